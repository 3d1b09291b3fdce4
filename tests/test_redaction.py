"""Redaction: what is scrubbed before anything is encoded, how it is counted, and what is left alone."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import re

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from pydantic import SecretStr

from graphtape.recorder import Recorder
from graphtape.recorder.codec import Decoder, Encoder
from graphtape.recorder.redaction import DEFAULT_PATTERNS, MARK, Redactor

SECRETS = {
    "openai": "sk-AbCdEf0123456789AbCdEf01",
    "openai-project": "sk-proj-AbCdEf0123456789AbCdEf0123456789",
    "anthropic": "sk-ant-api03-AbCdEf0123456789_AbCdEf-0123456789",
    "bearer": "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
    "bearer-lower": "bearer abcdefghijklmnop0123",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "github": "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
    "github-oauth": "gho_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
    "github-fine-grained": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "slack": "xoxb-1234567890-abcdefghij",
    "google": "AIzaSyA-1234567890abcdefghijklmnopqrstu",
    "private-key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY-----",
    "bearer-upper": "BEARER abcdefghijklmnop0123",
    "basic-auth-header": "Authorization: Basic dXNlcjpodW50ZXIy",
    "gitlab": "glpat-AbCdEf0123456789xyzW",
    "huggingface": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
    "stripe": "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "slack-webhook": "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "url-password": "postgresql://app:Sup3rS3cret@",  # (the credential part of postgresql://app:Sup3rS3cret@db:5432/prod)
    "pem-cut-short": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nQyNTUxOQAAACD",
    "google-oauth": "ya29.a0AfH6SMBxYz0123456789abcdefGHIJ",
    "groq": "gsk_AbCdEf0123456789AbCdEf0123",
    "langsmith": "lsv2_pt_0123456789abcdef0123456789abcdef_0123abcd",
    "perplexity": "pplx-AbCdEf0123456789AbCdEf0123",
    "tavily": "tvly-dev-AbCdEf0123456789AbCdEf0123456789",
    "pinecone": "pcsk_4AbCdE_AbCdEf0123456789AbCdEf0123456789AbCdEf",
    "replicate": "r8_AbCdEf0123456789AbCdEf0123456789AbCdE",
    "fireworks": "fw_AbCdEf0123456789AbCdEf01",
    "authorization-other-scheme": "Authorization: SSWS 00AbCdEf0123456789xyzWvU",
    "npmrc-auth-token": "//npm.example.com/:_authToken=AbCdEf0123456789xyzWvU",
    "cookie-pairs": "Cookie: theme=dark; sid=AbCdEf0123456789",
    "query-signature": "?sig=AbCdEf0123456789%2Bxyz",
    "stripe-test": "sk_test_51AbCdEf0123456789AbCdEf",
    "stripe-webhook": "whsec_AbCdEf0123456789AbCdEf0123",
    "npm": "npm_AbCdEf0123456789AbCdEf0123456789AbCd",
    "slack-app": "xapp-1-A0123ABCD-4567890123-abcdef0123456789abcdef0123456789",
    "discord-webhook": "https://discord.com/api/webhooks/123456789012345678/AbCdEf0123456789_AbCdEf-0123456789",
    "digitalocean": "dop_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    "shopify": "shpat_0123456789abcdef0123456789abcdef",
    "databricks": "dapi0123456789abcdef0123456789abcdef",
    "atlassian": "ATATT3xFfGF0AbCdEf0123456789AbCdEf0123456789AbCdEf0123456789AbCdEf0123456789AbCdEf0123456789AbCdEf0123456789AbCdEf0123456789",
    "linear": "lin_api_AbCdEf0123456789AbCdEf0123456789AbCdEf01",
    "notion": "ntn_AbCdEf0123456789AbCdEf0123456789AbCdEf0123456789",
    "postman": "PMAK-0123456789ab0123456789ab-0123456789abcdef0123456789abcdef01",
    "mailgun": "key-0123456789abcdef0123456789abcdef",
    "xai": "xai-AbCdEf0123456789AbCdEf0123456789AbCdEf0123456789",
    "grafana": "glsa_AbCdEf0123456789AbCdEf0123456789_0123abcd",
    "gitlab-runner": "glrt-AbCdEf0123456789AbCdEf",
    "doppler": "dp.st.prd.AbCdEf0123456789AbCdEf0123456789AbCdEf0123456789",
    "vault": "hvs.AbCdEf0123456789AbCdEf0123456789AbCdEf0123456789",
    "terraform-cloud": "AbCdEf01234567.atlasv1.AbCdEf0123456789AbCdEf0123456789AbCdEf0123456789AbCdEf0123456789AbCdEf0123456789",
    "pulumi": "pul-0123456789012345678901234567890123456789",
    "sentry": "sntrys_eyJpYXQiOjE2AbCdEf0123456789AbCdEf0123456789AbCdEf0123456789",
    "new-relic": "NRAK-0123456789ABCDEFGHIJKLMNOPQ",
    "age": "AGE-SECRET-KEY-1QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"[:74],
    "aws-key-pair": "AKIAIOSFODNN7EXAMPLE,wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "url-token-user": "https://0123456789abcdef0123456789abcdef01234567@",
    "pem-in-base64": "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFSUJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkIKLS0tLS1FTkQgRUMgUFJJVkFURSBLRVktLS0tLQo=",
    "discord-bot": "MTAxNTk4NzY1NDMyMTAxMjM0.GaBcDe.AbCdEf0123456789AbCdEf0123456789AbCd",
    "query-code": "?code=AbCdEf0123456789_AbCdEf0123456789AbCdEf01==",
    "putty-private-lines": "Private-Lines: 2\nAAAAgQC0123456789abcdefABCDEF\nAAAAQQDabcdef0123",
}


def encode(value: Any, redactor: Redactor | None = None) -> Any:
    """Encode with ``redactor`` and read back as plain data."""
    return Decoder({}, typed=False).decode(Encoder(redactor or Redactor()).encode(value))


# ---------------------------------------------------------------------------
# Patterns in text
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", DEFAULT_PATTERNS)
def test_every_builtin_pattern_has_an_example_here(pattern: str) -> None:
    assert any(re.fullmatch(pattern, secret) for secret in SECRETS.values()), pattern


@pytest.mark.parametrize("name", SECRETS)
def test_credential_patterns_are_scrubbed_anywhere_in_text(name: str) -> None:
    secret = SECRETS[name]
    r = Redactor()
    # A private key cut short has no END line: everything after BEGIN goes, so nothing follows it here.
    after = "" if name == "pem-cut-short" else " after"
    text = f"before {secret}{after}"
    out = r.scrub(text)
    assert secret not in out
    assert out.startswith("before ") and out.endswith(after) and MARK in out
    assert r.count == 1


def test_secrets_inside_values_of_any_shape() -> None:
    r = Redactor()
    value = {
        "messages": [HumanMessage(f"my key is {SECRETS['openai']}"), AIMessage("ok", tool_calls=[{"name": "call", "args": {"header": SECRETS["bearer"]}, "id": "c1"}])],
        "list": [("tuple", SECRETS["aws"])],
        "set": {SECRETS["github"]},
    }
    plain = encode(value, r)
    text = repr(plain)
    for name in ("openai", "bearer", "aws", "github"):
        assert SECRETS[name] not in text, name
    assert r.count == 4
    assert plain["messages"][0]["content"] == f"my key is {MARK}"


def test_several_secrets_in_one_string_are_each_counted() -> None:
    r = Redactor()
    out = r.scrub(f"{SECRETS['aws']} and {SECRETS['github']} and {SECRETS['slack']}")
    assert out == f"{MARK} and {MARK} and {MARK}"
    assert r.count == 3


@pytest.mark.parametrize(
    "text",
    [
        "sk-short",
        "a task-list with sk- inside",
        "Bearer of bad news",
        "AKIA is a prefix, AKIAshort",
        "ghp_tooShort",
        "ordinary text about tokens and passwords",
        "order A-1042 ships on 2024-05-06",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    r = Redactor()
    assert r.scrub(text) == text
    assert r.count == 0


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("order 5sk-proj-AbCdEf0123456789AbCdEf0123", "order 5"),
        ("id=12github_pat_11ABCDEFG0123456789_abcdefghij", "id=12"),
        ("v2glpat-AbCdEf0123456789xyzW", "v2"),
    ],
)
def test_keys_with_a_long_prefix_are_found_glued_to_what_comes_before(text: str, kept: str) -> None:
    r = Redactor()
    assert r.scrub(text) == kept + MARK
    assert r.count == 1


@pytest.mark.parametrize("line_end", ["\r\n", "\n", "\\r\\n"])  # also escaped, as in a repr of the body
def test_multipart_form_fields_named_like_a_secret_lose_their_value(line_end: str) -> None:
    body = line_end.join(
        [
            "--xyz",
            'Content-Disposition: form-data; name="password"',
            "",
            "hunter2-very-secret",
            "--xyz",
            'Content-Disposition: form-data; name="api_key"',
            "Content-Type: text/plain",
            "",
            "abc123-secret-value",
            "--xyz",
            'Content-Disposition: form-data; name="username"',
            "",
            "ada",
            "--xyz--",
        ]
    )
    r = Redactor()
    out = r.scrub(body)
    assert "hunter2-very-secret" not in out and "abc123-secret-value" not in out
    assert out.count(MARK) == 2 and f"{line_end}ada{line_end}" in out and 'name="password"' in out
    assert r.spans(body) and len(r.spans(body)) == 2


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("<config><password>hunter2hunter2</password><user>bob</user></config>", f"<config><password>{MARK}</password><user>bob</user></config>"),
        ('<wsse:Password Type="PasswordText">p@ss w0rd</wsse:Password>', f'<wsse:Password Type="PasswordText">{MARK}</wsse:Password>'),
        ('<secret name="db">topsecretvalue</secret>', f'<secret name="db">{MARK}</secret>'),
        ("<b>bold</b> then <Token>abc123xyz</Token>", f"<b>bold</b> then <Token>{MARK}</Token>"),
    ],
)
def test_xml_elements_named_like_a_secret_lose_their_text(text: str, kept: str) -> None:
    r = Redactor()
    assert r.scrub(text) == kept
    assert r.count == 1


@pytest.mark.parametrize("text", ["<user>bob</user><monkey>banana</monkey>", "<password></password>", "<password>x</secret>", "&lt;password&gt;x&lt;/password&gt;"])
def test_other_xml_is_left_alone(text: str) -> None:
    r = Redactor()
    assert r.scrub(text) == text and r.count == 0


def test_user_patterns_and_keys() -> None:
    r = Redactor(patterns=[r"ACME-\d{4}-\d{4}", r"(?i:employee #\d+)"], keys=["ssn", "x-internal"])
    value = {
        "note": "badge ACME-1234-5678 for Employee #42",
        "ssn": "123-45-6789",
        "user_SSN_last4": "6789",
        "X-Internal-Route": "/admin",
        "kept": "ACME-12-34",
    }
    plain = encode(value, r)
    assert plain["note"] == f"badge {MARK} for {MARK}"
    assert plain["ssn"] == MARK and plain["user_SSN_last4"] == MARK and plain["X-Internal-Route"] == MARK
    assert plain["kept"] == "ACME-12-34"
    assert r.count == 5
    # The built-in nets still work next to user ones.
    assert Redactor(patterns=[r"ACME-\d+"]).scrub(f"x {SECRETS['aws']} y") == f"x {MARK} y"


# ---------------------------------------------------------------------------
# Secret keys and SecretStr
# ---------------------------------------------------------------------------

SECRET_KEYS = [
    "password",
    "db_passwd",
    "passphrase",
    "client_secret",
    "access_token",
    "refresh_token",
    "token",
    "api_key",
    "apiKey",
    "OPENAI_API_KEY",
    "x-api-key",
    "Authorization",
    "proxy_authorisation",
    "credentials",
    "private_key",
    "aws_access_key_id",
    "session_id",
    "Cookie",
    "set-cookie",
    "dbPassword",
    "pwd",
    "XApiKey",
    "APIKey",
    "sessionId",
    "JSESSIONID",
    "basic_auth",
    "authToken",
    "AWS_SECRET_ACCESS_KEY",
    "api.key",
]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_values_under_secret_keys_are_redacted_whole(key: str) -> None:
    r = Redactor()
    plain = encode({key: "plain-looking-value", "nested": {key: {"even": "structured"}}}, r)
    assert plain[key] == MARK and plain["nested"][key] == MARK
    assert r.count == 2


def test_empty_secret_values_are_not_counted() -> None:
    r = Redactor()
    plain = encode({"password": "", "api_key": None, "token": "x"}, r)
    assert plain == {"password": "", "api_key": None, "token": MARK}
    assert r.count == 1


def test_empty_secret_values_in_non_string_key_dicts_are_not_counted() -> None:
    r = Redactor()
    plain = encode({1: "one", "password": "", "token": None}, r)
    assert plain == {"1": "one", "password": "", "token": None}
    assert r.count == 0


class Ambiguous:
    """Like a numpy array: comparing gives something that refuses to be a bool."""

    def __ne__(self, other: object) -> Any:
        return self

    def __bool__(self) -> bool:
        raise ValueError("truth value is ambiguous")


def test_secret_values_are_not_asked_to_compare() -> None:
    r = Redactor()
    assert encode({"api_key": Ambiguous()}, r) == {"api_key": MARK}
    assert r.count == 1


def test_secret_keys_in_non_string_key_dicts() -> None:
    r = Redactor()
    plain = encode({1: "one", "password": "pw"}, r)
    assert plain == {"1": "one", "password": MARK}
    assert r.count == 1


def test_secretstr_is_redacted_wherever_it_is() -> None:
    r = Redactor()
    value = {"config": {"llm": SecretStr("sk-live-value-that-is-long"), "other": [SecretStr("short")]}}
    plain = encode(value, r)
    assert plain == {"config": {"llm": MARK, "other": [MARK]}}
    assert r.count == 2


# ---------------------------------------------------------------------------
# Counts are not secrets
# ---------------------------------------------------------------------------

COUNT_KEYS = {
    "input_tokens": 10,
    "output_tokens": 5,
    "total_tokens": 15,
    "prompt_tokens": 10,
    "completion_tokens": 5,
    "reasoning_tokens": 2,
    "cached_tokens": 1,
    "max_tokens": 256,
    "max_completion_tokens": 512,
    "token_count": 7,
    "tokens_used": 7,
    "tokens": 7,
}


def test_token_counts_are_not_redacted() -> None:
    r = Redactor()
    value = {**COUNT_KEYS, "token_usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}, "usage": {"input_tokens": 1}}
    assert encode(value, r) == value
    assert r.count == 0


def test_message_usage_metadata_survives() -> None:
    r = Redactor()
    m = AIMessage("hi", usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}, response_metadata={"token_usage": {"total_tokens": 15}})
    plain = encode(m, r)
    assert plain["usage_metadata"] == {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    assert plain["response_metadata"] == {"token_usage": {"total_tokens": 15}}
    assert r.count == 0


def test_usage_detail_breakdowns_are_not_redacted() -> None:
    usage = {
        "input_tokens": 10,
        "output_tokens": 5,
        "total_tokens": 15,
        "input_token_details": {"cache_read": 3, "audio": 0},
        "output_token_details": {"reasoning": 2},
    }
    openai = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3, "completion_tokens_details": {"reasoning_tokens": 0}, "prompt_tokens_details": {"cached_tokens": 0}}
    r = Redactor()
    assert encode({"usage_metadata": usage, "token_usage": openai}, r) == {"usage_metadata": usage, "token_usage": openai}
    assert r.count == 0


@pytest.mark.parametrize("key", ["passage", "passages", "compass", "num_tokens", "tokenizer", "bypass_cache"])
def test_ordinary_keys_containing_secret_words_are_kept(key: str) -> None:
    r = Redactor()
    assert encode({key: "ordinary value"}, r) == {key: "ordinary value"}


@pytest.mark.parametrize(
    "key",
    [
        "author", "secretary", "passwordless", "monkey", "keys", "oauth_provider", "inputTokenDetails", "token_ids", "tokens_per_second",
        "cookiecutter", "output_keys", "input_keys", "stream_keys", "model_key", "prompt_key",
    ],
)
def test_keys_are_judged_by_whole_words(key: str) -> None:
    assert not Redactor().is_secret_key(key)


def test_user_keys_match_anywhere_in_a_key_and_win_over_count_words() -> None:
    r = Redactor(keys="ssn")  # a lone string is one key, not three letters
    assert r.is_secret_key("userSSN") and r.is_secret_key("ssn_count")
    assert not r.is_secret_key("session_count") and not r.is_secret_key("s")
    assert Redactor(keys=["token_count"]).is_secret_key("token_count")


@pytest.mark.parametrize("keys", [[""], ["  "], [3]])
def test_bad_user_keys_are_refused(keys: list) -> None:
    with pytest.raises(ValueError, match="bad redaction key"):
        Redactor(keys=keys)


def test_user_pattern_with_global_flag() -> None:
    assert Redactor(patterns=[r"(?i)employee #\d+"]).scrub("for EMPLOYEE #42 only") == f"for {MARK} only"


def test_user_pattern_flags_stay_with_their_pattern() -> None:
    r = Redactor(patterns=[r"(?i)(?s)begin.+?end", r"ACME-\d+", r"order \d{4}", re.compile(r"case-\d+", re.IGNORECASE)])
    assert r.scrub("x BEGIN\nEND y acme-1 order 1234 CASE-77") == f"x {MARK} y acme-1 {MARK} {MARK}"
    assert r.scrub(f"{SECRETS['aws']} sk-short") == f"{MARK} sk-short"  # the built-ins did not become case-blind


def test_user_patterns_shorter_than_builtins_match_whole_short_values() -> None:
    r = Redactor(patterns=[r"\d{3}-\d{2}-\d{4}"])
    assert encode({"ssn_field": "123-45-6789", "other": "ok"}, r) == {"ssn_field": MARK, "other": "ok"}


@pytest.mark.parametrize("pattern", [r"(ab)\1", r"(?P<tag>x+)-(?P=tag)", r"secret(?=:)", r"(?<=key=)\w+", r"(?x) order \s \d{4}  # a comment"])
def test_user_patterns_that_need_backtracking_are_refused(pattern: str) -> None:
    # Backreferences, lookarounds (and verbose mode) are not RE2: scrubbing stays linear in the text.
    with pytest.raises(ValueError, match="bad redaction pattern"):
        Redactor(patterns=[pattern])


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        *((p, "lookarounds and backreferences need backtracking") for p in ("(?=x)", "(?!x)", "(?=xa)", "(?<=x)a", "(?<!x)a", "a(?=x)")),
        *((p, "verbose mode \\(\\?x\\) is not RE2 syntax") for p in ("(?x)a", "(?ix)a", "(?x:a b)")),
    ],
)
def test_a_refused_pattern_is_named_for_what_it_uses(pattern: str, why: str) -> None:
    """A lookaround whose text holds an x is a lookaround, not verbose mode."""
    with pytest.raises(ValueError, match=rf"^bad redaction pattern '{re.escape(pattern)}': .*{why}"):
        Redactor(patterns=[pattern])


@pytest.mark.parametrize(
    ("pattern", "why"),
    [("(unclosed", "missing \\)"), ("[z-a]", "character class range"), ("x*", "empty text"), (r"\b", "empty text"), ("(?L)x", "perl operator"), (b"bytes", "string"), (None, "string")],
)
def test_invalid_user_patterns_are_refused_up_front(pattern: Any, why: str) -> None:
    with pytest.raises(ValueError, match=rf"bad redaction pattern .*{why}"):
        Redactor(patterns=[pattern])


def test_recorder_refuses_a_bad_pattern_when_constructed(sqlite_url: str) -> None:
    with pytest.raises(ValueError, match="bad redaction pattern '\\(unclosed'"):
        Recorder(sqlite_url, redact_patterns=["(unclosed"])


def test_github_fine_grained_token_is_scrubbed() -> None:
    token = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcd"
    assert token not in Redactor().scrub(f"token {token}")


# ---------------------------------------------------------------------------
# Through a recording, on every backend
# ---------------------------------------------------------------------------


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    settings: dict


def leaky(state: Chat) -> dict:
    return {"messages": [AIMessage(f"use {SECRETS['openai']} please", usage_metadata={"input_tokens": 9, "output_tokens": 3, "total_tokens": 12})]}


def test_recording_counts_redactions_and_keeps_usage(store_url: str) -> None:
    b = StateGraph(Chat)
    b.add_node("leaky", leaky)
    b.add_edge(START, "leaky")
    rec = Recorder(store_url, redact_patterns=[r"ACME-\d{4}"], durability="sync")
    try:
        graph = rec.attach(b.compile())
        graph.invoke({"messages": [HumanMessage("badge ACME-1234")], "settings": {"api_key": "k-123", "max_tokens": 100, "secret": SecretStr("s")}})
        store = rec.store
        run = store.get_run(rec.last_run_id)
        final = store.state_at(run.id, max(s.step for s in store.list_steps(run.id)))
        assert final["messages"][0]["content"] == f"badge {MARK}"
        assert final["messages"][1]["content"] == f"use {MARK} please"
        assert final["messages"][1]["usage_metadata"] == {"input_tokens": 9, "output_tokens": 3, "total_tokens": 12}
        assert final["settings"] == {"api_key": MARK, "max_tokens": 100, "secret": MARK}
        detail = store.run_detail(run.id)
        assert detail.inputs["settings"]["api_key"] == MARK and detail.inputs["settings"]["max_tokens"] == 100
        # Each secret is counted where it was first encoded (the encoder shares messages by identity).
        assert run.redactions >= 4
    finally:
        rec.close()


def test_a_plain_graph_run_redacts_nothing(tmp_path) -> None:
    """LangGraph's own config (``output_keys``, ``stream_mode``...) holds no secret: a demo run counts 0."""
    from conftest import load_agent

    from graphtape import Recorder

    agent = load_agent("reason_act")
    with Recorder(str(tmp_path / "g.db"), durability="sync") as rec:
        rec.attach(agent.build_graph("happy"), name="plain").invoke(agent.inputs_for("happy"))
        run = rec.store.get_run(rec.last_run_id)
    assert run.redactions == 0


