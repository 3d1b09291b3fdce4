"""A store graphtape may only read: reading commands work, commands that write say "read-only" in one line.

SQLite is made read-only for real, in two ways a user meets:

- ``file``: the database file is 0444 in a folder anyone may write to;
- ``folder``: the folder (or the mount) holding it cannot be written, so its
  ``-wal`` and ``-shm`` files cannot be created.

Permission bits do not stop root. Run as root, the ``file`` case runs the
command as ``nobody`` (``setpriv``), and the ``folder`` case runs it in a
private mount namespace where the folder is bind-mounted read-only
(``unshare -m``; ``nobody`` and a 0555 folder where that is not allowed).
Run as another user, ``chmod`` is enough. Every command runs in a
subprocess, so the whole path (opening, reading, refusing) is the one a user
gets. PostgreSQL: a role granted only SELECT is a read-only store.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.parse
from pathlib import Path

import pytest
import sqlalchemy as sa
from textual.widgets import Static

from graphtape.recorder import Recorder, open_store
from graphtape.recorder.errors import ReadOnlyStore
from graphtape.recorder.writer import CLOSE_WAIT_S
from graphtape.replay import replay
from graphtape.replay.loading import load_graph
from graphtape.replay.runner import ReplayError
from graphtape.tui.app import build_app
from graphtape.tui.cli import main
from graphtape.tui.demo import record_demo
from graphtape.tui.screens.run import RunScreen
from graphtape.tui.screens.runs import RunsScreen

ROOT = Path(__file__).resolve().parents[1]
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
IS_ROOT = os.geteuid() == 0
# The commands that write, each with what it must say it needs.
WRITERS = {
    "replay": ["replay", "last", "--trust-recorded-graph"],
    "fork": ["fork", "last", "--at", "1", "--set", "x=1", "--trust-recorded-graph"],
    "import": ["import", "{fixture}"],
    "import-langgraph": ["import-langgraph", "{other_db}"],
    "gc": ["gc", "--older-than", "0d"],
    "migrate": ["migrate"],
    "demo": ["demo", "--no-tui", "--scenario", "happy"],
}


def _can_unshare() -> bool:
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount --bind -o ro /tmp /tmp"], capture_output=True)
    return probe.returncode == 0


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> dict[str, Path]:
    """A store with the demo's happy run, a fixture exported from it, and a second store to import from."""
    folder = tmp_path_factory.mktemp("ro-source")
    db = folder / "runs.db"
    record_demo(str(db), "happy")
    assert main(["--db", str(db), "export", "last", "-o", str(folder / "happy.json")]) == 0
    other = folder / "other.db"
    shutil.copy(db, other)
    return {"db": db, "fixture": folder / "happy.json", "other_db": other}


