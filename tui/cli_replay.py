"""Commands that re-run recordings: ``replay`` and ``fork``.

Registered on the main parser by ``tui.cli.build_parser``; like the rest of
the CLI, nothing heavy is imported until a command runs. ``replay`` exits 0
when the replay matches the recording and 1 with a divergence report when it
does not (2 for errors, as everywhere).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graphtape.tui.cli_args import RUN_HELP, step_number

Command = Callable[[str, str, Callable[[argparse.Namespace], int]], argparse.ArgumentParser]

EXIT_OK, EXIT_DIVERGED = 0, 1
MODES = ("strict", "tools", "live")


def register(command: Command) -> None:
    """Add ``replay`` and ``fork`` to the ``graphtape`` parser."""
    rp = command("replay", "Re-run a recorded run from a step with tools and models answered from the recording; exit 1 if it diverges.", cmd_replay)
    _common(rp)
    rp.add_argument("--from", dest="from_step", type=step_number, metavar="N", help="resume after step N (default: the run's first step, a full replay)")
    rp.add_argument("--mode", choices=MODES, default="strict", help="strict: answer every tool and model call, HTTP request and store read from the recording, send nothing (default); tools: answer tools and store reads, run models and HTTP live; live: mock nothing")
    rp.add_argument("--mock-node", action="append", default=[], metavar="NODE", help="serve NODE's recorded updates instead of running it (for nodes that do their own I/O); repeatable")
    rp.add_argument("--require-all-used", action="store_true", help="report recorded calls the replay never made")

    fk = command("fork", "Edit the state after a step and continue as a new run linked to the original.", cmd_fork)
    _common(fk)
    fk.add_argument("--at", dest="at_step", type=step_number, required=True, metavar="N", help="fork after step N")
    fk.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=JSON", help="state edit: a top-level key (or dotted path into it) and a JSON value; repeatable")
    fk.add_argument("--as-node", metavar="NODE", help="apply the edit as if NODE wrote it (through the reducers, like update_state)")
    fk.add_argument("--mode", choices=MODES, default="strict", help="which calls that still match the recording are answered from it (default: strict, all of them); a call the edit changed runs live in every mode")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", metavar="RUN", help=RUN_HELP)
    p.add_argument("--graph", metavar="REF", help="the graph to run: module:attr or path/to/file.py:attr (default: the one recorded with the run, once you agree to load it)")
    p.add_argument("--trust-recorded-graph", action="store_true", help="load the graph reference recorded with the run without asking (loading runs that file's code)")
    p.add_argument("--ns", default="", metavar="NS", help="a subgraph (its path, like child, or a namespace graphtape show prints): replay it from its own step")
    p.add_argument("--override", action="append", default=[], metavar="NAME=REF", help="answer tool (or model) NAME with the function at module:func instead of the recording; repeatable")
    p.add_argument("--ignore", action="append", default=[], metavar="PATH", help="state path to leave out of comparisons, like messages.*.id; repeatable")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _setup(args: argparse.Namespace) -> tuple[Any, str, Any, dict[str, Any]]:
    """Open the store, resolve the run, load the graph and the overrides (all errors one line)."""
    from graphtape.recorder import GraphtapeError, open_store
    from graphtape.replay.loading import GraphLoadError, load_callable, load_graph
    from graphtape.replay.module_hint import store_folder

    store = open_store(args.db, create=False)
    try:
        store.require_writable(f"{args.command} records the {args.command} as a new run")
        run = store.get_run(args.run)
    except GraphtapeError:
        store.close()
        raise
    ref = args.graph or run.graph_ref
    if not ref:
        store.close()
        from graphtape.replay.fixture_format import FIXTURE_TAG

        why = "was imported from a fixture, whose graph reference is not trusted" if FIXTURE_TAG in run.tags else "was recorded without a graph reference"
        raise GraphLoadError(f"run {run.id} {why}: pass --graph module:attr or path/to/file.py:attr")
    if not args.graph and _elsewhere(ref):
        store.close()
        raise GraphLoadError(
            f"run {run.id} names its graph by a path relative to the folder it was recorded in ({_shown(ref)}), "
            f"and {Path.cwd()} has no such file: run this from that folder, or pass --graph with the file's path from here"
        )
    if not args.graph and not args.trust_recorded_graph and not _agreed(run.id, ref):
        store.close()
        raise GraphLoadError(f"not loading the graph recorded with run {run.id} ({_shown(ref)}): loading runs its code; pass --graph {_shown(ref)} (or --trust-recorded-graph) to run it")
    overrides = {}
    for item in args.override:
        name, sep, target = item.partition("=")
        if not sep or not name or not target:
            store.close()
            raise GraphLoadError(f"bad --override {item!r}: use NAME=module:func")
        overrides[name] = load_callable(target)
    try:
        graph = load_graph(ref, near=store_folder(getattr(store, "url", None)))
    except GraphtapeError:
        store.close()
        raise
    return store, run.id, graph, overrides



def _elsewhere(ref: str) -> bool:
    """Whether a recorded ``path.py:attr`` is relative and names no file from here (the run was
    recorded in another working directory): said before any prompt offers to load it."""
    from graphtape.replay.loading import GraphLoadError, split_ref

    try:
        target, _attr = split_ref(ref)
    except GraphLoadError:
        return False  # the loader says what is wrong with it
    path = Path(target).expanduser()
    return target.endswith(".py") and not path.is_absolute() and not path.exists()


def _shown(ref: str) -> str:
    """A recorded reference as it may be shown and pasted: on one line (a line break in it could
    draw a forged question above the real one), control characters out, quoted for a shell."""
    import shlex

    from graphtape.tui.render import printable

    return shlex.quote(printable(" ⏎ ".join(ref.splitlines())))


def _agreed(run_id: str, ref: str) -> bool:
    """Ask on a terminal before loading a graph reference read from a recording; no terminal, no."""
    from graphtape.replay.loading import package_files_of, source_of

    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return False
    source = source_of(ref)
    where = f"the file {source}" if source else "a module graphtape cannot find without importing it"
    packages = package_files_of(ref, source)
    if packages:
        where += ", after " + ", ".join(str(p) for p in packages)
    print(f"run {run_id} names its graph as {_shown(ref)} ({where}).", file=sys.stderr)
    print("Loading it runs that code. Load it? [y/N] ", end="", file=sys.stderr, flush=True)
    try:
        answer = sys.stdin.readline()
    except (OSError, KeyboardInterrupt):
        return False
    return answer.strip().lower() in ("y", "yes")


def _print(result: Any, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False, default=str))
    else:
        print(result.report())


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay and report; exit 1 when the replay diverges."""
    from graphtape.replay import replay
    from graphtape.tui.cli_admin import progress_bar

    store, run_id, graph, overrides = _setup(args)
    try:
        with progress_bar(not args.json) as progress:
            result = replay(
                run_id, graph, args.from_step, args.mode, ns=args.ns, store=store, overrides=overrides,
                mock_nodes=args.mock_node, ignore=args.ignore, require_all_used=args.require_all_used, progress=progress,
            )
    finally:
        store.close()
    _print(result, args.json)
    return EXIT_DIVERGED if result.diverged else EXIT_OK


def cmd_fork(args: argparse.Namespace) -> int:
    """Fork with the edits applied; prints the new run and how it went."""
    from graphtape.replay import fork
    from graphtape.replay.edits import parse_edits

    store, run_id, graph, overrides = _setup(args)
    try:
        update = parse_edits(args.sets, lambda: store.state_at(run_id, args.at_step, args.ns))
        result = fork(run_id, graph, args.at_step, update, as_node=args.as_node, mode=args.mode, ns=args.ns, store=store, overrides=overrides, ignore=args.ignore)
    finally:
        store.close()
    _print(result, args.json)
    if not args.json:
        from graphtape.recorder.terminal_text import command_line

        print(f"fork recorded as run {result.run_id} (open it with: {command_line('graphtape', 'tui', result.run_id)})", file=sys.stderr)
    return EXIT_DIVERGED if result.error else EXIT_OK  # the edited run failed: say so in the exit code too