# ---------------------------------------------------------------------------
# Keys in text: the value is read only after a secret key, so text inside values is still searched
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ('{"payload": "{\\"api_key\\": \\"k-7f3a9c2e1b\\"}"}', "k-7f3a9c2e1b"),  # JSON inside a JSON string
        ("https://example.com/cb?access_token=tok7f3a9c2e1b&page=2", "tok7f3a9c2e1b"),  # a URL's query, after its scheme
        ('{"password": "ab\\"cd7f3a9c2e1b"}', "cd7f3a9c2e1b"),  # an escaped quote does not end the value
        ('DB_PASSWORD="correct horse 7f3a9c"', "horse 7f3a9c"),  # a quoted .env value with spaces
        ("password: 'hunter2-7f3a9c'", "hunter2-7f3a9c"),  # YAML, quoted
        ("Authorization: Token 7f3a9c2e1b5d", "7f3a9c2e1b5d"),  # a scheme word, then the credential
        ("redis://:r3d1s7f3a9c@cache:6379/0", "r3d1s7f3a9c"),  # a URL password without a user
        ("postgresql://app:p@ss7f3a9c@db/prod", "ss7f3a9c"),  # an unescaped @ in a URL password
        ('"{\\"token\\": \\"a\\\\nb7f3a9c2e1b\\"}"', "b7f3a9c2e1b"),  # an escape inside JSON inside JSON
        ("run --db-password=s3cr3t7f3a9c now", "s3cr3t7f3a9c"),  # a command-line flag
    ],
)
def test_secret_values_in_text_are_found_wherever_the_key_sits(text: str, secret: str) -> None:
    r = Redactor()
    out = r.scrub(text)
    assert secret not in out and MARK in out, out
    assert r.count >= 1


