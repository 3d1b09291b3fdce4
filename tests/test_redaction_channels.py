"""Sixty-odd secrets of every listed format, planted through every channel, found nowhere.

Formats: provider keys, AWS key ids (AKIA, ASIA) and secret keys (env and credentials-file
forms), passwords in URLs (postgresql, mysql), libpq ``password=``, Azure storage connection
strings, JWTs, Stripe, Hugging Face, GitLab, Slack webhooks, ``?api_key=`` in URLs,
``Authorization: Basic``, ``Ocp-Apim-Subscription-Key``, YAML ``password:``, PEM and PGP
private key blocks (one cut short), and values under keys named jwt, bearer, dsn,
database_url, connection_string, *_key, ssh_key, hmac_key, subscription_key, webhook_url.
Channels: the inputs, the config, state channels named like secrets, nested state, tool
arguments and results, model messages (a key split across two content parts), bytes,
namedtuples, an unserializable object's long repr, a node error, the run's name and tags.
Checked: the SQLite file (and its WAL), every PostgreSQL row, an exported fixture,
``show --json`` and a state saved from the TUI.
"""

from __future__ import annotations

import collections
import json
import secrets
import string
import zlib
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
import sqlalchemy as sa
from conftest import load_agent
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode

from graphtape.recorder import Recorder, open_store
from graphtape.tui.cli import main

ScriptedChatModel = load_agent("scripted_model").ScriptedChatModel
Pair = collections.namedtuple("Pair", "user api_key")


