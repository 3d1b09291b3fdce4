"""The secrets a run learns by value: from a call's inputs (a value under a secret key), and from
a failed SQL statement (a value bound to a column named like a secret)."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from graphtape.recorder.learned_secrets import RunRedactor
from graphtape.recorder.redaction import MARK, Redactor
from graphtape.recorder.statement_params import placeholder_names


def test_only_values_worth_looking_for_are_learned_from_a_calls_inputs() -> None:
    """A short value, a flag or a number under a secret key would take ordinary words out of
    every later text; a mapping under a secret key (a tool's schema) holds no value to look for."""
    redactor = RunRedactor()
    redactor.learn(
        {
            "password": "hunter2",  # 7 characters: too short to tell from a word
            "api_key": "disabled",
            "pin_token": "12345678",
            "tools": [{"properties": {"password": {"type": "string", "description": "The user's password, if any"}}}],
            "headers": [["x-api-key", "hdr-" + "k" * 8]],
            "nested": {"client_secret": SecretStr("sec-" + "s" * 8)},
            "user": "someone-plain",
        }
    )
    text = "hunter2 disabled 12345678 The user's password, if any someone-plain / hdr-kkkkkkkk sec-ssssssss hdr-kkkkkkkk"
    assert redactor.scrub(text) == f"hunter2 disabled 12345678 The user's password, if any someone-plain / {MARK} {MARK} {MARK}"
    assert redactor.count == 3
    assert Redactor().scrub(text) == text  # none of it is a secret to the built-in rules


@pytest.mark.parametrize(
    "statement, names",
    [
        ("insert into users (name, password) values (?, ?)", [(0, "name"), (1, "password")]),
        ('INSERT INTO "users" ("name", "password") VALUES (?, ?), (?, ?)', [(0, "name"), (1, "password"), (2, "name"), (3, "password")]),
        ("update users set password = ?, note = 'why?' where u.name = ? and x in (?, ?)", [(0, "password"), (1, "name"), (2, None), (3, None)]),
        ("update users set password=$2 where name=$1", [(1, "password"), (0, "name")]),
        ("insert into t (a, b) values (lower(?), ?)", [(0, None), (1, None)]),  # not a plain row: left unnamed
    ],
)
def test_the_positional_parameters_of_a_statement_are_named_by_their_columns(statement: str, names: list) -> None:
    assert placeholder_names(statement) == names
