"""A replay's override may name a model as its user knows it (``large-model``, ``gpt-4o``), not
only by graphtape's label for the call (``ScriptedChatModel:large-model``), its class or ``model``.
"""

from __future__ import annotations

import pytest
from ecosystem_shapes_v1 import dynamic_model
from langchain_core.messages import AIMessage, HumanMessage

from graphtape import Recorder, open_store, replay
from graphtape.replay.runner import ReplayError


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[str, str]:
    db = str(tmp_path_factory.mktemp("names") / "runs.db")
    with Recorder(db) as rec:
        rec.attach(dynamic_model(), name="chooser").invoke({"messages": [HumanMessage("Where are D1 and D2?")]})
        rec.flush()
    store = open_store(db)
    try:
        return db, store.list_runs()[0].id
    finally:
        store.close()


def _calls(db: str, run_id: str) -> list:
    store = open_store(db)
    try:
        return [c for c in store.calls(run_id) if c.kind == "model"]
    finally:
        store.close()


def test_an_override_by_the_models_own_name_answers_that_model_only(recorded):
    db, run_id = recorded
    large = [c for c in _calls(db, run_id) if c.name.endswith(":large-model")]
    assert large and all(c.name == "ScriptedChatModel:large-model" for c in large)
    result = replay(run_id, dynamic_model(), db=db, overrides={"large-model": lambda messages: AIMessage("too long")})
    first = result.first_divergence
    assert first is not None, result.report()
    assert (first.step, first.node) == (large[0].step, large[0].node), result.report()


def test_overridden_model_calls_are_not_reported_unused(recorded):
    db, run_id = recorded
    for name in ("model", "ScriptedChatModel", "small-model"):
        same = replay(run_id, dynamic_model(), db=db, overrides={name: lambda messages: AIMessage("order D1 is in transit; order D2 is in transit")}, require_all_used=True)
        assert not [d for d in same.divergences if d.kind == "missing" and "small-model" in d.what], (name, same.report())


def test_a_name_no_model_answers_to_is_refused_naming_the_models(recorded):
    db, run_id = recorded
    with pytest.raises(ReplayError, match="ScriptedChatModel:large-model"):
        replay(run_id, dynamic_model(), db=db, overrides={"huge-model": lambda messages: AIMessage("x")})
