"""Redaction end to end: secrets planted everywhere a recording reaches never land on disk.

A real agent graph (a scripted chat model bound to tools, a ``ToolNode``) is
recorded with secrets of every form graphtape redacts (the built-in credential
patterns, values under secret-naming keys, pydantic ``SecretStr``, a user
pattern and a user key) planted in the inputs, the config, the state, tool
arguments and results, model messages (streamed and not) and tool and model
errors. Then no secret's distinctive bytes may appear in the database file,
its ``-wal`` / ``-shm`` files, or any row once decompressed; and the files are
private to their owner (mode 0600).
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import stat
import string
import zlib
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from conftest import load_agent
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from pydantic import SecretStr

from graphtape.recorder import Recorder, open_store
from graphtape.recorder.redaction import DEFAULT_PATTERNS, MARK

ScriptedChatModel = load_agent("scripted_model").ScriptedChatModel

USER_PATTERN = r"ACME-\d{10}"
USER_KEY = "internal_ref"


def _rand(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


class Planted:
    """Fresh secrets of every form, each with a distinctive random body to search for."""

    def __init__(self) -> None:
        self.bodies: dict[str, str] = {}

    def _keep(self, name: str, body: str, text: str) -> str:
        self.bodies[name] = body
        return text

    # -- credential patterns (found anywhere in text) ----------------------------
    def pattern(self, where: str, kind: str) -> str:
        name = f"{kind}@{where}"
        upper = string.ascii_uppercase + string.digits
        body = {
            "openai": _rand(24),
            "openai-project": _rand(32),
            "anthropic": _rand(32),
            "bearer": _rand(30),
            "aws": _rand(16, upper),
            "github": _rand(36),
            "github-fine-grained": _rand(40),
            "slack": _rand(20),
            "google": _rand(35),
            "private-key": _rand(48),
            "user-pattern": _rand(10, string.digits),
        }[kind]
        text = {
            "openai": f"sk-{body}",
            "openai-project": f"sk-proj-{body}",
            "anthropic": f"sk-ant-{body}",
            "bearer": f"Bearer {body}",
            "aws": f"AKIA{body}",
            "github": f"ghp_{body}",
            "github-fine-grained": f"github_pat_{body}",
            "slack": f"xoxb-{body}",
            "google": f"AIza{body}",
            "private-key": f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----",
            "user-pattern": f"ACME-{body}",
        }[kind]
        return self._keep(name, body, text)

    def every_pattern(self, where: str) -> str:
        kinds = ["openai", "openai-project", "anthropic", "bearer", "aws", "github", "github-fine-grained", "slack", "google", "private-key", "user-pattern"]
        return " | ".join(f"{k}: {self.pattern(where, k)}" for k in kinds)

    # -- values under keys, SecretStr -------------------------------------------
    def value(self, where: str) -> str:
        body = _rand(24)
        return self._keep(f"value@{where}", body, f"v-{body}")

    def keyed(self, where: str) -> dict[str, Any]:
        return {
            "password": self.value(f"password@{where}"),
            "dbPassword": self.value(f"dbPassword@{where}"),
            "api_key": self.value(f"api_key@{where}"),
            "x-api-key": self.value(f"x-api-key@{where}"),
            "access_token": self.value(f"access_token@{where}"),
            "Authorization": self.value(f"Authorization@{where}"),
            "cookie": self.value(f"cookie@{where}"),
            "session_id": self.value(f"session_id@{where}"),
            "client_secret": self.value(f"client_secret@{where}"),
            "private_key": self.value(f"private_key@{where}"),
            USER_KEY: self.value(f"{USER_KEY}@{where}"),
            "wrapped": SecretStr(self.value(f"SecretStr@{where}")),
            "max_tokens": 256,  # not a secret: must survive
        }


class AgentState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    account: dict
    notes: list


def build(p: Planted, *, model_error: bool = False) -> Any:
    @tool
    def lookup(query: str, password: str) -> dict:
        """Look up an account (the password is needed upstream)."""
        return {"found": f"account for {query}: {p.every_pattern('tool-result')}", **p.keyed("tool-result")}

    @tool
    def explode(reason: str) -> str:
        """Fail the way a broken integration does."""
        raise ValueError(f"upstream rejected the call: {p.every_pattern('tool-error')}")

    script = [
        AIMessage(
            content=f"Checking with {p.every_pattern('model-message')}",
            tool_calls=[
                {"name": "lookup", "args": {"query": p.every_pattern("tool-args-text"), "password": p.value("password@tool-args")}, "id": "call_1"},
                {"name": "explode", "args": {"reason": p.every_pattern("tool-error-args")}, "id": "call_2"},
            ],
        ),
        AIMessage(content=f"Done; I used {p.every_pattern('final-answer')}"),
    ]

    def scripted(messages: list) -> AIMessage:
        if model_error:
            raise RuntimeError(f"provider error: {p.every_pattern('model-error')}")
        return script[sum(isinstance(m, AIMessage) for m in messages)]

    model = ScriptedChatModel(script=scripted, model_name="scripted-secrets").bind_tools([lookup, explode])

    def prepare(state: AgentState) -> dict:
        return {"account": p.keyed("state"), "notes": [p.every_pattern("state-notes"), {"detail": p.keyed("state-nested")}]}

    def agent(state: AgentState) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    b = StateGraph(AgentState)
    b.add_node("prepare", prepare)
    b.add_node("agent", agent)
    b.add_node("tools", ToolNode([lookup, explode], handle_tool_errors=True))
    b.add_edge(START, "prepare")
    b.add_edge("prepare", "agent")
    b.add_conditional_edges("agent", lambda s: "tools" if s["messages"][-1].tool_calls else END, ["tools", END])
    b.add_edge("tools", "agent")
    return b.compile()


def inputs(p: Planted) -> dict:
    return {"messages": [HumanMessage(f"Please help, my keys: {p.every_pattern('input-message')}")], "account": p.keyed("input"), "notes": []}


def config(p: Planted, thread: str) -> dict:
    return {
        "configurable": {"thread_id": thread, "openai_api_key": p.value("openai_api_key@config"), "user": p.every_pattern("config-text")},
        "metadata": {"auth_token": p.value("auth_token@metadata"), "why": p.every_pattern("metadata-text")},
    }


def everything_stored(db: Path) -> bytes:
    """The files' raw bytes, plus every cell of every table decompressed where it was compressed."""
    raw = b"".join(f.read_bytes() for f in db.parent.glob(db.name + "*"))
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    cells: list[bytes] = []
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                for cell in row:
                    if isinstance(cell, str):
                        cells.append(cell.encode())
                    elif isinstance(cell, bytes):
                        cells.append(cell)
                        for body in (cell, cell[1:]):
                            try:
                                cells.append(zlib.decompress(body))
                            except zlib.error:
                                pass
    finally:
        conn.close()
    return raw + b"\0".join(cells)