def test_keys_that_are_not_secrets_leave_their_values_alone() -> None:
    r = Redactor()
    text = '{"order": "A-1042", "status": "shipped", "url": "https://shop.example/o?id=1042&page=2"}'
    assert r.scrub(text) == text and r.count == 0


def test_a_token_after_an_escaped_newline_is_found_and_the_escape_kept() -> None:
    # A tool's dict return value becomes its repr: lines are "\\n"-escaped, right before the key.
    text = repr({"log": f"line one\n{SECRETS['aws']}\n{SECRETS['huggingface']}"})
    out = Redactor().scrub(text)
    assert SECRETS["aws"] not in out and SECRETS["huggingface"] not in out
    assert f"line one\\n{MARK}\\n{MARK}" in out


def test_tokens_inside_long_base64_runs_are_not_keys() -> None:
    """Images and ids are base64: a key prefix met by chance inside one is not a key (1 MB of
    URL-safe base64 used to hold a few "hf_..." and "ghp_..." matches)."""
    import base64
    import random

    rng = random.Random(13)
    data = base64.urlsafe_b64encode(rng.randbytes(3_000_000)).decode()
    planted = data[:5000] + "hf_" + "a" * 34 + data[5000:10000]
    r = Redactor()
    assert r.scrub(data) == data and r.count == 0
    assert "hf_" + "a" * 34 in Redactor().scrub(planted)  # inside the run, not after a boundary: kept
    assert MARK in Redactor().scrub(data[:100] + " hf_" + "a" * 34)  # after a boundary: a key


