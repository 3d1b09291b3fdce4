"""The ``graphtape`` command line: record the demo, list runs, show a run or one of its steps.

Parsing, dispatch and error handling live here; the work is in ``tui.demo``,
``tui.views`` and ``tui.render``. Importing this module loads neither Textual
nor LangGraph: each command imports what it needs when it runs.

Exit codes: 0 ok, 1 reserved for "replay diverged" and "the runs differ", 2 error (one line on
stderr, traceback with ``--debug``), 130 interrupted, 141 output pipe closed.
"""

from __future__ import annotations

import argparse
import io
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from graphtape.tui.cli_args import RUN_HELP, non_negative, step_number

__all__ = ["build_parser", "main"]

EXIT_OK = 0
EXIT_DIVERGED = 1  # reserved for `graphtape replay` (diverged) and `graphtape diff` (the runs differ)
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141

RUN_STATUSES = ("running", "ok", "error", "interrupted", "incomplete")
DEFAULT_LIMIT = 50


# -- parsing ------------------------------------------------------------------


def _version() -> str:
    # The package's own constant (pyproject reads it): importlib.metadata would cost every command ~20 ms.
    from graphtape import __version__

    return __version__


def _db_value(text: str) -> str:
    """``--db``, refused when empty: an empty path would name the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError("the value is empty: give a SQLite file path or a SQLAlchemy URL, or leave --db out for $GRAPHTAPE_DB, else ./graphtape.db")
    return text


def _global_options(parser: argparse.ArgumentParser, *, on_subcommand: bool) -> None:
    # On subcommands the defaults are SUPPRESS, so `graphtape --db X runs` is not undone by `runs`.
    keep = argparse.SUPPRESS if on_subcommand else None
    parser.add_argument(
        "--db",
        metavar="URL|PATH",
        type=_db_value,
        default=keep,
        help="store to use: a SQLite file or a SQLAlchemy URL (default: $GRAPHTAPE_DB, else ./graphtape.db)",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS if on_subcommand else False,
        help="show the traceback when something fails",
    )


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming what to fix, the closest valid word, and
    where help is (not the usage dump)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}{_meant_choice(self, message)} (see {self.prog} --help)\n")

    def unrecognized(self, extra: Sequence[str], given: argparse.Namespace | None = None) -> NoReturn:
        """Words no option of this command takes: said by this command (whose --help lists its
        options), with the option a mistyped flag was closest to."""
        self.error("unrecognized arguments: " + " ".join(extra) + (_meant_flag(self, extra) or _meant_word(self, extra, given)))


def _meant_choice(parser: argparse.ArgumentParser, message: str) -> str:
    """``; did you mean 'show'?`` for an invalid choice close to a valid one (a command, a mode)."""
    import ast
    import difflib
    import re

    found = re.search(r"invalid choice: ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")", message)
    if found is None:
        return ""
    try:
        value = ast.literal_eval(found.group(1))
    except (ValueError, SyntaxError):
        return ""
    choices = [str(c) for action in parser._actions if action.choices for c in action.choices]
    close = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.7)
    return f"; did you mean {close[0]!r}?" if close else ""


def _meant_flag(parser: argparse.ArgumentParser, extra: Sequence[str]) -> str:
    """``; did you mean --search?`` for the first mistyped flag close to one the command takes."""
    import difflib

    flags = [o for action in parser._actions for o in action.option_strings if o.startswith("--")]
    for word in extra:
        if word.startswith("--"):
            close = difflib.get_close_matches(word.partition("=")[0], flags, n=1, cutoff=0.7)
            if close:
                return f"; did you mean {close[0]}?"
    return ""


# A number after the run is the step a newcomer means: `show last 4`, `replay last 2`.
_STEP_FLAG = {"show": ("--step", "step"), "replay": ("--from", "from_step")}


def _meant_word(parser: argparse.ArgumentParser, extra: Sequence[str], given: argparse.Namespace | None) -> str:
    """``; did you mean --step 4?`` for a step number given without its flag, and the command that
    shows one run for a run given to ``runs`` (which lists them all)."""
    import re

    from graphtape.recorder.terminal_text import command_line

    command = parser.prog.rpartition(" ")[2]
    word = extra[0] if extra else ""
    if not word or word.startswith("--"):
        return ""  # a word after an unknown flag is that flag's value, not a run or a step
    if command in _STEP_FLAG and re.fullmatch(r"-?[0-9]+", word):
        flag, dest = _STEP_FLAG[command]
        return "" if getattr(given, dest, None) is not None else f"; did you mean {flag} {word}?"
    if command == "runs" and not word.startswith("-"):
        return f"; runs lists every run and takes no run: to see one, {command_line('graphtape', 'show', word)}"
    return ""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every command (also used by the help tests)."""
    parser = _Parser(
        prog="graphtape",
        description="A flight recorder for LangGraph agents: record runs, then inspect them step by step.",
        epilog="Start with `graphtape demo`, then `graphtape show last`.",
    )
    parser.add_argument("--version", action="version", version=f"graphtape {_version()}")
    _global_options(parser, on_subcommand=False)
    common = argparse.ArgumentParser(add_help=False)
    _global_options(common, on_subcommand=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands", parser_class=_Parser)

    def command(name: str, summary: str, func: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=summary, description=summary, parents=[common])
        p.set_defaults(func=func)
        return p

    demo = command("demo", "Record the bundled demo agents (an incident among them) and open the result.", cmd_demo)
    demo.add_argument("--scenario", metavar="NAME", default="all", help="one scenario (happy, incident, unknown_tool, bad_input, loop_limit, react) or all (default)")
    demo.add_argument("--no-tui", action="store_true", help="print the incident's summary instead of opening the TUI")

    runs = command("runs", "List recorded runs, newest first.", cmd_runs)
    runs.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    runs.add_argument("--status", choices=RUN_STATUSES, help="only runs with this status")
    runs.add_argument("--limit", type=non_negative, default=DEFAULT_LIMIT, metavar="N", help=f"at most N runs (default {DEFAULT_LIMIT}; 0 for all)")
    runs.add_argument("--search", metavar="TEXT", help="only runs whose name, graph, error, tags, id prefix, a call name, or a failed or abandoned (timed-out) call contain TEXT")
    from graphtape.tui.cli_admin import add_run_filters, add_web_flags

    add_run_filters(runs)

    show = command("show", "Show a run's supersteps, or one step in full with --step.", cmd_show)
    show.add_argument("run", metavar="RUN", help=RUN_HELP.replace("last~N", "last~N (N recorded runs before the last)"))
    show.add_argument("--step", type=step_number, metavar="N", help="show step N in full: tasks, routes, calls, events and state")
    show.add_argument("--ns", default="", metavar="NS", help="a subgraph: its path, like child, or a namespace graphtape show prints (default: the root graph)")
    show.add_argument("--json", action="store_true", help="print JSON instead of text")
    show.add_argument("--full", action="store_true", help="do not fold long strings in updates and state")
    tui = command("tui", "Open the terminal UI on the store (and on RUN if given).", cmd_tui)
    tui.add_argument("run", metavar="RUN", nargs="?", help=f"run to open: {RUN_HELP}")
    add_web_flags(tui)

    from graphtape.tui import cli_admin, cli_diff, cli_fixtures, cli_replay, cli_rescue

    cli_replay.register(command)
    cli_diff.register(command)
    cli_fixtures.register(command)
    cli_admin.register(command)
    cli_rescue.register(command)
    parser.set_defaults(root_parser=parser)  # completion reads the whole tree without importing this module
    parser.commands = dict(sub.choices)  # type: ignore[attr-defined] - _main says an unknown word by its command
    return parser


# -- commands -------------------------------------------------------------------


def _print_traceback() -> None:
    import traceback

    traceback.print_exc()


def _width() -> int:
    import shutil  # here: the listings' start-up is most of their time, and only tables need it

    return max(60, shutil.get_terminal_size((120, 24)).columns)


def _print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2, default=str))


