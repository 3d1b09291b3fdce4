"""graphtape's pytest plugin: a recorded incident becomes a regression test.

::

    @pytest.mark.graphtape("fixtures/runs/incident-42.json", graph="myapp.agent:graph")
    def test_incident_42(graphtape_replay):
        result = graphtape_replay()            # strict replay against today's code
        assert result.final_state["answer"] == "..."

``graphtape_replay()`` imports the fixture into the session's temporary store and replays
it on the marker's graph with every tool and model call answered from the
fixture. A divergence fails the test with the first one rendered: the step,
the node, the kind, what was recorded, what happened instead and a diff.

Marker arguments: the fixture path (a relative path is looked for beside the
test file first, then from pytest's rootdir; a new recording goes to the
rootdir's), ``graph=`` (a ``module:attr`` or ``file.py:attr`` reference, or the
compiled graph itself: never read from the fixture), ``inputs=`` and
``config=`` (to record a missing fixture), ``ignore=`` (state paths such as
``messages.*.id``), ``state_keys=`` (compare only these keys) and ``mode=``
(``strict``, ``tools`` or ``live``).

``--graphtape-record`` takes a ``RecordMode``: ``none`` (default, and the only
one allowed with ``CI=true``), ``missing`` or ``rewrite``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from graphtape.recorder.terminal_text import command_line, one_line, printable
from graphtape.replay.record_mode import RecordMode, in_ci
from graphtape.replay.wrong_graph import wrong_graph

MARKER = "graphtape"
_MODE_KEY = pytest.StashKey[RecordMode]()
_WRITTEN_KEY = pytest.StashKey[list]()  # (what, shown, resolved path) this process wrote
_WRITTEN_PROPERTY = "graphtape_wrote"
_MARKER_KWARGS = ("graph", "inputs", "config", "ignore", "state_keys", "mode")
MAX_MORE = 5


def _fail(message: str) -> None:
    """Fail the test with ``message``, printable: it quotes recorded names and values, and pytest
    writes it to the terminal and to CI logs as it is (escape sequences included)."""
    pytest.fail(printable(message), pytrace=False)


def _record_mode(text: str) -> RecordMode:
    try:
        return RecordMode.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("graphtape", "graphtape regression fixtures")
    group.addoption(
        "--graphtape-record",
        dest="graphtape_record",
        type=_record_mode,
        default=None,
        metavar="MODE",
        help="none (default: replay only), missing (record fixtures that do not exist yet) or rewrite "
        "(re-record every fixture from today's code); refused with CI=true",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(path, graph=..., inputs=None, config=None, ignore=(), state_keys=None, mode='strict'): "
        "replay a graphtape regression fixture with the graphtape_replay fixture",
    )
    mode = config.getoption("graphtape_record", None) or RecordMode.NONE
    if mode.records and in_ci():
        raise pytest.UsageError(
            f"graphtape: refusing to record fixtures with CI=true (--graphtape-record={mode.value}): "
            "record them on your machine and commit them; CI only replays (drop the option)"
        )
    config.stash[_MODE_KEY] = mode
    config.stash[_WRITTEN_KEY] = []
    config.pluginmanager.register(_Told(), "graphtape-told")


def pytest_report_header(config: pytest.Config) -> str | None:
    mode = config.stash.get(_MODE_KEY, RecordMode.NONE)
    return f"graphtape: record mode {mode.value}" if mode.records else None


class _Told:
    """The fixtures the session's tests recorded or rewrote, for its summary: collected from each
    test's reports, so that under pytest-xdist the controller, which prints the summary, hears of
    what its workers wrote (a test's phases each carry them: kept once, in order)."""

    def __init__(self) -> None:
        self.lines: dict[str, None] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.lines.update(dict.fromkeys(value for name, value in report.user_properties if name == _WRITTEN_PROPERTY))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.lines:
            terminalreporter.section("graphtape")
            for line in self.lines:
                terminalreporter.write_line(line)


@dataclass(frozen=True)
class _Spec:
    """What a test's marker asks for."""

    path: Path
    shown: str
    graph: Any
    inputs: Any
    config: dict[str, Any] | None
    ignore: tuple[str, ...]
    state_keys: tuple[str, ...] | None
    mode: str
    nodeid: str
    rootdir: Path
    rerun: str = ""  # the test as pytest, started where this session was, names it (shell-quoted)
    tried: tuple[Path, ...] = ()  # where a relative fixture path was looked for, in order
    test_dir: Path | None = None


def _spec(request: pytest.FixtureRequest) -> _Spec:
    marker = request.node.get_closest_marker(MARKER)
    if marker is None:
        _fail(f"graphtape_replay needs @pytest.mark.{MARKER}(path, graph=...) on the test")
    if len(marker.args) != 1 or not isinstance(marker.args[0], (str, os.PathLike)):
        _fail(f"@pytest.mark.{MARKER} takes one positional argument, the fixture's path")
    unknown = sorted(set(marker.kwargs) - set(_MARKER_KWARGS))
    if unknown:
        _fail(f"@pytest.mark.{MARKER}: unknown argument(s) {', '.join(unknown)}; it takes {', '.join(_MARKER_KWARGS)}")
    root = Path(request.config.rootpath)
    path = Path(os.fspath(marker.args[0]))
    tried = [path] if path.is_absolute() else list(dict.fromkeys([Path(request.node.path).parent / path, root / path]))
    full = next((p for p in tried if p.exists()), tried[-1])
    shown = _within(full, root)
    graph = marker.kwargs.get("graph")
    if graph is None:
        _fail(f"@pytest.mark.{MARKER}({shown!r}) needs graph='package.module:attr' (or path/to/file.py:attr): the graph to replay on")
    config = marker.kwargs.get("config")
    if config is not None and not isinstance(config, dict):
        _fail(f"@pytest.mark.{MARKER}: config= must be a dict (a LangGraph config)")
    return _Spec(
        path=full,
        shown=shown,
        graph=graph,
        inputs=marker.kwargs.get("inputs"),
        config=config,
        ignore=_strings(marker.kwargs.get("ignore", ()), "ignore"),
        state_keys=None if marker.kwargs.get("state_keys") is None else _strings(marker.kwargs["state_keys"], "state_keys"),
        mode=str(marker.kwargs.get("mode", "strict")),
        nodeid=request.node.nodeid,
        rootdir=root,
        rerun=_rerun_id(request.node.nodeid, root, Path(request.config.invocation_params.dir)),
        tried=tuple(tried),
        test_dir=Path(request.node.path).parent,
    )


def _rerun_id(nodeid: str, root: Path, started: Path) -> str:
    """The test's node id from the folder pytest was started in (a node id is the rootdir's), quoted
    for a shell: what ``pytest ... <it>`` pasted there runs, whatever the test's name holds."""
    file, sep, rest = nodeid.partition("::")
    try:
        file = os.path.relpath(root / file, started)
    except ValueError:  # another drive (Windows): the full path
        file = str(root / file)
    return command_line(Path(file).as_posix() + sep + rest)


def _within(path: Path, root: Path) -> str:
    """``path`` as the project names it: from the rootdir as written (a linked folder keeps its
    name in the project), else resolved, else in full."""
    for p, r in ((Path(os.path.abspath(path)), Path(os.path.abspath(root))), (path.resolve(), root.resolve())):
        try:
            return p.relative_to(r).as_posix()
        except ValueError:
            pass
    return str(path)


def _strings(value: Any, name: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, Iterable) or not all(isinstance(v, str) for v in value):
        _fail(f"@pytest.mark.{MARKER}: {name}= must be a list of strings")
    return tuple(value)


class _SessionStore:
    """The store every fixture of a test session is imported into and replayed in, opened at first use.

    A new store per test cost each test its creation (the schema), its opening and its closing:
    a fifth of a test that replays a short fixture. Sharing one is safe: a fixture's run id comes
    from its content, so a fixture imported again is found, and each replay is a new run.
    """

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._factory = tmp_path_factory
        self._store: Any = None

    def get(self) -> Any:
        if self._store is None:
            from graphtape.recorder import SqlStore

            self._store = SqlStore(self._factory.mktemp("graphtape-replays") / "replays.db")
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


@pytest.fixture(scope="session")
def _graphtape_session_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_SessionStore]:
    holder = _SessionStore(tmp_path_factory)
    yield holder
    holder.close()