def leaks(p: Planted, blob: bytes) -> list[str]:
    return sorted(name for name, body in p.bodies.items() if body.encode() in blob)


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_no_planted_secret_reaches_the_database_files(tmp_path: Path, durability: str) -> None:
    db = tmp_path / "secrets.db"
    p = Planted()
    old = os.umask(0o022)  # a usual umask: the files must still come out private
    try:
        rec = Recorder(db, durability=durability, redact_patterns=[USER_PATTERN], redact_keys=[USER_KEY])
        graph = rec.attach(build(p), name="secret-agent")
        # Streamed: the model's tool-call arguments arrive as JSON text in chunks.
        chunks = list(graph.stream(inputs(p), config(p, "streamed"), stream_mode=["values", "messages"]))
        final = chunks[-1]
        graph.invoke(inputs(p), config(p, "invoked"))
        with pytest.raises(RuntimeError, match="provider error"):
            rec.attach(build(p, model_error=True), name="failing-agent").invoke(inputs(p), config(p, "failing"))
        assert rec.flush()
        files = sorted(db.parent.glob(db.name + "*"))
        assert {f.name for f in files} >= {"secrets.db", "secrets.db-wal"}
        for f in files:
            assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
        assert leaks(p, everything_stored(db)) == []  # while the WAL holds the latest writes
        rec.close()
    finally:
        os.umask(old)
    assert leaks(p, everything_stored(db)) == []  # and after it was checkpointed into the file
    assert p.bodies and final[0] == "values"

    # The recording is still useful: the shapes and the harmless values are kept.
    store = open_store(db)
    runs = {r.thread_id: r for r in store.list_runs()}
    assert runs["failing"].status == "error" and MARK in runs["failing"].error_message
    assert runs["streamed"].redactions > 50
    run_id = runs["invoked"].id
    last = store.list_steps(run_id)[-1].step
    state = store.state_at(run_id, last)
    assert state["account"]["max_tokens"] == 256 and state["account"]["password"] == MARK
    calls = store.calls(run_id)
    assert {c.name for c in calls if c.kind == "tool"} == {"lookup", "explode"}
    failed = next(c for c in calls if c.name == "explode")
    assert failed.error_type == "ValueError" and MARK in failed.error_message
    store.close()