def _read_store(db: str | None) -> Any:
    """Open the store for reading: a missing database is an error, never created."""
    from graphtape.recorder import open_store

    return open_store(db, create=False)


def _tui_available() -> bool:
    try:
        return importlib.util.find_spec("graphtape.tui.app") is not None
    except (ImportError, ValueError):
        return False


def _rescue_hint(store: Any) -> str | None:
    """What a store with no runs is when it is a rescue file (opens the full store: no runs to list)."""
    from graphtape.recorder.store.rescue_hint import rescue_hint

    return rescue_hint(store.engine, _where(store.url))


def _where(url: str) -> str:
    from graphtape.recorder.store import shown_url

    return shown_url(url)


def cmd_demo(args: argparse.Namespace) -> int:
    """Record the demo agents; open the TUI on the incident, or print its summary."""
    from graphtape.tui.demo import INCIDENT, record_demo
    from graphtape.tui.render import clip, run_text
    from graphtape.tui.views import run_view

    width = _width()

    def start(url: str) -> None:
        print(f"recording the demo agents into {_where(url)}", flush=True)

    def report(demo: Any) -> None:
        run = demo.run
        line = f"  {run.name:<18} {run.id}  {run.status:<5} {run.step_count:>3} steps  {demo.description}"
        print(clip(line, width), flush=True)

    url, runs = record_demo(args.db, args.scenario, on_start=start, on_run=report)
    focus = next((d for d in runs if d.scenario == INCIDENT), runs[-1])
    if not args.no_tui and _tui_available() and sys.stdin.isatty() and sys.stdout.isatty():
        from graphtape.tui.app import run_app  # type: ignore[import-not-found]  # written by the TUI issue

        result = run_app(url, focus.run.id, welcome=demo_welcome(focus.description))
        return result if isinstance(result, int) else EXIT_OK
    store = _read_store(url)
    try:
        print()
        print(run_text(run_view(store, focus.run.id), width))
    finally:
        store.close()
    print("\nmore: graphtape runs · graphtape show last~1 · graphtape show last --json")
    return EXIT_OK


