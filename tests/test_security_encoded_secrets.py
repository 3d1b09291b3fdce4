"""Secrets in shapes the direct patterns did not read, recorded through a real graph.

A compiled LangGraph graph (a scripted chat model bound to a tool, a ``ToolNode``, a node that
builds text) carries secrets the ways that slipped through: a passphrase of plain words after
"passphrase:" or "password is", a table whose header names a password or token column, a
percent-encoded ``password%3D…``, a key written as two adjacent string literals in code,
``creds`` and ``oauth`` as mapping keys, base64 of a JSON service account, base64 and
percent-encoded forms of a secret the environment holds. No secret's bytes may reach the
store's file (payloads decompressed) or the exported fixture; the text around each stays.
"""

from __future__ import annotations

import base64
import json
import secrets
import string
import urllib.parse
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from conftest import exported, load_agent
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from test_redaction_e2e import everything_stored

from graphtape.recorder import Recorder, open_store
from graphtape.recorder.redaction import MARK, Redactor

ScriptedChatModel = load_agent("scripted_model").ScriptedChatModel


def _rand(n: int) -> str:
    body = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(n - 1))
    return body + secrets.choice(string.digits)


def _word(n: int) -> str:
    """Random lowercase letters that end as no adverb or participle does."""
    return "".join(secrets.choice("bcdfghjkmnpqrstvwxz") for _ in range(n - 1)) + "q"


class Planted:
    """One random secret per shape."""

    def __init__(self) -> None:
        self.phrase_colon = [_word(6) for _ in range(4)]
        self.phrase_told = [_word(5) for _ in range(4)]
        self.tsv = [_rand(14), _rand(14)]
        self.markdown = _rand(16)
        self.urlenc_eq = _rand(16)
        self.urlenc_colon = _rand(16)
        self.concat = _rand(24)
        self.creds = _rand(18)
        self.oauth = _rand(20)
        self.sa_key = _rand(64)
        self.env = _rand(10) + "/+=" + _rand(6)  # signs percent-encoding and base64 change

    def bodies(self) -> dict[str, str]:
        out = {
            "tsv-0": self.tsv[0],
            "tsv-1": self.tsv[1],
            "markdown": self.markdown,
            "urlenc-eq": self.urlenc_eq,
            "urlenc-colon": self.urlenc_colon,
            "concat": self.concat,
            "creds": self.creds,
            "oauth": self.oauth,
            "sa-key": self.sa_key,
            "env": self.env,
        }
        out.update({f"phrase-colon-{i}": w for i, w in enumerate(self.phrase_colon)})
        out.update({f"phrase-told-{i}": w for i, w in enumerate(self.phrase_told)})
        return out


def service_account(key: str) -> str:
    """A Google service account's JSON, as a CI variable or a Kubernetes secret holds it: base64."""
    blob = {
        "type": "service_account",
        "project_id": "shop-prod",
        "private_key_id": "0123456789abcdef",
        "private_key": f"-----BEGIN PRIVATE KEY-----\n{key}\n-----END PRIVATE KEY-----\n",
        "client_email": "agent@shop-prod.iam.gserviceaccount.com",
    }
    return base64.b64encode(json.dumps(blob).encode()).decode()


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    notes: str
    settings: dict