def test_a_lone_surrogate_is_scrubbed_not_a_failure() -> None:
    r = Redactor()
    out = r.scrub("half an emoji \ud83d then password=hunter2x")
    assert out == f"half an emoji \ufffd then password={MARK}" and r.count == 1
    assert encode({"text": "cut \ud83d stream " * 3}) == {"text": "cut \ufffd stream " * 3}


def test_spans_cover_keyed_values_in_characters() -> None:
    text = "é ünïcode password=hunter2x and sk-proj-AbCdEf0123456789AbCdEf"
    spans = Redactor().spans(text)
    assert [text[a:b] for a, b in spans] == ["hunter2x", "sk-proj-AbCdEf0123456789AbCdEf"]


# ---------------------------------------------------------------------------
# Values that hide text: content parts, bytes
# ---------------------------------------------------------------------------


def test_a_private_key_split_across_content_parts_is_scrubbed_whole() -> None:
    body = "MIIEow" + "QmFzZTY0Qm9keU9mQUtleQ" * 80  # ~1.7 kB: the seam is far from BEGIN
    pem = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"
    half = len(pem) // 2
    m = AIMessage(content=[{"type": "text", "text": "key: " + pem[:half]}, {"type": "text", "text": pem[half:] + " done"}, {"type": "text", "text": "next part"}])
    plain = encode(m)
    text = repr(plain)
    assert body[half - 100 : half + 100] not in text and "QmFzZTY0Qm9k" not in text
    begin, end = pem.splitlines()[0], pem.splitlines()[-1]  # the key's kind is kept, its body goes
    assert [p["text"] for p in plain["content"]] == [f"key: {begin}\n{MARK}\n{end} done", "", "next part"]


