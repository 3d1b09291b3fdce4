"""A corpus of hostile recordings through every command a person runs on one they received.

Each fixture plants code where text goes (docstring and comment breakouts, shell substitutions,
newlines, terminal sequences, markup) and where a name is read (the graph reference naming a
planted file or module, envelopes naming ``os.system``, ``subprocess.Popen``, ``builtins.eval``
or a planted module). Every payload, if it ever ran, would create the marker file. Each fixture
is imported, listed, shown (text, JSON, a step), exported, turned into a test with ``test-gen``,
refused by ``replay``/``fork`` without consent; then pytest collects and runs every generated
test. The marker must never exist, no output may carry a control character, and every command
either succeeds or fails in one line.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from graphtape.tui.cli import main

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "runs" / "demo-react.json"
SAFE_GRAPH = f"{ROOT / 'fixtures' / 'agents' / 'react_agent.py'}:graph"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def corpus(marker: Path, folder: Path) -> list[tuple[str, dict[str, Any]]]:
    """``(what, fixture)`` pairs: the demo fixture with one hostile change each."""
    py = f"__import__('os').system('touch {marker}')"
    sh = f"$(touch {marker})`touch {marker}`"
    planted = folder / "planted.py"
    planted.write_text(f"open({str(marker)!r}, 'w').close()\ngraph = None\n")
    (folder / "notes.py").write_text(f"open({str(marker)!r}, 'w').close()\ngraph = None\n")
    texts = {
        "docstring breakout": f'incident """; {py}; """',
        "single-quoted breakout": f"x'''; {py}; '''",
        "newline then code": f"line\nimport os; os.system('touch {marker}')\n#",
        "backslash breakout": f"\\\"\"\"\n{py}",
        "shell substitution": f"run {sh}; touch {marker} #",
        "terminal sequences": f"evil\x1b]52;c;dG91Y2g=\x07\x1b[2J\x9b31m\u202e{sh}",
        "markup": f"[/][link=file://{marker}]x[/link][bold]{sh}",
    }
    base = json.loads(DEMO.read_text())
    out: list[tuple[str, dict[str, Any]]] = []
    for what, text in texts.items():
        for field in ("name", "graph_name", "about"):
            f = copy.deepcopy(base)
            f[field] = text
            out.append((f"{what} in {field}", f))
        f = copy.deepcopy(base)
        f["final_state"] = {f"k {text}": 1, **f["final_state"]}
        out.append((f"{what} in a state key", f))
    for ref in (f"{planted}:graph", "notes:graph", "os:system", "subprocess:Popen", f"agent.py:graph; touch {marker} #", f"{sh}:graph"):
        f = copy.deepcopy(base)
        f["graph"] = ref
        out.append((f"graph reference {ref[:30]!r}", f))
    for envelope in (
        {"$t": "obj", "type": "os.system", "v": {"command": f"touch {marker}"}},
        {"$t": "lc.msg", "cls": "subprocess.Popen", "v": {"args": ["touch", str(marker)]}},
        {"$t": "obj", "type": "builtins.eval", "v": {"source": py}},
        {"$t": "enum", "type": "planted.Evil", "v": 1},
        {"$t": "pickle", "v": "gASVIAAAAAAAAACMAm9zlIwGc3lzdGVtlJOUjAV0b3VjaJSFlFKULg=="},
    ):
        f = copy.deepcopy(base)
        f["inputs"] = {"x": envelope, "y": [envelope]}
        out.append((f"envelope {envelope['$t']} {envelope.get('type') or envelope.get('cls') or ''}", f))
    return out


def test_a_hostile_corpus_runs_nothing_through_any_command(tmp_path, capsys, monkeypatch):
    marker = tmp_path / "pwned"
    monkeypatch.chdir(tmp_path)  # "notes:graph" would be found here
    cases = corpus(marker, tmp_path)
    assert len(cases) >= 35
    db = str(tmp_path / "received.db")
    gen = tmp_path / "generated"
    outcomes: dict[str, int] = {}
    commands = 0
    for i, (what, fixture) in enumerate(cases):
        path = tmp_path / f"hostile-{i}.json"
        path.write_text(json.dumps(fixture))
        for argv in (
            ["import", str(path)],
            ["runs"],
            ["show", "last"],
            ["show", "last", "--json"],
            ["show", "last", "--step", "1"],
            ["export", "last", "-o", str(tmp_path / f"out-{i}.json")],
            ["test-gen", "last", "--graph", SAFE_GRAPH, "-o", str(gen), "--name", f"hostile {i}"],
            ["replay", "last"],
            ["fork", "last", "--at", "0", "--set", "remaining_steps=1"],
        ):
            code = main(["--db", db, *argv])
            out = capsys.readouterr()
            commands += 1
            outcomes[argv[0]] = outcomes.get(argv[0], 0) + (code == 0)
            assert code in (0, 2), (what, argv, code)
            assert not CONTROL.search(out.out.replace("\n", "").replace("\t", "")), (what, argv)
            if code == 2:
                assert out.err.count("\n") == 1 and "Traceback" not in out.err, (what, argv, out.err)
            assert not marker.exists(), (what, argv)
    assert outcomes["import"] == len(cases) and outcomes["test-gen"] == len(cases)
    assert outcomes["replay"] == outcomes["fork"] == 0  # the recorded reference is never loaded unasked
    # The generated tests are collected and run: the recorded text in them is inert.
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GRAPHTAPE_DB")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(gen)], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert "error" not in proc.stdout.splitlines()[-1].lower(), proc.stdout[-3000:]
    assert len(list(gen.glob("test_*.py"))) == len(cases)
    assert not marker.exists()
    # The payloads are live: loading the planted file, as consent would, does create the marker.
    from graphtape.replay.loading import load_module_from_path

    load_module_from_path(tmp_path / "planted.py")
    assert marker.exists()
    print(f"\nhostile recordings tried: {len(cases)}, commands run on them: {commands} + pytest on {len(cases)} generated tests; code run: 0")
