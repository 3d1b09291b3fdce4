"""``graphtape diff RUN_A RUN_B`` as users run it: exit codes, --json, --ignore, --ns, the demo, graph versions."""

from __future__ import annotations

import json
import re

import pytest
from diff_graphs import stamped_graph, versioned_graph
from replay_graphs import sub_graph

from graphtape.recorder import Recorder
from graphtape.tui.cli import main
from graphtape.tui.demo import record_demo


def record(db: str, graph, inputs: dict, name: str) -> str:
    with Recorder(db) as rec:
        rec.attach(graph, name=name).invoke(inputs)
        rec.flush()
        return rec.last_run_id


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> str:
    """The store `graphtape demo` leaves: runs named demo:happy, demo:incident and the others."""
    db = str(tmp_path_factory.mktemp("demo") / "graphtape.db")
    record_demo(db, "happy")
    record_demo(db, "incident")
    return db


def test_the_demo_happy_run_against_the_incident_names_the_timeout_in_one_line(demo_db, capsys):
    code = main(["diff", "demo:happy", "demo:incident", "--db", demo_db])
    out = capsys.readouterr().out
    assert code == 1
    firsts = [line for line in out.splitlines() if line.startswith("first difference:")]
    assert len(firsts) == 1 and out.splitlines()[1] == firsts[0]  # right under the verdict
    assert re.fullmatch(
        r"first difference: step 2 node 'act': call: tool 'lookup_order_status' timed out in demo:incident"
        r" \(its node stopped waiting after \d+ ms\); it answered in demo:happy",
        firsts[0],
    ), firsts[0]


def test_exit_0_when_the_runs_behaved_the_same(demo_db, capsys):
    assert main(["diff", "demo:happy", "demo:happy", "--db", demo_db]) == 0
    out = capsys.readouterr().out
    assert "behaved the same" in out and "no difference" in out


def test_json_output(demo_db, capsys):
    assert main(["diff", "demo:happy", "demo:incident", "--json", "--db", demo_db]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["same"] is False and data["a"]["name"] == "demo:happy" and data["b"]["name"] == "demo:incident"
    first = data["first_difference"]
    assert (first["kind"], first["step_a"], first["step_b"], first["node"]) == ("call", 2, 2, "act")
    assert "timed out" in first["b"] and "lookup_order_status" in first["what"]
    assert "-  \"carrier\": \"DHL\"," in first["diff"] or '- "carrier": "DHL",' in first["diff"]
    assert all({"kind", "a", "b", "diff", "carried", "step_a", "step_b"} <= set(d) for d in data["differences"])


def test_ignore_turns_a_difference_off(tmp_path, capsys):
    db = str(tmp_path / "s.db")
    a = record(db, stamped_graph("10:00"), {"x": 1}, "stamped")
    b = record(db, stamped_graph("11:00"), {"x": 1}, "stamped")
    assert main(["diff", a, b, "--db", db]) == 1
    assert "state key 'stamp' differs" in capsys.readouterr().out
    assert main(["diff", a, b, "--ignore", "stamp", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "behaved the same" in out and "ignored paths: stamp" in out


def test_runs_of_different_graph_versions(tmp_path, capsys):
    db = str(tmp_path / "v.db")
    a = record(db, versioned_graph(1), {"x": 2}, "pipeline")
    b = record(db, versioned_graph(2), {"x": 2}, "pipeline")
    assert main(["diff", a[:10], b[:10], "--db", db]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert f"graph: node 'audit' only in run {b[:8]}'s graph" in lines
    assert lines[1] == f"first difference: step 2 node 'score': route: score went to __end__ in run {a[:8]}, went to audit in run {b[:8]}"


def test_ns_compares_one_subgraph(tmp_path, capsys):
    db = str(tmp_path / "sub.db")
    a = record(db, sub_graph(1), {"n": 1, "log": []}, "sub")
    b = record(db, sub_graph(3), {"n": 1, "log": []}, "sub")
    assert main(["diff", a, b, "--ns", "child", "--json", "--db", db]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ns"] == "child" and {d["ns"] for d in data["differences"]} == {"child"}
    assert data["first_difference"]["node"] == "s2"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["diff", "nope", "demo:happy"], "no run matches 'nope'"),
        (["diff", "demo:happy", "demo:incident", "--ignore", "a..b"], "bad ignore pattern 'a..b'"),
        (["diff", "demo:happy", "demo:incident", "--ns", "child"], "neither run has a subgraph namespace 'child'"),
        (["diff", "demo:happy"], "the following arguments are required: RUN_B"),
    ],
)
def test_errors_are_one_line_and_exit_2(demo_db, capsys, argv, message):
    assert main([*argv, "--db", demo_db]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_missing_store_is_an_error_not_a_new_file(tmp_path, capsys):
    db = tmp_path / "none.db"
    assert main(["diff", "last", "last~1", "--db", str(db)]) == 2
    assert "no database" in capsys.readouterr().err and not db.exists()


def test_a_name_means_its_recorded_run_and_a_partial_replay_diffs_without_python_objects(tmp_path, capsys):
    """A replay keeps its source's name: the name still means the recorded run (as ``last`` does),
    and a diff against a replay that started at step 4 compares from step 4 and shows values,
    never a sentinel's repr."""
    db = str(tmp_path / "demo.db")
    record_demo(db, "happy")
    record_demo(db, "incident")
    assert main(["replay", "demo:incident", "--from", "4", "--trust-recorded-graph", "--db", db]) in (0, 1)
    capsys.readouterr()
    assert main(["runs", "--json", "--db", db]) == 0
    runs = json.loads(capsys.readouterr().out)
    (replayed,) = [r["id"] for r in runs if r.get("parent_run_id")]
    assert main(["diff", "demo:happy", "demo:incident", "--db", db]) == 1
    assert "timed out in demo:incident" in capsys.readouterr().out  # the recording, not its replay
    main(["diff", "demo:incident", replayed, "--json", "--db", db])
    out = capsys.readouterr().out
    assert replayed in json.dumps(json.loads(out)["b"]) and "<object object" not in out
    # The replay went on from step 4: compared from there, it behaved as the recording did.
    assert main(["diff", "demo:incident", replayed, "--db", db]) == 0
    assert "behaved the same" in capsys.readouterr().out


def test_a_run_and_its_full_replay_behaved_the_same(tmp_path, capsys):
    """A replay from the first step resumed the recording's input checkpoint: it was given no
    input of its own, which is no difference."""
    from graphtape.replay import replay

    db = str(tmp_path / "runs.db")
    run_id = record(db, sub_graph(), {"n": 1}, "full")
    result = replay(run_id, sub_graph(), db=db)
    assert not result.diverged, result.report()
    assert main(["diff", run_id, result.run_id, "--db", db]) == 0
    assert "behaved the same" in capsys.readouterr().out
