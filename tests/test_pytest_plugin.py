"""The pytest plugin, run as users run it: pytester sessions with the graphtape marker.

Each test writes a small agent (a real compiled LangGraph graph calling a real
LangChain tool) into pytester's folder, records its fixture through the plugin
(``--graphtape-record=missing``), then changes the code or the options and
checks what the plugin reports.
"""

from __future__ import annotations

import json
import re

import langchain_core.language_models  # noqa: F401
import langgraph.graph  # noqa: F401
import pytest

import graphtape.recorder.attach  # noqa: F401 - with the two above: loaded before pytester snapshots
import graphtape.replay.runner  # noqa: F401 - sys.modules, so inline sessions share their classes
from graphtape.replay.record_mode import RecordMode, in_ci

pytest_plugins = ["pytester"]

AGENT = '''
import uuid
from typing import TypedDict

from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph

LIMIT = {limit}


@tool
def fetch_amount(order_id: str) -> int:
    """The amount of an order."""
    return {amount}


class State(TypedDict, total=False):
    order_id: str
    amount: int
    verdict: str
    stamp: str


def check(state: State) -> dict:
    update = {{"amount": fetch_amount.invoke({{"order_id": state["order_id"]}})}}
    if {volatile}:
        update["stamp"] = str(uuid.uuid4())
    return update


def route(state: State) -> str:
    return "escalate" if state["amount"] > LIMIT else "approve"


def approve(state: State) -> dict:
    return {{"verdict": "approved"}}


def escalate(state: State) -> dict:
    return {{"verdict": "escalated"}}


builder = StateGraph(State)
builder.add_node("check", check)
builder.add_node("approve", approve)
builder.add_node("escalate", escalate)
builder.add_edge(START, "check")
builder.add_conditional_edges("check", route, ["approve", "escalate"])
builder.add_edge("approve", END)
builder.add_edge("escalate", END)
graph = builder.compile()
'''

TEST = '''
import pytest


@pytest.mark.graphtape("fixtures/runs/refund.json", graph="{graph}", inputs={{"order_id": "A-1"}}{extra})
def test_refund(graphtape_replay):
    result = graphtape_replay()
    assert result.final_state["verdict"] == "{verdict}"
'''


@pytest.fixture(autouse=True)
def _not_ci(monkeypatch):
    # These sessions record fixtures; the outer run may well be on CI.
    monkeypatch.delenv("CI", raising=False)


# Other installed plugins stay out of the inner sessions: the snapshot plugin owns a
# session-wide temp dir, and hypothesis imports itself afresh in every session.
QUIET = ("textual-snapshot", "hypothesispytest", "asyncio", "langsmith_plugin", "syrupy", "cacheprovider")


def run(pytester, *args: str):
    """A pytest session in pytester's folder, as a user's project would run one."""
    return pytester.runpytest(*(a for name in QUIET for a in ("-p", f"no:{name}")), *args)


def write_agent(pytester, name: str = "agent", *, limit: int = 100, amount: int = 250, volatile: bool = False) -> None:
    pytester.makepyfile(**{name: AGENT.format(limit=limit, amount=amount, volatile=volatile)})


def write_test(pytester, *, graph: str = "agent.py:graph", verdict: str = "escalated", extra: str = "") -> None:
    pytester.makepyfile(test_refund=TEST.format(graph=graph, verdict=verdict, extra=extra))


def recorded(pytester, extra: str = "", **agent) -> bytes:
    """Record fixtures/runs/refund.json through the plugin; returns its bytes."""
    write_agent(pytester, **agent)
    write_test(pytester, extra=extra)
    result = run(pytester, "--graphtape-record=missing")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*recorded fixtures/runs/refund.json*"])
    return (pytester.path / "fixtures" / "runs" / "refund.json").read_bytes()


def test_missing_mode_records_a_fixture_that_replays_clean(pytester):
    data = recorded(pytester)
    fixture = json.loads(data)
    assert fixture["graph"] == "agent.py:graph"
    assert [c["name"] for s in fixture["steps"] for c in s.get("calls", [])] == ["fetch_amount"]

    again = run(pytester)  # record mode none: replay only
    again.assert_outcomes(passed=1)
    assert (pytester.path / "fixtures" / "runs" / "refund.json").read_bytes() == data


