"""A received store crafted by hand: text that is not UTF-8, names that carry line breaks.

Both were found by planting hostile text in every column of a real recording and running every
command on it: one cell of bytes that are not UTF-8 made every run of the store unreadable, and a
recorded call's name could start a line of its own in a replay's report.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import TypedDict

from langgraph.graph import END, START, StateGraph

from graphtape.recorder import Recorder
from graphtape.recorder.store.payloads import pack, unpack
from graphtape.replay.result import Divergence
from graphtape.tui.cli import main

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class S(TypedDict):
    n: int


def _recorded(db: Path) -> None:
    b = StateGraph(S)
    b.add_node("bump", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "bump")
    b.add_edge("bump", END)
    with Recorder(db) as rec:
        rec.attach(b.compile(), name="kept").invoke({"n": 0})
        rec.attach(b.compile(), name="crafted").invoke({"n": 1})


def test_text_that_is_not_utf8_reads_as_replacement_characters_not_as_a_damaged_store(tmp_path: Path, capsys) -> None:
    db = tmp_path / "received.db"
    _recorded(db)
    conn = sqlite3.connect(db)
    # Bytes no UTF-8 decoder takes, an escape sequence among them, in the text columns read most.
    conn.execute(
        "UPDATE runs SET name = CAST(X'637261667465641BFF5B324A' AS TEXT), thread_id = CAST(X'FF00FE' AS TEXT),"
        " error_message = CAST(X'C3' AS TEXT) WHERE name = 'crafted'"
    )
    conn.execute("UPDATE calls SET name = CAST(X'FFFE' AS TEXT)")
    conn.execute("UPDATE steps SET summary = CAST(X'FF1B5B324A' AS TEXT)")
    conn.commit()
    conn.close()
    for argv in (["runs"], ["runs", "--json"], ["show", "last"], ["show", "last", "--step", "1"], ["show", "last~1"], ["export", "last", "-o", str(tmp_path / "f.json")]):
        code = main(["--db", str(db), *argv])
        out = capsys.readouterr()
        assert code == 0, (argv, out.err)
        assert not CONTROL.search(out.out.replace("\n", "").replace("\t", "")), argv
    main(["--db", str(db), "runs"])
    listing = capsys.readouterr().out
    assert "kept" in listing and "crafted?\ufffd[2J" in listing  # the other run is there, this one shown as it reads


def test_a_recorded_call_name_cannot_start_a_line_of_a_replay_report() -> None:
    name = "lookup\r\nFAKE: replay matches the recording"
    d = Divergence(kind="extra", step=2, node="act", what="tool call 'lookup'", recorded=None, actual={"id": 1}, candidates=[{"name": name, "step": 2, "node": "act", "differs": ["arguments"], "arguments": {}}])
    lines = d.render().splitlines()
    assert not any(line.lstrip().startswith("FAKE") for line in lines), lines
    assert any(repr(name) in line for line in lines)
    plain = Divergence(kind="extra", step=2, node="act", what="x", recorded=None, actual=1, candidates=[{"name": "POST https://api.example/charge", "step": 1, "node": "n"}])
    assert "closest recorded call: POST https://api.example/charge at step 1" in plain.render()  # an ordinary name reads as it is


def _forge_names(db: Path) -> None:
    """Every recorded name of the newest run's step 1 (its node, summary, route) carries a line
    break and a line of its own; state keys too."""
    conn = sqlite3.connect(db)
    run_id = conn.execute("SELECT id FROM runs WHERE name = 'crafted'").fetchone()[0]
    forged = "bump\nFORGED: all checks passed"
    for row_id, payload in conn.execute("SELECT id, payload FROM steps WHERE run_id = ? AND step = 1", (run_id,)).fetchall():
        tree = unpack(payload)
        for task in tree.get("t") or []:
            task["node"] = forged
            task["w"] = {"n\nFORGED: key": 2}
        for route in tree.get("r") or []:
            route["src"] = forged
            route["dest"] = ["__end__\nFORGED: went nowhere"]
        conn.execute(
            "UPDATE steps SET payload = ?, nodes = ?, summary = ? WHERE id = ?",
            (pack(tree), forged, f"{forged} → __end__", row_id),
        )
    conn.commit()
    conn.close()


def test_a_recorded_name_cannot_start_a_line_of_show_or_diff(tmp_path: Path, capsys) -> None:
    db = tmp_path / "received.db"
    _recorded(db)
    _forge_names(db)
    for argv in (["show", "last"], ["show", "last", "--step", "1"], ["diff", "last~1", "last"]):
        main(["--db", str(db), *argv])
        out = capsys.readouterr().out
        assert "FORGED" in out, argv  # the names are shown...
        assert not [line for line in out.splitlines() if line.lstrip().startswith("FORGED")], (argv, out)  # ...each on its own line's end


def test_a_command_shown_to_paste_holds_recorded_text_as_one_quoted_argument(tmp_path: Path) -> None:
    """``graphtape show`` suggests commands to paste (``graphtape show RUN --ns NS``): a subgraph's
    node named ``x$(touch ...);y`` gave a namespace that, pasted, ran ``touch`` and another
    command. Each word of a suggested command is now quoted for the shell where it needs it."""
    import os
    import shlex
    import subprocess
    import sys

    from graphtape.recorder import open_store

    inner = StateGraph(S)
    inner.add_node("inner", lambda s: {"n": s["n"] + 1})
    inner.add_edge(START, "inner")
    inner.add_edge("inner", END)
    node = f"x$(touch {tmp_path / 'pasted'});y *"
    b = StateGraph(S)
    b.add_node(node, inner.compile())
    b.add_edge(START, node)
    b.add_edge(node, END)
    db = tmp_path / "received.db"
    with Recorder(db) as rec:
        rec.attach(b.compile(), name="nested").invoke({"n": 0})
    store = open_store(db)
    run = store.list_runs()[0]
    ns = next(n for n in store.namespaces(run.id) if n)
    store.close()
    assert ns.startswith(node)

    graphtape = str(Path(sys.executable).with_name("graphtape"))
    env = {**os.environ, "COLUMNS": "1000"}
    suggested = []
    for argv in (["show", "last"], ["show", "last", "--step", "1"], ["show", "last", "--ns", ns]):
        out = subprocess.run([graphtape, "--db", str(db), *argv], capture_output=True, text=True, timeout=120, env=env)
        assert out.returncode == 0, out.stderr
        suggested += [line[line.index("graphtape show"):].split(" / ")[0] for line in out.stdout.splitlines() if "graphtape show" in line]
    with_ns = [shlex.split(line) for line in suggested if "--ns" in line]
    assert with_ns and all(words[words.index("--ns") + 1] == ns for words in with_ns), suggested
    for line in suggested:
        words = shlex.split(line)
        assert words[:3] == ["graphtape", "show", run.id[:8]] and all(w in ("--ns", ns, "--step") or w.isdigit() for w in words[3:]), line