class ReadOnlyCopy:
    """A copy of the source store made read-only one way (``kind``), and a way to run graphtape on it."""

    def __init__(self, kind: str, source: dict[str, Path], *, killed: bool = False) -> None:
        self.kind = kind
        # Under /tmp, not pytest's 0700 folder, so that `nobody` can reach it.
        self.base = Path(tempfile.mkdtemp(prefix="graphtape-ro-"))
        self.base.chmod(0o755)
        self.folder = self.base / "store"
        self.folder.mkdir()
        self.db = self.folder / "runs.db"
        shutil.copy(source["db"], self.db)
        if killed:  # its run as a recorder that died would have left it: running, its process gone
            gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
            engine = sa.create_engine(f"sqlite:///{self.db}")
            with engine.begin() as conn:
                conn.execute(sa.text("UPDATE runs SET status = 'running', ended_at = NULL, owner_host = :h, owner_pid = :p"), {"h": socket.gethostname(), "p": int(gone.stdout)})
            engine.dispose()
        self.extras = self.base / "extras"  # what commands read besides the store: readable by anyone
        self.extras.mkdir()
        for name in ("fixture", "other_db"):
            shutil.copy(source[name], self.extras / source[name].name)
            (self.extras / source[name].name).chmod(0o644)
        self.fixture, self.other_db = self.extras / source["fixture"].name, self.extras / source["other_db"].name
        self.db.chmod(0o644)
        self.prefix: list[str] = []
        if kind == "file":
            self.folder.chmod(0o777)
            self.db.chmod(0o444)
            self.prefix = NOBODY if IS_ROOT else []
        elif IS_ROOT and _can_unshare():
            # A real read-only mount, seen only by the command's own mount namespace.
            self.prefix = ["unshare", "-m", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', str(self.folder)]
        else:
            self.folder.chmod(0o555)
            self.prefix = NOBODY if IS_ROOT else []
        self.before = self.snapshot()

    def snapshot(self) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in sorted(self.folder.iterdir())}

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        args = tuple(a.format(fixture=self.fixture, other_db=self.other_db) for a in args)
        cmd = [*self.prefix, sys.executable, "-m", "graphtape.tui.cli", "--db", str(self.db), *args]
        env = {**os.environ, "HOME": str(self.extras), "COLUMNS": "200"}
        return subprocess.run(cmd, capture_output=True, text=True, cwd=self.extras, env=env, timeout=120)

    def python(self, source: str) -> subprocess.CompletedProcess:
        script = self.extras / "script.py"
        script.write_text(source)
        script.chmod(0o644)
        env = {**os.environ, "HOME": str(self.extras)}
        return subprocess.run([*self.prefix, sys.executable, str(script), str(self.db)], capture_output=True, text=True, cwd=self.extras, env=env, timeout=120)

    def cleanup(self) -> None:
        for p in [self.base, *self.base.rglob("*")]:
            try:
                p.chmod(0o755 if p.is_dir() else 0o644)
            except OSError:
                pass
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(params=["file", "folder"])
def ro(request, source):
    store = ReadOnlyCopy(request.param, source)
    yield store
    store.cleanup()


def test_the_setup_really_cannot_write(ro):
    """The premise: a plain SQLite write on this store fails as the command would run it."""
    out = ro.python(
        "import sqlite3, sys\n"
        "try:\n"
        "    c = sqlite3.connect(sys.argv[1]); c.execute(\"INSERT INTO graphtape_meta VALUES ('probe', 'x')\"); c.commit(); print('wrote')\n"
        "except sqlite3.Error as exc:\n"
        "    print('refused:', exc)\n"
    )
    assert out.stdout.startswith("refused:"), (ro.kind, out.stdout, out.stderr)


def test_reading_commands_read_it_and_leave_nothing_behind(ro):
    runs = ro.cli("runs", "--json")
    assert runs.returncode == 0, runs.stderr
    (run,) = json.loads(runs.stdout)
    table = ro.cli("runs")
    assert table.returncode == 0 and run["id"] in table.stdout, table.stderr
    show = ro.cli("show", "last")
    assert show.returncode == 0 and f"run {run['id']}" in show.stdout, show.stderr
    step = ro.cli("show", "last", "--step", "1", "--json")
    assert step.returncode == 0 and json.loads(step.stdout)["step"]["step"] == 1, step.stderr
    for args in (["stats"], ["export", "last", "-o", "-"], ["diff", "last", "last"], ["gc", "--older-than", "0d", "--dry-run"]):
        done = ro.cli(*args)
        assert done.returncode == 0 and "error" not in done.stderr, (args, done.stderr)
    assert "would delete 1 run(s)" in ro.cli("gc", "--older-than", "0d", "--dry-run").stdout
    # No -wal or -shm was created, and the database is byte for byte what it was.
    assert ro.snapshot() == ro.before


def test_a_killed_run_shows_as_killed_though_the_store_cannot_be_marked(source):
    ro = ReadOnlyCopy("folder", source, killed=True)
    try:
        done = ro.cli("runs", "--json")
        assert done.returncode == 0, done.stderr
        (run,) = json.loads(done.stdout)
        assert (run["status"], run["status_reason"]) == ("interrupted", "killed")
        assert run["ended_at"] is not None and run["step_count"] > 0
        assert "interrupted (killed)" in ro.cli("show", "last").stdout
        assert json.loads(ro.cli("runs", "--json", "--status", "running").stdout) == []
        (killed,) = json.loads(ro.cli("runs", "--json", "--status", "interrupted").stdout)  # filtered as shown
        assert killed["id"] == run["id"]
        assert json.loads(ro.cli("stats", "--json").stdout)["runs_by_status"] == {"interrupted": 1}  # counted as shown
        assert ro.snapshot() == ro.before  # shown, not stored
    finally:
        ro.cleanup()