def _rand(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


class Planted:
    """Secrets with random bodies to search the stored bytes for."""

    def __init__(self) -> None:
        self.bodies: dict[str, str] = {}

    def keep(self, name: str, body: str, text: str) -> str:
        assert name not in self.bodies, name
        self.bodies[name] = body
        return text

    def formats(self, where: str) -> str:
        """Every listed format, in one text."""
        up, b64 = string.ascii_uppercase + string.digits, string.ascii_letters + string.digits + "+/"
        parts = []
        for kind, make in {
            "openai": lambda b: f"sk-proj-{b}",
            "aws-akia": lambda b: f"AKIA{b[:16].upper()}",
            "aws-asia": lambda b: f"ASIA{b[:16].upper()}",
            "aws-secret-env": lambda b: f"AWS_SECRET_ACCESS_KEY={b}",
            "aws-secret-file": lambda b: f"[default]\naws_secret_access_key = {b}\n",
            "postgres-url": lambda b: f"postgresql://app:{b}@db.internal:5432/prod",
            "mysql-url": lambda b: f"mysql://root:{b}@mysql:3306/app",
            "libpq": lambda b: f"host=db port=5432 password={b} dbname=app",
            "azure": lambda b: f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={b}==;EndpointSuffix=core.windows.net",
            "jwt": lambda b: f"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ{b[:12]}.{b}",
            "stripe": lambda b: f"sk_live_{b}",
            "huggingface": lambda b: f"hf_{b}",
            "gitlab": lambda b: f"glpat-{b[:20]}",
            "slack-webhook": lambda b: f"https://hooks.slack.com/services/T0000/B0000/{b}",
            "url-api-key": lambda b: f"https://api.example.com/v1/search?q=x&api_key={b}&page=2",
            "basic-auth": lambda b: f"Authorization: Basic {b}",
            "apim-header": lambda b: f"Ocp-Apim-Subscription-Key: {b}",
            "yaml": lambda b: f"database:\n  password: {b}\n  user: app",
            "pem": lambda b: f"-----BEGIN RSA PRIVATE KEY-----\nMIIE{b}\n-----END RSA PRIVATE KEY-----",
            "pgp": lambda b: f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOY{b}\n=abcd\n-----END PGP PRIVATE KEY BLOCK-----",
            "pem-cut": lambda b: f"-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl{b}",
        }.items():
            body = _rand(40, up if kind.startswith("aws-a") else b64 if kind == "basic-auth" else string.ascii_letters + string.digits)
            shown = body[:16].upper() if kind.startswith("aws-a") else body[:12] if kind == "jwt" else body[:20] if kind == "gitlab" else body
            parts.append(self.keep(f"{kind}@{where}", shown, make(body)))
        return "\n".join(parts)

    def keyed(self, where: str) -> dict[str, Any]:
        """Values under every listed key name."""
        out: dict[str, Any] = {"max_tokens": 256, "primary_key": "order-7"}  # not secrets: kept
        for key in ("jwt", "bearer", "dsn", "database_url", "connection_string", "openai_api_key", "ssh_key", "hmac_key", "subscription_key", "webhook_url", "db_password", "auth_token"):
            body = _rand(24)
            out[key] = self.keep(f"key:{key}@{where}", body, f"v-{body}")
        return out


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    openai_api_key: str
    db_password: str
    auth_token: str
    notes: list
    blob: Any


class Opaque:
    """A value with no safe encoding, whose long repr carries a key past character 2000."""

    def __init__(self, tail: str) -> None:
        self.tail = tail

    def __repr__(self) -> str:
        return "Opaque(" + "x" * 2500 + self.tail + ")"


def build(p: Planted) -> Any:
    @tool
    def lookup(query: str, db_password: str) -> dict:
        """Look up an account."""
        return {"found": p.formats("tool-result"), **p.keyed("tool-result")}

    split_body = _rand(32)
    p.keep("split-content", split_body[8:], "")
    script = [
        AIMessage(
            content=[{"type": "text", "text": f"Here: sk-proj-{split_body[:8]}"}, {"type": "text", "text": f"{split_body[8:]} {p.formats('model-message')}"}],
            tool_calls=[{"name": "lookup", "args": {"query": p.formats("tool-args"), "db_password": p.keep("tool-arg-password", b := _rand(20), b)}, "id": "c1"}],
        ),
        AIMessage(content=f"Done. {p.formats('final-answer')}"),
    ]
    model = ScriptedChatModel(script=lambda m: script[sum(isinstance(x, AIMessage) for x in m)], model_name="secrets").bind_tools([lookup])
    opaque_body = _rand(40)

    def prepare(state: State) -> dict:
        return {
            "openai_api_key": p.keep("channel-openai_api_key", b1 := _rand(30), f"sk-{b1}"),
            "db_password": p.keep("channel-db_password", b2 := _rand(18), b2),
            "auth_token": p.keep("channel-auth_token", b3 := _rand(22), b3),
            "notes": [p.formats("state-notes"), p.keyed("state-nested"), Pair("bob", p.keep("namedtuple", b4 := _rand(26), b4))],
            "blob": [p.formats("bytes").encode(), Opaque(p.keep("opaque-repr", opaque_body, f" AKIA{opaque_body[:16].upper()} sk-proj-{opaque_body}"))],
        }

    def agent(state: State) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    def audit(state: State) -> dict:
        raise RuntimeError(f"audit failed for {p.formats('node-error')}")

    b = StateGraph(State)
    b.add_node("prepare", prepare)
    b.add_node("agent", agent)
    b.add_node("tools", ToolNode([lookup]))
    b.add_node("audit", audit)
    b.add_edge(START, "prepare")
    b.add_edge("prepare", "agent")
    b.add_conditional_edges("agent", lambda s: "tools" if s["messages"][-1].tool_calls else "audit", ["tools", "audit"])
    b.add_edge("tools", "agent")
    b.add_edge("audit", END)
    return b.compile()


def record(p: Planted, url: str) -> str:
    with Recorder(url, durability="sync") as rec:
        name = p.keep("run-name", b := _rand(30), f"incident sk-proj-{b}")
        tag = p.keep("tag", t := _rand(30), f"owner:hf_{t}")
        graph = rec.attach(build(p), name=name, tags=["nightly", tag])
        config = {"configurable": {"thread_id": "t1", **p.keyed("config")}, "metadata": {"note": p.formats("config-metadata")}}
        with pytest.raises(RuntimeError, match="audit failed"):
            graph.invoke({"messages": [HumanMessage(p.formats("input-message"))], "notes": [p.keyed("input")]}, config)
        return rec.last_run_id


def sqlite_bytes(db: Path) -> bytes:
    raw = b"".join(f.read_bytes() for f in db.parent.glob(db.name + "*"))
    return raw + rows_bytes(f"sqlite:///{db}")


def rows_bytes(url: str) -> bytes:
    """Every cell of every graphtape table, decompressed where it is compressed."""
    engine = sa.create_engine(url)
    cells: list[bytes] = []
    try:
        with engine.connect() as conn:
            for table in ("runs", "steps", "calls", "blobs", "run_facets"):
                for row in conn.execute(sa.text(f"SELECT * FROM {table}")):
                    for cell in row:
                        data = cell.encode() if isinstance(cell, str) else bytes(cell) if isinstance(cell, (bytes, memoryview)) else None
                        if data is None:
                            continue
                        cells.append(data)
                        for body in (data, data[1:]):
                            try:
                                cells.append(zlib.decompress(body))
                            except zlib.error:
                                pass
    finally:
        engine.dispose()
    return b"\0".join(cells)


def leaks(p: Planted, blob: bytes) -> list[str]:
    import base64

    found = []
    for name, body in p.bodies.items():
        if body.encode() in blob:
            found.append(name)
    # bytes values are stored base64: the planted text must not be in there either
    for chunk in blob.split(b'"'):
        try:
            decoded = base64.b64decode(chunk, validate=True)
        except Exception:  # noqa: BLE001 - not base64
            continue
        found += [f"{n}(in bytes)" for n, body in p.bodies.items() if body.encode() in decoded]
    return sorted(set(found))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_sixty_secrets_through_every_channel_reach_no_store_export_json_or_save(backend, tmp_path, request, capsys, monkeypatch):
    url = str(tmp_path / "secrets.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    p = Planted()
    run_id = record(p, url)
    assert len(p.bodies) >= 60, len(p.bodies)

    stored = sqlite_bytes(tmp_path / "secrets.db") if backend == "sqlite" else rows_bytes(url)
    assert leaks(p, stored) == [], leaks(p, stored)

    fixture = tmp_path / "fx.json"
    assert main(["--db", url, "export", run_id, "-o", str(fixture)]) == 0
    assert leaks(p, fixture.read_bytes()) == []
    capsys.readouterr()
    shown = []
    for argv in (["show", run_id, "--json"], ["show", run_id, "--step", "1", "--json"], ["runs", "--json"]):
        assert main(["--db", url, *argv]) == 0
        shown.append(capsys.readouterr().out)
    assert leaks(p, "\n".join(shown).encode()) == []

    # A state saved from the TUI (s), the run's last complete step.
    from graphtape.tui.app import build_app
    from graphtape.tui.screens.run import RunScreen

    monkeypatch.chdir(tmp_path)
    app = build_app(url, run_id)
    async with app.run_test(size=(120, 34)) as pilot:
        for _ in range(60):
            await pilot.pause(0.05)
            if isinstance(app.screen, RunScreen) and app.screen.payload is not None:
                break
        await pilot.press("G", "left")
        await pilot.pause(0.3)
        await pilot.press("s")
        await pilot.pause(0.2)
        app.screen.query_one("#export-path").value = str(tmp_path / "saved.json")
        await pilot.press("enter")
        for _ in range(40):
            await pilot.pause(0.05)
            if (tmp_path / "saved.json").exists():
                break
    saved = (tmp_path / "saved.json").read_bytes()
    assert json.loads(saved) and leaks(p, saved) == []

    # The recording stays useful: what is not a secret is kept, and the redactions are counted.
    store = open_store(url)
    try:
        run = store.get_run(run_id)
        state = store.state_at(run_id, store.list_steps(run_id)[-2].step)
    finally:
        store.close()
    assert run.redactions >= 60 and run.tags[0] == "nightly"
    assert state["notes"][1]["max_tokens"] == 256 and state["notes"][1]["primary_key"] == "order-7"
