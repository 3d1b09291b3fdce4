"""``graphtape replay`` / ``graphtape fork`` as users run them, and replays in fresh processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from graphtape.recorder import Recorder, open_store
from graphtape.tui.cli import main

ROOT = Path(__file__).resolve().parents[1]
AGENTS = ROOT / "fixtures" / "agents"

GRAPH_FILE = """
import operator
from typing import Annotated, TypedDict
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph

THRESHOLD = {threshold}

@tool
def lookup(q: str) -> str:
    \"\"\"Look up q.\"\"\"
    return "found " + q

class S(TypedDict, total=False):
    x: int
    path: Annotated[list[str], operator.add]

def check(state):
    return {{"path": [lookup.invoke({{"q": str(state["x"])}})]}}

def route(state):
    return "big" if state["x"] > THRESHOLD else "small"

b = StateGraph(S)
b.add_node("check", check)
b.add_node("big", lambda s: {{"path": ["big"]}})
b.add_node("small", lambda s: {{"path": ["small"]}})
b.add_edge(START, "check")
b.add_conditional_edges("check", route, ["big", "small"])
b.add_edge("big", END)
b.add_edge("small", END)
graph = b.compile()
"""


@pytest.fixture
def project(tmp_path: Path):
    """A recorded run of a user's graph file, and a copy of the file with the router changed."""
    (tmp_path / "agent.py").write_text(GRAPH_FILE.format(threshold=5))
    (tmp_path / "agent_changed.py").write_text(GRAPH_FILE.format(threshold=50))
    db = str(tmp_path / "runs.db")
    from graphtape.replay.loading import load_graph

    ref = f"{tmp_path / 'agent.py'}:graph"
    with Recorder(db) as rec:
        rec.attach(load_graph(ref), graph_ref=ref).invoke({"x": 9})
        rec.flush()
        run_id = rec.last_run_id
    return tmp_path, db, run_id


def test_replay_command_exits_0_when_clean_and_1_with_a_report(project, capsys):
    tmp, db, run_id = project
    assert main(["--db", db, "replay", run_id, "--trust-recorded-graph"]) == 0  # the recorded reference, loaded as asked
    assert "matches the recording" in capsys.readouterr().out
    code = main(["--db", db, "replay", run_id, "--graph", f"{tmp / 'agent_changed.py'}:graph"])
    out = capsys.readouterr().out
    assert code == 1
    assert "FIRST step 1 node 'check': route divergence" in out
    assert "route (route) went to small instead of big" in out


