"""A tool's JSON schema under a secret key stays readable; a real secret under that key does not.

The model is handed ``{"properties": {"password": {"type": "string", "description": ...}}}``
for a ``login`` tool: a description of a password, not one. The recording keeps it (in the model
call's inputs as a mapping, and in JSON text), still hides a schema that gives an instance (a
default password), and ``{"password": "hunter2..."}`` when the model calls the tool.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import exported, load_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent
from test_redaction_e2e import everything_stored

from graphtape.recorder import Recorder, open_store
from graphtape.recorder import redaction, schema_shapes
from graphtape.recorder.codec import Decoder, Encoder
from graphtape.recorder.redaction import MARK, Redactor

PASSWORD = "hunter2-c41e9b07d25a83f6"
DEFAULT = "changeme-7a0d3e91b5c6f248"
SCHEMA = {"type": "string", "description": "The user's password", "minLength": 8}


def encode(value):
    """Encoded as the recorder stores it, read back as plain data."""
    return Decoder({}, typed=False).decode(Encoder(Redactor()).encode(value))


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ({"password": SCHEMA}, {"password": SCHEMA}),
        ({"api_key": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Api Key"}}, None),  # pydantic's Optional
        ({"password": {"type": "string", "default": DEFAULT}}, {"password": MARK}),  # a default password is a password
        ({"credentials": {"type": "object", "properties": {"token": {"type": "string", "examples": [DEFAULT]}}}}, {"credentials": MARK}),
        ({"password": PASSWORD}, {"password": MARK}),
        ({"password": {"current": PASSWORD, "new": PASSWORD}}, {"password": MARK}),
        ({"password": {"type": "string", "value": PASSWORD}}, {"password": MARK}),  # not a keyword: not a schema
        ({"auth": {"type": "basic", "username": "bob", "password": PASSWORD}}, {"auth": MARK}),  # "basic" is no JSON type
        ({"password": {"type": "string", "properties": {"x": {"title": PASSWORD}}}}, {"password": MARK}),  # a subschema without a type
    ],
)
def test_a_schema_under_a_secret_key_is_kept_and_a_secret_is_not(value: dict, kept: dict | None) -> None:
    out = encode(value)
    assert out == (value if kept is None else kept)
    assert PASSWORD not in json.dumps(out) and DEFAULT not in json.dumps(out)


@pytest.mark.parametrize(
    ("value", "readable"),
    [
        ({"properties": {"password": SCHEMA}}, True),
        ({"properties": {"password": {"type": "string", "default": DEFAULT}}}, False),
        ({"password": {"current": PASSWORD}}, False),
        ({"password": {"type": "string", "description": f"password: {PASSWORD}"}}, True),  # text inside is scanned as any text
    ],
)
def test_a_schema_in_json_text_is_kept_and_a_secret_is_not(value: dict, readable: bool) -> None:
    out = Redactor().scrub(json.dumps(value))
    assert PASSWORD not in out and DEFAULT not in out
    assert ('"password": {"type": "string"' in out) is readable


def test_nested_schemas_in_text_are_parsed_a_bounded_number_of_times(monkeypatch) -> None:
    parsed = [0]
    real = redaction.json.loads

    def counted(text, *a, **kw):
        parsed[0] += len(text)
        return real(text, *a, **kw)

    monkeypatch.setattr(redaction.json, "loads", counted)
    inner: dict = {"type": "string"}
    for _ in range(40):  # deeper than a schema may be: marked whole, parsed once
        inner = {"type": "object", "properties": {"auth": inner}}
    text = json.dumps({"items": [{"auth": inner} for _ in range(50)]})
    out = Redactor().scrub(text)
    assert parsed[0] <= 2 * len(text)
    parsed[0] = 0
    shallow: dict = {"type": "string"}
    for _ in range(8):
        shallow = {"type": "object", "properties": {"auth": shallow}}
    text = json.dumps({"items": [{"auth": shallow} for _ in range(50)]})
    assert Redactor().scrub(text) == text
    assert parsed[0] <= (schema_shapes.MAX_DEPTH + 2) * len(text)
    assert MARK in out


def test_a_recorded_agent_keeps_its_tool_schema_and_hides_the_password_it_was_called_with(tmp_path: Path) -> None:
    model_class = load_agent("scripted_model").ScriptedChatModel

    @tool(parse_docstring=True)
    def login(username: str, password: str) -> str:
        """Log a user in.

        Args:
            username: the account's name
            password: the user's password
        """
        return f"{username} is logged in"

    script = [
        AIMessage(content="", tool_calls=[{"name": "login", "args": {"username": "bob", "password": PASSWORD}, "id": "call_1"}]),
        AIMessage(content="bob is logged in"),
    ]
    agent = create_react_agent(model_class(script=script), [login])
    db = tmp_path / "schema.db"
    with Recorder(db) as rec:
        rec.attach(agent, name="login").invoke({"messages": [HumanMessage("log bob in")]})
        run_id = rec.last_run_id

    stored = everything_stored(db)
    fixture = json.dumps(exported(str(db), run_id)).encode()
    assert PASSWORD.encode() not in stored and PASSWORD.encode() not in fixture

    store = open_store(db)
    try:
        calls = store.calls(run_id)
    finally:
        store.close()
    schemas = [t["function"]["parameters"]["properties"]["password"] for c in calls if c.kind == "model" for t in c.inputs["tools"]]
    assert schemas and all(s == {"type": "string", "description": "the user's password"} for s in schemas), schemas
    (tool_call,) = [c for c in calls if c.kind == "tool"]
    assert tool_call.inputs["password"] == MARK and tool_call.inputs["username"] == "bob"
    assert b'"password":{"description":"the user\'s password","type":"string"}' in stored  # on disk as the store reads it
    assert b'"password": {"description": "the user\'s password", "type": "string"}' in fixture
