"""Hundreds of secrets of every listed format, planted through every channel, found nowhere.

Formats (31): provider keys (OpenAI, Anthropic, Hugging Face, Stripe), AWS key ids (AKIA, ASIA)
and secret keys (env and credentials-file forms), passwords in URLs (postgresql, mysql, redis
without a user), libpq ``password=``, Azure storage connection strings, JWTs, GitHub (classic and
fine-grained), GitLab, Slack tokens and webhooks, Google keys, ``?api_key=`` and
``&access_token=`` in URLs, ``Authorization: Basic`` and ``Bearer``, ``Ocp-Apim-Subscription-Key``,
YAML ``password:``, a quoted ``.env`` value, JSON inside a JSON string, PEM and PGP private key
blocks (one cut short); and values under keys named jwt, bearer, dsn, database_url,
connection_string, openai_api_key, ssh_key, hmac_key, subscription_key, webhook_url,
db_password, auth_token.
Channels: the inputs, the config (configurable and metadata), state channels named like
secrets, nested state, tool arguments, results and errors, model messages (a key split across
two content parts, a private key across two more), a failing model call, bytes, namedtuples, an
unserializable object's long repr, a node error and its traceback (a key on the raising line),
the run's name and tags. Checked: the SQLite file (and its WAL), every PostgreSQL row, exported
fixtures, ``show --json`` and ``show --full`` of every step, ``runs --json`` and a state saved
from the TUI. Run with ``-s`` to see the tally.
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
from graphtape.recorder.redaction import MARK
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
        n = 1
        while f"{name}#{n}" in self.bodies or (n == 1 and name in self.bodies):
            n += 1
        self.bodies[name if n == 1 else f"{name}#{n}"] = body  # a second run plants its own
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
            # graphtape's own formats from before the catalogue, and keys inside other text
            "bearer": lambda b: f"Authorization: Bearer {b}",
            "anthropic": lambda b: f"sk-ant-api03-{b}",
            "github": lambda b: f"ghp_{b}",
            "github-fine-grained": lambda b: f"github_pat_{b}",
            "slack-token": lambda b: f"xoxb-{b}",
            "google": lambda b: f"AIza{b[:35]}",
            "json-in-json": lambda b: '{"payload": "{\\"api_key\\": \\"' + b + '\\"}"}',
            "redis-no-user": lambda b: f"redis://:{b}@cache:6379/0",
            "env-quoted": lambda b: f'DB_PASSWORD="{b}"',
            "query-token": lambda b: f"https://cb.example/done?code=1&access_token={b}",
            # keys and headers an outside probe found stored
            "google-oauth": lambda b: f"ya29.{b}",
            "groq": lambda b: f"gsk_{b}",
            "langsmith": lambda b: f"lsv2_pt_{b}",
            "perplexity": lambda b: f"pplx-{b}",
            "tavily": lambda b: f"tvly-dev-{b}",
            "pinecone": lambda b: f"pcsk_{b}",
            "replicate": lambda b: f"r8_{b}",
            "fireworks": lambda b: f"fw_{b}",
            "auth-other-scheme": lambda b: f"Authorization: SSWS {b}",
            "authentication-header": lambda b: f"Authentication: Token {b}",
            "cookie-second": lambda b: f"Cookie: theme=dark; session={b}",
            "set-cookie": lambda b: f"Set-Cookie: Path=/; session={b}; HttpOnly",
            "query-sig": lambda b: f"https://acct.blob.core.windows.net/c/f.pdf?sv=2022-11-02&sig={b}",
            "query-key": lambda b: f"https://maps.example/api?key={b}&q=x",
            "bearer-url-encoded": lambda b: f"Authorization=Bearer%20{b}",
            "key-url-encoded": lambda b: f"text=%20sk-proj-{b}",
            "key-glued-to-a-digit": lambda b: f"order 5sk-proj-{b}",
            "multipart-password": lambda b: f'--x\r\nContent-Disposition: form-data; name="password"\r\n\r\n{b}\r\n--x--',
            # formats added after an outside probe found them stored
            "stripe-test": lambda b: f"sk_test_{b}",
            "stripe-webhook": lambda b: f"whsec_{b}",
            "npm": lambda b: f"//registry.npmjs.org/ npm_{b[:36]}",
            "npmrc-private-registry": lambda b: f"//npm.example.com/:_authToken={b}",
            "slack-app": lambda b: f"xapp-1-A0123ABCD-4567890123-{b}",
            "discord-webhook": lambda b: f"https://discord.com/api/webhooks/123456789012345678/{b}",
            "digitalocean": lambda b: f"dop_v1_{b}{b[:24]}",
            "shopify": lambda b: f"shpat_{b[:32]}",
            "databricks": lambda b: f"dapi{b[:32]}",
            "atlassian": lambda b: f"ATATT3{b}{b}{b}",
            "linear": lambda b: f"lin_api_{b}",
            "notion": lambda b: f"ntn_{b}",
            "postman": lambda b: f"PMAK-{b[:24]}-{b[:34]}",
            "mailgun": lambda b: f"key-{b[:32]}",
            "xai": lambda b: f"xai-{b}",
            "grafana": lambda b: f"glsa_{b}",
            "gitlab-runner": lambda b: f"glrt-{b}",
            "doppler": lambda b: f"dp.st.prd.{b}",
            "vault": lambda b: f"hvs.{b}",
            "terraform-cloud": lambda b: f"AbCdEf01234567.atlasv1.{b}{b}",
            "pulumi": lambda b: f"pul-{b}",
            "sentry": lambda b: f"sntrys_{b}",
            "new-relic": lambda b: f"NRAK-{b[:27]}",
            "age": lambda b: f"AGE-SECRET-KEY-1{b}{b[:18]}",
            "pem-in-base64": lambda b: "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQp" + b,
            "aws-key-pair": lambda b: f"Access key ID,Secret access key\nAKIAIOSFODNN7EXAMPLE,{b}",
            "url-token-user": lambda b: f"git clone https://{b}@github.com/org/repo.git",
            "discord-bot": lambda b: f"MTAxNTk4NzY1NDMyMTAxMjM0.GaBcDe.{b}",
            "query-code": lambda b: f"https://fn.azurewebsites.net/api/lookup?code={b}==&clientId=default",
            "putty-private-lines": lambda b: f"PuTTY-User-Key-File-3: ssh-ed25519\nPrivate-Lines: 1\n{b}\nPrivate-MAC: 0a1b",
        }.items():
            alphabet = string.ascii_letters + string.digits
            if kind.startswith("aws-a") or kind == "new-relic":
                alphabet = up
            elif kind in ("basic-auth", "pem-in-base64", "putty-private-lines"):
                alphabet = b64
            elif kind in ("digitalocean", "shopify", "databricks", "postman", "mailgun", "pulumi"):
                alphabet = "0123456789abcdef"
            elif kind == "age":
                alphabet = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
            body = _rand(40, alphabet)
            cut = {"jwt": 12, "gitlab": 20, "google": 35, "npm": 36, "shopify": 32, "databricks": 32, "postman": 24, "mailgun": 32, "new-relic": 27}
            shown = body[:16].upper() if kind.startswith("aws-a") else body[: cut.get(kind, 40)]
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


AUDIT = """
def audit(state):
    client_key = "sk-proj-{key}"; raise RuntimeError("audit failed for " + {text!r})
