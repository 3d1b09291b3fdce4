"""Precision: an ordinary agent run redacts nothing.

A ``create_react_agent`` on the real ``ChatOpenAI`` (against the local fake server of the
conformance corpus), streamed and not, whose data looks like production data without holding a
secret: images as base64 data URLs (one URL-safe), UUIDs, SHA-256 and git hashes, ids with prefixes, URLs
with queries, token counts and usage, ``public_key``/``primary_key``/``cache_key`` fields, prose
about passwords and tokens, commands with ordinary ``-p`` flags, keys that merely hold a code's
name (``pinned``, ``pin_memory``), and LangGraph's own config keys. Any redaction here would be a false
positive corrupting the recording: the run must count 0 and store no mark.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import random
import uuid
import zlib
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from graphtape.recorder import Recorder, open_store
from graphtape.recorder.redaction import MARK

_NS = uuid.UUID("12345678-1234-5678-1234-567812345678")


def _png(width: int = 160, height: int = 120) -> bytes:
    """A real PNG of deterministic noise, as an agent would be shown a photo."""
    row_bytes = width * 3

    def row(y: int) -> bytes:
        out = b""
        while len(out) < row_bytes:
            out += hashlib.sha256(f"{y}:{len(out)}".encode()).digest()
        return b"\x00" + out[:row_bytes]  # filter byte 0, then the pixels

    def chunk(kind: bytes, data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")

    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + b"\x08\x02\x00\x00\x00"
    pixels = zlib.compress(b"".join(row(y) for y in range(height)))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def order(order_id: str) -> dict[str, Any]:
    """What an order API answers: ids, hashes, URLs, counts; nothing secret."""
    digest = hashlib.sha256(order_id.encode()).hexdigest()
    return {
        "order_id": order_id,
        "uuid": str(uuid.uuid5(_NS, order_id)),
        "request_id": f"req_{digest[:24]}",
        "customer": {"id": "cus_NffrFeUfNV2Hib", "email": "ada@example.com", "public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGtQh3jbp0k2 ada@laptop"},
        "payment_intent": "pi_3MtwBwLkdIwHu7ix28a3tqPa",
        "commit": hashlib.sha1(order_id.encode()).hexdigest(),
        "checksum": f"sha256:{digest}",
        "tracking": {"carrier": "UPS", "number": "1Z999AA10123456784", "url": "https://www.ups.com/track?loc=en_US&tracknum=1Z999AA10123456784&requester=ST/trackdetails"},
        "links": {"self": f"https://api.shop.example/v2/orders/{order_id}?expand=items&page=2&per_page=50", "docs": "https://docs.shop.example/orders#status"},
        "primary_key": f"orders/{order_id}",
        "cache_key": f"order:{order_id}:v3",
        "idempotency_key": str(uuid.uuid5(_NS, f"refund-{order_id}")),
        "sort_key": "2024-05-06T10:15:00Z",
        "s3_key": f"invoices/2024/05/{order_id}.pdf",
        "token_count": 412,
        "tokens": 412,
        "max_tokens": 1024,
        "status": "in transit",
        "note": "The customer asked to reset their password; the reset token email was resent at 10:15.",
        # Prose, commands and keys near the words of secrets, holding none.
        "runbook": "Run `mysql -u app -p shop` (it asks for the password), `docker run -p 8080:80 web` and "
        "`pytest -p no:cacheprovider`; the token is valid, the password is incorrect, the key is to retry "
        "with --max-tokens 100, never --password on the command line, and --token-file ~/.tok.",
        "display": {"pinned": True, "spin": 3, "option": "express", "hotpot": "no"},
        "loader": {"pin_memory": True, "pin_length": 4, "otp_attempts": 0},
        "created_at": "2024-05-06T10:15:00+00:00",
        "total": {"amount": 4999, "currency": "EUR"},
        "items": [{"sku": f"SKU-{i:05d}", "qty": i % 3 + 1, "etag": hashlib.md5(f"{order_id}{i}".encode()).hexdigest()} for i in range(12)],  # noqa: S324 - an etag
    }


def build(base_url: str, streaming: bool) -> Any:
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    @tool
    def lookup_order(order_id: str) -> str:
        """Where an order is."""
        return json.dumps(order(order_id))

    model = ChatOpenAI(model="gpt-fake", base_url=base_url, api_key="sk-fake-key-for-the-local-server", streaming=streaming, stream_usage=True, max_retries=0)
    return create_react_agent(model, [lookup_order], name="support_agent")


@pytest.fixture(scope="module")
def fake_openai():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from conformance.fake_openai import FakeOpenAI

    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_an_ordinary_agent_run_redacts_nothing(fake_openai, backend, tmp_path, request):
    url = str(tmp_path / "clean.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    image = base64.b64encode(_png()).decode()
    label = base64.urlsafe_b64encode(random.Random(13).randbytes(600_000)).decode()
    assert len(image) > 20_000
    question = HumanMessage(
        content=[
            {"type": "text", "text": "Where is order A1? The photo shows the label (token counts below are for billing)."},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image}"}},
            # A scanned label as URL-safe base64: its alphabet holds "-" and "_", so key prefixes
            # (hf_, sk-, ghp_) turn up inside it by chance (the old patterns redacted 8 here).
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{label}"}},
        ]
    )
    config = {
        "configurable": {"thread_id": str(uuid.uuid5(_NS, "thread")), "user_id": "u_8f14e45fceea167a", "checkpoint_ns": ""},
        "metadata": {"request_id": str(uuid.uuid5(_NS, "request")), "deployment": "eu-west-1", "git_sha": hashlib.sha1(b"v1").hexdigest()},
        "tags": ["support", "prod"],
        "recursion_limit": 25,
        "run_name": "support-agent",
    }
    with Recorder(url, durability="sync") as rec:
        rec.attach(build(fake_openai.url, streaming=False), name="support: order A1", tags=["prod"]).invoke({"messages": [question]}, config)
        invoked = rec.last_run_id
        streamed_graph = rec.attach(build(fake_openai.url, streaming=True), name="support: order A1 (streamed)")
        asyncio.run(streamed_graph.ainvoke({"messages": [question]}, {**config, "configurable": {**config["configurable"], "thread_id": "t-2"}}))
        streamed = rec.last_run_id
    store = open_store(url)
    try:
        for run_id in (invoked, streamed):
            run = store.get_run(run_id)
            assert run.status == "ok" and run.faults == 0
            calls = store.calls(run_id)
            # The one true secret in the run: the API key, in each of ChatOpenAI's own HTTP requests
            # (recorded as part of its model call). Every redaction must be that header, nothing else.
            http = [c for c in calls if c.kind == "http"]
            assert http and all(c.inputs["headers"].get("authorization") == f"Bearer {MARK}" for c in http)
            assert run.redactions == len(http), f"{run.redactions - len(http)} false positive(s) in {run.name}"
            others = [c for c in calls if c.kind != "http"]
            steps = store.list_steps(run_id)
            final = store.state_at(run_id, steps[-1].step)
            text = json.dumps([final, store.run_detail(run_id).inputs, [c.inputs for c in others], [c.output for c in others]], default=str)
            assert MARK not in text and "sk-fake-key-for-the-local-server" not in json.dumps([c.inputs for c in http], default=str)
            assert image in text and label in text and "1Z999AA10123456784" in text and "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGtQh3jbp0k2" in text
            tool_result = next(m for m in final["messages"] if m.get("type") == "tool")
            assert json.loads(tool_result["content"]) == order("A1")
    finally:
        store.close()