def build(p: Planted) -> Any:
    @tool
    def read_table(name: str) -> str:
        """Dump a table as tab-separated rows."""
        return f"user\tpassword\trole\nbob\t{p.tsv[0]}\tadmin\nann\t{p.tsv[1]}\tdev\n"

    @tool
    def write_code(task: str) -> str:
        """Write code for a task."""
        return f'import openai\nclient = openai.OpenAI(api_key="sk-proj-" "{p.concat}")\n'

    script = [
        AIMessage(
            content="Reading the users table and writing the client.",
            tool_calls=[
                {"name": "read_table", "args": {"name": "users"}, "id": "c1"},
                {"name": "write_code", "args": {"task": "client"}, "id": "c2"},
            ],
        ),
        AIMessage(content=f"| setting | value |\n|---|---|\n| password | {p.markdown} |\n| region | eu-west-1 |"),
    ]
    model = ScriptedChatModel(script=lambda messages: script[sum(isinstance(m, AIMessage) for m in messages)], model_name="scripted").bind_tools([read_table, write_code])

    def prepare(state: State) -> dict:
        notes = (
            f"the vault passphrase: {' '.join(p.phrase_colon)}, keep it safe\n"
            f"Remember: my password is {' '.join(p.phrase_told)}.\n"
            f"form body: user%3Dbob%26password%3D{p.urlenc_eq}%26remember%3D1\n"
            f"search: https://wiki.example/search?q=password%3A%20{p.urlenc_colon}&page=2\n"
            f"GOOGLE_CREDENTIALS_B64={service_account(p.sa_key)}\n"
            f"echoed: {urllib.parse.quote(p.env, safe='')} and {urllib.parse.quote_plus(p.env)} "
            f"and {base64.b64encode(p.env.encode()).decode()}\n"
        )
        return {"notes": notes, "settings": {"creds": {"user": "bob", "key": p.creds}, "oauth": {"refresh": p.oauth}, "region": "eu-west-1"}}

    def agent(state: State) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    b = StateGraph(State)
    b.add_node("prepare", prepare)
    b.add_node("agent", agent)
    b.add_node("tools", ToolNode([read_table, write_code]))
    b.add_edge(START, "prepare")
    b.add_edge("prepare", "agent")
    b.add_conditional_edges("agent", lambda st: "tools" if st["messages"][-1].tool_calls else END, ["tools", END])
    b.add_edge("tools", "agent")
    return b.compile()


def test_encoded_tabled_and_split_secrets_never_reach_the_store_or_a_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = Planted()
    monkeypatch.setenv("SHOP_SERVICE_TOKEN", p.env)
    db = tmp_path / "encoded.db"
    with Recorder(db) as rec:
        rec.attach(build(p), name="encoded").invoke({"messages": [HumanMessage("set up the shop client")]})
        run_id = rec.last_run_id
    stored = everything_stored(db)
    fixture = json.dumps(exported(str(db), run_id)).encode()
    leaked = [name for name, body in p.bodies().items() if body.encode() in stored or body.encode() in fixture]
    assert leaked == []

    store = open_store(db)
    try:
        state = store.state_at(run_id, store.list_steps(run_id)[-1].step)
    finally:
        store.close()
    lines = state["notes"].splitlines()
    assert lines[:4] == [
        f"the vault passphrase: {MARK}, keep it safe",
        f"Remember: my password is {MARK}.",
        f"form body: user%3Dbob%26password%3D{MARK}%26remember%3D1",  # (the parameter's name stays)
        f"search: https://wiki.example/search?q=password%3A%20{MARK}&page=2",
    ]
    assert lines[4] == f"GOOGLE_CREDENTIALS_B64={MARK}"
    assert lines[5] == f"echoed: {MARK} and {MARK} and {MARK}"
    assert state["settings"] == {"creds": MARK, "oauth": MARK, "region": "eu-west-1"}
    tool_texts = [m["content"] for m in state["messages"] if m["type"] == "tool"]
    assert f"user\tpassword\trole\nbob\t{MARK}\tadmin\nann\t{MARK}\tdev\n" in tool_texts
    assert f'client = openai.OpenAI(api_key="{MARK}" "{MARK}")' in "".join(tool_texts)
    assert state["messages"][-1]["content"] == f"| setting | value |\n|---|---|\n| password | {MARK} |\n| region | eu-west-1 |"


