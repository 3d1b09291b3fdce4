"""HTTP requests a node makes itself: recorded with the run, answered by a strict replay, nothing sent.

Real components throughout: a real HTTP service on 127.0.0.1 (tests/http_server.py),
the real clients (httpx sync and async, requests, urllib3, aiohttp, the openai SDK,
ChatOpenAI), real compiled graphs, a real store. "Nothing sent" is counted at the
service and at the socket (an audit hook sees every connect attempt).
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import sys
import zlib
from dataclasses import asdict
from pathlib import Path
from typing import TypedDict

import aiohttp
import httpx
import openai
import pytest
import requests
import urllib3
from http_server import Connects, EchoService
from langgraph.graph import END, START, StateGraph

from graphtape.recorder import Recorder, open_store
from graphtape.recorder import http_capture
from graphtape.replay import export_fixture, replay
from graphtape.replay.fixture import dumps_fixture

sys.path.insert(0, str(Path(__file__).parent / "conformance"))
from fake_openai import FakeOpenAI  # noqa: E402

KEY = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a"
TOKEN = "tok_9d8c7b6a5f4e3d2c1b0a"
API_KEY_HEADER = "k3y-0f-the-st4tus-api"


@pytest.fixture
def service():
    svc = EchoService().start()
    yield svc
    svc.stop()


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "http.db")


class Order(TypedDict, total=False):
    order: str
    charged: dict
    status: dict


def order_graph(url: str, *, amount: int = 5, path: str = "/charge", status_of: str | None = None, caught: list | None = None):
    """``charge`` posts with httpx (a bearer token, a key in the query); ``status`` gets with requests."""

    def charge(state: Order) -> dict:
        r = httpx.post(f"{url}{path}?api_key={KEY}", json={"order": state["order"], "amount": amount}, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5)
        return {"charged": r.json()}

    def status(state: Order) -> dict:
        try:
            r = requests.get(f"{url}/status/{status_of or state['order']}", headers={"api-key": API_KEY_HEADER}, timeout=5)
        except requests.ConnectionError as exc:
            if caught is not None:
                caught.append(exc)
            raise
        return {"status": r.json()}

    b = StateGraph(Order)
    b.add_node("charge", charge)
    b.add_node("status", status)
    b.add_edge(START, "charge")
    b.add_edge("charge", "status")
    b.add_edge("status", END)
    return b.compile()


def record(db: str, graph, inputs) -> str:
    with Recorder(db) as rec:
        rec.attach(graph, name="orders").invoke(inputs)
        rec.flush()
        return rec.last_run_id


def header(record: dict, name: str):
    """A stored header, whatever case the client wrote its name in."""
    return next(v for k, v in record["headers"].items() if k.lower() == name.lower())


def http_calls(db: str, run_id: str):
    store = open_store(db)
    try:
        return [c for c in store.calls(run_id) if c.kind == "http"]
    finally:
        store.close()


# -- recording -----------------------------------------------------------------------------


def test_httpx_and_requests_are_recorded_with_step_node_and_task(db, service):
    run_id = record(db, order_graph(service.url), {"order": "A-1"})
    calls = http_calls(db, run_id)
    assert [(c.name, c.step, c.node) for c in calls] == [
        (f"POST {service.url}/charge", 1, "charge"),
        (f"GET {service.url}/status/A-1", 2, "status"),
    ]
    charge, status = calls
    assert charge.task_id and status.task_id and charge.task_id != status.task_id
    assert charge.inputs["method"] == "POST" and json.loads(charge.inputs["body"]) == {"order": "A-1", "amount": 5}
    assert charge.output["status"] == 200 and json.loads(charge.output["body"])["path"] == "/charge"
    assert status.output["reason"] == "OK" and json.loads(status.output["body"])["method"] == "GET"
    assert charge.latency_ms is not None and charge.latency_ms > 0
    assert charge.parent_call_id is None and status.parent_call_id is None
    assert service.requests == 2


def test_secrets_in_headers_urls_and_cookies_are_redacted_in_the_store_and_fixtures(db, service, tmp_path):
    run_id = record(db, order_graph(service.url.replace("127.0.0.1", f"admin:{TOKEN}x@127.0.0.1")), {"order": "A-1"})
    charge, status = http_calls(db, run_id)
    assert header(charge.inputs, "Authorization") == "Basic [REDACTED]"  # the scheme kept: only the credential is a secret
    assert header(status.inputs, "api-key") == "[REDACTED]"
    assert "[REDACTED]" in charge.inputs["url"] and KEY not in charge.inputs["url"] and TOKEN not in charge.inputs["url"]
    assert header(charge.output, "Set-Cookie") == "session=[REDACTED]; Path=/"  # the cookie's name and attributes kept
    with sqlite3.connect(db) as conn:  # every stored text, as the database holds it
        rows = " ".join(str(v) for table in ("calls", "runs") for row in conn.execute(f"SELECT * FROM {table}") for v in row)
    store = open_store(db)
    try:
        decoded = json.dumps([asdict(c) for c in store.calls(run_id)], default=str)  # blobs resolved
        fixture = dumps_fixture(export_fixture(store, run_id, graph="orders.py:graph")).decode()
    finally:
        store.close()
    for secret in (KEY, TOKEN, API_KEY_HEADER, "s3cr3t-cookie-value"):
        assert secret not in rows and secret not in decoded, secret
        assert secret not in fixture, secret


def test_patches_are_in_place_only_while_a_run_records(db, service):
    original = httpx.HTTPTransport.handle_request
    seen = []

    def look(state: Order) -> dict:
        seen.append((http_capture.installed(), httpx.HTTPTransport.handle_request is original))
        return {}

    b = StateGraph(Order)
    b.add_node("look", look)
    b.add_edge(START, "look")
    assert not http_capture.installed()
    for order in ("A-1", "A-2"):  # the second run puts back what the first one's end took off
        record(db, b.compile(), {"order": order})
        assert not http_capture.installed() and httpx.HTTPTransport.handle_request is original
    assert seen == [(True, False), (True, False)]
    # Outside a run nothing is patched, and a request is the client's own.
    assert httpx.get(f"{service.url}/plain").json()["path"] == "/plain"


def test_attach_prepares_the_http_patches_so_the_first_run_does_not_wait_for_them(tmp_path):
    """Building vcrpy's patchers imports vcrpy and the clients (about 0.3 s): attach does it, in a
    fresh process, so the first recorded run starts its first node at once (a deadline on it
    would otherwise run out before the graph began). Nothing is left patched after attach."""
    import subprocess
    import textwrap

    script = textwrap.dedent(
        f"""
        import sys, httpx
        from typing import TypedDict
        from langgraph.graph import START, StateGraph
        from graphtape import Recorder
        from graphtape.recorder import http_capture

        class S(TypedDict):
            n: int

        b = StateGraph(S)
        b.add_node("one", lambda s: {{"n": s["n"] + 1}})
        b.add_edge(START, "one")
        original = httpx.HTTPTransport.handle_request
        assert "vcr" not in sys.modules
        rec = Recorder({str(tmp_path / "gt.db")!r})
        graph = rec.attach(b.compile())
        print("prepared", "vcr" in sys.modules and http_capture._patchers is not None)
        print("patched after attach", http_capture.installed() or httpx.HTTPTransport.handle_request is not original)
        print(graph.invoke({{"n": 1}}))
        rec.close()
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["prepared True", "patched after attach False", "{'n': 2}"]