@pytest.fixture
def graphtape_replay(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, _graphtape_session_store: _SessionStore) -> Callable[..., Any]:
    """A function that replays the test's fixture and returns the ``ReplayResult``.

    Call it as ``graphtape_replay()``; keyword arguments override the marker
    (``ignore``, ``state_keys``, ``mode``) or pass through to ``replay``
    (``overrides``, ``mock_nodes``). ``check=False`` returns a diverged result
    instead of failing the test.
    """
    spec = _spec(request)
    mode = request.config.stash.get(_MODE_KEY, RecordMode.NONE)
    written = request.config.stash.get(_WRITTEN_KEY, [])

    def run(*, check: bool = True, **options: Any) -> Any:
        from graphtape.recorder.errors import GraphtapeError

        before = len(written)
        try:
            return _run(spec, mode, tmp_path_factory, _graphtape_session_store, written, check, options)
        except (GraphtapeError, ValueError) as exc:
            message = f"graphtape: {spec.shown}: {exc}"
        finally:
            # Told through the test's report: under pytest-xdist it reaches the controller, which
            # prints the summary (a worker's own list stays in the worker).
            request.node.user_properties.extend((_WRITTEN_PROPERTY, f"{what} {shown}") for what, shown, _ in written[before:])
        # Failed outside the handler: pytest would otherwise print the caught error and its causes
        # above the message, as a chain of tracebacks.
        _fail(message)

    return run


