"""The committed fixtures of the bundled demo agents, replayed through the plugin's marker.

They were written with ``graphtape demo`` then ``graphtape export``; after an
intended change to a demo agent, re-record them with
``pytest tests/test_fixture_runs.py --graphtape-record=rewrite``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INCIDENT = "fixtures/runs/demo-incident.json"
REACT = "fixtures/runs/demo-react.json"


@pytest.mark.graphtape(INCIDENT, graph="fixtures/agents/reason_act.py:graph_incident")
def test_incident_replays_against_todays_agent(graphtape_replay):
    result = graphtape_replay()
    outcome = result.final_state["agent_outcome"]
    # The incident as recorded: two timeouts, a fallback to an estimate, and a wrong "delivered".
    assert result.final_state["retries"] == 2
    assert outcome["answer"] == "Good news: your order A-1042 was delivered on 2024-05-03."
    assert result.served == {"tool": 3, "model": 4}


@pytest.mark.graphtape(REACT, graph="fixtures/agents/react_agent.py:graph")
def test_react_parallel_tool_calls_replay(graphtape_replay):
    result = graphtape_replay()
    assert result.final_state["messages"][-1].content.startswith("B-2077 was delivered on 2024-05-01.")
    assert result.served == {"tool": 3, "model": 3}


def test_the_incident_fixture_catches_a_different_agent(tmp_path):
    # Not through the marker: --graphtape-record=rewrite would re-record the incident from this agent.
    from graphtape.recorder import SqlStore
    from graphtape.replay import replay
    from graphtape.replay.fixture import import_fixture, read_fixture
    from graphtape.replay.loading import load_graph

    store = SqlStore(tmp_path / "store.db")
    try:
        run_id = import_fixture(store, read_fixture(ROOT / INCIDENT)).run_id
        happy = load_graph("fixtures/agents/reason_act.py:graph_happy", ROOT)
        result = replay(run_id, happy, store=store)
    finally:
        store.close()
    # The happy scenario's model is another model: strict replay cannot answer it from the incident.
    first = result.first_divergence
    assert result.diverged and (first.step, first.node) == (1, "reason")
    assert "model call 'ScriptedChatModel:scripted-happy' has no matching recording" in first.what


@pytest.mark.parametrize("name", [INCIDENT, REACT])
def test_committed_fixtures_name_no_machine_path(name):
    text = (ROOT / name).read_text(encoding="utf-8")
    fixture = json.loads(text)
    assert not Path(fixture["graph"].rpartition(":")[0]).is_absolute()
    assert str(ROOT) not in text and "/home/" not in text and "/tmp/" not in text
