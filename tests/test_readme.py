"""Every ``graphtape`` command the README shows runs, as written, on the demo's store.

The commands come from the README's ``bash`` blocks, in order, run from a project folder
holding the demo agents and the store ``graphtape demo`` (the first command's end) made.
A replay may exit 1 (it diverged), a diff too (the runs differ); everything else exits 0, except ``graphtape tui``
without a terminal, which must say so in one line. ``--web`` runs until its URL is printed.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GRAPHTAPE = Path(sys.executable).with_name("graphtape")


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
            proc = subprocess.Popen([str(GRAPHTAPE), *argv], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            try:
                first = proc.stdout.readline()
            finally:
                proc.terminate()
                proc.wait(timeout=15)
            assert "serving the graphtape TUI at http://localhost:8765/?token=" in first, line
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
