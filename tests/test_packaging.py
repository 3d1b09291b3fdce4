"""graphtape installs as one import package, and a user's own modules never shadow it.

The wheel is built from this checkout and unpacked: its top-level names, its
entry points and its files are what ``pip install graphtape`` would put into
site-packages. Then a user's project with its own ``replay/``, ``recorder.py``
and ``tui.py`` runs pytest (with graphtape's plugin) and the CLI from its root,
against the unpacked wheel first and the development install second.
"""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE_FOLDERS = {"recorder": "graphtape/recorder", "replay": "graphtape/replay", "tui": "graphtape/tui"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # A copy without build leftovers, so the wheel is built from the tracked tree as CI sees it.
    src = out / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".venv", ".git", "build", "*.egg-info", "__pycache__", "*.db*", ".pytest_cache"))
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (built,) = out.glob("graphtape-*.whl")
    return built


@pytest.fixture(scope="module")
def unpacked(wheel, tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("site")
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(target)
    return target


def test_the_wheel_installs_exactly_one_top_level_package(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    top = {n.split("/")[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"graphtape"}
    assert "recorder" not in top and "replay" not in top and "tui" not in top


def test_the_wheel_carries_every_source_file_the_demo_agents_and_the_styles(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    for folder, installed in SOURCE_FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            assert f"{installed}/{path.relative_to(ROOT / folder).as_posix()}" in names, path
    assert {"graphtape/__init__.py", "graphtape/__main__.py", "graphtape/tui/app.tcss"} <= names
    for agent in (ROOT / "fixtures" / "agents").glob("*.py"):
        assert f"graphtape/fixtures/agents/{agent.name}" in names
    assert not any(n.startswith("graphtape/fixtures/runs/") for n in names)  # captured runs stay in the repository


def test_the_entry_points_live_under_graphtape(wheel):
    with zipfile.ZipFile(wheel) as zf:
        info = next(n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt"))
        parser = configparser.ConfigParser()
        parser.read_string(zf.read(info).decode())
    assert dict(parser["console_scripts"]) == {"graphtape": "graphtape.tui.cli:main"}
    assert dict(parser["pytest11"]) == {"graphtape": "graphtape.replay.pytest_plugin"}


SHADOWS = {
    "replay/__init__.py": "raise RuntimeError('the user project replay package was imported')\n",
    "recorder.py": "raise RuntimeError('the user project recorder.py was imported')\n",
    "tui.py": "raise RuntimeError('the user project tui.py was imported')\n",
    "graph.py": textwrap.dedent(
        """
        from typing import TypedDict

        from langgraph.graph import END, START, StateGraph


        class State(TypedDict, total=False):
            n: int


        def bump(state: State) -> dict:
            return {"n": state.get("n", 0) + 1}


        builder = StateGraph(State)
        builder.add_node("bump", bump)
        builder.add_edge(START, "bump")
        builder.add_edge("bump", END)
        graph = builder.compile()
        """
    ),
    "test_user.py": textwrap.dedent(
        """
        import sys

        import pytest


        def test_graphtape_plugin_is_loaded(request):
            assert request.config.pluginmanager.has_plugin("graphtape")
            assert request.config.getoption("graphtape_record") == "missing"


        @pytest.mark.graphtape("fixtures/runs/bump.json", graph="graph.py:graph", inputs={"n": 1})
        def test_bump(graphtape_replay):
            assert graphtape_replay().final_state["n"] == 2
            assert not {"recorder", "replay", "tui"} & set(sys.modules)
        """
    ),
}


def _user_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    for name, text in SHADOWS.items():
        path = project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return project


def _env(extra_path: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CI")}
    if extra_path is not None:
        env["PYTHONPATH"] = str(extra_path)
    return env


@pytest.mark.parametrize("install", ["wheel", "editable"])
def test_a_user_project_with_its_own_replay_recorder_and_tui_runs_pytest_and_the_cli(install, unpacked, tmp_path):
    project = _user_project(tmp_path)
    env = _env(unpacked if install == "wheel" else None)
    where = subprocess.run(
        [sys.executable, "-c", "import graphtape.recorder, graphtape.tui.demo as d; print(graphtape.recorder.__file__); print(d.agents_dir())"],
        cwd=project, env=env, capture_output=True, text=True, timeout=120,
    )
    assert where.returncode == 0, where.stderr
    expected_root = unpacked if install == "wheel" else ROOT
    assert all(Path(line).is_relative_to(expected_root) for line in where.stdout.split()), where.stdout

    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--graphtape-record=missing", "test_user.py"],
        cwd=project, env=env, capture_output=True, text=True, timeout=300,
    )
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
    assert "2 passed" in tests.stdout
    assert (project / "fixtures" / "runs" / "bump.json").is_file()

    db = project / "runs.db"
    demo = subprocess.run(
        [sys.executable, "-m", "graphtape", "demo", "--no-tui", "--db", str(db)],
        cwd=project, env=env, capture_output=True, text=True, timeout=300,
    )
    assert demo.returncode == 0, demo.stderr
    runs = subprocess.run(
        [sys.executable, "-m", "graphtape", "runs", "--db", str(db)],
        cwd=project, env=env, capture_output=True, text=True, timeout=120,
    )
    assert runs.returncode == 0 and "incident" in runs.stdout, runs.stdout + runs.stderr
    assert "Traceback" not in demo.stderr + runs.stderr


def test_the_public_api_is_one_import():
    import graphtape

    assert graphtape.__all__ == ["Recorder", "fork", "open_store", "register_type", "replay"]
    from graphtape import Recorder, fork, open_store, register_type, replay
    from graphtape.replay.runner import fork as runner_fork
    from graphtape.replay.runner import replay as runner_replay

    assert fork is runner_fork and callable(replay) and Recorder.__name__ == "Recorder"
    assert open_store.__module__.startswith("graphtape.recorder") and register_type.__module__.startswith("graphtape.recorder")
    # The name `replay` is both the function and the subpackage: neither shadows the other.
    import graphtape.replay.runner as runner

    assert runner.replay is runner_replay and graphtape.replay.ReplayMode.STRICT.value == "strict"
    for name in graphtape.__all__:
        assert getattr(graphtape, name).__doc__, f"graphtape.{name} needs a docstring"


def test_every_module_loads_once_under_its_graphtape_name():
    code = (
        "import sys, graphtape, graphtape.tui.cli, graphtape.replay.runner, graphtape.tui.app, graphtape.replay.fixture;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('recorder', 'replay', 'tui')))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