def demo_welcome(description: str) -> str:
    """The demo's hint, one line in the run header: the story, and the keys that find where it went wrong."""
    return f"{description}  e: next problem (E back) · ← →: step · 4: routes · 5: calls · ?: keys"


def cmd_tui(args: argparse.Namespace) -> int:
    """Open the TUI; the store is checked first so a bad path is one line, not a screen."""
    store = _read_store(args.db)
    try:
        if args.run:
            store.resolve_run(args.run)
        url = store.url
    finally:
        store.close()
    if getattr(args, "web", False):
        from graphtape.tui.cli_admin import serve_web

        return serve_web(url, args.run, args.port, allow_writes=args.web_allow_writes, sessions=args.web_sessions)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print("graphtape: error: the TUI needs a terminal (try graphtape show RUN)", file=sys.stderr)
        return 2
    from graphtape.tui.app import run_app

    return run_app(url, args.run)


def cmd_runs(args: argparse.Namespace) -> int:
    """List runs as a table or JSON."""
    from graphtape.recorder.store.quick_listing import open_listing
    from graphtape.tui.cli_admin import run_filters
    from graphtape.tui.render import runs_table
    from graphtape.tui.views import run_dict, runs_view

    store = open_listing(args.db)  # a SQLite file is listed without SQLAlchemy: start-up is most of this command
    try:
        fetch = args.limit + 1 if args.limit else None
        if run_filters(args):
            runs = [run_dict(r) for r in store.list_runs(status=args.status, text=args.search, limit=fetch, **run_filters(args))]
        else:
            runs = runs_view(store, status=args.status, text=args.search, limit=fetch)
        filtered = args.status or args.search or run_filters(args)
        rescued = None if runs or filtered or args.json else _rescue_hint(store)
    finally:
        store.close()
    more = bool(args.limit) and len(runs) > args.limit
    runs = runs[: args.limit] if more else runs
    if args.json:
        _print_json(runs)
    elif not runs:
        print("no runs match" if filtered else rescued or f"no runs in {_where(store.url)} yet: record some with `graphtape demo`, or run the graph a Recorder's attach returns (`graph = rec.attach(graph)`: the graph passed in is not recorded)")
    else:
        print(runs_table(runs, _width()))
    if more:
        print(f"(showing the newest {args.limit}; --limit 0 shows all)", file=sys.stderr)
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    """Show a run's steps, or one step in full."""
    from graphtape.tui.render import run_text, step_text
    from graphtape.tui.views import run_view, step_view

    store = _read_store(args.db)
    try:
        if args.step is None and args.json:
            from graphtape.tui.json_stream import write_object
            from graphtape.tui.views import run_view_stream

            # Written as read, a page of steps at a time: a run of 10,000 steps is never held whole.
            head, steps = run_view_stream(store, args.run, args.ns)
            write_object(sys.stdout, head, "steps", steps)
            return EXIT_OK
        if args.step is None:
            view = run_view(store, args.run, args.ns)
            text = None if args.json else run_text(view, _width())
        else:
            view = step_view(store, args.run, args.step, args.ns)
            text = None if args.json else step_text(view, _width(), full=args.full)
    finally:
        store.close()
    if text is None:
        _print_json(view)
    else:
        print(text)
    return EXIT_OK