def test_replay_json_output(project, capsys):
    tmp, db, run_id = project
    code = main(["--db", db, "replay", run_id, "--graph", f"{tmp / 'agent_changed.py'}:graph", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["diverged"] is True
    assert data["divergences"][0]["kind"] == "route" and data["divergences"][0]["first"] is True
    assert data["source_run_id"] == run_id and data["run_id"]


def test_replay_override_from_the_command_line(project, capsys):
    tmp, db, run_id = project
    (tmp / "fakes.py").write_text("def lookup(q):\n    return 'faked ' + q\n")
    code = main(["--db", db, "replay", run_id, "--trust-recorded-graph", "--override", f"lookup={tmp / 'fakes.py'}:lookup", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    state = next(d for d in data["divergences"] if d["kind"] == "state")
    assert state["actual"] == ["faked 9"] and state["recorded"] == ["found 9"]


def test_fork_command_records_a_linked_run(project, capsys):
    tmp, db, run_id = project
    assert main(["--db", db, "fork", run_id, "--trust-recorded-graph", "--at", "0", "--set", "x=1"]) == 0
    captured = capsys.readouterr()
    assert "fork of run" in captured.out and "fork recorded as run" in captured.err
    store = open_store(db)
    try:
        fork_run = next(r for r in store.list_runs() if r.parent_run_id == run_id)
        assert fork_run.fork_step == 0
        assert store.run_detail(fork_run.id).output["path"] == ["found 1", "small"]
    finally:
        store.close()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["replay", "nosuchrun"], "no run"),
        (["replay", "{run}", "--graph", "nope.py:graph"], "cannot load"),
        (["replay", "{run}", "--graph", "bad-ref"], "bad graph reference"),
        (["replay", "{run}", "--trust-recorded-graph", "--from", "99"], "no completed step 99"),
        (["replay", "{run}", "--trust-recorded-graph", "--mode", "loose"], "invalid choice"),
        (["replay", "{run}", "--trust-recorded-graph", "--override", "lookup"], "bad --override"),
        (["replay", "{run}", "--trust-recorded-graph", "--mock-node", "ghost"], "cannot mock node"),
        (["fork", "{run}", "--trust-recorded-graph", "--at", "0"], "at least one --set"),
        (["fork", "{run}", "--trust-recorded-graph", "--at", "0", "--set", "x=nine"], "not JSON"),
        (["fork", "{run}", "--trust-recorded-graph", "--at", "0", "--set", "nokey.a=1"], "no key 'nokey'"),
        (["fork", "{run}", "--trust-recorded-graph", "--at", "0", "--set", "turnz=1"], "the state has no key 'turnz'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(project, capsys, argv, message):
    _tmp, db, run_id = project
    code = main(["--db", db, *[a.replace("{run}", run_id) for a in argv]])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_a_recorded_graph_reference_is_not_loaded_without_consent(project, capsys):
    tmp, db, _run_id = project
    from graphtape.replay.loading import load_graph

    # A run whose recording names a file that plants a marker when executed (never loaded yet).
    planted = tmp / "planted.py"
    planted.write_text(f"open({str(tmp / 'pwned')!r}, 'w').close()\n" + GRAPH_FILE.format(threshold=5))
    with Recorder(db) as rec:
        rec.attach(load_graph(f"{tmp / 'agent.py'}:graph"), graph_ref=f"{planted}:graph").invoke({"x": 9})
        run_id = rec.last_run_id
    for argv in (["replay", run_id], ["fork", run_id, "--at", "0", "--set", "x=1"]):
        code = main(["--db", db, *argv])  # no terminal here: no prompt, so no
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and "--trust-recorded-graph" in err and "loading runs its code" in err
        assert not (tmp / "pwned").exists()
    assert main(["--db", db, "replay", run_id, "--trust-recorded-graph"]) == 0
    assert (tmp / "pwned").exists()  # agreed to: loaded


def test_a_fork_that_raises_says_so_and_exits_1(project, capsys):
    tmp, db, run_id = project
    code = main(["--db", db, "fork", run_id, "--trust-recorded-graph", "--at", "0", "--set", "x=null"])
    out = capsys.readouterr().out
    assert code == 1
    assert out.splitlines()[1].startswith("the fork raised TypeError")


FRESH = """
import sys
from graphtape.replay import replay
from graphtape.replay.loading import load_graph
result = replay(sys.argv[1], load_graph(sys.argv[2]), db=sys.argv[3])
print("CLEAN" if not result.diverged else result.report())
"""


def test_unchanged_replay_is_clean_in_20_fresh_processes(tmp_path):
    """Nothing volatile leaks into the comparison: message ids, run ids, tool-call ids, dict order, time."""
    db = str(tmp_path / "fresh.db")
    refs = [f"{AGENTS / 'react_agent.py'}:graph", f"{AGENTS / 'reason_act.py'}:graph_unknown_tool"]
    from graphtape.replay.loading import load_graph

    runs = []
    with Recorder(db) as rec:
        for ref in refs:
            module = load_graph(ref)
            rec.attach(module, graph_ref=ref).invoke(_inputs_for(ref))
            rec.flush()
            runs.append((rec.last_run_id, ref))
    env = {**os.environ, "PYTHONHASHSEED": "random"}

    def one(i: int) -> str:
        run_id, ref = runs[i % len(runs)]
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(FRESH), run_id, ref, db], capture_output=True, text=True, timeout=300, env=env, cwd=str(ROOT))
        return proc.stdout.strip() or proc.stderr.strip().splitlines()[-1]

    with ThreadPoolExecutor(max_workers=4) as pool:
        outcomes = list(pool.map(one, range(20)))
    assert outcomes == ["CLEAN"] * 20, [o for o in outcomes if o != "CLEAN"][:2]


def _inputs_for(ref: str):
    from graphtape.replay.loading import load_module_from_path

    path, _, attr = ref.rpartition(":")
    module = load_module_from_path(path)
    if attr.startswith("graph_"):
        return module.inputs_for(attr[len("graph_") :])
    return module.inputs_for()


MODELLED_FILE = '''
import sys
from typing import TypedDict
from pydantic import BaseModel
from langgraph.graph import END, START, StateGraph


class Report(BaseModel):
    order_id: str
    status: str


class S(TypedDict, total=False):
    order_id: str
    report: Report


def build():
    b = StateGraph(S)
    b.add_node("make_report", lambda s: {"report": Report(order_id=s["order_id"], status="in transit")})
    b.add_edge(START, "make_report")
    b.add_edge("make_report", END)
    return b.compile()


graph = build()

if __name__ == "__main__":
    from graphtape import Recorder

    with Recorder(sys.argv[1]) as rec:
        rec.attach(build()).invoke({"order_id": "A1"})
'''


def test_a_class_in_the_state_matches_whatever_module_ran_its_file(tmp_path, capsys):
    """Recorded by the file run as a script (``__main__.Report``), replayed with the file loaded
    by path (a module name graphtape makes up): the same class, compared by its fields."""
    (tmp_path / "modelled.py").write_text(MODELLED_FILE)
    db = str(tmp_path / "modelled.db")
    subprocess.run([sys.executable, str(tmp_path / "modelled.py"), db], check=True, cwd=tmp_path)
    store = open_store(db)
    try:
        run_id = store.list_runs()[0].id
        assert store.run_detail(run_id).output["report"]["__type__"] == "__main__.Report"
    finally:
        store.close()
    assert main(["--db", db, "replay", run_id, "--graph", f"{tmp_path / 'modelled.py'}:graph"]) == 0, capsys.readouterr().out
    assert "matches the recording" in capsys.readouterr().out
    # Another class of that name with other fields is still a divergence.
    (tmp_path / "changed.py").write_text(MODELLED_FILE.replace('status="in transit"', 'status="lost"'))
    assert main(["--db", db, "replay", run_id, "--graph", f"{tmp_path / 'changed.py'}:graph"]) == 1
    assert "state key 'report' differs" in capsys.readouterr().out


def test_replaying_an_imported_fixture_without_graph_says_why_none_is_used(project, capsys):
    """A fixture names its graph, but that name is data from elsewhere: the error says the run
    came from a fixture (not that it was recorded without one) and how to go on."""
    tmp_path, db, run_id = project
    out = tmp_path / "fx.json"
    assert main(["--db", db, "export", run_id, "-o", str(out)]) == 0
    assert main(["--db", db, "import", str(out)]) == 0
    capsys.readouterr()
    store = open_store(db)
    try:
        imported = next(r.id for r in store.list_runs() if "fixture" in r.tags)
    finally:
        store.close()
    assert main(["--db", db, "replay", imported]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"run {imported} was imported from a fixture, whose graph reference is not trusted: pass --graph" in err


TYPED_FILE = """
import dataclasses
from typing import Any, TypedDict
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from graphtape import register_type

@dataclasses.dataclass
class Order:
    total: int

register_type(Order)

class Conn:  # a client object kept in the state: no encoding of its own
    pass

@tool
def fetch(n: int) -> Order:
    '''Fetch an order.'''
    return Order(total=n * 10)

class S(TypedDict, total=False):
    conn: Any
    total: int

def work(state):
    return {"conn": Conn(), "total": fetch.invoke({"n": 4}).total}

b = StateGraph(S)
b.add_node("work", work)
b.add_edge(START, "work")
b.add_edge("work", END)
graph = b.compile()
"""


def test_a_graph_recorded_by_import_replays_from_its_file(tmp_path, monkeypatch, capsys):
    """Recorded as ``import typed_agent``, replayed as ``--graph typed_agent.py:graph`` (the file
    loaded under a private module name): its registered types and its objects' reprs are the same."""
    (tmp_path / "typed_agent.py").write_text(TYPED_FILE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import typed_agent

    db = str(tmp_path / "gt.db")
    with Recorder(db) as rec:
        assert rec.attach(typed_agent.graph).invoke({})["total"] == 40
    code = main(["--db", db, "replay", "last", "--graph", f"{tmp_path / 'typed_agent.py'}:graph"])
    out = capsys.readouterr().out
    assert code == 0 and "matches the recording" in out, out
    sys.modules.pop("typed_agent", None)
