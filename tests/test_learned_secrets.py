"""The secrets a run learns by value: from a call's inputs, the run's input and config, and the
writes of its tasks (a value under a secret key), and from a failed SQL statement (a value bound
to a column named like a secret)."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from pydantic import SecretStr
from test_redaction_e2e import everything_stored

from graphtape.recorder import Recorder, open_store

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


class Session(TypedDict, total=False):
    api_key: str
    answer: Any
    said: Annotated[list[str], operator.add]


def _quoting_graph() -> Any:
    """A graph whose nodes quote, without a key, secrets it was handed under one: in its state,
    its config, the answer to an interrupt."""

    def keep(state: Session) -> dict:
        return {"api_key": "Zq9Lk2mP4xZ8wQ"}

    def say(state: Session, config: RunnableConfig) -> dict:
        token = config["configurable"]["user_token"]
        return {"said": [f"calling with {state['api_key']}", f"as user {token}"]}

    def ask(state: Session) -> dict:
        answer = interrupt("the database password?")
        return {"answer": {"db_password": answer["db_password"]}, "said": [f"connecting with {answer['db_password']}"]}

    b = StateGraph(Session)
    b.add_node("keep", keep)
    b.add_node("say", say)
    b.add_node("ask", ask)
    b.add_edge(START, "keep")
    b.add_edge("keep", "say")
    b.add_edge("say", "ask")
    b.add_edge("ask", END)
    return b.compile(checkpointer=InMemorySaver())


def test_a_word_under_a_secret_key_is_not_learned() -> None:
    """State and config hold how a secret is handled under its key more often than the secret
    ({"auth": "anonymous"}): learned, the word would go from every later sentence."""
    redactor = RunRedactor()
    redactor.learn([{"auth": "anonymous", "password_policy": "required"}, {"configurable": {"token": "Optional", "api_key": "Zq9Lk2mP4xZ8wQ"}}])
    text = "anonymous users: a password is required, Optional; key Zq9Lk2mP4xZ8wQ"
    assert redactor.scrub(text) == f"anonymous users: a password is required, Optional; key {MARK}"


def test_secrets_under_keys_in_state_config_and_answers_are_hidden_where_nodes_quote_them(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    config = {"configurable": {"thread_id": "t1", "user_token": "ut-9f8e7d6c5b4a"}}
    with Recorder(db, durability="sync") as rec:
        graph = rec.attach(_quoting_graph())
        graph.invoke({}, config)
        out = graph.invoke(Command(resume={"db_password": "S3cretDbPw99"}), config)
        # A later run on the thread starts from a state holding the key: quoted again, it is hidden.
        graph.update_state(config, {"said": [f"still {out['api_key']}"]})
    assert out["said"][0] == "calling with Zq9Lk2mP4xZ8wQ"  # the user's graph is untouched
    stored = everything_stored(db)
    for secret in (b"Zq9Lk2mP4xZ8wQ", b"ut-9f8e7d6c5b4a", b"S3cretDbPw99"):
        assert secret not in stored
    store = open_store(db)
    try:
        run = store.list_runs()[-1]
        said = store.state_at(run.id, store.list_steps(run.id)[-1].step)["said"]
    finally:
        store.close()
    assert said[:3] == [f"calling with {MARK}", f"as user {MARK}", f"connecting with {MARK}"]
