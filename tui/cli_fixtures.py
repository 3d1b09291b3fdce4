"""Regression-fixture commands: export, import, test-gen.

Registered on the main parser by ``tui.cli.build_parser``. ``export`` writes a
recorded run as a fixture file, ``import`` loads one into a store (to open
it in the TUI or replay it), ``test-gen`` writes the fixture and a pytest
file that replays it. ``export`` and ``import`` never load a graph; ``test-gen``
loads the one its ``--graph`` names (the user's own reference) as ``replay`` does,
so a test that could never load its graph is refused before it is written.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graphtape.tui.cli_args import RUN_HELP

Command = Callable[[str, str, Callable[[argparse.Namespace], int]], argparse.ArgumentParser]

DEFAULT_DIR = Path("fixtures") / "runs"


def register(command: Command) -> None:
    """Add ``export``, ``import`` and ``test-gen`` to the ``graphtape`` parser."""
    ex = command("export", "Write a recorded run as a regression fixture (JSON) that a test replays.", cmd_export)
    ex.add_argument("run", metavar="RUN", help=RUN_HELP)
    ex.add_argument("-o", "--output", metavar="FILE", help=f"where to write it (default: {DEFAULT_DIR.as_posix()}/<run name>.json; - for stdout)")
    ex.add_argument("--force", action="store_true", help="replace the file if it exists (a fixture is a test's expectation: not replaced by default)")
    _export_options(ex)

    im = command("import", "Load a fixture file into the store as a run, to open it in the TUI or replay it.", cmd_import)
    im.add_argument("file", metavar="FILE", help="a fixture written by graphtape export")
    im.add_argument("--json", action="store_true", help="print the imported run as JSON")

    tg = command("test-gen", "Export a run as a fixture and write a pytest file next to it that replays it.", cmd_test_gen)
    tg.add_argument("run", metavar="RUN", help=RUN_HELP)
    tg.add_argument("-o", "--output-dir", metavar="DIR", default=str(DEFAULT_DIR), help=f"folder for both files (default: {DEFAULT_DIR.as_posix()})")
    tg.add_argument("--name", metavar="NAME", help="base name of the files (default: from the run's name)")
    tg.add_argument("--force", action="store_true", help="overwrite an existing fixture and test file")
    _export_options(tg, graph_required=True)


def _export_options(p: argparse.ArgumentParser, graph_required: bool = False) -> None:
    p.add_argument(
        "--graph",
        metavar="REF",
        required=graph_required,
        help="the graph tests replay on: module:attr or path/to/file.py:attr"
        + (" (required: the test loads it when it runs, so it is yours to name, not the recording's)" if graph_required else " (default: the one recorded with the run)"),
    )
    p.add_argument("--steps", metavar="A:B", help="check only steps A to B (A:, :B or one step); the replay resumes from the step before A, so A comes after the run's first step (0 or later for a run started from its input)")
    p.add_argument("--redact", action="append", default=[], metavar="REGEX", help="also scrub text matching REGEX (on top of the recorder's rules); repeatable")
    p.add_argument("--redact-key", action="append", default=[], metavar="KEY", help="also hide values under keys containing KEY; repeatable")


def _writable_here(folder: Path) -> None:
    """Refuse, before any work, a folder reached through a link out of the project."""
    from graphtape.recorder.private_files import LinkLeadsOut, refuse_link_out
    from graphtape.replay.fixture import FixtureError

    try:
        refuse_link_out(folder / "file")
    except LinkLeadsOut as exc:
        raise FixtureError(f"cannot write in {folder}: {exc.strerror}") from None


def _export(args: argparse.Namespace) -> tuple[dict[str, Any], Any]:
    from graphtape.recorder import open_store
    from graphtape.recorder.errors import ReadTooLarge
    from graphtape.replay.fixture import MAX_FILE_BYTES, FixtureError, export_fixture
    from graphtape.replay.loading import check_ref

    if args.graph is not None:
        check_ref(args.graph)  # before the store is read or a file written; export only writes it down
    store = open_store(args.db, create=False)
    try:
        run = store.get_run(args.run)
        try:
            fixture = export_fixture(store, run.id, graph=args.graph, steps=args.steps, redact_patterns=args.redact, redact_keys=args.redact_key)
        except ValueError as exc:  # a bad --redact pattern
            raise FixtureError(str(exc)) from None
        except ReadTooLarge as exc:
            # The budget's own line blames the store; an honest long run with a large state meets it too.
            which = f"steps {args.steps} of run {run.id}" if args.steps else f"run {run.id}"
            raise FixtureError(
                f"{exc}; if {which} is honest, it is too large for one fixture (a test reads at most "
                f"{MAX_FILE_BYTES // (1024 * 1024)} MB): export fewer steps with --steps A:B"
            ) from None
    finally:
        store.close()
    return fixture, run


def _default_path(folder: Path, run: Any, name: str | None) -> Path:
    from graphtape.replay.testgen import slug

    return folder / f"{slug(name or run.name)}.json"


def _warn_machine_path(fixture: dict[str, Any]) -> None:
    from graphtape.replay.fixture import is_machine_path

    if is_machine_path(fixture.get("graph")):
        print(
            f"graphtape: warning: the fixture names the graph by an absolute path ({fixture['graph']}), which only works on this machine: "
            "run from your project root or pass --graph",
            file=sys.stderr,
        )


def _summary(fixture: dict[str, Any]) -> str:
    steps = fixture["steps"]
    calls = sum(len(s.get("calls") or []) for s in steps) + sum(len(s.get("calls") or []) for sub in fixture.get("subgraphs") or [] for s in sub["steps"])
    marks = len((fixture.get("redacted") or {}).get("in_this_file") or [])
    return f"steps {steps[0]['step']}..{steps[-1]['step']}, {calls} call{'s' if calls != 1 else ''}" + (f", {marks} redacted value{'s' if marks != 1 else ''}" if marks else "")


def cmd_export(args: argparse.Namespace) -> int:
    """Export a run as a fixture file (or to stdout with ``-o -``)."""
    from graphtape.replay.fixture import MAX_FILE_BYTES, dumps_fixture, write_fixture

    if args.output != "-":
        _writable_here(Path(args.output).parent if args.output else DEFAULT_DIR)
    fixture, run = _export(args)
    _warn_machine_path(fixture)
    if args.output == "-":
        data = dumps_fixture(fixture)
        if len(data) > MAX_FILE_BYTES:
            print(f"graphtape: warning: this fixture is {len(data) / (1024 * 1024):.0f} MB; a test reads at most {MAX_FILE_BYTES // (1024 * 1024)} MB (check fewer steps with --steps A:B)", file=sys.stderr)
        if sys.stdout.isatty():  # recorded text on a terminal: through the stream that shows controls as "?"
            sys.stdout.write(data.decode("utf-8"))
        else:
            sys.stdout.buffer.write(data)  # a pipe or a file gets the fixture byte for byte
        return 0
    path = Path(args.output) if args.output else _default_path(DEFAULT_DIR, run, None)
    size = write_fixture(path, fixture, overwrite=args.force)
    print(f"wrote {path} ({_kb(size)}; {_summary(fixture)}) from run {run.id}")
    print(f"replay it in a test: @pytest.mark.graphtape({path.as_posix()!r}, graph={fixture.get('graph') or 'module:attr'!r})")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Load a fixture into the store; importing the same file twice finds the same run."""
    import json

    from graphtape.recorder import open_store
    from graphtape.recorder.store import shown_url
    from graphtape.replay.fixture import import_fixture, read_fixture

    fixture = read_fixture(args.file)
    store = open_store(args.db, create=True)
    try:
        store.require_writable("import adds the fixture as a run")
        imported = import_fixture(store, fixture, label=args.file)
        url = shown_url(store.url)  # printed: never the password
    finally:
        store.close()
    if args.json:
        print(json.dumps({"run_id": imported.run_id, "name": imported.name, "graph": imported.graph, "steps": imported.steps, "calls": imported.calls, "already": imported.already, "db": url}, indent=2))
        return 0
    from graphtape.recorder.terminal_text import command_line, one_line

    verb = "already in the store as" if imported.already else "imported as"
    # The name is the fixture author's text: a line break in it must not print a line of its own.
    print(one_line(f"{args.file}: {verb} run {imported.run_id} ({imported.name}, {imported.steps} steps, {imported.calls} calls)"))
    # The fixture's graph field is the fixture author's text: offered only if it is a graph
    # reference, and quoted, so pasting the hint runs nothing else.
    valid = _is_graph_ref(imported.graph)
    graph = shlex.quote(imported.graph) if valid else "module:attr"
    print(f"open it: {command_line('graphtape', 'tui', imported.run_id)} · replay it: {command_line('graphtape', 'replay', imported.run_id, '--graph')} {graph}")
    if valid:
        print("(the fixture's graph reference is not loaded until you pass it yourself: check what it names first)")
    elif imported.graph:
        print(f"(the fixture's graph field {imported.graph[:80]!r} is not a module:attr or path/to/file.py:attr reference: name the graph yourself)")
    return 0


