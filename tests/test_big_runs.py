"""A long run whose state holds a text of megabytes, rewritten at every step, opens and lists.

250 supersteps each rewriting a 3 MB text hold 750 MB of updates: the run view showed a
line of each, yet decoded them all and was refused by the store's 512 MB read budget.
Its listing reads previews (the first chunk of each text); one step still reads in full.
"""

from __future__ import annotations

import json
from typing import TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from graphtape import Recorder, open_store
from graphtape.recorder.store import read_budget
from graphtape.recorder.store.previews import PREVIEW_CHARS
from graphtape.tui.cli import main

STEPS = 250
SIZE = 3 * 1024 * 1024


class Doc(TypedDict):
    text: str
    n: int


def _rewriter():
    def grow(s: Doc) -> dict:
        n = s["n"] + 1
        return {"text": f"{n:08d}" + (s["text"] or "x" * SIZE)[8:], "n": n}

    b = StateGraph(Doc)
    b.add_node("grow", grow)
    b.add_edge(START, "grow")
    b.add_conditional_edges("grow", lambda s: "grow" if s["n"] < STEPS else END, ["grow", END])
    return b.compile()


@pytest.fixture(scope="module")
def big_run(tmp_path_factory):
    db = tmp_path_factory.mktemp("big") / "gt.db"
    with Recorder(db) as rec:
        rec.attach(_rewriter(), name="rewriter").invoke({"text": "", "n": 0}, {"recursion_limit": STEPS + 10})
        run_id = rec.last_run_id
    return str(db), run_id