def test_a_failed_request_is_recorded_with_the_clients_error(db, service):
    dead = EchoService().start()
    dead_url = dead.url
    dead.stop()

    def call(state: Order) -> dict:
        try:
            httpx.get(f"{dead_url}/down", timeout=2)
        except httpx.ConnectError as exc:
            return {"status": {"fallback": type(exc).__name__}}
        return {"status": {"fallback": None}}

    b = StateGraph(Order)
    b.add_node("call", call)
    b.add_edge(START, "call")
    graph = b.compile()
    run_id = record(db, graph, {"order": "A-1"})
    (failed,) = http_calls(db, run_id)
    assert failed.error_type == "httpx.ConnectError" and failed.output is None
    # The replay raises the recorded error where the client raised it: the node falls back again.
    with Connects(dead.port) as connects:
        result = replay(run_id, graph, db=db)
    assert not result.diverged, result.report()
    assert result.final_state["status"] == {"fallback": "ConnectError"}
    assert connects.count == 0


def compressed_upload_graph(url: str):
    """A node that uploads compressed bodies, as telemetry and batch clients do: gzip, deflate,
    and an encoding nothing here reads."""

    def upload(state: Order) -> dict:
        gz = httpx.post(f"{url}/gz", content=gzip.compress(json.dumps({"api_key": KEY, "order": state["order"]}).encode()), headers={"Content-Encoding": "gzip"}, timeout=5)
        df = requests.post(f"{url}/df", data=zlib.compress(f"token={TOKEN}&order={state['order']}".encode()), headers={"Content-Encoding": "deflate"}, timeout=5)
        odd = httpx.post(f"{url}/odd", content=b"\x8f\x00" + API_KEY_HEADER.encode()[::-1], headers={"Content-Encoding": "x-unknown"}, timeout=5)
        return {"status": {"codes": [gz.status_code, df.status_code, odd.status_code]}}

    b = StateGraph(Order)
    b.add_node("upload", upload)
    b.add_edge(START, "upload")
    return b.compile()