def _is_graph_ref(ref: str | None) -> bool:
    """Whether ``ref`` is a graph reference (``module:attr`` or ``path/file.py:attr``) and nothing more."""
    from graphtape.replay.loading import GraphLoadError, split_ref

    if not ref or any(not c.isprintable() for c in ref) or ref.startswith("-"):
        return False
    try:
        split_ref(ref)
    except GraphLoadError:
        return False
    return True


def cmd_test_gen(args: argparse.Namespace) -> int:
    """Export the fixture and write ``test_<name>.py`` next to it."""
    from graphtape.recorder.private_files import write_private
    from graphtape.replay.fixture import FixtureError, write_fixture
    from graphtape.replay.loading import load_graph
    from graphtape.replay.testgen import render_test, slug

    _writable_here(Path(args.output_dir))
    fixture, run = _export(args)
    load_graph(args.graph)  # replay's own loader: a test that could never load its graph is refused, nothing written
    _warn_machine_path(fixture)
    folder = Path(args.output_dir)
    fixture_path = _default_path(folder, run, args.name)
    test_path = folder / f"test_{slug(args.name or run.name).replace('-', '_')}.py"
    for existing in (test_path, fixture_path):
        if existing.exists() and not args.force:
            raise FixtureError(f"{existing} exists: pass --force to overwrite it, or --name to write another")
    size = write_fixture(fixture_path, fixture, overwrite=True)
    source = render_test(fixture, fixture_path, test_path, args.graph)
    try:
        write_private(test_path, source.encode("utf-8"), overwrite=True, mode=0o644)  # a link there is replaced, not followed
    except OSError as exc:
        raise FixtureError(f"cannot write {test_path}: {exc.strerror or exc}") from None
    print(f"wrote {fixture_path} ({_kb(size)}; {_summary(fixture)}) from run {run.id}")
    print(f"wrote {test_path}: run it with `pytest {test_path.as_posix()}`")
    return 0


def _kb(size: int) -> str:
    return f"{size / 1024:.1f} kB"