"""


def _audit_node(p: Planted, folder: Path) -> Any:
    """A node from a file whose raising line holds a key: the traceback's source line carries it."""
    from graphtape.replay.loading import load_module_from_path

    key = p.keep("traceback-source-line", b := _rand(32), b)
    path = folder / f"audit_{key[:6]}.py"
    path.write_text(AUDIT.format(key=key, text=p.formats("node-error")))
    return load_module_from_path(path).audit


def build(p: Planted, folder: Path, *, model_fails: bool = False) -> Any:
    @tool
    def lookup(query: str, db_password: str) -> dict:
        """Look up an account."""
        return {"found": p.formats("tool-result"), **p.keyed("tool-result")}

    @tool
    def explode(reason: str) -> str:
        """Fail the way a broken integration does."""
        raise ValueError(f"upstream rejected the call: {p.formats('tool-error')}")

    split_body = _rand(32)
    p.keep("split-content", split_body[8:], "")
    pem_body = "".join(_rand(64) + "\n" for _ in range(26))  # a 2048-bit key's worth of lines
    p.keep("pem-split-content", pem_body[900:960], "")
    pem = f"-----BEGIN RSA PRIVATE KEY-----\n{pem_body}-----END RSA PRIVATE KEY-----"
    script = [
        AIMessage(
            content=[
                {"type": "text", "text": f"Here: sk-proj-{split_body[:8]}"},
                {"type": "text", "text": f"{split_body[8:]} {p.formats('model-message')}"},
                {"type": "text", "text": f" and the deploy key: {pem[:1000]}"},  # cut far from BEGIN...
                {"type": "text", "text": pem[1000:]},  # ...and END: only the parts together are a key
            ],
            tool_calls=[
                {"name": "lookup", "args": {"query": p.formats("tool-args"), "db_password": p.keep("tool-arg-password", b := _rand(20), b)}, "id": "c1"},
                {"name": "explode", "args": {"reason": p.formats("tool-error-args")}, "id": "c2"},
            ],
        ),
        AIMessage(content=f"Done. {p.formats('final-answer')}"),
    ]

    def answer(messages: list) -> AIMessage:
        if model_fails:
            raise RuntimeError(f"provider error: {p.formats('model-error')}")
        return script[sum(isinstance(x, AIMessage) for x in messages)]

    model = ScriptedChatModel(script=answer, model_name="secrets").bind_tools([lookup, explode])
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

    b = StateGraph(State)
    b.add_node("prepare", prepare)
    b.add_node("agent", agent)
    b.add_node("tools", ToolNode([lookup, explode], handle_tool_errors=True))
    b.add_node("audit", _audit_node(p, folder))
    b.add_edge(START, "prepare")
    b.add_edge("prepare", "agent")
    b.add_conditional_edges("agent", lambda s: "tools" if s["messages"][-1].tool_calls else "audit", ["tools", "audit"])
    b.add_edge("tools", "agent")
    b.add_edge("audit", END)
    return b.compile()