# -- entry point ------------------------------------------------------------------


def _silence_stdout() -> None:
    # After EPIPE, point stdout at /dev/null so the interpreter's final flush stays quiet.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


class _TerminalSafe(io.TextIOBase):
    """A text stream that passes everything on with control characters shown as ``?``.

    Everything the CLI prints (run names, errors, tool output read from a
    store or a fixture) goes through here, so recorded text can never drive
    the terminal. The TUI writes through Textual's own driver, not this.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        from graphtape.recorder.terminal_text import printable

        self.inner.write(printable(text))
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def buffer(self) -> Any:  # bytes written on purpose (export -o -) pass as they are
        return self.inner.buffer

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", "utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code instead of exiting (tests call this)."""
    streams = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, _TerminalSafe):
        sys.stdout, sys.stderr = _TerminalSafe(sys.stdout), _TerminalSafe(sys.stderr)
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = streams


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # `graphtape help [COMMAND]` and `graphtape version`, as git and pip take them: the help asked for.
    if argv[:1] == ["help"] and len(argv) <= 2:
        argv = [*argv[1:], "--help"]
    elif argv == ["version"]:
        argv = ["--version"]
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # said by the command they were given to, not by `graphtape`
            getattr(parser, "commands", {}).get(getattr(args, "command", None), parser).unrecognized(extra, args)
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else (EXIT_OK if exc.code is None else EXIT_ERROR)
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    debug = args.debug
    try:
        from graphtape.recorder.errors import GraphtapeError

        try:
            code = args.func(args)
            sys.stdout.flush()
            return code
        except GraphtapeError as exc:
            if debug:
                _print_traceback()
            # One line, always: the message may quote recorded text (a name, a graph reference) with newlines in it.
            print("graphtape: error: " + " ⏎ ".join(str(exc).splitlines()), file=sys.stderr)
            return EXIT_ERROR
    except KeyboardInterrupt:
        print("graphtape: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as exc:  # noqa: BLE001 - a bug: still one line unless --debug
        if debug:
            _print_traceback()
        if _read_only_failure(exc):
            print("graphtape: error: the store is read-only: this command writes to it, so it needs a store it can write to (pass --db, or get write access)", file=sys.stderr)
            return EXIT_ERROR
        line = str(exc).strip().splitlines()
        detail = f": {line[0]}" if line else ""
        print(f"graphtape: error: unexpected {type(exc).__name__}{detail} (rerun with --debug for the traceback, and please report it)", file=sys.stderr)
        return EXIT_ERROR


def _read_only_failure(exc: BaseException) -> bool:
    """A write that met a read-only store (a database error, not a bug): said as such, not as "please report it"."""
    if not type(exc).__module__.startswith("sqlalchemy"):
        return False
    from graphtape.recorder.store.read_only import is_read_only_error

    return is_read_only_error(exc)


if __name__ == "__main__":
    sys.exit(main())
