"""HTTP calls where people read runs: ``graphtape show`` and the TUI's Calls tab, beside model calls."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TypedDict

import httpx
import pytest
from http_server import EchoService
from langgraph.graph import START, StateGraph
from test_tui import calls_of_step, settle

from graphtape.recorder import Recorder
from graphtape.tui.app import build_app
from graphtape.tui.cli import main
from graphtape.tui.widgets.timeline import Timeline

sys.path.insert(0, str(Path(__file__).parent / "conformance"))
from fake_openai import FakeOpenAI  # noqa: E402


class S(TypedDict, total=False):
    charged: dict
    answer: str


@pytest.fixture(scope="module")
def http_db(tmp_path_factory):
    """A run whose step 1 posts with httpx and step 2 asks ChatOpenAI (whose own request is part of it)."""
    from langchain_openai import ChatOpenAI

    db = str(tmp_path_factory.mktemp("http") / "views.db")
    service, fake = EchoService().start(), FakeOpenAI().start()
    openai_url = fake.url
    model = ChatOpenAI(base_url=openai_url, api_key="sk-test-0123456789abcdefghij", model="gpt-fake", max_retries=0)

    def charge(state: S) -> dict:
        return {"charged": httpx.post(f"{service.url}/charge", json={"amount": 5}, timeout=5).json()}

    def ask(state: S) -> dict:
        return {"answer": model.invoke("how much?").content}

    b = StateGraph(S)
    b.add_node("charge", charge)
    b.add_node("ask", ask)
    b.add_edge(START, "charge")
    b.add_edge("charge", "ask")
    try:
        with Recorder(db) as rec:
            rec.attach(b.compile(), name="views").invoke({})
    finally:
        service.stop()
        fake.stop()
    return db, service.url, openai_url


def test_show_lists_http_calls_with_status_and_under_their_model_call(http_db, capsys):
    db, url, openai_url = http_db
    assert main(["--db", db, "show", "last"]) == 0
    overview = capsys.readouterr().out
    assert "calls     1 http, 1 model" in overview  # the model call's own request is not counted again
    assert main(["--db", db, "show", "last", "--step", "1"]) == 0
    step1 = capsys.readouterr().out
    assert f"  http  POST {url}/charge  200 OK" in step1 and "in node charge" in step1
    assert 'sent {"amount": 5}' in step1 and '"path": "/charge"' in step1
    assert main(["--db", db, "show", "last", "--step", "2"]) == 0
    step2 = capsys.readouterr().out
    assert f"    ↳ http POST {openai_url}/chat/completions  200 OK" in step2
    assert "(part of model ChatOpenAI:gpt-fake)" in step2


async def test_the_calls_tab_shows_http_requests_beside_model_calls(http_db):
    db, url, openai_url = http_db
    app = build_app(db, "last")
    async with app.run_test(size=(150, 44)) as pilot:
        await settle(app, pilot)
        panel = await calls_of_step(app, pilot, 1)
        screen = app.screen
        first = str(panel.query_one("#call-list").get_option_at_index(0).prompt)
        assert first.startswith(f"http  POST {url}/charge") and "charge" in first and first.rstrip().endswith("200 OK")
        detail = "\n".join(str(r) for r in panel.query_one("#call-detail").content.renderables)
        assert "response: 200 OK" in detail and '"amount": 5' in detail and "request headers:" in detail
        screen.query_one(Timeline).cursor = next(i for i, s in enumerate(screen.steps) if s.step == 2)
        await settle(app, pilot)
        options = panel.query_one("#call-list")
        prompts = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert prompts[0].startswith("model ChatOpenAI:gpt-fake")
        assert prompts[1].startswith(f"↳ http POST {openai_url}/chat/completions")
        options.highlighted = 1
        await settle(app, pilot)
        detail = "\n".join(str(r) for r in panel.query_one("#call-detail").content.renderables)
        assert "part of model ChatOpenAI:gpt-fake" in detail