def test_a_route_change_fails_naming_step_node_and_kind(pytester):
    recorded(pytester)
    # Today's code: a higher limit, and a tool that would answer differently (the fixture answers it).
    write_agent(pytester, "agent_v2", limit=1000, amount=999)
    write_test(pytester, graph="agent_v2.py:graph")
    result = run(pytester)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "graphtape: the replay of fixtures/runs/refund.json diverged from the recording" in out
    assert "FIRST step 1 node 'check': route divergence: route (route) went to approve instead of escalate" in out
    assert "--- recorded" in out and "+++ actual" in out
    assert "--graphtape-record=rewrite" in out
    assert "Traceback" not in out


TWICE = '''
import pytest


@pytest.mark.graphtape("fixtures/runs/refund.json", graph="agent.py:graph")
def test_strict(graphtape_replay):
    assert graphtape_replay().final_state["verdict"] == "escalated"


@pytest.mark.graphtape("fixtures/runs/refund.json", graph="agent.py:graph", ignore=["stamp"])
def test_ignoring_a_key(graphtape_replay):
    assert graphtape_replay().served["tool"] == 1
'''


def test_a_session_replays_its_fixtures_in_one_store(pytester):
    from graphtape.recorder import SqlStore

    recorded(pytester)
    pytester.makepyfile(test_twice=TWICE)
    run(pytester, "test_twice.py").assert_outcomes(passed=2)
    # One store made for the session (not one per test): the fixture imported once, replayed twice.
    stores = sorted((pytester.path.parent / "basetemp").rglob("*.db"))
    assert [p.name for p in stores] == ["replays.db"]
    store = SqlStore(stores[0], create=False)
    try:
        runs = store.list_runs()
    finally:
        store.close()
    imported = [r for r in runs if r.parent_run_id is None]
    assert len(imported) == 1 and sorted(r.parent_run_id for r in runs if r.parent_run_id) == [imported[0].id] * 2


def test_fixture_tests_run_on_several_workers(pytester):
    """``pytest -n 2`` (pytest-xdist), as a CI spreads a suite: each worker replays in its own
    session store, the clean fixtures pass, and a changed route still fails naming the route."""
    recorded(pytester)
    pytester.makepyfile(test_twice=TWICE)
    run(pytester, "-n", "2", "test_twice.py", "test_refund.py").assert_outcomes(passed=3)
    stores = sorted(p.parent.name for p in (pytester.path.parent / "basetemp").rglob("replays.db"))
    assert len(stores) == 2  # one per worker: workers never write one file at once
    write_agent(pytester, "agent_v2", limit=1000, amount=999)
    write_test(pytester, graph="agent_v2.py:graph")
    result = run(pytester, "-n", "2", "test_twice.py", "test_refund.py")
    result.assert_outcomes(passed=2, failed=1)
    assert "route divergence: route (route) went to approve instead of escalate" in result.stdout.str()


def test_rewrite_mode_re_records_from_todays_code(pytester):
    before = recorded(pytester)
    write_agent(pytester, "agent_v2", limit=1000, amount=999)
    write_test(pytester, graph="agent_v2.py:graph", verdict="approved")
    run(pytester).assert_outcomes(failed=1)

    result = run(pytester, "--graphtape-record=rewrite")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*rewrote fixtures/runs/refund.json*"])
    after = (pytester.path / "fixtures" / "runs" / "refund.json").read_bytes()
    fixture = json.loads(after)
    assert fixture["graph"] == "agent_v2.py:graph"
    assert fixture["final_state"]["verdict"] == "approved"
    assert fixture["inputs"] == json.loads(before)["inputs"]
    # The tool was answered from the old fixture (250), not run live (today's tool says 999).
    assert [c["output"] for s in fixture["steps"] for c in s.get("calls", [])] == [250]
    run(pytester).assert_outcomes(passed=1)


