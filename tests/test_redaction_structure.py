"""Redaction hides the credential and keeps what is around it.

A URL keeps its scheme, user, host and query keys (``postgresql://app:[REDACTED]@db:5432/orders``,
``/a?api_key=[REDACTED]&page=2``), an authorization header its scheme (``Bearer [REDACTED]``), a
cookie header its cookie names, a private key its BEGIN and END lines: what a user reads a
recording for, in text and in a mapping alike. The secret itself is still in
no byte of the store: each test checks both, on a real graph recorded into a real SQLite file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypedDict

import httpx
import pytest
from conftest import exported
from http_server import EchoService
from langgraph.graph import END, START, StateGraph
from test_redaction_e2e import everything_stored

from graphtape.recorder import Recorder, open_store
from graphtape.recorder.redaction import MARK, Redactor

PASSWORD = "pw-5f0c9a1e27b3d846"
API_KEY = "key8d41c07b9e3a52f6d1e0"
TOKEN = "tok3b9e07c5a1d84f26e9b0"

URLS = {
    "postgresql://app:{pw}@db.internal:5432/orders": f"postgresql://app:{MARK}@db.internal:5432/orders",
    "redis://:{pw}@cache.internal:6379/0": f"redis://:{MARK}@cache.internal:6379/0",
    "amqp://orders:{pw}@rabbit.internal:5672/prod": f"amqp://orders:{MARK}@rabbit.internal:5672/prod",
    "mongodb+srv://admin:{pw}@cluster0.ab1cd.mongodb.net/shop?retryWrites=true": f"mongodb+srv://admin:{MARK}@cluster0.ab1cd.mongodb.net/shop?retryWrites=true",
    "mysql://root:{pw}@localhost:3306/shop": f"mysql://root:{MARK}@localhost:3306/shop",
    "https://bob:{pw}@files.example.com/reports/q3.csv": f"https://bob:{MARK}@files.example.com/reports/q3.csv",
}


@pytest.mark.parametrize(("url", "kept"), list(URLS.items()))
def test_a_connection_url_keeps_its_scheme_user_and_host(url: str, kept: str) -> None:
    r = Redactor()
    text = url.format(pw=PASSWORD)
    assert r.scrub(f"connecting to {text} now") == f"connecting to {kept} now" and r.count == 1
    assert r.scrub(f"DATABASE_URL={text}") == f"DATABASE_URL={kept}"  # the key's value: only its password is secret
    assert r.scrub(json.dumps({"database_url": text})) == json.dumps({"database_url": kept})


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (f"/a?api_key={API_KEY}&page=2", f"/a?api_key={MARK}&page=2"),
        (f"GET https://api.example.com/v1/items?token={API_KEY}&limit=10", f"GET https://api.example.com/v1/items?token={MARK}&limit=10"),
        (f"https://x.example/cb#access_token={API_KEY}&expires_in=3600", f"https://x.example/cb#access_token={MARK}&expires_in=3600"),
        (f"https://s3.example/b/k?X-Amz-Signature={API_KEY}&X-Amz-Date=20240101", f"https://s3.example/b/k?X-Amz-Signature={MARK}&X-Amz-Date=20240101"),
        (f"https://fn.example/api/run?code={API_KEY}{API_KEY}&name=x", f"https://fn.example/api/run?code={MARK}&name=x"),
        (f"redirect=https%3A%2F%2Fapp%2Fcb%3Fclient_secret%3D{API_KEY}", f"redirect=https%3A%2F%2Fapp%2Fcb%3Fclient_secret%3D{MARK}"),
        (f"Authorization: Bearer {TOKEN}", f"Authorization: Bearer {MARK}"),
        (f'{{"Authorization": "Bearer {TOKEN}", "Accept": "json"}}', f'{{"Authorization": "Bearer {MARK}", "Accept": "json"}}'),
        (f"Proxy-Authorization: Basic {TOKEN}", f"Proxy-Authorization: Basic {MARK}"),
        (f"Authorization: SSWS {TOKEN}", f"Authorization: SSWS {MARK}"),
        (f"Cookie: theme=dark; sid={TOKEN}", f"Cookie: theme={MARK}; sid={MARK}"),
        (f"Set-Cookie: sid={TOKEN}; Path=/; HttpOnly", f"Set-Cookie: sid={MARK}; Path=/; HttpOnly"),
        (f"https://hooks.slack.com/services/T0001/B0001/{TOKEN}", f"https://hooks.slack.com/services/{MARK}"),
        (f"token_type=bearer access_token={TOKEN} expires_in=3600", f"token_type=bearer access_token={MARK} expires_in=3600"),
        (f"x-api-key=AKCp8{TOKEN} and more", f"x-api-key={MARK} and more"),
        (f"//registry.npmjs.org/:_authToken=npm_{TOKEN}{TOKEN[:13]} # ci", f"//registry.npmjs.org/:_authToken={MARK} # ci"),
        (
            f"-----BEGIN RSA PRIVATE KEY-----\nMIIE{TOKEN}\n{TOKEN}\n-----END RSA PRIVATE KEY-----\nnext line",
            f"-----BEGIN RSA PRIVATE KEY-----\n{MARK}\n-----END RSA PRIVATE KEY-----\nnext line",
        ),
        (f"private_key: -----BEGIN PRIVATE KEY-----\nMIIE{TOKEN}", f"private_key: -----BEGIN PRIVATE KEY-----\n{MARK}"),  # cut short
    ],
)
def test_names_schemes_and_separators_around_a_secret_are_kept(text: str, kept: str) -> None:
    r = Redactor()
    assert r.scrub(text) == kept
    assert Redactor().scrub(kept) == kept  # read again (a replay hands it back), it stays as it is


@pytest.mark.parametrize(
    "text",
    [
        # A long user of a token's letters may be the credential (https://<token>:x-oauth-basic@github.com).
        "https://{tok}{tok}:x-oauth-basic@github.com/a/b.git",
        # Under a connection key, a URL that holds more than its password (a parameter) goes whole.
        "DATABASE_URL=postgresql://app:{pw}@db/orders?sslpassword={pw}",
        # A password key's value that merely looks like a URL goes whole.
        "password=ftp://x:{pw}@y",
    ],
)
def test_what_may_be_a_secret_around_a_marked_one_still_goes(text: str) -> None:
    out = Redactor().scrub(text.format(pw=PASSWORD, tok=TOKEN))
    assert PASSWORD not in out and TOKEN not in out and MARK in out


def test_a_value_under_a_secret_key_keeps_a_scheme_or_a_connection_url_but_not_more() -> None:
    r = Redactor()
    assert r.kept_value("authorization", f"Bearer {TOKEN}") == f"Bearer {MARK}"
    assert r.kept_value("database_url", f"postgresql://app:{PASSWORD}@db:5432/orders") == f"postgresql://app:{MARK}@db:5432/orders"
    assert r.kept_value("cookie", f"theme=dark; sid={TOKEN}") == f"theme={MARK}; sid={MARK}"
    for key, value in [
        ("database_url", "postgresql://db:5432/orders?options=-c%20x"),  # no password found: whole
        ("webhook_url", f"https://u:{PASSWORD}@hooks.example/{TOKEN}"),  # a webhook's path is its secret
        ("password", f"{PASSWORD} {PASSWORD}"),
        ("api_key", TOKEN),
        ("password", f"AKIAIOSFODNN7EXAMPLE{PASSWORD}"),  # a format took a part: the rest goes too
    ]:
        assert r.kept_value(key, value) in (None, MARK), (key, value)


@pytest.mark.parametrize(
    "mapping",
    [
        {"authorization": f"Bearer {TOKEN}", "accept": "json"},
        {"database_url": f"postgresql://app:{PASSWORD}@db.internal:5432/orders"},
        {"cookie": f"theme=dark; sid={TOKEN}"},
        {"set-cookie": f"sid={TOKEN}; Path=/; HttpOnly"},
        {"private_key": f"-----BEGIN RSA PRIVATE KEY-----\nMIIE{TOKEN}\n-----END RSA PRIVATE KEY-----"},
        {"password": f"Bearer {TOKEN}"},
        {"password": f"{PASSWORD} and more"},
    ],
)
def test_a_mapping_and_its_json_text_keep_the_same(mapping: dict) -> None:
    """A replay hands a node the recorded mapping; the node may write it out as text: the text
    must read as the recorded text did, or the replay diverges."""
    from graphtape.recorder.codec import Decoder, Encoder

    encoded = Decoder({}, typed=False).decode(Encoder(Redactor()).encode(mapping))
    assert json.dumps(encoded) == Redactor().scrub(json.dumps(mapping))
    assert TOKEN not in json.dumps(encoded) and PASSWORD not in json.dumps(encoded)


class Fetched(TypedDict, total=False):
    order: str
    out: dict
    notes: list
    settings: dict


def test_a_recorded_run_keeps_urls_readable_and_stores_no_secret(tmp_path: Path) -> None:
    svc = EchoService().start()

    def fetch(state: Fetched) -> dict:
        r = httpx.get(f"{svc.url}/a?api_key={API_KEY}&page=2", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5)
        notes = [f"connecting to {u.format(pw=PASSWORD)}" for u in URLS]
        return {"out": r.json(), "notes": notes, "settings": {"database_url": f"postgresql://app:{PASSWORD}@db.internal:5432/orders", "pool": 5}}

    b = StateGraph(Fetched)
    b.add_node("fetch", fetch)
    b.add_edge(START, "fetch")
    b.add_edge("fetch", END)
    db = tmp_path / "urls.db"
    try:
        with Recorder(db) as rec:
            rec.attach(b.compile(), name="urls").invoke({"order": "A-1"})
            run_id = rec.last_run_id
    finally:
        svc.stop()

    stored = everything_stored(db)
    fixture = json.dumps(exported(str(db), run_id)).encode()
    for secret in (PASSWORD, API_KEY, TOKEN):
        assert secret.encode() not in stored and secret.encode() not in fixture, secret

    store = open_store(db)
    try:
        (call,) = [c for c in store.calls(run_id) if c.kind == "http"]
        state = store.state_at(run_id, store.list_steps(run_id)[-1].step)
    finally:
        store.close()
    assert call.inputs["url"] == f"{svc.url}/a?api_key={MARK}&page=2"
    assert next(v for k, v in call.inputs["headers"].items() if k.lower() == "authorization") == f"Bearer {MARK}"
    assert state["notes"] == [f"connecting to {kept}" for kept in URLS.values()]
    assert state["settings"] == {"database_url": f"postgresql://app:{MARK}@db.internal:5432/orders", "pool": 5}
    # The raw file holds what the store reads back: the structure is on disk, not rebuilt on read.
    assert f"/a?api_key={MARK}&page=2".encode() in stored
    assert f"postgresql://app:{MARK}@db.internal:5432/orders".encode() in stored
    # An exported fixture is redacted again on the way out, and keeps the same structure.
    assert f"/a?api_key={MARK}&page=2".encode() in fixture and f"Bearer {MARK}".encode() in fixture
    assert f'"database_url": "postgresql://app:{MARK}@db.internal:5432/orders"'.encode() in fixture


def test_a_connection_url_handed_to_a_run_is_learned_as_its_password() -> None:
    from graphtape.recorder.learned_secrets import secret_values

    url = f"postgresql://app:{PASSWORD}@db.internal:5432/orders"
    assert secret_values({"database_url": url}, Redactor().is_secret_key) == {PASSWORD}
    with_query = f"{url}?sslmode=require"  # parameters may hold more: the whole value, as before
    assert secret_values({"database_url": with_query}, Redactor().is_secret_key) == {with_query}


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("always-auth=true\nregistry=https://npm.example.com/", "always-auth=true\nregistry=https://npm.example.com/"),
        ("auth: false\nuser: bob", "auth: false\nuser: bob"),
        ("password: null # unset", "password: null # unset"),
        ("auth: falsey9", f"auth: {MARK}"),  # a word that only starts so is a value like any
    ],
)
def test_a_switch_under_a_secret_key_is_no_secret(text: str, kept: str) -> None:
    assert Redactor().scrub(text) == kept


def test_a_boolean_under_a_secret_key_is_kept_in_a_mapping_as_json_text_keeps_it() -> None:
    from graphtape.recorder.codec import Decoder, Encoder

    mapping = {"use_auth": True, "use_token": False, "password": None, "auth": "true"}
    encoded = Decoder({}, typed=False).decode(Encoder(Redactor()).encode(mapping))
    assert encoded == {"use_auth": True, "use_token": False, "password": None, "auth": MARK}  # a string is a value
    assert json.dumps(encoded) == Redactor().scrub(json.dumps(mapping))