# base64 as ``base64`` and Python's encodebytes write it: lines of 76, the last one shorter.
WRAPPED_PEM = base64.encodebytes(b"-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA" + b"Q7v" * 100 + b"\n-----END RSA PRIVATE KEY-----\n").decode()
WRAPPED_ACCOUNT = base64.encodebytes(b'{"type": "service_account", "private_key": "' + b"k" * 300 + b'"}').decode()


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("passphrase: tiger lamp orbit, then log in", "lamp orbit"),
        ("my password is correct horse battery staple", "horse battery staple"),
        ("The passphrase was blue sky river.", "sky river"),
        ("name\ttoken\nsvc\tabcdEFGH1234ijkl\n", "abcdEFGH1234ijkl"),
        ("id,name,api_key\n1,bob,ZZZ123abc456\n", "ZZZ123abc456"),
        ('{"out": "user\\tpassword\\nbob\\tHunter2xyzQ"}', "Hunter2xyzQ"),  # a TSV inside JSON text
        ("| Setting | Value |\n|--|--|\n| password | Hunter2xyzQ |", "Hunter2xyzQ"),
        ("password%3DHunter2xyzQ", "Hunter2xyzQ"),
        ("next=%2Flogin%3Fpassword%253DHunter2xyzQ", "Hunter2xyzQ"),  # encoded twice
        ('KEY = ("sk-"\n    "abcdefghijklmnopqrstuvwx1234")', "abcdefghijklmnopqrstuvwx1234"),
        ('token = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789"', "abcdefghijklmnopqrstuvwxyz0123456789"),
        ("{'creds': 'Hunter2xyzQ'}", "Hunter2xyzQ"),
        ('{"oauth": {"t": "Hunter2xyzQ"}}', "Hunter2xyzQ"),
        (base64.b64encode(b'{"user": "bob", "password": "Hunter2xyzQ"}').decode(), "eyJ1c2VyIjogImJvYiIs"),
        ("data:\n  .env: " + base64.b64encode(b"DB_PASSWORD=Hunter2xyzQ\nDEBUG=0\n").decode(), "REJfUEFTU1dPUkQ9"),
        # base64 wrapped at 76 characters, as the base64 command writes it
        ("\n".join(__import__("textwrap").wrap(base64.b64encode(b"x" * 50 + b'"password": "Hunter2xyzQ"' + b"y" * 40).decode(), 76)), "eHh4eHh4"),
        # ...over three lines and more (a private key's body is on them), the last one short,
        # the breaks escaped too (a repr, JSON text): every line goes.
        ("tls.key: " + WRAPPED_PEM, WRAPPED_PEM.splitlines()[3]),
        (json.dumps({"tls.key": WRAPPED_PEM}), WRAPPED_PEM.splitlines()[3]),
        (repr("sa: " + WRAPPED_ACCOUNT), WRAPPED_ACCOUNT.splitlines()[-1]),
        ("sa: " + WRAPPED_ACCOUNT + "thanks", WRAPPED_ACCOUNT.splitlines()[-1]),
    ],
)
def test_secrets_in_these_shapes_are_found(text: str, secret: str) -> None:
    r = Redactor()
    out = r.scrub(text)
    assert secret not in out and MARK in out, out
    assert r.scrub(out) == out


@pytest.mark.parametrize(
    "text",
    [
        "the password is stored in the vault",
        "The password is twelve characters long.",
        "the password is rotated every ninety days",
        "The password is the same as before.",
        "The password was reset by admin.",
        "Enter your name, password\nand then press, ok",  # commas in prose are no table
        "| Field | Type |\n|---|---|\n| password | string |\n| user | string |",  # a schema's table
        "model\tprompt_tokens\tcompletion_tokens\ngpt-4o\t12\t40",
        "https://x.example/search?q=hello%20world&page=2",
        "name=%E2%9C%93%20done&token_count=3",
        'print("hello" "world") and msg = "a" + "b"',
        "run 3f2a9c1e-6b7d-4e8f-9a0b-1c2d3e4f5a6b sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "thread_id: user-42-session-abcdEFGH1234 order A-1042",
        "image: iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
        "SGVsbG8sIHdvcmxkISBUaGlzIGlzIGEgcGxhaW4gbWVzc2FnZS4=",  # base64 of ordinary text stays
        '{"author": "bob", "credit_card_fee": 0.3, "authority": "eu"}',
    ],
)
def test_ordinary_text_ids_and_encodings_survive(text: str) -> None:
    assert Redactor().scrub(text) == text