def record(p: Planted, url: str, folder: Path) -> list[str]:
    """The agent's run (it ends in the audit node's error) and a run whose model call fails."""
    runs = []
    with Recorder(url, durability="sync") as rec:
        name = p.keep("run-name", b := _rand(30), f"incident sk-proj-{b}")
        tag = p.keep("tag", t := _rand(30), f"owner:hf_{t}")
        graph = rec.attach(build(p, folder), name=name, tags=["nightly", tag])
        config = {"configurable": {"thread_id": "t1", **p.keyed("config")}, "metadata": {"note": p.formats("config-metadata")}}
        with pytest.raises(RuntimeError, match="audit failed"):
            graph.invoke({"messages": [HumanMessage(p.formats("input-message"))], "notes": [p.keyed("input")]}, config)
        runs.append(rec.last_run_id)
        failing = rec.attach(build(p, folder, model_fails=True), name="failing-model")
        with pytest.raises(RuntimeError, match="provider error"):
            failing.invoke({"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": "t2"}})
        runs.append(rec.last_run_id)
    return runs


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


def tally(p: Planted) -> str:
    """What was planted: formats x text channels, secret-named keys x places, and single plants."""
    formats = [n.split("#")[0] for n in p.bodies if "@" in n and not n.startswith("key:")]
    keys = [n.split("#")[0] for n in p.bodies if n.startswith("key:")]
    single = sorted({n.split("#")[0] for n in p.bodies if "@" not in n})
    return (
        f"{len(p.bodies)} secrets: {len({f.split('@')[0] for f in formats})} formats in {len({f.split('@')[1] for f in formats})} text channels, "
        f"{len({k.split('@')[0] for k in keys})} secret-named keys in {len({k.split('@')[1] for k in keys})} places, and {', '.join(single)}"
    )


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_sixty_secrets_through_every_channel_reach_no_store_export_json_or_save(backend, tmp_path, request, capsys, monkeypatch):
    url = str(tmp_path / "secrets.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    p = Planted()
    run_id, failing_id = record(p, url, tmp_path)
    kinds = {name.split("@", 1)[0] for name in p.bodies if "@" in name and ":" not in name.split("@", 1)[0]}
    assert len(p.bodies) >= 60 and len(kinds) >= 31, (len(p.bodies), len(kinds))

    stored = sqlite_bytes(tmp_path / "secrets.db") if backend == "sqlite" else rows_bytes(url)
    assert leaks(p, stored) == [], leaks(p, stored)

    capsys.readouterr()
    written = []
    for rid in (run_id, failing_id):
        fixture = tmp_path / f"fx-{rid}.json"
        assert main(["--db", url, "export", rid, "-o", str(fixture)]) == 0
        written.append(fixture.read_bytes())
    assert leaks(p, b"\n".join(written)) == []
    store = open_store(url)
    try:
        steps = {rid: [s.step for s in store.list_steps(rid)] for rid in (run_id, failing_id)}
    finally:
        store.close()
    shown = []
    for argv in (
        ["runs", "--json"],
        *(["show", rid, "--json"] for rid in steps),
        *(["show", rid, "--step", str(n), "--json"] for rid, ns in steps.items() for n in ns),
        *(["show", rid, "--step", str(n), "--full"] for rid, ns in steps.items() for n in ns),
    ):
        assert main(["--db", url, *argv]) == 0, argv
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

    # Every channel was really recorded (a channel missing from the store would hide nothing),
    # and the recording stays useful: what is not a secret is kept, the redactions are counted.
    store = open_store(url)
    try:
        run = store.get_run(run_id)
        state = store.state_at(run_id, store.list_steps(run_id)[-2].step)
        calls = store.calls(run_id)
        failing = store.get_run(failing_id)
        model_call = next(c for c in store.calls(failing_id) if c.kind == "model")
        tasks = [t for n in steps[run_id] for t in store.step_detail(run_id, n).tasks]
    finally:
        store.close()
    assert run.redactions >= 60 and run.tags[0] == "nightly" and MARK in run.name and MARK in run.tags[1]
    assert state["notes"][1]["max_tokens"] == 256 and state["notes"][1]["primary_key"] == "order-7"
    assert state["openai_api_key"] == state["db_password"] == state["auth_token"] == MARK
    assert {c.name for c in calls if c.kind == "tool"} == {"lookup", "explode"}
    assert MARK in next(c for c in calls if c.name == "explode").error_message
    assert failing.status == "error" and MARK in failing.error_message and MARK in model_call.error_message
    audit = next(t for t in tasks if t.node == "audit")
    assert audit.traceback and "client_key = " in audit.traceback[-1][3] and MARK in audit.traceback[-1][3]
    content = next(m for m in state["messages"] if m.get("type") == "ai")["content"]
    assert len(content) == 4 and MARK in content[0]["text"] and content[-1]["text"] in ("", MARK)  # joined where a secret spans parts
    print(f"\n{backend}: planted {tally(p)}; found {len(leaks(p, stored))}")