@pytest.mark.parametrize("command", sorted(WRITERS))
def test_commands_that_write_say_read_only_in_one_line(ro, command):
    done = ro.cli(*WRITERS[command])
    assert done.returncode == 2, (command, done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1, (command, done.stderr)
    line = done.stderr.strip()
    assert line.startswith("graphtape: error: the store ") and " is read-only: " in line, line
    assert command.split("-")[0] in line  # it names what needed to write
    for bad in ("OperationalError", "please report", "no run matches", "unable to open"):
        assert bad not in done.stdout + done.stderr
    assert ro.snapshot() == ro.before


PILOT = textwrap.dedent(
    """
    import asyncio, json, sys
    from graphtape.tui.app import build_app
    from graphtape.tui.screens.run import RunScreen

    async def main():
        app = build_app(sys.argv[1], "last")
        async with app.run_test(size=(120, 36)) as pilot:
            for _ in range(100):
                await pilot.pause(0.05)
                if isinstance(app.screen, RunScreen) and app.screen.payload is not None:
                    break
            header = str(app.screen.query_one("#run-header").render())
            await pilot.press("g", "r")
            await pilot.pause(0.2)
            await pilot.press("f")
            await pilot.pause(0.2)
            print(json.dumps({
                "screen": type(app.screen).__name__,
                "header": header,
                "notes": [[n.title, n.message] for n in app._notifications],
                "read_only": app.store.read_only,
            }))

    asyncio.run(main())
    """
)


def test_the_tui_opens_it_and_refuses_replay_and_fork_with_a_notification(ro):
    done = ro.python(PILOT)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["read_only"] and seen["screen"] == "RunScreen"  # no prompt opened, nothing crashed
    assert "demo:happy" in seen["header"]
    titles = [t for t, _ in seen["notes"]]
    messages = [m for _, m in seen["notes"]]
    assert titles == ["Read-only store", "Read-only store"]
    assert "is read-only: replay records a new run" in messages[0] and "is read-only: fork records a new run" in messages[1]
    assert ro.snapshot() == ro.before


# -- PostgreSQL: a role granted only SELECT --------------------------------------------------------


def _schema_of(url: str) -> str:
    return urllib.parse.unquote(url).split("search_path=")[1].split("&")[0]


def _as_role(url: str, role: str) -> str:
    return sa.engine.make_url(url).set(username=role).render_as_string(hide_password=False)


@pytest.fixture
def pg_roles(pg_url):
    """The store at ``pg_url`` with the demo's happy run, and a way to make roles that may only do some things."""
    record_demo(pg_url, "happy")
    engine = sa.create_engine(pg_url)
    schema = _schema_of(pg_url)
    made: list[str] = []

    def role(*grants: str) -> str:
        name = f"graphtape_ro_{os.urandom(4).hex()}"
        with engine.begin() as conn:
            conn.execute(sa.text(f'CREATE ROLE "{name}" LOGIN'))
            conn.execute(sa.text(f'GRANT USAGE ON SCHEMA "{schema}" TO "{name}"'))
            conn.execute(sa.text(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{name}"'))
            for grant in grants:
                conn.execute(sa.text(grant.format(schema=f'"{schema}"', role=f'"{name}"')))
        made.append(name)
        return _as_role(pg_url, name)

    yield pg_url, role
    with engine.begin() as conn:
        for name in made:
            conn.execute(sa.text(f'DROP OWNED BY "{name}"'))
            conn.execute(sa.text(f'DROP ROLE "{name}"'))
    engine.dispose()


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_select_only_postgresql_role_reads_and_refuses_writes(pg_roles, capsys, tmp_path):
    owner_url, role = pg_roles
    url = role()
    store = open_store(url)
    try:
        assert store.read_only
        (run,) = store.list_runs()
        assert store.get_run(run.id).step_count == len(store.list_steps(run.id))
        with pytest.raises(ReadOnlyStore, match="is read-only: gc deletes runs"):
            store.require_writable("gc deletes runs")
    finally:
        store.close()
    owner = open_store(owner_url)
    try:
        assert not owner.read_only
    finally:
        owner.close()
    asked = open_store(owner_url, read_only=True)  # read-only on request: the server refuses writes too
    try:
        assert asked.read_only and asked.get_run("last").id == run.id
        with pytest.raises(sa.exc.DBAPIError, match="read-only transaction"):
            with asked.engine.begin() as conn:
                conn.execute(sa.text("DELETE FROM runs"))
    finally:
        asked.close()
    code, out, err = run_cli(capsys, "--db", url, "runs", "--json")
    assert code == 0 and json.loads(out)[0]["id"] == run.id, err
    code, out, err = run_cli(capsys, "--db", url, "show", "last")
    assert code == 0 and f"run {run.id}" in out, err
    assert run_cli(capsys, "--db", owner_url, "export", "last", "-o", str(tmp_path / "happy.json"))[0] == 0
    commands = {**WRITERS, "import": ["import", str(tmp_path / "happy.json")], "import-langgraph": ["import-langgraph", owner_url]}
    commands.pop("migrate")  # migrate reads the version first: at v4 it has nothing to write
    for name, args in commands.items():
        code, out, err = run_cli(capsys, "--db", url, *args)
        assert code == 2 and err.count("\n") == 1 and " is read-only: " in err, (name, out, err)
        assert "password" not in err and "OperationalError" not in err and "ProgrammingError" not in err


async def test_the_tui_on_a_select_only_role_refuses_replay_and_fork(pg_roles):
    _, role = pg_roles
    app = build_app(role())
    async with app.run_test(size=(120, 36)) as pilot:
        for _ in range(100):
            await pilot.pause(0.05)
            if isinstance(app.screen, RunsScreen) and app.screen.runs:
                break
        assert "(read-only)" in str(app.screen.query_one("#runs-title", Static).render())
        app.open_run(app.screen.runs[0].id)
        for _ in range(100):
            await pilot.pause(0.05)
            if isinstance(app.screen, RunScreen) and app.screen.payload is not None:
                break
        await pilot.press("g", "r")
        await pilot.pause(0.1)
        await pilot.press("f")
        await pilot.pause(0.1)
        assert isinstance(app.screen, RunScreen)
        notes = [(n.title, n.message) for n in app._notifications]
        assert [t for t, _ in notes] == ["Read-only store", "Read-only store"]
        assert all(" is read-only: " in m for _, m in notes)


def test_a_replay_whose_run_cannot_be_written_says_so(pg_roles, capsys):
    """A role that may insert runs but not their facets (filled by a trigger): every write of the replay fails."""
    owner_url, role = pg_roles
    url = role(
        "GRANT INSERT, UPDATE ON {schema}.runs, {schema}.steps, {schema}.calls, {schema}.blobs TO {role}",
        "GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}",
    )
    store = open_store(url)
    try:
        assert not store.read_only  # it may insert runs: the refusal comes from the write itself
        run = store.get_run("last")
        started = time.monotonic()
        with pytest.raises(ReplayError) as caught:
            replay(run.id, load_graph(run.graph_ref), store=store)
        # Said at once: a missing grant does not pass while the recorder's close would retry it.
        assert time.monotonic() - started < CLOSE_WAIT_S
        assert str(caught.value).startswith("could not record the replay: ")
        assert "permission denied for table run_facets" in str(caught.value)
    finally:
        store.close()
    code, out, err = run_cli(capsys, "--db", url, "replay", "last", "--trust-recorded-graph")
    assert code == 2
    last = err.strip().splitlines()[-1]
    assert last.startswith("graphtape: error: could not record the replay: ") and "no run matches" not in err, err
    owner = open_store(owner_url)
    try:
        assert [r.id for r in owner.list_runs()] == [run.id]  # nothing half-written
    finally:
        owner.close()


def test_read_only_on_request_reads_a_writable_store_and_creates_nothing(tmp_path):
    """``open_store(read_only=True)`` on a store that could be written: reads, refuses writes, leaves no file beside it."""
    db = tmp_path / "runs.db"
    record_demo(str(db), "happy")
    store = open_store(db, read_only=True)
    try:
        assert store.read_only and len(store.list_runs()) == 1
        with pytest.raises(ReadOnlyStore):
            store.require_writable("a test writes")
    finally:
        store.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.db"]  # the read-only opening created nothing
    with Recorder(db) as rec:
        assert not rec.store.read_only