def test_a_compressed_request_body_is_stored_decompressed_and_redacted(db, service):
    """Compressed, a body's secrets are hidden from redaction, not from whoever unzips the recording."""
    run_id = record(db, compressed_upload_graph(service.url), {"order": "A-1"})
    gz, df, odd = http_calls(db, run_id)
    assert json.loads(gz.inputs["body"]) == {"api_key": "[REDACTED]", "order": "A-1"}
    assert df.inputs["body"] == "token=[REDACTED]&order=A-1"
    assert odd.inputs["body"].startswith("<") and "not kept" in odd.inputs["body"]
    store = open_store(db)
    try:
        fixture = dumps_fixture(export_fixture(store, run_id, graph="uploads.py:graph")).decode()
    finally:
        store.close()
    for secret in (KEY, TOKEN):
        assert secret not in fixture and secret not in json.dumps([gz.inputs, df.inputs])
    service.stop()
    result = replay(run_id, compressed_upload_graph(service.url), db=db, require_all_used=True)
    assert not result.diverged, result.report()
    assert result.served["http"] == 3


# -- strict replay, the service stopped ----------------------------------------------------------


def test_strict_replay_answers_every_request_with_the_service_stopped(db, service):
    run_id = record(db, order_graph(service.url), {"order": "A-1"})
    sent = service.requests
    service.stop()
    with Connects(service.port) as connects:
        result = replay(run_id, order_graph(service.url), db=db, require_all_used=True)
    assert not result.diverged, result.report()
    assert result.served == {"tool": 0, "model": 0, "http": 2}
    assert "2 http calls answered from the recording" in result.report()
    assert result.final_state["charged"]["path"] == "/charge" and result.final_state["status"]["method"] == "GET"
    assert service.requests == sent and connects.count == 0
    # The replay is a recorded run too: its HTTP calls are the answers it got.
    assert [c.name for c in http_calls(db, result.run_id)] == [f"POST {service.url}/charge", f"GET {service.url}/status/A-1"]


def test_a_changed_body_is_refused_and_named(db, service):
    run_id = record(db, order_graph(service.url), {"order": "A-1"})
    service.stop()
    with Connects(service.port) as connects:
        result = replay(run_id, order_graph(service.url, amount=50), db=db)
    assert connects.count == 0
    first = result.first_divergence
    assert (first.kind, first.step, first.node) == ("arguments", 1, "charge"), result.report()
    assert first.what == f"http call 'POST {service.url}/charge' has no matching recording (refused inside the node: it never left the machine)"
    assert first.recorded["body"] == {"order": "A-1", "amount": 5} and first.actual["body"] == {"order": "A-1", "amount": 50}
    assert first.candidates[0]["name"] == f"POST {service.url}/charge" and first.candidates[0]["differs"] == ["arguments"]
    # Inside the node it failed as httpx's own connection error, naming the request.
    assert result.error.startswith(f"ConnectError: graphtape replay refused POST {service.url}/charge")