def test_rewrite_keeps_what_was_redacted_when_the_run_was_first_recorded(pytester):
    recorded(pytester)
    path = pytester.path / "fixtures" / "runs" / "refund.json"
    fixture = json.loads(path.read_text())
    # As if the incident had held three secrets when it was recorded: the file keeps only markers.
    fixture["redacted"]["when_recorded"] = 3
    path.write_text(json.dumps(fixture, indent=2))
    write_agent(pytester, "agent_v2", limit=1000, amount=999)
    write_test(pytester, graph="agent_v2.py:graph", verdict="approved")
    run(pytester, "--graphtape-record=rewrite").assert_outcomes(passed=1)
    rewritten = json.loads(path.read_text())
    assert rewritten["final_state"]["verdict"] == "approved"  # it was re-recorded
    assert rewritten["redacted"]["when_recorded"] == 3


def test_rewrite_keeps_the_bytes_when_nothing_changed(pytester):
    before = recorded(pytester)
    run(pytester, "--graphtape-record=rewrite").assert_outcomes(passed=1)
    assert (pytester.path / "fixtures" / "runs" / "refund.json").read_bytes() == before


def test_ci_refuses_to_record(pytester, monkeypatch):
    write_agent(pytester)
    write_test(pytester)
    monkeypatch.setenv("CI", "true")
    result = run(pytester, "--graphtape-record=missing")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*graphtape: refusing to record fixtures with CI=true (--graphtape-record=missing)*"])
    assert not (pytester.path / "fixtures" / "runs" / "refund.json").exists()


def test_a_missing_fixture_fails_in_mode_none(pytester):
    write_agent(pytester)
    write_test(pytester)
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*graphtape: no fixture at {pytester.path.resolve() / 'fixtures' / 'runs' / 'refund.json'}: record it with `pytest --graphtape-record=missing`*"])
    assert not (pytester.path / "fixtures" / "runs" / "refund.json").exists()


def test_a_bad_record_mode_names_the_valid_ones(pytester):
    write_test(pytester)
    result = run(pytester, "--graphtape-record=sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown record mode 'sometimes': use one of 'none', 'missing', 'rewrite'*"])


def test_ignore_paths_and_state_keys_leave_volatile_state_out(pytester):
    recorded(pytester, extra=', ignore=["stamp"]', volatile=True)
    run(pytester).assert_outcomes(passed=1)

    write_test(pytester)
    strict = run(pytester)
    strict.assert_outcomes(failed=1)
    assert "FIRST step 1 node 'check': state divergence: state key 'stamp' differs" in strict.stdout.str()

    write_test(pytester, extra=', state_keys=["amount", "verdict"]')
    run(pytester).assert_outcomes(passed=1)


def test_check_false_returns_the_divergences(pytester):
    recorded(pytester)
    write_agent(pytester, "agent_v2", limit=1000)
    pytester.makepyfile(
        test_refund='''
import pytest


@pytest.mark.graphtape("fixtures/runs/refund.json", graph="agent_v2.py:graph")
def test_refund(graphtape_replay):
    result = graphtape_replay(check=False)
    first = result.first_divergence
    assert (first.kind, first.step, first.node) == ("route", 1, "check")
    assert result.final_state["verdict"] == "approved"
'''
    )
    run(pytester).assert_outcomes(passed=1)


