"""A credential format never takes the next key's name for its credential: an authorization
scheme's credential is on its own line, and a word followed by ``=`` or ``:`` and a value is a key
whose value goes with it. Before, the format hid the next key's name from the key rule and its
value was stored in clear."""

from __future__ import annotations

import pytest
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from graphtape.recorder import Recorder, open_store
from graphtape.recorder.redaction import Redactor

SECRET = "Q7vWx9Zk2LmN4pRt8sYu"


@pytest.mark.parametrize(
    "text",
    [
        # A raw HTTP request: a one-word Authorization value, then the proxy's credential.
        f"GET / HTTP/1.1\r\nAuthorization: tok_abc123\r\nProxy-Authorization: Basic {SECRET}==\r\nAccept: */*\r\n",
        # An OAuth token response as YAML and as a .env file.
        f"token_type: bearer\nrefresh_token: {SECRET}\nexpires_in: 3600\n",
        f"TOKEN_TYPE=Bearer\nACCESS_TOKEN={SECRET}\n",
        # ... and as one log line of key=value pairs.
        f"token_type=bearer access_token={SECRET} expires_in=3600",
        f"authorization: Basic Proxy-Authorization: {SECRET}",
        # A private key cut short, then a key of another kind.
        f"-----BEGIN PRIVATE KEY-----\nrefresh_token: {SECRET}",
        # An empty header, then a credential on the next line.
        f"GET / HTTP/1.1\r\nCookie:\r\nProxy-Authorization: {SECRET}\r\n",
        f"Cookie:\nrefresh_token: {SECRET}\n",
        # A key whose value was left out, then another key and its value on the same line.
        f"password: X-Api-Key: {SECRET}",
    ],
)
def test_a_credential_after_an_authorization_scheme_is_redacted(text: str) -> None:
    scrubbed = Redactor().scrub(text)
    assert SECRET not in scrubbed, scrubbed


@pytest.mark.parametrize(
    "text, kept",
    [
        ("Authorization: Bearer abcdefghijklmnopqrstu\nAccept: */*", "Accept: */*"),
        ("token_type: bearer\nexpires_in: 3600", "expires_in: 3600"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==\r\nHost: example.com", "Host: example.com"),
    ],
)
def test_the_next_line_after_a_credential_is_kept(text: str, kept: str) -> None:
    scrubbed = Redactor().scrub(text)
    assert kept in scrubbed and "abcdefghijklmnopqrstu" not in scrubbed and "dXNlcjpwYXNzd29yZA" not in scrubbed


class S(TypedDict):
    login_reply: str
    tool_out: str


def test_an_oauth_response_in_state_and_in_a_tool_result_is_stored_without_its_tokens(tmp_path) -> None:
    @tool
    def login(user: str) -> str:
        """Log in and return the token response."""
        return f"TOKEN_TYPE=Bearer\nACCESS_TOKEN={SECRET}A\n"

    def node(state: S, config) -> dict:
        return {"login_reply": f"token_type: bearer\nrefresh_token: {SECRET}B\n", "tool_out": login.invoke({"user": "bob"}, config)}

    b = StateGraph(S)
    b.add_node("n", node)
    b.add_edge(START, "n")
    b.add_edge("n", END)
    db = str(tmp_path / "t.db")
    with Recorder(db) as rec:
        out = rec.attach(b.compile()).invoke({"login_reply": "", "tool_out": ""})
        rec.flush()
        run_id = rec.last_run_id
    assert SECRET + "A" in out["tool_out"]  # the graph's own values are untouched
    store = open_store(db)
    try:
        final = store.state_at(run_id, store.list_steps(run_id)[-1].step)
        calls = store.calls(run_id)
    finally:
        store.close()
    assert SECRET not in repr(final) and SECRET not in repr([c.output for c in calls])
    assert "refresh_token" in final["login_reply"] and "ACCESS_TOKEN" in final["tool_out"]