def test_a_changed_url_is_refused_and_named_with_the_closest_recorded_request(db, service):
    run_id = record(db, order_graph(service.url), {"order": "A-1"})
    service.stop()
    with Connects(service.port) as connects:
        result = replay(run_id, order_graph(service.url, path="/v2/charge"), db=db)
    assert connects.count == 0
    first = result.first_divergence
    assert (first.kind, first.step, first.node) == ("extra", 1, "charge")
    assert f"'POST {service.url}/v2/charge'" in first.what
    closest = first.candidates[0]
    assert (closest["name"], closest["step"], closest["node"], closest["differs"]) == (f"POST {service.url}/charge", 1, "charge", ["name"])
    assert f"closest recorded call: POST {service.url}/charge at step 1 in node 'charge'" in first.render()


def test_a_refused_requests_call_fails_as_requests_own_connection_error(db, service):
    run_id = record(db, order_graph(service.url), {"order": "A-1"})
    service.stop()
    caught: list = []
    with Connects(service.port) as connects:
        result = replay(run_id, order_graph(service.url, status_of="OTHER", caught=caught), db=db)
    assert connects.count == 0
    assert len(caught) == 1 and f"graphtape replay refused GET {service.url}/status/OTHER" in str(caught[0])
    first = result.first_divergence
    assert (first.step, first.node) == (2, "status") and f"'GET {service.url}/status/OTHER'" in first.what


def test_tools_mode_lets_requests_through_and_the_report_says_so(db, service):
    run_id = record(db, order_graph(service.url), {"order": "A-1"})
    before = service.requests
    result = replay(run_id, order_graph(service.url), mode="tools", db=db)
    assert service.requests == before + 2
    assert "2 HTTP requests went live: mode tools" in result.report()


def test_on_miss_live_lets_an_unanswered_request_out_and_reports_it(db, service):
    run_id = record(db, order_graph(service.url), {"order": "A-1"})
    before = service.requests
    result = replay(run_id, order_graph(service.url, amount=7), db=db, on_miss="live")
    assert service.requests == before + 1  # the changed charge went out; status was answered
    assert result.first_divergence.kind == "arguments" and "(it ran live)" in result.first_divergence.what


# -- the other clients -------------------------------------------------------------------------------


class Fetched(TypedDict, total=False):
    got: dict


def async_graph(url: str):
    """httpx.AsyncClient (a gzip response), aiohttp, then urllib3 with a binary body."""

    async def fetch(state: Fetched) -> dict:
        async with httpx.AsyncClient() as client:
            a = (await client.post(f"{url}/gzip/async", json={"q": 1})).json()
        async with aiohttp.ClientSession() as session:
            async with session.put(f"{url}/aio", json={"q": 2}, headers={"X-Api-Key": API_KEY_HEADER}) as r:
                b = await r.json()
        return {"got": {"httpx": a, "aiohttp": b}}

    def pool(state: Fetched) -> dict:
        r = urllib3.request("POST", f"{url}/u3", body=b"\xff\xfe raw", headers={"Content-Type": "application/octet-stream"})
        return {"got": {**state["got"], "urllib3": json.loads(r.data)}}

    b = StateGraph(Fetched)
    b.add_node("fetch", fetch)
    b.add_node("pool", pool)
    b.add_edge(START, "fetch")
    b.add_edge("fetch", "pool")
    return b.compile()


def test_async_httpx_aiohttp_and_urllib3_record_and_replay_offline(db, service):
    import asyncio

    graph = async_graph(service.url)
    with Recorder(db) as rec:
        recorded = asyncio.run(rec.attach(graph, name="fetch").ainvoke({}))
        rec.flush()
        run_id = rec.last_run_id
    calls = http_calls(db, run_id)
    assert [(c.name, c.node) for c in calls] == [(f"POST {service.url}/gzip/async", "fetch"), (f"PUT {service.url}/aio", "fetch"), (f"POST {service.url}/u3", "pool")]
    gz, aio, u3 = calls
    assert "content-encoding" not in {k.lower() for k in gz.output["headers"]} and json.loads(gz.output["body"])["path"] == "/gzip/async"
    assert aio.inputs["body"] == {"q": 2} and header(aio.inputs, "X-Api-Key") == "[REDACTED]"
    assert u3.inputs["body"]["__type__"] == "bytes"
    service.stop()
    with Connects(service.port) as connects:
        result = replay(run_id, async_graph(service.url), db=db, require_all_used=True)
    assert not result.diverged, result.report()
    assert result.served["http"] == 3 and connects.count == 0
    assert result.final_state["got"] == recorded["got"]