def test_a_marker_without_graph_is_one_line(pytester):
    pytester.makepyfile(
        test_refund='''
import pytest


@pytest.mark.graphtape("fixtures/runs/refund.json")
def test_refund(graphtape_replay):
    graphtape_replay()
'''
    )
    result = run(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*needs graph='package.module:attr'*"])


def test_a_fixture_or_graph_that_cannot_load_fails_in_one_clean_message(pytester):
    """A damaged fixture, a missing attribute or a missing module fails the test with graphtape's
    message alone: no exception chain ("During handling...", "The above exception...") above it."""
    data = recorded(pytester)
    (pytester.path / "fixtures" / "runs" / "damaged.json").write_bytes(data[: len(data) // 2])
    pytester.makepyfile(
        test_refund='''
import pytest


@pytest.mark.graphtape("fixtures/runs/damaged.json", graph="agent.py:graph")
def test_damaged(graphtape_replay):
    graphtape_replay()


@pytest.mark.graphtape("fixtures/runs/refund.json", graph="agent.py:nosuch")
def test_no_attribute(graphtape_replay):
    graphtape_replay()


@pytest.mark.graphtape("fixtures/runs/refund.json", graph="graphtape_no_such_module:graph")
def test_no_module(graphtape_replay):
    graphtape_replay()
'''
    )
    result = run(pytester)
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    assert "During handling of the above exception" not in out and "The above exception was the direct cause" not in out, out
    # Each test's section holds its one message and nothing else.
    sections = dict(re.findall(r"^_+ (test_\w+) _+\n(.*?)(?=^_+ test_|^=+ short test summary)", out, flags=re.S | re.M))
    bodies = {name: [line for line in body.splitlines() if line.strip()] for name, body in sections.items()}
    assert [len(lines) for lines in bodies.values()] == [1, 1, 1], bodies
    assert re.fullmatch(r"graphtape: fixtures/runs/damaged\.json: .*damaged\.json is not valid JSON .*", bodies["test_damaged"][0])
    assert bodies["test_no_attribute"] == ["graphtape: fixtures/runs/refund.json: agent.py has no attribute 'nosuch'; graph-like names there: graph"]
    assert bodies["test_no_module"][0].startswith("graphtape: fixtures/runs/refund.json: no module named 'graphtape_no_such_module'")


def test_test_gen_writes_a_test_that_passes(pytester, tmp_path):
    from graphtape.recorder import Recorder
    from graphtape.tui.cli import main

    write_agent(pytester)
    from graphtape.replay.loading import load_graph

    graph = load_graph(str(pytester.path / "agent.py") + ":graph")
    db = tmp_path / "store.db"
    with Recorder(db) as rec:
        rec.attach(graph, name="refund case").invoke({"order_id": "A-1"})
        rec.flush()
    out = pytester.path / "tests" / "regressions"
    # pytester runs in its folder, as a user runs graphtape from the project root.
    code = main(["--db", str(db), "test-gen", "last", "--graph", "agent.py:graph", "-o", "tests/regressions"])
    assert code == 0
    assert (out / "refund-case.json").is_file()
    source = (out / "test_refund_case.py").read_text()
    assert "../../agent.py" in source  # paths relative to the test file: the pair can move with the project
    result = run(pytester, str(out))
    result.assert_outcomes(passed=1)


def test_record_mode_is_a_str_enum_with_a_validator():
    assert RecordMode.parse("rewrite") is RecordMode.REWRITE
    assert RecordMode.MISSING == "missing"
    assert not RecordMode.NONE.records
    with pytest.raises(ValueError, match="use one of 'none', 'missing', 'rewrite'"):
        RecordMode.parse("all")
    assert in_ci({"CI": "true"}) and in_ci({"CI": "1"}) and not in_ci({}) and not in_ci({"CI": "false"})


def test_a_relative_fixture_path_is_found_beside_the_test_file_wherever_pytest_starts(pytester):
    # Record the fixture at the rootdir, then move the test, its agent and its fixture into a
    # folder: the marker's relative path now only exists beside the test file.
    recorded(pytester)
    sub = pytester.path / "suite"
    (sub / "fixtures" / "runs").mkdir(parents=True)
    for name in ("test_refund.py", "agent.py", "fixtures/runs/refund.json"):
        (pytester.path / name).rename(sub / name)
    result = run(pytester, "suite/test_refund.py")
    result.assert_outcomes(passed=1)
    # Neither beside the test nor from the rootdir: both places are named.
    (sub / "fixtures" / "runs" / "refund.json").unlink()
    result = run(pytester, "suite/test_refund.py")
    result.assert_outcomes(failed=1)
    beside, root = sub / "fixtures" / "runs" / "refund.json", pytester.path / "fixtures" / "runs" / "refund.json"
    result.stdout.fnmatch_lines([f"*no fixture at {beside.resolve()} or {root.resolve()}*"])


def test_failure_messages_show_recorded_control_characters_as_text():
    """A failing fixture's message quotes recorded names and values; pytest writes it to the
    terminal and CI logs as it is, so escapes (OSC 52 sets the clipboard, OSC 0 the title),
    C1 controls and bidi overrides are shown as "?" (newlines and tabs stay)."""
    from graphtape.replay import pytest_plugin

    hostile = "call \x1b]52;c;ZWNobw==\x07 \x1b]0;TITLE\x07 \x9b2J \u202eevil\nnext\tline"
    with pytest.raises(pytest.fail.Exception) as failed:
        pytest_plugin._fail(f"graphtape: closest recorded call: {hostile}")
    text = str(failed.value)
    assert not any(c in text for c in "\x1b\x07\x9b\u202e"), repr(text)
    assert "call ?]52;c;ZWNobw==? ?]0;TITLE? ?2J ?evil\nnext\tline" in text
    from pathlib import Path

    source = Path(pytest_plugin.__file__).read_text(encoding="utf-8")
    assert source.count("pytest.fail(") == 1  # every failure goes through _fail


OTHER_AGENT = '''
from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    order_id: str
    verdict: str


builder = StateGraph(State)
builder.add_node("ok", lambda s: {"verdict": "fine"})
builder.add_node("explode", lambda s: {"verdict": "boom"})
builder.add_edge(START, "ok")
builder.add_edge("ok", "explode")
builder.add_edge("explode", END)
graph = builder.compile()
'''


def test_a_fixture_replayed_on_another_graph_asks_wrong_graph_and_offers_no_rewrite(pytester):
    recorded(pytester)
    pytester.makepyfile(other=OTHER_AGENT)
    write_test(pytester, graph="other.py:graph")
    result = run(pytester)
    result.assert_outcomes(failed=1)
    out = " ".join(result.stdout.str().split())
    assert "this fixture was recorded from a graph with nodes approve, check, escalate" not in out  # only what ran
    assert "this fixture was recorded from a graph with nodes check, escalate; the graph given (other.py:graph) has explode, ok: wrong graph?" in out
    assert "--graphtape-record=rewrite would overwrite the fixture" in out
    assert "re-record the fixture: pytest --graphtape-record=rewrite" not in out


@pytest.mark.parametrize("start", ["subfolder", "outside"])
def test_rewrite_refuses_a_fixture_folder_linked_out_of_the_rootdir_wherever_pytest_starts(pytester, monkeypatch, start):
    """The link check is made against pytest's rootdir, not the folder pytest was started from:
    from a subfolder or from outside the project, fixtures/runs linked elsewhere is not written through."""
    before = recorded(pytester)
    pytester.makeini("[pytest]\n")  # the project's root, wherever pytest is started
    elsewhere = pytester.path.parent / f"elsewhere-{start}"
    (pytester.path / "fixtures" / "runs").rename(elsewhere)
    (pytester.path / "fixtures" / "runs").symlink_to(elsewhere, target_is_directory=True)
    write_agent(pytester, limit=1000)  # today's code would change the fixture
    cwd = pytester.mkdir("sub") if start == "subfolder" else pytester.path.parent / f"away-{start}"
    cwd.mkdir(exist_ok=True)
    monkeypatch.chdir(cwd)
    result = run(pytester, "--graphtape-record=rewrite", str(pytester.path / "test_refund.py"))
    result.assert_outcomes(failed=1)
    out = " ".join(result.stdout.str().split())
    assert f"graphtape: cannot write fixtures/runs/refund.json: fixtures/runs is a link to {elsewhere.resolve()}, outside the project" in out
    assert "Traceback" not in out
    assert (elsewhere / "refund.json").read_bytes() == before


def test_rewrite_writes_through_a_link_that_stays_in_the_rootdir_from_a_subfolder(pytester, monkeypatch):
    """A fixtures folder linked to another folder of the project is the project's own choice:
    started from the subfolder holding the link, it leaves the current directory, not the project."""
    recorded(pytester)
    pytester.makeini("[pytest]\n")
    sub = pytester.mkdir("suite")
    for name in ("test_refund.py", "agent.py"):
        (pytester.path / name).rename(sub / name)
    (sub / "fixtures").mkdir()
    (sub / "fixtures" / "runs").symlink_to(pytester.path / "fixtures" / "runs", target_is_directory=True)
    write_agent(pytester, "suite/agent", limit=1000)
    write_test(pytester, verdict="approved")
    (pytester.path / "test_refund.py").rename(sub / "test_refund.py")
    monkeypatch.chdir(sub)
    result = run(pytester, "--graphtape-record=rewrite", "test_refund.py")
    result.assert_outcomes(passed=1)
    assert json.loads((pytester.path / "fixtures" / "runs" / "refund.json").read_bytes())["final_state"]["verdict"] == "approved"


def test_a_generated_test_in_a_folder_linked_out_of_the_project_is_not_rewritten_through_it(pytester, tmp_path):
    """test-gen's test names its fixture from its own folder as reached, not resolved: a tests
    folder linked out of the project is seen as a link by the rewrite's check, and refused."""
    from graphtape.recorder import Recorder
    from graphtape.replay.loading import load_graph
    from graphtape.tui.cli import main

    write_agent(pytester)
    pytester.makeini("[pytest]\n")
    db = tmp_path / "store.db"
    with Recorder(db) as rec:
        rec.attach(load_graph(str(pytester.path / "agent.py") + ":graph"), name="refund case").invoke({"order_id": "A-1"})
        rec.flush()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (pytester.path / "regressions").symlink_to(elsewhere, target_is_directory=True)
    assert main(["--db", str(db), "test-gen", "last", "--graph", "agent.py:graph", "-o", str(elsewhere)]) == 0
    before = (elsewhere / "refund-case.json").read_bytes()
    write_agent(pytester, limit=1000)
    result = run(pytester, "--graphtape-record=rewrite", "regressions")
    result.assert_outcomes(failed=1)
    assert "graphtape: cannot write regressions/refund-case.json: regressions is a link to" in " ".join(result.stdout.str().split())
    assert (elsewhere / "refund-case.json").read_bytes() == before


def test_tests_sharing_a_fixture_rewrite_it_once(pytester):
    """Three tests replay one fixture: ``--graphtape-record=rewrite`` re-records it once (a second
    rewrite would start from the first), and the summary says so once."""
    recorded(pytester)
    pytester.makepyfile(test_twice=TWICE)
    result = run(pytester, "--graphtape-record=rewrite", "test_twice.py", "test_refund.py")
    result.assert_outcomes(passed=3)
    assert result.stdout.str().count("rewrote fixtures/runs/refund.json") == 1


def test_the_re_record_hint_runs_from_where_pytest_was_started(pytester, monkeypatch):
    """Started in a subfolder, pytest names tests from there: the hint names the failing test so
    that pasting it in that folder runs it (a node id is the rootdir's)."""
    recorded(pytester)
    pytester.makeini("[pytest]\n")
    write_agent(pytester, "agent_v2", limit=1000, amount=999)
    write_test(pytester, graph="agent_v2.py:graph")
    monkeypatch.chdir(pytester.mkdir("sub"))
    result = run(pytester, str(pytester.path / "test_refund.py"))
    result.assert_outcomes(failed=1)
    out = " ".join(result.stdout.str().split())
    assert "re-record the fixture: pytest --graphtape-record=rewrite ../test_refund.py::test_refund" in out, out


def test_the_summary_names_what_workers_rewrote_under_xdist(pytester):
    """Under ``pytest -n 2`` the workers rewrite the fixtures and the controller prints the
    summary: it hears of them through the tests' reports."""
    recorded(pytester)
    pytester.makepyfile(test_twice=TWICE)
    result = run(pytester, "-n", "2", "--graphtape-record=rewrite", "test_twice.py", "test_refund.py")
    result.assert_outcomes(passed=3)
    assert result.stdout.str().count("rewrote fixtures/runs/refund.json") == 1, result.stdout.str()
