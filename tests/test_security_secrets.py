"""Secrets in the shapes an outside probe found stored, recorded through a real graph.

A compiled LangGraph graph (a scripted chat model bound to tools, a ``ToolNode``, a node that
posts over HTTP) is recorded with secrets written the ways agents write them: a scheme word
between a key and its secret, a password told in prose that is only letters, a command line
given as a list of arguments, token formats of more vendors, a private key in base64. No
secret's bytes may reach the store's files or the run's exported fixture, and the ordinary
text around each must survive.
"""

from __future__ import annotations

import base64
import json
import secrets
import string
from pathlib import Path
from typing import Annotated, Any, TypedDict

import httpx
import pytest
from conftest import exported, load_agent
from http_server import EchoService
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from test_redaction_e2e import everything_stored

from graphtape.recorder import Recorder, open_store
from graphtape.recorder.redaction import MARK, Redactor

ScriptedChatModel = load_agent("scripted_model").ScriptedChatModel


def _rand(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    """Random characters; with the default alphabet, always a digit among them (a random word of
    letters alone could read as a key's name)."""
    body = "".join(secrets.choice(alphabet) for _ in range(n))
    return body[:-1] + secrets.choice(string.digits) if alphabet == string.ascii_letters + string.digits else body


def _word(n: int) -> str:
    """Random lowercase letters that end as no adjective or participle does."""
    return _rand(n - 1, "bcdfghjkmnpqrstvwxz") + "q"


class Secrets:
    """One random secret per shape, with the text that carries it."""

    def __init__(self) -> None:
        s = self.s = {
            "scheme-between": _rand(24),
            "token-scheme": _rand(24),
            "walrus": _rand(20),
            "prose-letters": _word(22),
            "prose-pass": _rand(6, string.ascii_lowercase) + "2" + _rand(6, string.ascii_lowercase),
            "passphrase": " ".join(_word(7) for _ in range(4)),
            "argv-mysql": _rand(10) + "!pw",
            "argv-curl": _rand(16),
            "argv-token": _rand(24),
            "argv-in-text": _rand(18),
            "npm": _rand(36),
            "stripe-test": _rand(24),
            "vault": _rand(30),
            "basic-pair": base64.b64encode(f"bob:{_rand(14)}".encode()).decode(),
            "b64-credentials": base64.b64encode(f"svc:{_rand(14)}".encode()).decode(),
            "b64-pem": base64.b64encode(f"-----BEGIN RSA PRIVATE KEY-----\nMIIE{_rand(60)}\n-----END RSA PRIVATE KEY-----\n".encode()).decode(),
            "error-prose": _word(18),
            "http-body": _rand(24),
            "model-said": _word(20),
        }
        self.notes = (
            f"password: Api-Key = {s['scheme-between']} (kept: see the vault)\n"
            f"db_password = Token {s['token-scheme']}\n"
            f'api_key := "{s["walrus"]}"\n'
            f"The password is {s['prose-letters']}.\n"
            f"my pass is {s['prose-pass']} and it works\n"
            f"passphrase: {s['passphrase']}\n"
            f"npm token npm_{s['npm']} for the registry\n"
            f"stripe sk_test_{s['stripe-test']} in the sandbox\n"
            f"vault hvs.{s['vault']} expires soon\n"
            f"credentials: {s['b64-credentials']}\n"
        )

    def bodies(self) -> dict[str, str]:
        """The distinctive bytes of each secret (a passphrase's words, each)."""
        out = {k: v for k, v in self.s.items() if k != "passphrase"}
        out.update({f"passphrase-{i}": w for i, w in enumerate(self.s["passphrase"].split())})
        return out


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    notes: str
    argv: list
    echoed: dict


def build(sec: Secrets, url: str) -> Any:
    s = sec.s

    @tool
    def run_command(argv: list[str]) -> str:
        """Run a command (here: say what would run)."""
        return json.dumps({"ran": ["curl", "-u", f"bob:{s['argv-in-text']}", "https://api.example.com"], "pem": s["b64-pem"], "status": "ok"})

    @tool
    def log_in(user: str) -> str:
        """Log a user in."""
        raise ValueError(f"login failed for {user}: the password is {s['error-prose']}, try again")

    script = [
        AIMessage(
            content=f"I will run it. For the record, the password is {s['model-said']}.",
            tool_calls=[
                {"name": "run_command", "args": {"argv": ["curl", "-u", f"bob:{s['argv-curl']}", "https://api.example.com"]}, "id": "c1"},
                {"name": "run_command", "args": {"argv": ["gh", "auth", "login", "--token", s["argv-token"]]}, "id": "c2"},
                {"name": "log_in", "args": {"user": "bob"}, "id": "c3"},
            ],
        ),
        AIMessage(content="Done."),
    ]
    model = ScriptedChatModel(script=lambda messages: script[sum(isinstance(m, AIMessage) for m in messages)], model_name="scripted").bind_tools([run_command, log_in])

    def prepare(state: State) -> dict:
        return {"notes": sec.notes, "argv": ["mysql", "-u", "root", "-p", s["argv-mysql"], "shop"]}

    def post(state: State) -> dict:
        headers = [("Authorization", f"Basic {s['basic-pair']}"), ("X-Trace", "trace-7")]
        r = httpx.post(f"{url}/notes", content=f"password: Api-Key = {s['http-body']}\nuser: bob", headers=headers, timeout=5)
        return {"echoed": {"status": r.status_code}}

    def agent(state: State) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    b = StateGraph(State)
    b.add_node("prepare", prepare)
    b.add_node("post", post)
    b.add_node("agent", agent)
    b.add_node("tools", ToolNode([run_command, log_in], handle_tool_errors=True))
    b.add_edge(START, "prepare")
    b.add_edge("prepare", "post")
    b.add_edge("post", "agent")
    b.add_conditional_edges("agent", lambda st: "tools" if st["messages"][-1].tool_calls else END, ["tools", END])
    b.add_edge("tools", "agent")
    return b.compile()


@pytest.fixture
def service():
    svc = EchoService().start()
    yield svc
    svc.stop()


def test_secrets_in_the_shapes_agents_write_them_never_reach_the_store_or_a_fixture(tmp_path: Path, service: EchoService) -> None:
    sec = Secrets()
    db = tmp_path / "shapes.db"
    with Recorder(db) as rec:
        rec.attach(build(sec, service.url), name="shapes").invoke({"messages": [HumanMessage("log bob in and fetch the orders")]})
        run_id = rec.last_run_id
    assert service.requests == 1  # the request went out as the node wrote it
    stored = everything_stored(db)
    fixture = json.dumps(exported(str(db), run_id)).encode()
    for name, body in sec.bodies().items():
        assert body.encode() not in stored, f"{name} is in the store"
        assert body.encode() not in fixture, f"{name} is in the fixture"

    # What is around each secret is kept.
    store = open_store(db)
    try:
        state = store.state_at(run_id, store.list_steps(run_id)[-1].step)
        calls = store.calls(run_id)
    finally:
        store.close()
    notes = state["notes"]
    assert notes.splitlines() == [
        f"password: {MARK} (kept: see the vault)",  # the scheme goes with its secret, as "Token abc" does
        f"db_password = {MARK}",
        f'api_key := "{MARK}"',
        f"The password is {MARK}.",
        f"my pass is {MARK} and it works",
        f"passphrase: {MARK}",
        f"npm token {MARK} for the registry",
        f"stripe {MARK} in the sandbox",
        f"vault {MARK} expires soon",
        f"credentials: {MARK}",
    ]
    assert state["argv"] == ["mysql", "-u", "root", "-p", MARK, "shop"]
    assert [c.inputs for c in calls if c.name == "run_command"] == [
        {"argv": ["curl", "-u", f"bob:{MARK}", "https://api.example.com"]},
        {"argv": ["gh", "auth", "login", "--token", MARK]},
    ]
    failed = next(c for c in calls if c.name == "log_in")
    assert failed.error_message == f"login failed for bob: the password is {MARK}, try again"
    tool_texts = [m["content"] for m in state["messages"] if m["type"] == "tool"]
    assert f'{{"ran": ["curl", "-u", "bob:{MARK}", "https://api.example.com"], "pem": "{MARK}", "status": "ok"}}' in tool_texts, tool_texts
    assert any(f"login failed for bob: the password is {MARK}, try again" in t for t in tool_texts), tool_texts
    http = next(c for c in calls if c.kind == "http")
    assert http.inputs["body"] == f"password: {MARK}\nuser: bob", http.inputs
    said = next(m["content"] for m in state["messages"] if m["type"] == "ai")
    assert said == f"I will run it. For the record, the password is {MARK}."


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("password: Api-Key = x9Fq2mZ7pLk3Rt8W", "x9Fq2mZ7pLk3Rt8W"),  # a scheme word between the key and its secret
        ("password: ApiKey x9Fq2mZ7pLk3Rt8W", "x9Fq2mZ7pLk3Rt8W"),
        ("db_password = Token abcQ7d9Lk2mP4xZ", "abcQ7d9Lk2mP4xZ"),
        ("password => 'Pa55w0rdX'", "Pa55w0rdX"),  # Ruby, PHP
        ('password := "Pa55w0rdX"', "Pa55w0rdX"),  # Go, Pascal
        ("the password is correcthorsebatterystaple", "correcthorsebatterystaple"),  # a password of letters
        ("The password is: correcthorsebatterystaple.", "correcthorsebatterystaple"),
        ("our wifi password is pineapplepizza, enjoy", "pineapplepizza"),
        ("my pass is hunter2hunter2", "hunter2hunter2"),
        ("my password's hunter2hunter2", "hunter2hunter2"),
        ("the passphrase is 'blue sky river'", "blue sky river"),
        ("passphrase: blue sky river mountain", "sky river mountain"),  # a key on its own line: the rest of the line
        ("  - passphrase: blue sky river mountain\n  - user: bob", "sky river mountain"),
        ("export DB_PASSWORD=correct horse battery staple", "horse battery staple"),
        ("[('Authorization', 'Basic Ym9iOmh1bnRlcjJodW50ZXIy')]", "Ym9iOmh1bnRlcjJodW50ZXIy"),  # a header pair in a repr
        ('[["Authorization", "Basic Ym9iOmh1bnRlcjJodW50ZXIy"]]', "Ym9iOmh1bnRlcjJodW50ZXIy"),
        ('{"argv": ["mysql", "-p", "S3cret!pw"]}', "S3cret!pw"),  # a command line as a JSON list in text
        ("['curl', '-u', 'bob:hunter2x', 'https://x']", "hunter2x"),
        ('{"cmd": ["gh", "auth", "login", "--token", "abc123def456x"]}', "abc123def456x"),
        ("mysql -u root -p S3cret!pw shop", "S3cret!pw"),  # "-p" and a word that reads as a password
        # shapes found by playing attacker
        ("env:\n  - name: DB_PASSWORD\n    value: hunter2hunter2\n  - name: LOG_LEVEL\n    value: debug", "hunter2hunter2"),  # Kubernetes
        ('{"headers": [{"name": "Authorization", "value": "Token abc123def456"}]}', "abc123def456"),  # a HAR entry
        ("{'name': 'api_key', 'value': 'sk9x8c7v6b5n'}", "sk9x8c7v6b5n"),
        ('[("X-Api-Key", "abcdefabcdefabcdef"), ("Accept", "text/html")]', "abcdefabcdefabcdef"),  # headers as pairs
        ("headers=[(b'x-api-key', b'Zq9Lk2mP4xZ8wrrr')]", "Zq9Lk2mP4xZ8wrrr"),
        ("db:\n  password: |\n    line1Pa55\n\n    line2Pa55\n  user: bob", "line2Pa55"),  # a YAML block scalar
        ("- name: x\n  password: >-\n    Pa55w0rdX\n- name: y", "Pa55w0rdX"),
        ("os.environ['API_KEY'] = 'Zq9Lk2mP4xZ8wqqqq'", "Zq9Lk2mP4xZ8wqqqq"),  # code a tool runs
        ('settings["db_password"] = "Pa55w0rdX"', "Pa55w0rdX"),
        ("$env:API_KEY = 'Zq9Lk2mP4xZ8wqqqq'", "Zq9Lk2mP4xZ8wqqqq"),  # PowerShell
        ("connect with user admin and password S3cr3t!x please", "S3cr3t!x"),  # no verb, no separator
        ("api key Zq9Lk2mP4xZ8wqqqq", "Zq9Lk2mP4xZ8wqqqq"),
        ("npm_" + "AbCdEf0123456789AbCdEf0123456789AbCd", "AbCdEf0123456789AbCdEf0123456789AbCd"),
        ("https://app.example/cb#access_token=ya2Zq9Lk2mP4xZ8w&token_type=bearer", "ya2Zq9Lk2mP4xZ8w"),  # OAuth's implicit flow
        ("login?next=https%3A%2F%2Fapp%2Fcb%3Fclient_secret%3DZq9Lk2mP4xZ8wqqqq", "Zq9Lk2mP4xZ8wqqqq"),  # a URL in a URL
        ("I set the password to Pa55w0rdX for you", "Pa55w0rdX"),
        ("changed my passphrase to 'blue sky river'", "blue sky river"),
        ('requests.post(url, auth=("bob", "hunter2hunter2"))', "hunter2hunter2"),
        ("Access key ID,Secret access key\nAKIAIOSFODNN7EXAMPLE,wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n", "wJalrXUtnFEMI/K7MDENG"),  # the console's CSV
        ("git clone https://0123456789abcdef0123456789abcdef01234567@github.com/org/repo.git", "0123456789abcdef0123"),  # a token as the URL's user
        ('{"user": "bob", "pw": "hunter2"}', "hunter2"),  # a password's short name
        # A secret key's value whose head a format marks: the rest of the word is the secret's too.
        ("password=AKIAIOSFODNN7EXAMPLEextra9Zq next", "extra9Zq"),
        ('{"password": "AKIAIOSFODNN7EXAMPLEextra9Zq"}', "extra9Zq"),
        ("api_key: npm_abcdefghijklmnopqrstuvwxyz0123456789extra9Zq", "extra9Zq"),
        # An .npmrc line of a registry whose token is in no known format, or longer than npm's own.
        ("//npm.example.com/:_authToken=Zq9Lk2mP4xZ8wQ7rTt", "Zq9Lk2mP4xZ8wQ7rTt"),
        ("//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789extra9Zq", "extra9Zq"),
        ("//npm.example.com/:_auth=Ym9iOmh1bnRlcjJodW50ZXIy\nalways-auth=true", "Ym9iOmh1bnRlcjJodW50ZXIy"),
    ],
)
def test_secrets_written_as_agents_write_them_are_found(text: str, secret: str) -> None:
    r = Redactor()
    out = r.scrub(text)
    assert secret not in out and MARK in out, out
    assert r.scrub(out) == out  # scrubbing again changes nothing