# -- the openai SDK and ChatOpenAI ------------------------------------------------------------------


class Chat(TypedDict, total=False):
    question: str
    answer: str


def sdk_graph(base_url: str, ask_instead: str | None = None):
    def ask(state: Chat) -> dict:
        client = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0)
        reply = client.chat.completions.create(model="gpt-fake", messages=[{"role": "user", "content": ask_instead or state["question"]}])
        return {"answer": reply.choices[0].message.content}

    b = StateGraph(Chat)
    b.add_node("ask", ask)
    b.add_edge(START, "ask")
    return b.compile()


def test_a_node_calling_the_openai_sdk_replays_with_the_server_stopped(db):
    fake = FakeOpenAI().start()
    base_url = fake.url
    try:
        run_id = record(db, sdk_graph(base_url), {"question": "where is my order?"})
    finally:
        fake.stop()
    (call,) = http_calls(db, run_id)
    assert call.name == f"POST {base_url}/chat/completions" and call.node == "ask"
    assert header(call.inputs, "Authorization") == "Bearer [REDACTED]"
    served = fake.requests
    port = int(base_url.rsplit(":", 1)[1].split("/")[0])
    with Connects(port) as connects:
        result = replay(run_id, sdk_graph(base_url), db=db)
    assert not result.diverged, result.report()
    assert result.final_state["answer"] == "Done: " and result.served["http"] == 1
    assert fake.requests == served and connects.count == 0
    # Asked something else, the SDK's request is refused: the node sees openai's own connection error.
    with Connects(port) as connects:
        changed = replay(run_id, sdk_graph(base_url, ask_instead="cancel it"), db=db)
    assert connects.count == 0
    assert changed.error.startswith("APIConnectionError"), changed.report()
    first = changed.first_divergence
    assert (first.kind, first.node) == ("arguments", "ask") and f"'POST {base_url}/chat/completions'" in first.what
    assert first.actual["body"]["messages"] == [{"role": "user", "content": "cancel it"}]


def test_chatopenai_requests_are_part_of_the_model_call_not_counted_twice(db):
    from langchain_openai import ChatOpenAI

    fake = FakeOpenAI().start()
    base_url = fake.url

    def build():
        model = ChatOpenAI(base_url=base_url, api_key=KEY, model="gpt-fake", max_retries=0)

        def ask(state: Chat) -> dict:
            return {"answer": model.invoke(state["question"]).content}

        b = StateGraph(Chat)
        b.add_node("ask", ask)
        b.add_edge(START, "ask")
        return b.compile()

    try:
        run_id = record(db, build(), {"question": "hi"})
    finally:
        fake.stop()
    store = open_store(db)
    try:
        calls = store.calls(run_id)
        counts = store.call_counts(run_id)
    finally:
        store.close()
    model = next(c for c in calls if c.kind == "model")
    (request,) = [c for c in calls if c.kind == "http"]
    assert request.parent_call_id == model.call_id and request.name == f"POST {base_url}/chat/completions"
    assert counts == {1: {"model": 1}}
    result = replay(run_id, build(), db=db, require_all_used=True)  # the server is stopped
    assert not result.diverged, result.report()
    assert result.served == {"tool": 0, "model": 1}  # answered as the model call; its request never made