def test_a_key_split_across_three_parts_is_scrubbed() -> None:
    key = "sk-proj-AbCdEf0123456789AbCdEf0123456789"
    parts = [{"type": "text", "text": f"use {key[:10]}"}, {"type": "text", "text": key[10:15]}, {"type": "text", "text": f"{key[15:]} now"}]
    plain = encode(AIMessage(content=parts))
    assert [p["text"] for p in plain["content"]] == [f"use {MARK} now", "", ""]


def test_parts_with_no_secret_across_them_are_kept_as_they_are() -> None:
    parts = [{"type": "text", "text": "first sk-proj-AbCdEf0123456789AbCdEf"}, {"type": "text", "text": " second"}]
    plain = encode(AIMessage(content=parts))
    assert [p["text"] for p in plain["content"]] == [f"first {MARK}", " second"]


def test_bytes_are_scanned_to_their_end() -> None:
    import base64

    data = b"x" * 1_500_000 + f" key {SECRETS['openai-project']}".encode()
    r = Redactor()
    plain = encode({"body": data}, r)
    assert base64.b64decode(plain["body"]["base64"]) == MARK.encode() and r.count == 1
    clean = b"\x89PNG" + bytes(range(256)) * 100
    assert base64.b64decode(encode({"img": clean})["img"]["base64"]) == clean


# ---------------------------------------------------------------------------
# Text is scrubbed whole, then cut: a key across the cut is never left in part
# ---------------------------------------------------------------------------

KEY = "sk-proj-AbCdEf0123456789AbCdEf0123456789"


def test_a_traceback_line_is_scrubbed_before_it_is_cut() -> None:
    from graphtape.recorder.tracebacks import MAX_LINE, scrubbed_frames

    code = "x = call(" + "a" * (MAX_LINE - 15) + f"'{KEY}')"  # the key straddles character MAX_LINE
    frames = scrubbed_frames([["agent.py", 3, "node", code]], Redactor().scrub)
    assert KEY[:7] not in frames[0][3] and len(frames[0][3]) <= MAX_LINE