def _run(spec: _Spec, mode: RecordMode, tmp_path_factory: pytest.TempPathFactory, session: _SessionStore, written: list, check: bool, options: dict[str, Any]) -> Any:
    from graphtape.replay import replay
    from graphtape.replay.fixture import import_fixture, read_fixture

    allowed = {"ignore", "state_keys", "mode", "overrides", "mock_nodes"}
    unknown = sorted(set(options) - allowed)
    if unknown:
        _fail(f"graphtape_replay(): unknown argument(s) {', '.join(unknown)}; it takes check, {', '.join(sorted(allowed))}")
    ignore = tuple(options.pop("ignore", spec.ignore))
    state_keys = options.pop("state_keys", spec.state_keys)
    replay_mode = options.pop("mode", spec.mode)

    if not spec.path.exists():
        if not mode.records:
            looked = " or ".join(str(p.resolve()) for p in spec.tried) or str(spec.path)
            _fail(
                f"graphtape: no fixture at {looked}: record it with `pytest --graphtape-record=missing` "
                "(the marker needs inputs=...), or export a recorded run with `graphtape export RUN -o FILE`"
            )
        _record_live(spec, _write_target(spec), tmp_path_factory.mktemp("graphtape") / "record.db")
        written.append(("recorded", spec.shown, spec.path.resolve()))
    elif mode is RecordMode.REWRITE and not any(what == "rewrote" and same == spec.path.resolve() for what, _, same in written):
        # Tests sharing a fixture rewrite it once: a second rewrite would start from the first.
        _rewrite(spec, _write_target(spec), tmp_path_factory.mktemp("graphtape") / "rewrite.db", ignore=ignore, state_keys=state_keys)
        written.append(("rewrote", spec.shown, spec.path.resolve()))

    fixture = read_fixture(spec.path)
    graph = _graph(spec)
    # A fixture cut at step N checks steps up to N: what the graph does after is not recorded.
    cut = (fixture.get("slice") or {}).get("to")
    store = session.get()
    imported = import_fixture(store, fixture, label=spec.shown)
    result = replay(imported.run_id, graph, mode=replay_mode, store=store, ignore=ignore, state_keys=state_keys, to_step=cut, **options)
    if check and result.diverged:
        _fail(_failure(spec, result, wrong_graph(fixture, graph, _graph_ref(spec, "graph=") or "graph=")))
    return result


def _graph(spec: _Spec) -> Any:
    if isinstance(spec.graph, str):
        from graphtape.replay.loading import load_graph

        return load_graph(spec.graph, _graph_base(spec.graph, spec))
    return spec.graph


def _graph_base(ref: str, spec: _Spec) -> Path:
    """Where a ``file.py:attr`` reference is read from: beside the test file if it is there, else the rootdir."""
    file = ref.rpartition(":")[0]
    if file.endswith(".py") and spec.test_dir is not None and not Path(file).is_absolute() and (spec.test_dir / file).is_file():
        return spec.test_dir
    return spec.rootdir


def _graph_ref(spec: _Spec, fallback: str | None = None) -> str | None:
    return spec.graph if isinstance(spec.graph, str) else fallback


def _write_target(spec: _Spec) -> Path:
    """Where a recorded or rewritten fixture is written: its path with the folders' links resolved,
    once none of them leads out of pytest's rootdir (the project), wherever pytest was started from.

    The writer's own check is made against the current directory, which under pytest is wherever
    the user stood: from a subfolder or from outside the project, a ``fixtures/runs`` linked to
    ``~/.config`` was written through. Resolved here, the writer sees no link left to refuse.
    """
    from graphtape.recorder.private_files import link_leading_out

    link = link_leading_out(spec.path, spec.rootdir)
    if link is not None:
        _fail(
            f"graphtape: cannot write {spec.shown}: {_within(link, spec.rootdir)} is a link to {os.path.realpath(link)}, outside the project "
            f"({spec.rootdir}): graphtape does not write through it (name the folder it points to in the marker if that is where you mean)"
        )
    return Path(os.path.realpath(spec.path.parent)) / spec.path.name