def test_every_builtin_pattern_is_planted() -> None:
    import re

    from test_redaction_channels import Planted as EveryFormat

    p = Planted()
    text = p.every_pattern("check") + "\n" + EveryFormat().formats("check")  # the two end-to-end tests between them
    for pattern in DEFAULT_PATTERNS:
        assert re.search(pattern, text), pattern


def test_secret_used_as_a_mapping_key_is_redacted(tmp_path: Path) -> None:
    p = Planted()
    key = p.pattern("state-key", "openai-project")
    b = StateGraph(AgentState)
    b.add_node("cache", lambda s: {"account": {key: "client for this key"}})
    b.add_edge(START, "cache")
    db = tmp_path / "keys.db"
    with Recorder(db, durability="sync") as rec:
        rec.attach(b.compile()).invoke({"messages": [], "account": {}, "notes": []})
    assert leaks(p, everything_stored(db)) == []


class Reported(TypedDict, total=False):
    report: str


@pytest.mark.parametrize(
    "credentials",
    [
        {"service": "s3", "aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "n": 2},
        {"service": "api", "authorization": "Bearer abcdefghijklmnopqrstuvwxyz123456"},
        {"service": "api", "authorization": "Basic dXNlcjpwYXNzd29yZA=="},
    ],
    ids=["aws secret key", "bearer authorization", "basic authorization"],
)
def test_a_node_that_writes_a_redacted_mapping_as_text_replays_the_same(tmp_path: Path, credentials: dict) -> None:
    """A tool returns a mapping with a secret under a secret key; the node writes it out as text.
    The recording keeps the mapping with that key's value redacted, and the text with the secret
    scrubbed. A replay hands the node the redacted mapping, so the text it writes must read as
    the recorded text does: a format that takes in the key keeps the key."""
    from graphtape.replay import replay

    @tool
    def fetch_credentials(service: str) -> dict:
        """The credentials of a service."""
        return dict(credentials)

    def build():
        b = StateGraph(Reported)
        b.add_node("report", lambda s: {"report": str(fetch_credentials.invoke({"service": credentials["service"]}))})
        b.add_edge(START, "report")
        b.add_edge("report", END)
        return b.compile()

    db = str(tmp_path / "creds.db")
    with Recorder(db) as rec:
        rec.attach(build()).invoke({})
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        report = store.state_at(run_id, store.list_steps(run_id)[-1].step)["report"]
    finally:
        store.close()
    secret_key = next(k for k in credentials if k not in ("service", "n"))
    scheme = credentials[secret_key].split()[0] + " " if secret_key == "authorization" else ""  # "Bearer [REDACTED]"
    assert f"'{secret_key}': '{scheme}{MARK}'" in report and credentials[secret_key] not in report
    result = replay(run_id, build(), db=db)
    assert not result.diverged, result.report()


def test_secrets_in_the_environment_are_found_by_value_in_any_text(tmp_path: Path, monkeypatch) -> None:
    """A key in no known format, named in the environment (OPENAI_API_KEY, MY_SERVICE_TOKEN,
    DB_PASSWORD), is redacted where a tool echoes it and where an error quotes it; a variable
    that only looks secret by name (PWD) or holds no secret (TOKENIZERS_PARALLELISM) is not."""
    import json
    import urllib.parse

    key, token, password = "ENVKEY_plain_" + secrets.token_hex(6), "ENVTOK_" + secrets.token_hex(6), 'pw/"' + secrets.token_hex(6)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("MY_SERVICE_TOKEN", token)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")

    class Echo(TypedDict, total=False):
        said: str
        where: str
        carried: str

    def echo(state: Echo) -> dict:
        said = f"key {os.environ['OPENAI_API_KEY']} and token {os.environ['MY_SERVICE_TOKEN']}"
        carried = json.dumps({"pw": os.environ["DB_PASSWORD"]}) + " " + urllib.parse.quote(os.environ["DB_PASSWORD"], safe="")
        return {"said": said, "where": os.getcwd(), "carried": carried}

    def fail(state: Echo) -> dict:
        raise RuntimeError(f"login refused with {os.environ['DB_PASSWORD']}")

    b = StateGraph(Echo)
    b.add_node("echo", echo)
    b.add_node("fail", fail)
    b.add_edge(START, "echo")
    b.add_edge("echo", "fail")
    b.add_edge("fail", END)
    db = tmp_path / "env.db"
    with Recorder(db) as rec:
        monkeypatch.setenv("DB_PASSWORD", password)  # set after the recorder was made (a late load_dotenv)
        with pytest.raises(RuntimeError):
            rec.attach(b.compile()).invoke({})
        run_id = rec.last_run_id
    stored = everything_stored(db)
    for secret in (key, token, password, json.dumps(password)[1:-1], urllib.parse.quote(password, safe="")):
        assert secret.encode() not in stored
    store = open_store(db)
    try:
        run = store.get_run(run_id)
        assert (run.error_type, run.error_message) == ("RuntimeError", f"login refused with {MARK}")
        state = store.state_at(run_id, store.list_steps(run_id)[-1].step)
        assert state == {"said": f"key {MARK} and token {MARK}", "where": os.getcwd(), "carried": f'{{"pw": "{MARK}"}} {MARK}'}
    finally:
        store.close()


def test_a_replay_that_diverges_on_a_redacted_secret_says_why(tmp_path):
    from graphtape.replay import replay

    class KeyState(TypedDict, total=False):
        api_key: str
        valid: bool

    b = StateGraph(KeyState)
    b.add_node("check", lambda s: {"valid": s["api_key"].startswith("sk-")})  # reads the secret itself
    b.add_edge(START, "check")
    b.add_edge("check", END)
    graph = b.compile()
    db = str(tmp_path / "k.db")
    with Recorder(db) as rec:
        rec.attach(graph).invoke({"api_key": "sk-live-1234567890abcdef"})
        run_id = rec.last_run_id
    result = replay(run_id, graph, db=db)
    assert result.diverged and "replay was handed them redacted" in result.report(), result.report()
    clean = replay(run_id, graph, db=db, ignore=["valid"])
    assert not clean.diverged and "redacted" not in clean.report()


class Signup(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]


def _signup_graph(password: str, handled: bool):
    """A tool handed a password by name fails with SQLAlchemy's IntegrityError, whose text and
    ``params`` quote the statement's values: the password with no key beside it. A ``ToolNode``
    that handles tool errors puts that text in the state; without it, the error fails the node
    and the run."""
    import sqlalchemy as sa

    @tool
    def create_user(name: str, password: str) -> str:
        """Create a user."""
        engine = sa.create_engine("sqlite://")
        with engine.connect() as conn:
            conn.execute(sa.text("create table users (name text unique, password text)"))
            conn.execute(sa.text("insert into users values ('bob', 'x')"))
            conn.execute(sa.text("insert into users (name, password) values (:n, :p)"), {"n": name, "p": password})
        return "created"

    def ask(state: Signup) -> dict:
        return {"messages": [AIMessage("", tool_calls=[{"name": "create_user", "args": {"name": "bob", "password": password}, "id": "call-1"}])]}

    b = StateGraph(Signup)
    b.add_node("ask", ask)
    b.add_node("tools", ToolNode([create_user], handle_tool_errors=(lambda e: f"could not sign up: {e}") if handled else False))
    b.add_edge(START, "ask")
    b.add_edge("ask", "tools")
    b.add_edge("tools", END)
    return b.compile()


@pytest.mark.parametrize("handled", [True, False], ids=["error in the state", "error fails the run"])
@pytest.mark.parametrize("durability", ["sync", "async"])
def test_a_secret_a_call_was_handed_by_name_is_redacted_where_its_error_quotes_it(tmp_path: Path, durability: str, handled: bool) -> None:
    import sqlalchemy as sa

    password = "pw-" + secrets.token_hex(10)
    db = tmp_path / "signup.db"
    with Recorder(db, durability=durability) as rec:
        graph = rec.attach(_signup_graph(password, handled), name="signup")
        if handled:
            out = graph.invoke({"messages": [HumanMessage("sign bob up")]})
            assert "IntegrityError" in out["messages"][-1].content and password in out["messages"][-1].content  # the graph sees it all
        else:
            with pytest.raises(sa.exc.IntegrityError):
                graph.invoke({"messages": [HumanMessage("sign bob up")]})
        run_id = rec.last_run_id
    assert password.encode() not in everything_stored(db)
    store = open_store(db)
    try:
        call = next(c for c in store.calls(run_id) if c.name == "create_user")
        assert call.inputs == {"name": "bob", "password": MARK}
        assert call.error_type == "IntegrityError" and f"[parameters: ('bob', '{MARK}')]" in call.error_message
        assert call.output["error_fields"]["params"] == ["bob", MARK]
        run = store.get_run(run_id)
        if handled:
            state = store.state_at(run_id, store.list_steps(run_id)[-1].step)
            assert f"('bob', '{MARK}')" in state["messages"][-1]["content"]
            assert run.status == "ok"
        else:
            assert run.status == "error" and f"('bob', '{MARK}')" in run.error_message
        assert run.redactions >= 3
    finally:
        store.close()


class Row(TypedDict, total=False):
    done: str


@pytest.mark.parametrize("where", ["node", "tool"])
def test_a_value_a_failed_statement_binds_to_a_secret_column_is_redacted(tmp_path: Path, where: str) -> None:
    """No key named the password on its way in (a node's own query, a tool handed a row of
    values): the failed statement names its column, and that is enough to hide it."""
    import sqlalchemy as sa

    password = "pw-" + secrets.token_hex(10)

    def insert(values: list) -> str:
        engine = sa.create_engine("sqlite://")
        with engine.connect() as conn:
            conn.execute(sa.text("create table users (name text unique, password text)"))
            conn.execute(sa.text("insert into users values ('bob', 'x')"))
            conn.execute(sa.text('insert into users ("name", "password") values (:a, :b)'), {"a": values[0], "b": values[1]})
        return "inserted"

    @tool
    def add_row(table: str, values: list) -> str:
        """Add a row to a table."""
        return insert(values)

    def signup(state: Row) -> dict:
        if where == "tool":
            return {"done": add_row.invoke({"table": "users", "values": ["bob", password]})}
        return {"done": insert(["bob", password])}

    b = StateGraph(Row)
    b.add_node("signup", signup)
    b.add_edge(START, "signup")
    b.add_edge("signup", END)
    db = tmp_path / "rows.db"
    with Recorder(db) as rec:
        with pytest.raises(sa.exc.IntegrityError):
            rec.attach(b.compile()).invoke({})
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        run = store.get_run(run_id)
        assert run.status == "error" and f"[parameters: ('bob', '{MARK}')]" in run.error_message
        if where == "tool":
            call = next(c for c in store.calls(run_id) if c.name == "add_row")
            assert call.inputs == {"table": "users", "values": ["bob", MARK]}  # the same value, in the record of the call that failed
            assert call.output["error_fields"]["params"] == ["bob", MARK] and f"('bob', '{MARK}')" in call.error_message
    finally:
        store.close()
    assert password.encode() not in everything_stored(db)