def test_a_run_that_rewrote_a_3mb_text_at_each_of_250_steps_is_listed(big_run, capsys):
    db, run_id = big_run
    assert main(["show", run_id, "--db", db]) == 0
    out = capsys.readouterr().out
    assert f"{STEPS}  grow" in out
    assert 'text="00000250xxx' in out

    assert main(["show", run_id, "--db", db, "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert len(view["steps"]) == STEPS + 2
    (task,) = view["steps"][-1]["tasks"]
    text = task["writes"]["text"]
    assert text.startswith("00000250xxx") and len(text) < PREVIEW_CHARS + 40
    assert text.endswith(f"… [{SIZE - PREVIEW_CHARS:,} more chars]")
    assert task["writes"]["n"] == STEPS


def test_listing_a_big_run_pays_for_what_it_shows_and_one_step_still_reads_whole(big_run, capsys):
    db, run_id = big_run
    store = open_store(db)
    try:
        with read_budget() as budget:
            previews = store.step_previews(run_id)
        assert len(previews) == STEPS + 2
        # Each step's first chunk (64 K characters, one new per step) is read; the updates hold 750 MB.
        assert budget.limit - budget.left < 64 * 1024 * 1024
        assert store.step_detail(run_id, STEPS).tasks[0].writes["text"] == f"{STEPS:08d}" + "x" * (SIZE - 8)
    finally:
        store.close()
    assert main(["show", run_id, "--db", db, "--step", str(STEPS), "--json", "--full"]) == 0
    step = json.loads(capsys.readouterr().out)
    assert len(step["state"]["text"]) == SIZE and step["tasks"][0]["writes"]["text"] == step["state"]["text"]


async def test_the_tui_opens_the_big_run_and_steps_to_its_end(big_run):
    from textual.widgets import Static

    from graphtape.tui.app import build_app
    from graphtape.tui.screens.run import RunScreen
    from tui_helpers import settle

    db, run_id = big_run
    app = build_app(db, run_id)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen) and len(screen.steps) == STEPS + 2
        await pilot.press("end")
        await settle(pilot)
        assert screen.payload is not None and screen.payload.step.step == STEPS
        assert len(screen.payload.state["text"]) == SIZE
        assert not str(screen.query_one("#step-error", Static).render())


def _chatty():
    def talk(s: MessagesState) -> dict:
        return {"messages": [AIMessage(f"line {i}") for i in range(40)]}

    b = StateGraph(MessagesState)
    b.add_node("talk", talk)
    b.add_edge(START, "talk")
    return b.compile()


def test_a_preview_of_many_messages_says_how_many_and_the_last(store_url, capsys):
    db = store_url
    with Recorder(db) as rec:
        rec.attach(_chatty(), name="chatty").invoke({"messages": [HumanMessage("go")]})
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        (talk,) = [t for d in store.step_previews(run_id) for t in d.tasks if t.node == "talk"]
    finally:
        store.close()
    shown = talk.writes["messages"]
    assert len(shown) < 40 and {"__type__": "more", "items": 30} in shown
    assert shown[-1]["content"] == "line 39"
    assert main(["show", run_id, "--db", str(db)]) == 0
    assert '40 messages, last ai: "line 39"' in capsys.readouterr().out


def _one_text(text: str):
    b = StateGraph(Doc)
    b.add_node("write", lambda s: {"text": text, "n": 1})
    b.add_edge(START, "write")
    return b.compile()


def test_diff_of_runs_whose_long_texts_differ_shows_where_not_the_whole_texts(tmp_path, capsys):
    db = tmp_path / "gt.db"
    base = "x" * SIZE
    changed = base[:2_000_000] + "CHANGED" + base[2_000_007:]
    ids = []
    with Recorder(db) as rec:
        for text in (base, changed):
            rec.attach(_one_text(text), name="writer").invoke({"text": "", "n": 0})
            ids.append(rec.last_run_id)
    assert main(["diff", *ids, "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert "state key 'text' differs" in out
    assert len(out) < 10_000  # the texts are 3 MB each
    removed, added = (line.strip() for line in out.splitlines() if line.strip()[:1] in "-+" and line.strip()[:3] not in ("---", "+++"))
    assert "CHANGED" in added and "CHANGED" not in removed and "[1,999," in added and "more chars]" in added


def test_exporting_the_whole_big_run_says_to_export_fewer_steps_and_a_window_exports(big_run, tmp_path, capsys):
    db, run_id = big_run
    out = tmp_path / "big.json"
    assert main(["export", run_id, "--db", db, "-o", str(out), "--graph", "big:graph"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is honest, it is too large for one fixture" in err and "export fewer steps with --steps A:B" in err
    assert not out.exists()
    assert main(["export", run_id, "--db", db, "-o", str(out), "--graph", "big:graph", "--steps", "5:9"]) == 0
    fixture = json.loads(out.read_bytes())
    assert [s["step"] for s in fixture["steps"]] == [5, 6, 7, 8, 9]


class Shapes(TypedDict, total=False):
    cube: list
    deep: dict


def _values(x) -> int:
    if isinstance(x, list):
        return len(x) + sum(_values(i) for i in x)
    if isinstance(x, dict):
        return len(x) + sum(_values(v) for v in x.values())
    return 0


def test_a_preview_of_nested_long_lists_and_a_deep_value_stays_small(tmp_path, capsys):
    from graphtape.recorder.store.previews import PREVIEW_DEPTH, PREVIEW_VALUES

    deep: dict = {"end": 1}
    for _ in range(3 * PREVIEW_DEPTH):
        deep = {"a": deep}
    b = StateGraph(Shapes)
    b.add_node("make", lambda s: {"cube": [[[k for k in range(20)] for _ in range(20)] for _ in range(20)], "deep": deep})
    b.add_edge(START, "make")
    db = tmp_path / "gt.db"
    with Recorder(db) as rec:
        rec.attach(b.compile(), name="shapes").invoke({})
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        (make,) = [t for d in store.step_previews(run_id) for t in d.tasks if t.node == "make"]
        assert store.step_detail(run_id, 1).tasks[0].writes["deep"] == deep  # the step itself reads whole
    finally:
        store.close()
    cube, shown_deep = make.writes["cube"], make.writes["deep"]
    assert _values(cube) <= 2 * PREVIEW_VALUES and "…" in json.dumps(cube, ensure_ascii=False)  # cut ends count too; uncut, 1,600
    assert _values(shown_deep) <= PREVIEW_DEPTH + 2 and "…" in json.dumps(shown_deep, ensure_ascii=False)
    assert main(["show", run_id, "--db", str(db)]) == 0
    assert "make" in capsys.readouterr().out
