"""Every ``graphtape`` command the README shows runs, as written, on the demo's store.

The commands come from the README's ``bash`` blocks, in order, run from a project folder
holding the demo agents and the store ``graphtape demo`` (the first command's end) made.
A replay may exit 1 (it diverged), a diff too (the runs differ); everything else exits 0, except ``graphtape tui``
without a terminal, which must say so in one line. ``--web`` runs until its URL is printed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GRAPHTAPE = Path(sys.executable).with_name("graphtape")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    commands = []
    for block in blocks:
        for line in block.splitlines():
            line = line.strip()
            if line.startswith("graphtape "):
                commands.append(line.split("  #", 1)[0].strip())
    return commands


def test_the_readme_opens_with_the_two_commands_and_ci_runs_the_second():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first, second = re.findall(r"```bash\n(.*?)\n```", text, flags=re.S)[:2]
    assert first.startswith("python3 -m venv .venv") and first.endswith(".venv/bin/graphtape demo")
    assert second.startswith("python3 -m venv .venv") and "pytest" in second
    assert second in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_every_readme_command_runs(tmp_path):
    shutil.copytree(ROOT / "fixtures" / "agents", tmp_path / "fixtures" / "agents")
    env = {k: v for k, v in os.environ.items() if k not in ("GRAPHTAPE_DB", "CI")}
    env["COLUMNS"] = "120"

    def run(argv: list[str], timeout: int = 300) -> subprocess.CompletedProcess:
        return subprocess.run([str(GRAPHTAPE), *argv], cwd=tmp_path, capture_output=True, text=True, timeout=timeout, env=env)

    demo = run(["demo"])  # the end of the README's first command
    assert demo.returncode == 0 and "demo:incident" in demo.stdout, demo.stderr
    commands = readme_commands()
    assert len(commands) >= 15
    for line in commands:
        argv = shlex.split(line)[1:]
        if argv[:1] == ["tui"] and "--web" in argv:
            # As written but on a free port: 8765 may be taken on the machine running the tests.
            port = str(_free_port())
            argv = [port if a == "8765" else a for a in argv]
            proc = subprocess.Popen([str(GRAPHTAPE), *argv], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            try:
                first = proc.stdout.readline()
            finally:
                proc.terminate()
                _, err = proc.communicate(timeout=15)
            assert f"serving the graphtape TUI at http://localhost:{port}/?token=" in first, f"{line}\n{err}"
            continue
        proc = run(argv)
        where = f"{line}\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}"
        assert "Traceback" not in proc.stderr, where
        if argv[:1] == ["tui"]:
            assert proc.returncode == 2 and proc.stderr == "graphtape: error: the TUI needs a terminal (try graphtape show RUN)\n", where
        elif argv[:1] == ["replay"]:
            assert proc.returncode in (0, 1) and ("matches the recording" in proc.stdout or "divergence" in proc.stdout), where
        elif argv[:1] == ["diff"]:
            assert proc.returncode in (0, 1) and ("first difference" in proc.stdout or "behaved the same" in proc.stdout or '"same"' in proc.stdout), where
        else:
            assert proc.returncode == 0, where
    assert (tmp_path / "fixtures" / "runs" / "incident-42.json").is_file()
    generated = list((tmp_path / "fixtures" / "runs").glob("test_*.py"))
    assert generated
    # The test test-gen wrote passes: the incident replays clean offline through the marker.
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *map(str, generated)], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout[-2000:]


def readme_python_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


# What the README's Python examples leave to the reader, taken from the demo: a builder, its
# inputs and config (recording), a recorded run and today's graph (replay and fork), and a
# project module holding the graph (the marker's myapp.agent:graph).
PLACEHOLDERS = '''
import sys
sys.path.insert(0, "fixtures/agents")
import reason_act
from graphtape import open_store

builder = reason_act.build_graph("happy").builder
inputs, config = reason_act.inputs_for("happy"), {}
graph = reason_act.build_graph("incident")
_store = open_store("graphtape.db")
run_id = next(r.id for r in _store.list_runs() if r.name == "demo:incident" and r.parent_run_id is None)
_store.close()
'''

def test_every_readme_python_example_runs_on_the_demo_store(tmp_path):
    blocks = readme_python_blocks()
    assert len(blocks) == 3
    recording, replaying, marker = blocks
    assert "Recorder()" in recording and "fork(" in replaying and "pytest.mark.graphtape" in marker
    shutil.copytree(ROOT / "fixtures" / "agents", tmp_path / "fixtures" / "agents")
    env = {k: v for k, v in os.environ.items() if k not in ("GRAPHTAPE_DB", "CI")}
    demo = subprocess.run([str(GRAPHTAPE), "demo", "--scenario", "incident"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert demo.returncode == 0, demo.stderr
    export = subprocess.run([str(GRAPHTAPE), "export", "last", "-o", "fixtures/runs/incident-42.json", "--steps", "0:5"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert export.returncode == 0, export.stderr

    # The recording and the replay/fork examples run as written, with the names they leave open filled in.
    for name, block in (("recording", recording), ("replaying", replaying)):
        script = tmp_path / f"readme_{name}.py"
        script.write_text(PLACEHOLDERS + "\n" + block)
        proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
        assert proc.returncode == 0, f"{name}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    runs = subprocess.run([str(GRAPHTAPE), "runs", "--json", "--limit", "0"], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    listed = json.loads(runs.stdout)
    assert any(r["name"] == "triage" and r["tags"] == ["prod"] for r in listed)  # the recording example's run
    assert any(r["parent_run_id"] and "replay-of:" in " ".join(r["tags"]) for r in listed)  # the replay's
    assert any(r["parent_run_id"] and "fork-of:" in " ".join(r["tags"]) for r in listed)  # and the fork's

    # The marker example is a test file of a project whose graph lives in myapp/agent.py.
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "agent.py").write_text("import sys\nsys.path.insert(0, 'fixtures/agents')\nimport reason_act\n\ngraph = reason_act.build_graph('incident')\n")
    (tmp_path / "test_incident.py").write_text(marker)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_incident.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env={**env, "PYTHONPATH": str(tmp_path)},
    )
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout[-3000:]