def _record_live(spec: _Spec, target: Path, db: Path) -> None:
    """Run the graph live with the marker's inputs, record it, export the fixture."""
    from graphtape.recorder import Recorder
    from graphtape.replay.fixture import export_fixture, write_fixture

    if spec.inputs is None:
        _fail(f"graphtape: cannot record {spec.shown}: the marker has no inputs= to run the graph with")
    graph = _graph(spec)
    name = Path(spec.shown).stem
    with Recorder(db) as rec:
        app = rec.attach(graph, name=name, graph_ref=_graph_ref(spec))
        try:
            app.invoke(spec.inputs, dict(spec.config or {}))
        except Exception:  # noqa: BLE001 - a failing run is still a fixture (an incident, say)
            pass
        rec.flush()
        if rec.last_run_id is None:
            _fail(f"graphtape: cannot record {spec.shown}: the run was not recorded (see the warning above)")
        fixture = export_fixture(rec.store, rec.last_run_id, base_dir=spec.rootdir)
    write_fixture(target, fixture, overwrite=True)  # record modes missing/rewrite: writing is asked for


def _rewrite(spec: _Spec, target: Path, db: Path, *, ignore: tuple[str, ...], state_keys: Any) -> None:
    """Re-record a fixture from today's code, answering calls from it where they still match."""
    from graphtape.recorder import SqlStore
    from graphtape.replay import replay
    from graphtape.replay.fixture import StepRange, export_fixture, import_fixture, read_fixture, write_fixture

    old = read_fixture(spec.path)
    store = SqlStore(db)
    try:
        imported = import_fixture(store, old, label=spec.shown)
        result = replay(imported.run_id, _graph(spec), store=store, ignore=ignore, state_keys=state_keys, on_miss="live")
        if result.run_id is None:
            _fail(f"graphtape: cannot rewrite {spec.shown}: the replay was not recorded ({result.error or 'no run'})")
        cut = (old.get("slice") or {}).get("to")
        fixture = export_fixture(
            store,
            result.run_id,
            graph=_graph_ref(spec, old.get("graph")),
            steps=StepRange(None, cut) if cut is not None else None,
            origin=imported.run_id,
            base_dir=spec.rootdir,
        )
    finally:
        store.close()
    fixture["name"] = old["name"]
    # The re-recording starts from values already redacted (markers, often nothing left to scrub):
    # what was redacted when the run was first recorded still was.
    before = (old.get("redacted") or {}).get("when_recorded") if isinstance(old.get("redacted"), dict) else None
    if isinstance(before, int) and isinstance(fixture.get("redacted"), dict):
        fixture["redacted"]["when_recorded"] = max(before, int(fixture["redacted"].get("when_recorded") or 0))
    write_fixture(target, fixture, overwrite=True)  # record modes missing/rewrite: writing is asked for


def _failure(spec: _Spec, result: Any, wrong: str | None = None) -> str:
    """The test's failure message: the first divergence in full, the others by headline.

    ``wrong`` says the graph looks like another one than the fixture's: then it comes first,
    and re-recording (which would write that graph's behaviour into the fixture) is not offered.
    """
    n = len(result.divergences)
    lines = [f"graphtape: the replay of {spec.shown} diverged from the recording ({n} divergence{'s' if n != 1 else ''}):"]
    if wrong:
        lines.append(f"{wrong} Check graph= in the marker: --graphtape-record=rewrite would overwrite the fixture with this graph's behaviour.")
    lines.append(result.divergences[0].render())  # kept to its lines by render()
    rest = result.divergences[1:]
    for d in rest[:MAX_MORE]:
        lines.append(one_line(f"then {d.headline()}"))
    if len(rest) > MAX_MORE:
        lines.append(f"... and {len(rest) - MAX_MORE} more")
    if result.error:
        lines.append(one_line(f"the replay ended with {result.error}"))
    if not wrong:
        lines.append(f"if the new behaviour is intended, re-record the fixture: pytest --graphtape-record=rewrite {spec.rerun or command_line(spec.nodeid)}")
    return "\n".join(lines)