def test_an_exported_fixture_replays_offline_under_the_pytest_marker(db, service, tmp_path, pytester, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("ORDERS_URL", service.url)
    pytester.makepyfile(orders=ORDERS_MODULE)
    pytester.syspathinsert()
    import importlib

    orders = importlib.import_module("orders")
    run_id = record(db, orders.graph, {"order": "A-1"})
    store = open_store(db)
    try:
        fixture = export_fixture(store, run_id, graph="orders:graph")
    finally:
        store.close()
    path = pytester.path / "fixtures" / "orders.json"
    path.parent.mkdir()
    path.write_bytes(dumps_fixture(fixture))
    assert fixture["graphtape_fixture"] == 2
    assert [c["kind"] for s in fixture["steps"] for c in s.get("calls", [])] == ["http", "http"]
    pytester.makepyfile(test_orders=MARKED_TEST)
    service.stop()
    with Connects(service.port) as connects:
        outcome = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:asyncio", "-p", "no:textual-snapshot", "-p", "no:hypothesispytest")
    outcome.assert_outcomes(passed=1)
    assert connects.count == 0
    sys.modules.pop("orders", None)


ORDERS_MODULE = '''
import os
from typing import TypedDict

import httpx
import requests
from langgraph.graph import END, START, StateGraph

URL = os.environ["ORDERS_URL"]


class Order(TypedDict, total=False):
    order: str
    charged: dict
    status: dict


def charge(state):
    return {"charged": httpx.post(URL + "/charge", json={"order": state["order"]}, timeout=5).json()}


def status(state):
    return {"status": requests.get(URL + "/status/" + state["order"], timeout=5).json()}


b = StateGraph(Order)
b.add_node("charge", charge)
b.add_node("status", status)
b.add_edge(START, "charge")
b.add_edge("charge", "status")
b.add_edge("status", END)
graph = b.compile()
'''

MARKED_TEST = '''
import pytest


@pytest.mark.graphtape("fixtures/orders.json", graph="orders:graph")
def test_orders(graphtape_replay):
    result = graphtape_replay()
    assert result.served["http"] == 2
    assert result.final_state["charged"]["path"] == "/charge"
'''


pytest_plugins = ["pytester"]


def test_a_store_failure_mid_run_never_fails_a_request(tmp_path, service):
    db = tmp_path / "gone.db"

    def pay(state: Order) -> dict:
        db.unlink()  # the store goes away while the node runs (an operator cleaning up, a full disk)
        r = httpx.post(f"{service.url}/charge", json={"order": state["order"]}, timeout=5)
        return {"charged": r.json()}

    b = StateGraph(Order)
    b.add_node("pay", pay)
    b.add_edge(START, "pay")
    with Recorder(str(db), durability="sync") as rec:
        out = rec.attach(b.compile()).invoke({"order": "A-1"})
    assert out["charged"]["path"] == "/charge" and service.requests == 1
    assert not http_capture.installed()


def test_http_calls_are_stored_and_answered_on_every_backend(store_url, service):
    run_id = record(store_url, order_graph(service.url), {"order": "A-1"})
    store = open_store(store_url)
    try:
        assert [c.name for c in store.calls(run_id) if c.kind == "http"] == [f"POST {service.url}/charge", f"GET {service.url}/status/A-1"]
        assert store.call_counts(run_id) == {1: {"http": 1}, 2: {"http": 1}}
    finally:
        store.close()
    service.stop()
    result = replay(run_id, order_graph(service.url), db=store_url)
    assert not result.diverged and result.served["http"] == 2, result.report()


def test_a_request_from_a_functional_task_is_attributed_to_the_task_and_replayed(db, service):
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.func import entrypoint, task

    url = service.url

    def build():
        @task
        def fetch_status(order: str) -> dict:
            return requests.get(f"{url}/status/{order}", timeout=5).json()

        @entrypoint(checkpointer=InMemorySaver())
        def workflow(order: str) -> dict:
            return {"status": fetch_status(order).result()}

        return workflow

    with Recorder(db) as rec:
        out = rec.attach(build(), name="functional").invoke("A-7", {"configurable": {"thread_id": "t1"}})
        rec.flush()
        run_id = rec.last_run_id
    assert out["status"]["path"] == "/status/A-7"
    (call,) = http_calls(db, run_id)
    assert call.node == "fetch_status" and call.task_id and call.step is not None
    service.stop()
    with Connects(service.port) as connects:
        result = replay(run_id, build(), db=db)
    assert not result.diverged, result.report()
    assert result.served["http"] == 1 and connects.count == 0


# -- a body that never ends -----------------------------------------------------------------------


def _read_stream(url: str, client: str, stop_after: int) -> bytes:
    """What a node's own code reads of ``/stream`` before it stops reading and closes the response."""
    got = bytearray()
    if client == "httpx":
        with httpx.stream("GET", f"{url}/stream", timeout=5) as r:
            for chunk in r.iter_bytes():
                got += chunk
                if len(got) >= stop_after:
                    break
    elif client == "requests":
        with requests.get(f"{url}/stream", stream=True, timeout=5) as r:
            for chunk in r.iter_content(chunk_size=None):
                got += chunk
                if len(got) >= stop_after:
                    break
    elif client == "urllib3":
        r = urllib3.PoolManager().request("GET", f"{url}/stream", preload_content=False, timeout=5)
        try:
            for chunk in r.stream(4096):
                got += chunk
                if len(got) >= stop_after:
                    break
        finally:
            r.close()
    elif client == "urllib":
        import urllib.request

        with urllib.request.urlopen(f"{url}/stream", timeout=5) as r:
            while len(got) < stop_after:
                got += r.read(4096)
    elif client == "aiohttp":
        import asyncio

        async def read_aiohttp() -> None:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(sock_read=5)) as s, s.get(f"{url}/stream") as r:
                async for chunk in r.content.iter_any():
                    got.extend(chunk)
                    if len(got) >= stop_after:
                        break

        asyncio.run(read_aiohttp())
    else:
        import asyncio

        async def read() -> None:
            async with httpx.AsyncClient(timeout=5) as c, c.stream("GET", f"{url}/stream") as r:
                async for chunk in r.aiter_bytes():
                    got.extend(chunk)
                    if len(got) >= stop_after:
                        break

        asyncio.run(read())
    return bytes(got)