def test_an_unreadable_values_error_is_scrubbed_before_it_is_cut() -> None:
    class Broken(dict):
        def items(self):  # noqa: ANN202
            raise RuntimeError("x" * 290 + f" {KEY}")

    faults: list[str] = []
    tree = Encoder(on_fault=faults.append).encode({"v": Broken(a=1)})
    assert KEY[:7] not in repr(tree) and KEY[:7] not in repr(faults)


def test_a_node_error_is_scrubbed_before_it_is_cut(tmp_path) -> None:
    class S(TypedDict):
        n: int

    def fail(state: S) -> dict:
        raise RuntimeError("x" * 3990 + f" {KEY}")

    b = StateGraph(S)
    b.add_node("fail", fail)
    b.add_edge(START, "fail")
    with Recorder(str(tmp_path / "g.db"), durability="sync") as rec:
        with pytest.raises(RuntimeError):
            rec.attach(b.compile()).invoke({"n": 0})
        store = rec.store
        run = store.get_run(rec.last_run_id)
        task = next(t for s in store.list_steps(run.id) for t in store.step_detail(run.id, s.step).tasks if t.error_message)
    assert KEY[:7] not in task.error_message and KEY[:7] not in (run.error_message or "") and "x" * 3000 in task.error_message


@pytest.mark.parametrize("name", SECRETS)
def test_scrubbing_twice_changes_nothing_more(name: str) -> None:
    """A replayed value that echoes scrubbed text (a URL in a response) must scrub to itself,
    or a strict replay reports a state difference that is only the redaction's."""
    secret = SECRETS[name]
    for text in (
        f"{secret}",
        f'{{"path": "/charge?api_key={secret}", "echo": "{secret}"}}',
        f"url=/v1?token={secret}&x=1]",
        repr({"body": f'{{"api_key": "{secret}"}}'}),
        f"password: {secret})",
    ):
        once = Redactor().scrub(text)
        assert Redactor().scrub(once) == once, (text, once)


def test_known_clean_text_is_returned_as_it_is_and_other_text_is_scrubbed():
    key = "sk-" + "Zq9Xw8Vu7Ts6Rq5Po4Nm3Lk2"
    clean = "an answer read back from the recording"
    r = Redactor(known_clean=frozenset({clean, f"echo {key}"}))
    assert r.scrub(clean) is clean
    assert r.scrub(f"echo {key}") == f"echo {key}"  # the caller's promise: redacted when it was recorded
    assert key not in r.scrub(f"new {key}") and r.count == 1


def test_the_one_pass_check_and_the_two_passes_agree_on_every_kind_of_secret():
    """``scrub`` first asks one alternation of every format whether the text holds any, and runs
    the two substituting passes only then: a token, a text pattern, a secret key's value, text
    with a lone surrogate, a user's pattern and clean text come out the same as with both passes."""
    key = "sk-" + "Zq9Xw8Vu7Ts6Rq5Po4Nm3Lk2"
    texts = [
        f"the key is {key} ok",
        "postgresql://admin:hunter2secret@db.internal:5432/app",
        'config: {"password": "correct-horse-battery"}',
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEow" + "A" * 40 + "\n-----END RSA PRIVATE KEY-----",
        f"odd \ud800 text with {key}",
        "ticket TCK-123456 is open",
        "nothing secret in this sentence at all, just words",
    ]
    fast, slow = Redactor(patterns=[r"TCK-\d{6}"]), Redactor(patterns=[r"TCK-\d{6}"])
    slow._either = None  # the two passes alone
    got = [fast.scrub(t) for t in texts]
    assert got == [slow.scrub(t) for t in texts] and fast.count == slow.count == 6
    assert key not in got[0] and "hunter2secret" not in got[1] and "correct-horse" not in got[2]
    assert "MIIEow" not in got[3] and key not in got[4] and "TCK-123456" not in got[5]
    assert got[6] is texts[6]


def test_short_text_found_clean_is_remembered_and_secrets_are_counted_every_time():
    key = "sk-" + "Zq9Xw8Vu7Ts6Rq5Po4Nm3Lk2"
    r = Redactor()
    for _ in range(3):
        assert r.scrub("tool_call_with_context") == "tool_call_with_context"
        assert r.scrub(f"token {key}") == f"token {MARK}"
    assert r.count == 3  # each redaction counted, as before
    user = Redactor(patterns=[r"tool_\w+"])  # a redactor's own patterns decide what is clean
    assert user.scrub("tool_call_with_context") == MARK


@pytest.mark.parametrize(
    "text",
    [
        '{"secrets": {"db": "hunter2-prod-PASS-9", "n": [1, {"x": "}"}]}, "kept": "yes"}',  # a tool's JSON text
        "{'credentials': ['svc-user', 'hunter2-prod-PASS-9'], 'kept': 'yes'}",  # a repr
        '{"password": {"value": "hunter2-prod-PASS-9"}, "kept": "yes"}',
    ],
)
def test_an_object_or_list_under_a_secret_key_in_text_is_scrubbed_whole(text: str) -> None:
    """A tool returning ``{"password": {...}}`` is stored as its JSON text: the value of a secret
    key that is an object or a list goes whole (brackets inside its strings do not end it), the
    rest stays, and scrubbing again changes nothing."""
    once = Redactor().scrub(text)
    assert "hunter2-prod-PASS-9" not in once and "svc-user" not in once and MARK in once
    assert "kept" in once and "yes" in once
    assert Redactor().scrub(once) == once


