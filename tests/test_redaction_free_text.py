"""Secrets given in free text inside a longer value: ``note="password: hunter2"``.

A secret is often handed over in a sentence rather than under a key: a user's note, a tool's
answer, a model's message ("Your API key: ...", "my api key is: sk-..."). A secret's name, then
``:`` or ``=``, then a word is a value to hide, whether the name is one word (password, passwd,
secret, token, apikey) or two (API key, access key). Prose that merely names a secret ("the
password field is required", "password: is required") keeps every word.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

import pytest
from test_redaction_e2e import everything_stored
from langgraph.graph import START, StateGraph

from graphtape.recorder import Recorder, open_store
from graphtape.recorder.redaction import MARK, Redactor


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        # A key of one word, then : or =, inside a longer text.
        ('note="password: hunter2"', f'note="password: {MARK}"'),
        ("login with passwd: hunter2 please", f"login with passwd: {MARK} please"),
        ("set passwd=hunter2 and retry", f"set passwd={MARK} and retry"),
        ("the secret: xyzzy42", f"the secret: {MARK}"),
        ("use token=tok-123-abc now", f"use token={MARK} now"),
        ("apikey: foo-bar-baz", f"apikey: {MARK}"),
        ("api_key = foo", f"api_key = {MARK}"),
        # A key of two words, as people write it.
        ("Your API key: abc-def-ghi", f"Your API key: {MARK}"),
        ("api key: sk-abc", f"api key: {MARK}"),
        ("here is the access key = Zq9Lk2mP, keep it", f"here is the access key = {MARK}, keep it"),
        ("Secret key: s3cr3t-value", f"Secret key: {MARK}"),
        # "is:" states the value as a key's separator does: any word goes, not only one that reads as a secret.
        ("my api key is: sk-abcdef", f"my api key is: {MARK}"),
        ("the secret is: xyzzy", f"the secret is: {MARK}"),
        ("my token is: ghp-abc, thanks", f"my token is: {MARK}, thanks"),
        ("The password was: letmein.", f"The password was: {MARK}."),
        # Separators as other scripts and HTML write them: a fullwidth colon or equals sign (CJK
        # text), a no-break space (text taken from a web page); the rest of the text is kept as it was.
        ("请记下 password：hunter2 谢谢", f"请记下 password：{MARK} 谢谢"),
        ("鍵は api_key＝Zq9Lk2mP4 です", f"鍵は api_key＝{MARK} です"),
        ("password\u00a0=\u00a0hunter2 (from the wiki)", f"password\u00a0=\u00a0{MARK} (from the wiki)"),
        ("token\u202f: abc123def", f"token\u202f: {MARK}"),
        # An arrow or a dash after the name: the word after it goes when it reads as a secret.
        ("password -> hunter2", f"password -> {MARK}"),
        ("wifi password → hunter2, guest network", f"wifi password → {MARK}, guest network"),
        ("DB_PASSWORD ==> S3cret!pw", f"DB_PASSWORD ==> {MARK}"),
        ("api_key->sk9x8LmQpZ", f"api_key->{MARK}"),
        ("API key ⇒ AbCdEf123456 (prod)", f"API key ⇒ {MARK} (prod)"),
        ("**Password** ➜ correcthorsebatterystaple.", f"**Password** ➜ {MARK}."),
        ("- secret — xyzzy123\n- user -> bob", f"- secret — {MARK}\n- user -> bob"),
        ("Authorization -> Bearer sk9abc123XYZ7890", f"Authorization -> Bearer {MARK}"),  # the scheme stays, as after a colon
        ('{"note": "password \\u2192 hunter2"}', f'{{"note": "password \\u2192 {MARK}"}}'),
        ('{\\"note\\": \\"token -> abc123xyz9\\"}', f'{{\\"note\\": \\"token -> {MARK}\\"}}'),
    ],
)
def test_a_secret_given_in_free_text_is_redacted(text: str, kept: str) -> None:
    r = Redactor()
    assert r.scrub(text) == kept and r.count == 1
    assert Redactor().scrub(kept) == kept  # scrubbing again changes nothing


@pytest.mark.parametrize(
    "text",
    [
        "the password field is required",
        "password: is required",
        "Password: must be 8 characters or more",
        "The secret: there is none.",
        "Note on the API key: it must be rotated monthly",
        "Missing API key: the request was refused",
        "the api key is: not set yet",
        "Primary key: order_id",
        "sort key: created_at",
        "the key: a value",
        "password - see the vault",
        "密码：必填 (password：is required)",
        "Settings -> Password -> Change",
        "login --> password --> dashboard",
        "password -> reset page",
        "the token -> 2048 bits",
        "password_hash -> sha256",
        "token_count -> 42",
        "p = auth->token; q = cfg->password;",
        "def password(self) -> str:",
        "password -> $PASSWORD",
    ],
)
def test_prose_that_names_a_secret_keeps_its_words(text: str) -> None:
    r = Redactor()
    assert r.scrub(text) == text and r.count == 0


class Note(TypedDict):
    note: str


def test_a_recorded_state_value_never_holds_a_secret_told_in_free_text(tmp_path: Path) -> None:
    """End to end: a real graph whose state carries the secrets in a note; no stored byte holds them."""

    def write(state: Note) -> Note:
        return {"note": state["note"] + " | Your API key: Zq9-Lk2-mP4 and my api key is: sk-abcdef | wifi password -> Wq7hunter"}

    builder = StateGraph(Note)
    builder.add_node("write", write)
    builder.add_edge(START, "write")
    db = tmp_path / "runs.db"
    with Recorder(db, durability="sync") as rec:
        out = rec.attach(builder.compile()).invoke({"note": "password: hunter2 (the password field is required)"})
    assert "hunter2" in out["note"]  # the user's graph is untouched

    stored = everything_stored(db)
    for secret in (b"hunter2", b"Zq9-Lk2-mP4", b"sk-abcdef", b"Wq7hunter"):
        assert secret not in stored
    store = open_store(db)
    run = store.list_runs()[0]
    note = store.state_at(run.id, store.list_steps(run.id)[-1].step)["note"]
    store.close()
    assert note == f"password: {MARK} (the password field is required) | Your API key: {MARK} and my api key is: {MARK} | wifi password -> {MARK}"