@pytest.mark.parametrize(
    "text",
    [
        "password_field",
        "token_count: 512",
        "max_tokens: 1024",
        '{"max_tokens": 512, "token_count": 42, "password_field": "pw"}',  # a form's field, named
        "def check_password(password_field):",
        "the password is incorrect",
        "The password is required.",
        "the password is stored in the vault",
        "your password is compromised",
        "The password is case-sensitive",
        "the password is plaintext",
        "my pass is expired",
        "the boarding pass is attached",
        "The mountain pass is closed today",
        "the password is something only you know",
        "The password's strength is weak",
        "Set the password to something long.",
        "passphrase_hint: the name of my first pet",  # a line of prose: only its first word could be a value
        '["pip", "install", "-U", "requests"]',
        '["git", "push", "-u", "origin", "main"]',
        '["mysql", "-p", "shop"]',  # -p asks for the password; shop is the database
        "mysql -u app -p shop",
        "ssh -p 2222 host",
        "npm_config_cache=/srv/cache",
        'required: ["password", "email"]',  # a schema's list of two field names, not a pair
        '["token", "abc"]',
        '{"name": "LOG_LEVEL", "value": "debug"}',
        '{"password_field": "#pwd-input", "token_type": "bearer", "secret_name": "db-creds"}',
        "password reset link sent to bob2@example.com",
        "the api key v1beta2 endpoint",
        "token 2048 limit",
        "password sha256 hash",
        "the password policy v2.3.1 says",
        '<wsse:Password Type="PasswordText">',
        "pass the token to the client",
        "the password to the database is in the vault",
        "https://docs.example/page#section-2",
        "https://bob@example.com/x",
        "the npw value and the pwm signal",
        "Access key ID,Secret access key",
        # code that reads or compares a secret, or annotates its type
        "if token == (\"end\", key):",
        'if isinstance(v, dict) and prev_key == "properties":',
        "auth = (url.username, url.password)",
        "secret = api_key if isinstance(api_key, SecretStr) else SecretStr(api_key)",
        "api_key: str | None = None,",
        "resolved_api_key: Any = api_key",
    ],
)
def test_ordinary_text_and_code_identifiers_survive(text: str) -> None:
    out = Redactor().scrub(text)
    if text.startswith("passphrase_hint"):
        assert out.endswith("the name of my first pet"), out  # (the words of prose after the first stay)
    else:
        assert out == text


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["mysql", "-p", "S3cret!pw"], ["mysql", "-p", MARK]),
        (["mysql", "-u", "root", "-pS3cret!pw", "shop"], ["mysql", "-u", "root", f"-p{MARK}", "shop"]),
        (["curl", "-u", "user:pass1234", "https://x"], ["curl", "-u", f"user:{MARK}", "https://x"]),
        (["tool", "--token", "abc123def456", "--verbose"], ["tool", "--token", MARK, "--verbose"]),
        (["tool", "--password", "two words 9"], ["tool", "--password", MARK]),
        (["docker", "login", "-u", "bob", "-p", "Pa55w0rdX"], ["docker", "login", "-u", "bob", "-p", MARK]),
        (["redis-cli", "-a", "r3d1spass", "ping"], ["redis-cli", "-a", MARK, "ping"]),
        (["tool", "--api-key", "pa\"ss'wo\\rd9"], ["tool", "--api-key", MARK]),
        (["ls", "-la", "/srv"], None),
        (["ssh", "-p", "2222", "host"], None),
        (["mysql", "-p", "shop"], None),
        (["git", "push", "-u", "origin", "main"], None),
        (["a", "b"], None),
    ],
)
def test_a_command_line_given_as_a_list_loses_its_secrets(argv: list, expected: list | None) -> None:
    r = Redactor()
    assert r.scrub_argv(argv) == expected
    assert r.scrub_argv(tuple(argv)) == expected
    assert r.count == (0 if expected is None else 2)