@pytest.mark.parametrize(
    "text, secret",
    [
        ("error: password=hunter2abc", "hunter2abc"),
        ("downstream said: token=ERRTOK_s61xx", "ERRTOK_s61xx"),
        ("msg:\tapi_key = AKEYVAL123456", "AKEYVAL123456"),
        ("login failed: password: HUNTER2_LEAK_9", "HUNTER2_LEAK_9"),
    ],
)
def test_a_secret_key_after_a_plain_label_is_still_found(text: str, secret: str) -> None:
    out = Redactor().scrub(text)
    assert secret not in out and MARK in out and out.split(":")[0] == text.split(":")[0], out


@pytest.mark.parametrize(
    "url, secret",
    [
        ("https://b.s3.amazonaws.com/f?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=fe5f80f77d5fa3beca038a248ff027d0", "fe5f80f77d5fa3beca038a248ff027d0"),
        ("https://b.s3.amazonaws.com/f?X-Amz-Security-Token=IQoJb3JpZ2luX2VjEJr%2F%2F&X-Amz-Date=20240101", "IQoJb3JpZ2luX2VjEJr"),
        ("https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Signature=0a1b2c3d4e5f6071", "0a1b2c3d4e5f6071"),
    ],
)
def test_presigned_url_signatures_are_redacted(url: str, secret: str) -> None:
    out = Redactor().scrub(url)
    assert secret not in out and MARK in out and out.startswith(url.split("?")[0]), out


def test_header_pairs_named_like_a_secret_lose_their_value() -> None:
    """The value goes; an authorization scheme before it stays (it says how the call authenticated)."""
    pairs = [("Authorization", "Token TOKVAL_abcdefghijklmnop"), ["X-Api-Key", "APIKEYVAL_pair"], ("Cookie", b"sid=COOKIEVAL_pair"), ("Accept", "text/html")]
    out = encode({"headers": pairs})["headers"]
    assert out == [["Authorization", f"Token {MARK}"], ["X-Api-Key", MARK], ["Cookie", MARK], ["Accept", "text/html"]], out


# ---------------------------------------------------------------------------
# Key names written with JSON escapes, command lines, personal codes, secrets told in prose
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ('{"pass\\u0077ord": "hunter2"}', '{"pass\\u0077ord": "[REDACTED]"}'),
        ('{"\\u0070assword": "hunter2", "user": "ada"}', '{"\\u0070assword": "[REDACTED]", "user": "ada"}'),
        ('{"api\\u005Fkey": "k-7f3a9c2e1b"}', '{"api\\u005Fkey": "[REDACTED]"}'),
        ('{"payload": "{\\"pass\\\\u0077ord\\": \\"hunter2\\"}"}', '{"payload": "{\\"pass\\\\u0077ord\\": \\"[REDACTED]\\"}"}'),  # JSON in JSON
    ],
)
def test_a_json_key_written_with_escapes_is_read_unescaped(text: str, kept: str) -> None:
    r = Redactor()
    assert r.scrub(text) == kept and r.count == 1
    assert Redactor().scrub(kept) == kept


@pytest.mark.parametrize("text", ['{"\\u0070ath": "/srv/app", "caf\\u00e9": "open"}', '{"pass\\u0061ge": "chapter one"}'])
def test_escaped_keys_that_name_no_secret_keep_their_values(text: str) -> None:
    r = Redactor()
    assert r.scrub(text) == text and r.count == 0


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("deploy --password hunter2 --verbose", f"deploy --password {MARK} --verbose"),
        ("cli --api-key abcdef123456 --region eu", f"cli --api-key {MARK} --region eu"),
        ("cli --token XYZ", f"cli --token {MARK}"),
        ("tool -token xyz-7f3a9c", f"tool -token {MARK}"),  # Go-style single dash
        ("tool --db-password 'hunter 2' --host db", f"tool --db-password '{MARK}' --host db"),
        ('{"args": "--client-secret \\"s3cr3t value\\""}', f'{{"args": "--client-secret \\"{MARK}\\""}}'),
        ("app --pin 4821", f"app --pin {MARK}"),
        ("run \\\n  --password hunter2", f"run \\\n  --password {MARK}"),
        ("openssl rsa -passin pass:hunter2 -in key.pem", f"openssl rsa -passin {MARK} -in key.pem"),
        # -p is a password only where the command is one that takes it so.
        ("mysql -u root -phunter2 shop", f"mysql -u root -p{MARK} shop"),
        ("mysqldump -uroot -p'hunter 2' shop > dump.sql", f"mysqldump -uroot -p'{MARK}' shop > dump.sql"),
        ("/usr/bin/mariadb -h db -u app -pS3cr3t! -e 'select 1'", f"/usr/bin/mariadb -h db -u app -p{MARK} -e 'select 1'"),
        ('{"command": "mysql -u root -phunter2 db"}', f'{{"command": "mysql -u root -p{MARK} db"}}'),
        ("sshpass -p hunter2 ssh deploy@host", f"sshpass -p {MARK} ssh deploy@host"),
        ("sshpass -e -p'hunter2' scp a host:", f"sshpass -e -p'{MARK}' scp a host:"),
        ("docker login -u bob -p hunter2 registry.example.com", f"docker login -u bob -p {MARK} registry.example.com"),
        ("oc login -u dev -p hunter2 https://api.example:6443", f"oc login -u dev -p {MARK} https://api.example:6443"),
        ("mongosh -u admin -p hunter2 --authenticationDatabase admin", f"mongosh -u admin -p {MARK} --authenticationDatabase admin"),
        ("redis-cli -h cache -a hunter2 ping", f"redis-cli -h cache -a {MARK} ping"),
        ("curl -u admin:hunter2 https://api.example.com", f"curl -u admin:{MARK} https://api.example.com"),
        ("curl -s --user 'admin:hunter 2' https://x.example", f"curl -s --user 'admin:{MARK}' https://x.example"),
        ("curl -U proxy:hunter2 -x proxy:3128 https://x.example", f"curl -U proxy:{MARK} -x proxy:3128 https://x.example"),
        ("curl https://api.stripe.com/v1/charges -u sk_test_4eC39HqLyjWDarjtT1zdp7dc:", f"curl https://api.stripe.com/v1/charges -u {MARK}:"),
    ],
)
def test_secrets_on_a_command_line_are_redacted(text: str, kept: str) -> None:
    r = Redactor()
    assert r.scrub(text) == kept and r.count == 1
    assert Redactor().scrub(kept) == kept
    assert [text[a:b] for a, b in Redactor().spans(text)] != []