@pytest.mark.parametrize("client", ["httpx", "httpx-async", "requests", "urllib3", "urllib", "aiohttp"])
@pytest.mark.parametrize("stop_after", [10_000, 1_000_000])
def test_an_endless_stream_reaches_the_node_as_it_comes_and_its_recording_is_bounded(db, service, monkeypatch, client, stop_after):
    """A server that streams without end (server-sent events): the node's code reads it as it
    would without graphtape, byte for byte, stops after ``stop_after`` bytes, and the run goes
    on. The call keeps at most the cap of what was read: all of it, marked incomplete, when the
    node stopped under the cap (a replay plays it back to the node); the start of it, marked
    truncated with the count read, when it read past the cap."""
    import threading

    from graphtape.recorder import http_stream
    from http_server import stream_start

    cap = 64 * 1024
    monkeypatch.setattr(http_stream, "MAX_BODY_BYTES", cap)

    class St(TypedDict, total=False):
        read: bytes

    def listen(state: St) -> dict:
        return {"read": _read_stream(service.url, client, stop_after)}

    b = StateGraph(St)
    b.add_node("listen", listen)
    b.add_edge(START, "listen")
    b.add_edge("listen", END)
    out: list = []
    rec = Recorder(db)
    graph = rec.attach(b.compile(), name="stream")
    worker = threading.Thread(target=lambda: out.append(graph.invoke({})), daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "the node's read of an endless stream never returned"
    read = out[0]["read"]
    assert len(read) >= stop_after and read == stream_start(len(read))  # every byte, in order, as sent
    rec.close()
    (call,) = http_calls(db, rec.last_run_id)
    body = call.output["body"].encode()
    assert body == stream_start(len(body))
    # What the node read decides, not what it asked for: a busy machine lets more of the stream
    # pile up, and a client hands it over in one read (aiohttp: 88 KB for a node stopping at 10 KB).
    if len(read) < cap:
        assert len(body) >= len(read) and call.output["body_incomplete"] is True and "body_truncated" not in call.output
        service.stop()  # a replay answers from the recording
        with Connects(service.port) as connects:
            result = replay(rec.last_run_id, b.compile(), db=db, require_all_used=True)
        assert not result.diverged, result.report()
        assert connects.count == 0 and result.served["http"] == 1
        assert result.final_state["read"] == read
    else:
        assert len(body) == cap and call.output["body_truncated"] >= len(read)