class Deploy(TypedDict, total=False):
    manifest: dict
    log: str


def test_secrets_named_beside_their_values_and_in_code_never_reach_the_store(tmp_path: Path) -> None:
    """A Kubernetes env entry as a mapping ({"name": "DB_PASSWORD", "value": ...}), a tool's
    answer holding YAML with a block scalar, headers as pairs and code that sets a key."""
    pw, token, block, code_key = _rand(20), _rand(24), _rand(18), _rand(22)

    @tool
    def render(service: str) -> str:
        """Render a service's config."""
        return f"service: {service}\ndb:\n  password: |\n    {block}\n  user: app\nheaders: [('X-Api-Key', '{token}'), ('Accept', 'text/html')]"

    def deploy(state: Deploy) -> dict:
        rendered = render.invoke({"service": "shop"})
        manifest = {"env": [{"name": "DB_PASSWORD", "value": pw}, {"name": "LOG_LEVEL", "value": "debug"}]}
        return {"manifest": manifest, "log": rendered + f"\nos.environ['OPENAI_API_KEY'] = '{code_key}'"}

    b = StateGraph(Deploy)
    b.add_node("deploy", deploy)
    b.add_edge(START, "deploy")
    b.add_edge("deploy", END)
    db = tmp_path / "deploy.db"
    with Recorder(db) as rec:
        rec.attach(b.compile()).invoke({})
        run_id = rec.last_run_id
    stored = everything_stored(db)
    fixture = json.dumps(exported(str(db), run_id)).encode()
    for secret in (pw, token, block, code_key):
        assert secret.encode() not in stored and secret.encode() not in fixture
    store = open_store(db)
    try:
        state = store.state_at(run_id, store.list_steps(run_id)[-1].step)
    finally:
        store.close()
    assert state["manifest"] == {"env": [{"name": "DB_PASSWORD", "value": MARK}, {"name": "LOG_LEVEL", "value": "debug"}]}
    assert state["log"] == (
        f"service: shop\ndb:\n  password: {MARK}\n  user: app\nheaders: [('X-Api-Key', '{MARK}'), ('Accept', 'text/html')]"
        f"\nos.environ['OPENAI_API_KEY'] = '{MARK}'"
    )