@pytest.mark.parametrize(
    "text",
    [
        "docker run -p 8080:80 nginx", "ls -p /srv", "pytest -p no:cacheprovider -q", "psql --port 5432 -h db", "ssh -p 22 host",
        "mkdir -p build/x && git add -p", "sshpass -f pw.txt ssh -p 22 host", "mysql -u root -p shop", "mysql -u root -p -e 'select 1'",
        "docker exec -u root web sh", "docker run -u 1000:1000 img", "sudo -u postgres psql", "curl -u admin https://x.example",
        "redis-cli -p 6380 ping", "mongosh --port 27017", "echo $PW | docker login -u bob --password-stdin registry.example.com",
        "mysql --password --verbose", "ansible-playbook --ask-pass site.yml", "tool --no-password x", "gh --token-file ~/.tok",
        "cli --token $GITHUB_TOKEN", 'cli --token "$GITHUB_TOKEN"', "cli --api-key <your-key>", "pass --token to the CLI",
        "use --password only if you must", "--password, --token and --api-key are read from the environment",
        "-p, --password PASSWORD   the password to use", "--token TEXT  an access token", "--max-tokens 100 --token-count 5",
        "--auth-url https://keystone.example:5000/v3", "--auth-type basic", "--cookie-jar cookies.txt", "gpg --edit-key alice",
        "--private-key ~/.ssh/id_ed25519", "openssl enc -pass file:pw.txt", "--discard-dual-password | --retain-password",
    ],
)
def test_ordinary_flags_and_commands_are_left_alone(text: str) -> None:
    r = Redactor()
    assert r.scrub(text) == text and r.count == 0


CODE_KEYS = ["pin", "PIN", "userPin", "pin_code", "pincode", "otp", "OTP_CODE", "totp", "cvv", "cvv2", "CVC", "ssn", "customer_ssn", "security_code", "verification_code", "social_security_number"]


@pytest.mark.parametrize("key", CODE_KEYS)
def test_keys_naming_a_personal_or_one_time_code_are_secret(key: str) -> None:
    r = Redactor()
    assert encode({key: "4821", "n": {key: 4821}}, r) == {key: MARK, "n": {key: MARK}} and r.count == 2
    text = f"{key}=4821 and {key}: 123-45-6789"
    assert Redactor().scrub(text) == f"{key}={MARK} and {key}: {MARK}"


@pytest.mark.parametrize("key", ["spin", "pinned", "is_pinned", "option", "hotpot", "pin_memory", "pin_length", "otp_attempts", "OTP_VERSION", "otp_app", "cvv_required"])
def test_keys_that_merely_contain_a_code_word_are_kept(key: str) -> None:
    r = Redactor()
    assert encode({key: "4821"}, r) == {key: "4821"} and r.count == 0
    assert Redactor().scrub(f"{key}=4821 {key}: 4821") == f"{key}=4821 {key}: 4821"


@pytest.mark.parametrize("text", ["Pin: release a=stable", "Pin: version 5.32*", "OTP: sent to your phone", "SSN: on file, CVV: required"])
def test_a_code_key_in_text_keeps_a_value_without_digits(text: str) -> None:
    """APT's pinning (``Pin: release``) and prose about a code: a PIN, OTP, CVV or SSN holds digits."""
    r = Redactor()
    assert r.scrub(text) == text and r.count == 0


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("my password is hunter2", f"my password is {MARK}"),
        ("My password is Hunter2! can you log in?", f"My password is {MARK} can you log in?"),
        ("the password was Tr0ub4dor&3.", f"the password was {MARK}."),
        ("the API key is abc123def456ghi, use it", f"the API key is {MARK}, use it"),
        ("The secret key was wJalrXUtnFEMI/K7MDENG/bPxRfiCY", f"The secret key was {MARK}"),
        ("the access token is 7f3a9c2e1b5d", f"the access token is {MARK}"),
        ("my PIN is 4821 and my card ends 0042", f"my PIN is {MARK} and my card ends 0042"),
        ("the passphrase is: correct-horse-battery-9", f"the passphrase is: {MARK}"),
        ("the token is 'x9Kq2mZ7pL'", f"the token is '{MARK}'"),
    ],
)
def test_a_secret_told_in_prose_is_redacted(text: str, kept: str) -> None:
    r = Redactor()
    assert r.scrub(text) == kept and r.count == 1
    assert Redactor().scrub(kept) == kept


@pytest.mark.parametrize(
    "text",
    [
        *(
            f"The {noun} is {word}."
            for noun in ("password", "token", "API key", "PIN", "passcode")
            for word in ("incorrect", "valid", "wrong", "expired", "required", "missing", "invalid", "set", "not set", "case-sensitive")
        ),
        "the key is to retry with backoff", "the token is base64-encoded", "the token is a JWT signed with HS256",
        "the password is 12 characters long", "the token is 2048 bits", "the api key is ${OPENAI_API_KEY}", "the token is sha256",
        "the private key is ~/.ssh/id_ed25519", "the password was reset on 2024-05-06", "GPIO pin is 17", "the PIN is 4 digits",
        "the token was 12% of the budget", "the secret is to keep prompts short",
    ],
)
def test_prose_about_passwords_and_tokens_is_left_alone(text: str) -> None:
    """Only a word that reads as a secret goes: mixed letters and digits or symbols, or a PIN's
    digits. A password that is a plain word cannot be told from "the password is incorrect" and
    is kept."""
    r = Redactor()
    assert r.scrub(text) == text and r.count == 0
