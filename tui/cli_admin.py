"""Store housekeeping commands: gc, stats, migrate, import-langgraph, completion; run filters; the web TUI.

Registered on the main parser by ``tui.cli.build_parser``. Like the rest of
the CLI, nothing heavy is imported until a command runs. Progress bars go to
stderr and only when it is a terminal, so pipes and ``--json`` stay clean.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Command = Callable[[str, str, Callable[[argparse.Namespace], int]], argparse.ArgumentParser]

EXIT_OK = 0
EXIT_ERROR = 2
SHELLS = ("bash", "zsh", "fish")
DEFAULT_WEB_SESSIONS = 4
DEFAULT_WEB_PORT = 8000

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def CliError(message: str) -> Exception:  # noqa: N802 - raised like an exception class
    """A user error: a ``GraphtapeError``, so ``main`` prints it as one line (imported late: the CLI loads fast)."""
    from graphtape.recorder.errors import GraphtapeError

    return GraphtapeError(message)


def register(command: Command) -> None:
    """Add this module's subcommands to the ``graphtape`` parser."""
    gc = command("gc", "Delete runs older than a given age, then blobs no remaining run uses.", cmd_gc)
    gc.add_argument("--older-than", required=True, type=duration, metavar="AGE", help="age of the runs to delete, by when they ended: 30d, 12h, 90m, 2w")
    gc.add_argument("--keep-failed", action="store_true", help="keep runs that ended in an error, however old")
    gc.add_argument("--dry-run", action="store_true", help="report what would be deleted and delete nothing")
    gc.add_argument("--json", action="store_true", help="print the report as JSON")
    gc.epilog = "Runs still recording are never touched, nor the parent run of a fork that is kept."

    stats = command("stats", "Show the store's size: rows and bytes per table, runs by status.", cmd_stats)
    stats.add_argument("--json", action="store_true", help="print JSON instead of text")

    command("migrate", "Upgrade a store written by an older graphtape to this one's schema, in place.", cmd_migrate)

    imp = command(
        "import-langgraph",
        "Import the threads of a LangGraph SqliteSaver or PostgresSaver database as runs (the source is only read).",
        cmd_import_langgraph,
    )
    imp.add_argument("source", metavar="URL", help="sqlite:///checkpoints.db (or a file path) or a postgresql:// URL")
    imp.add_argument("--thread", action="append", default=[], metavar="ID", help="import only this thread (repeatable)")
    imp.add_argument("--json", action="store_true", help="print the summary as JSON")

    comp = command("completion", "Print a shell completion script: eval \"$(graphtape completion bash)\".", cmd_completion)
    comp.add_argument("shell", choices=SHELLS, help="the shell to complete in")


# -- filters for `graphtape runs` -------------------------------------------------------


def add_run_filters(parser: argparse.ArgumentParser) -> None:
    """The indexed filters of ``graphtape runs`` (each maps to a ``list_runs`` keyword)."""
    parser.add_argument("--name", metavar="NAME", help="only runs with this name (a trailing * matches a prefix: demo:*)")
    parser.add_argument("--tag", metavar="TAG", help="only runs with this tag")
    parser.add_argument("--tool", metavar="NAME", help="only runs that called this tool")
    parser.add_argument("--node", metavar="NAME", help="only runs in which this node ran")
    parser.add_argument("--error", metavar="TEXT", help="only runs whose error, or a failed or abandoned (timed-out) call's error, contains TEXT")


def run_filters(args: argparse.Namespace) -> dict[str, str]:
    """The ``list_runs`` keywords given on the command line."""
    return {k: v for k in ("name", "tag", "tool", "node", "error") if (v := getattr(args, k, None))}


# -- helpers ------------------------------------------------------------------------------


def duration(text: str) -> float:
    """Seconds from ``30d``, ``12h``, ``90m``, ``2w`` or ``45s`` (an argparse type)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text or "")
    if not m:
        raise argparse.ArgumentTypeError(f"not an age: {text!r} (use a number and a unit: 30d, 12h, 90m, 2w)")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2, default=str))


def _human_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _when(ts: float | None) -> str:
    from graphtape.tui.render import local_time

    return local_time(ts, "%Y-%m-%d %H:%M")


@contextmanager
def progress_bar(enabled: bool) -> Iterator[Callable[[str, int, int | None], None]]:
    """A ``(phase, done, total)`` callback drawing rich progress bars on stderr, or a no-op."""
    if not enabled or not sys.stderr.isatty():
        yield lambda _phase, _done, _total: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    tasks: dict[str, Any] = {}
    # Rich draws with escape sequences of its own, and the phases are graphtape's own words: it
    # writes to the terminal itself, not through the stream that shows control characters as "?".
    stream = getattr(sys.stderr, "inner", sys.stderr)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=Console(file=stream), transient=True) as bar:

        def update(phase: str, done: int, total: int | None) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)

        yield update


def _open_for_writing(db: str | None, what: str | None) -> Any:
    """Open the store a command writes to; ``what`` it writes is said in one line if the store is read-only."""
    from graphtape.recorder import open_store

    store = open_store(db, create=False)
    try:
        if what:
            store.require_writable(what)
    except BaseException:
        store.close()
        raise
    return store


# -- gc, stats, migrate ------------------------------------------------------------------


def cmd_gc(args: argparse.Namespace) -> int:
    """Delete old runs and the blobs only they used."""
    store = _open_for_writing(args.db, None if args.dry_run else "gc deletes runs")
    try:
        with progress_bar(not args.json) as progress:
            report = store.gc(args.older_than, keep_failed=args.keep_failed, dry_run=args.dry_run, progress=progress)
    finally:
        store.close()
    if args.json:
        from dataclasses import asdict

        _print_json(asdict(report))
        return EXIT_OK
    verb = "would delete" if report.dry_run else "deleted"
    print(
        f"{verb} {report.runs:,} run(s) ({report.steps:,} steps, {report.calls:,} calls) "
        f"and {report.blobs:,} unreferenced blob(s) ({_human_bytes(report.blob_bytes)})"
    )
    kept = []
    if report.kept_running:
        kept.append(f"{report.kept_running} still recording")
    if report.kept_fork_parents:
        kept.append(f"{report.kept_fork_parents} parent(s) of kept forks")
    if kept:
        print("kept: " + ", ".join(kept))
    if report.dry_run and report.runs:
        print("(dry run: nothing was deleted)")
    return EXIT_OK


def cmd_stats(args: argparse.Namespace) -> int:
    """Print the size report."""
    from graphtape.recorder import open_store

    store = open_store(args.db, create=False)
    try:
        report = store.stats()
    finally:
        store.close()
    if args.json:
        _print_json(report)
        return EXIT_OK
    where = report["url"][len("sqlite:///") :] if report["url"].startswith("sqlite:///") else report["url"]
    print(f"store    {where} ({report['backend']}, schema v{report['schema_version']})")
    print(f"size     {_human_bytes(report.get('database_bytes'))} on disk" if report["backend"] == "sqlite" else f"size     {_human_bytes(report.get('bytes'))} in graphtape's tables ({_human_bytes(report.get('database_bytes'))} database)")
    print()
    print(f"{'table':<12}{'rows':>12}{'size':>12}")
    for name, t in report["tables"].items():
        print(f"{name:<12}{t['rows']:>12,}{_human_bytes(t['bytes']):>12}")
    print()
    statuses = " · ".join(f"{k} {v:,}" for k, v in report["runs_by_status"].items()) or "none"
    print(f"runs by status: {statuses}")
    if report["oldest_run_at"] is not None:
        print(f"oldest run {_when(report['oldest_run_at'])} · newest {_when(report['newest_run_at'])}")
    return EXIT_OK


def cmd_migrate(args: argparse.Namespace) -> int:
    """Upgrade the schema in place, in one transaction."""
    from graphtape.recorder.store import migrate_store

    label, before, after = migrate_store(args.db)
    if before == after:
        print(f"{label} is already at schema v{after}")
    else:
        print(f"upgraded {label} from schema v{before} to v{after}")
    return EXIT_OK


# -- import-langgraph ----------------------------------------------------------------------


def cmd_import_langgraph(args: argparse.Namespace) -> int:
    """Import LangGraph checkpoint threads as runs."""
    from graphtape.recorder import open_store
    from graphtape.recorder.errors import StoreError
    from graphtape.recorder.import_langgraph import check_source, import_langgraph

    why = "import-langgraph adds the threads as runs"
    try:
        store = open_store(args.db)
    except StoreError:
        store = None  # no store there yet: made below, once the source is known to be importable
    try:
        if store is not None:
            store.require_writable(why)  # said before the source is checked
        check_source(args.source, args.thread)  # a bad source makes no new, empty target store
        if store is None:
            store = open_store(args.db, create=True)
            store.require_writable(why)
        with progress_bar(not args.json) as progress:
            summary = import_langgraph(args.source, store, threads=args.thread, progress=progress)
    finally:
        if store is not None:
            store.close()
    if args.json:
        _print_json(summary.to_dict())
        return EXIT_OK
    d = summary.to_dict()
    print(f"imported {d['imported']} run(s) ({d['steps']:,} steps) from {summary.source}" + (f"; {d['already_imported']} already imported" if d["already_imported"] else ""))
    width = max(60, shutil.get_terminal_size((120, 24)).columns)
    for r in summary.runs:
        note = "already imported" if r.already else f"{r.status:<11} {r.steps:>4} steps"
        extra = f"  ({r.skipped_checkpoints} checkpoints on abandoned forks skipped)" if r.skipped_checkpoints else ""
        print(f"  {r.run_id}  {r.thread_id:<24} {note}{extra}"[:width])
    if summary.blocked_types:
        names = ", ".join(f"{k} ({v})" for k, v in sorted(summary.blocked_types.items()))
        print(f"values not rebuilt (not on LangGraph's safe list; kept as plain data or a marker): {names}", file=sys.stderr)
    if summary.runs and not all(r.already for r in summary.runs):
        first = next(r for r in summary.runs if not r.already)
        from graphtape.recorder.terminal_text import command_line

        print(f"\nnext: {command_line('graphtape', 'show', first.run_id[:8])} · {command_line('graphtape', 'tui', first.run_id[:8])}")
    return EXIT_OK


# -- completion -----------------------------------------------------------------------------


def cmd_completion(args: argparse.Namespace) -> int:
    """Print the completion script for a shell."""
    print(completion_script(args.root_parser, args.shell))
    return EXIT_OK


def _tree(parser: argparse.ArgumentParser) -> tuple[list[dict], dict[str, tuple[str, list[dict]]]]:
    """(global options, {command: (summary, options)}) from the argparse tree.

    An option is ``{"flags", "help", "takes_value", "choices"}``.
    """

    def options(p: argparse.ArgumentParser) -> list[dict]:
        out = []
        for a in p._actions:
            if not a.option_strings or a.help == argparse.SUPPRESS:
                continue
            out.append(
                {
                    "flags": list(a.option_strings),
                    "help": (a.help or "").split("(")[0].strip(),
                    "takes_value": a.nargs != 0,
                    "choices": [str(c) for c in a.choices] if a.choices else [],
                }
            )
        return out

    commands: dict[str, tuple[str, list[dict]]] = {}
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            helps = {c.dest: c.help or "" for c in a._choices_actions}
            for name, sub in a.choices.items():
                opts = options(sub)
                positional = [x for x in sub._actions if not x.option_strings and x.choices]
                for x in positional:  # a positional with choices (completion SHELL) completes like an option value
                    opts.append({"flags": [], "help": x.help or "", "takes_value": True, "choices": [str(c) for c in x.choices]})
                commands[name] = (helps.get(name, ""), opts)
    return options(parser), commands


def completion_script(parser: argparse.ArgumentParser, shell: str) -> str:
    """A completion script for ``shell`` generated from the parser, so it never falls out of date."""
    glob, commands = _tree(parser)
    if shell == "bash":
        return _bash(glob, commands)
    if shell == "zsh":
        return _zsh(glob, commands)
    if shell == "fish":
        return _fish(glob, commands)
    raise CliError(f"no completion for {shell!r}: use one of {', '.join(SHELLS)}")


def _bash(glob: list[dict], commands: dict[str, tuple[str, list[dict]]]) -> str:
    def words(opts: list[dict]) -> str:
        return " ".join(f for o in opts for f in o["flags"])

    global_values = "|".join(f for o in glob if o["takes_value"] for f in o["flags"]) or "--"
    lines = [
        "# graphtape completion for bash. Load it with:",
        '#   eval "$(graphtape completion bash)"',
        "_graphtape() {",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" cmd="" i',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        case "${COMP_WORDS[i]}" in',
        f"            {global_values}) ((i++)) ;;",
        "            -*) ;;",
        '            *) cmd="${COMP_WORDS[i]}"; break ;;',
        "        esac",
        "    done",
        '    case "$cmd" in',
        '        "") case "$prev" in',
    ]
    for o in glob:
        if o["takes_value"]:
            lines.append(f"            {'|'.join(o['flags'])}) COMPREPLY=(); return ;;")
    lines += [
        "            esac",
        f'            if [[ "$cur" == -* ]]; then COMPREPLY=($(compgen -W "{words(glob)}" -- "$cur"))',
        f'            else COMPREPLY=($(compgen -W "{" ".join(commands)}" -- "$cur")); fi ;;',
    ]
    for name, (_help, opts) in commands.items():
        lines.append(f"        {shlex.quote(name)})")
        lines.append('            case "$prev" in')
        for o in opts:
            if o["takes_value"] and o["flags"]:
                reply = f'COMPREPLY=($(compgen -W "{" ".join(o["choices"])}" -- "$cur"))' if o["choices"] else "COMPREPLY=()"
                lines.append(f"                {'|'.join(o['flags'])}) {reply}; return ;;")
        lines.append("            esac")
        positional = [c for o in opts if not o["flags"] for c in o["choices"]]
        lines.append(f'            if [[ "$cur" == -* ]]; then COMPREPLY=($(compgen -W "{words(opts)}" -- "$cur"))')
        lines.append(f'            else COMPREPLY=($(compgen -W "{" ".join(positional)}" -- "$cur")); fi ;;')
    lines += ["    esac", "}", "complete -o default -F _graphtape graphtape"]
    return "\n".join(lines)


def _zsh_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "'\\''").replace("[", "\\[").replace("]", "\\]").replace(":", "\\:")


def _zsh(glob: list[dict], commands: dict[str, tuple[str, list[dict]]]) -> str:
    def specs(opts: list[dict]) -> list[str]:
        out = []
        for o in opts:
            if not o["flags"]:
                out.append(f"'1:{_zsh_escape(o['help'] or 'value')}:({' '.join(o['choices'])})'")
                continue
            flags = o["flags"]
            names = "{" + ",".join(flags) + "}" if len(flags) > 1 else flags[0]
            excl = f"'({' '.join(flags)})'" if len(flags) > 1 else ""
            value = ""
            if o["takes_value"]:
                value = f":value:({' '.join(o['choices'])})" if o["choices"] else ":value:_files"
            out.append(f"{excl}{names}'[{_zsh_escape(o['help'])}]{value}'")
        return out

    lines = [
        "#compdef graphtape",
        "# graphtape completion for zsh. Load it with:",
        '#   eval "$(graphtape completion zsh)"   (after compinit)',
        "_graphtape() {",
        "    local -a commands",
        "    commands=(",
    ]
    lines += [f"        '{_zsh_escape(name)}:{_zsh_escape(help_)}'" for name, (help_, _o) in commands.items()]
    lines += [
        "    )",
        "    local curcontext=\"$curcontext\" state line",
        "    _arguments -C \\",
        *[f"        {s} \\" for s in specs(glob)],
        "        '1:command:->command' '*::argument:->argument'",
        "    case $state in",
        "        command) _describe -t commands 'graphtape command' commands ;;",
        "        argument)",
        "            case $line[1] in",
    ]
    for name, (_help, opts) in commands.items():
        body = " ".join(specs(opts)) or "'*:file:_files'"
        lines.append(f"                {name}) _arguments {body} ;;")
    lines += ["            esac ;;", "    esac", "}", 'if [[ "$funcstack[1]" = "_graphtape" ]]; then _graphtape "$@"; else compdef _graphtape graphtape; fi']
    return "\n".join(lines)


def _fish(glob: list[dict], commands: dict[str, tuple[str, list[dict]]]) -> str:
    def q(text: str) -> str:
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"

    def opt_line(cond: str, o: dict) -> str:
        parts = [f"complete -c graphtape -n {q(cond)}"]
        for f in o["flags"]:
            parts.append(f"-l {f[2:]}" if f.startswith("--") else f"-s {f[1:]}")
        if o["takes_value"]:
            parts.append(f"-x -a {q(' '.join(o['choices']))}" if o["choices"] else "-r -F")
        if o["help"]:
            parts.append(f"-d {q(o['help'])}")
        return " ".join(parts)

    lines = ["# graphtape completion for fish. Load it with:", "#   graphtape completion fish | source", "complete -c graphtape -f"]
    for o in glob:
        lines.append(opt_line("__fish_use_subcommand", o))
    for name, (help_, opts) in commands.items():
        lines.append(f"complete -c graphtape -n '__fish_use_subcommand' -a {q(name)} -d {q(help_)}")
        cond = f"__fish_seen_subcommand_from {name}"
        for o in opts:
            if o["flags"]:
                lines.append(opt_line(cond, o))
            else:
                lines.append(f"complete -c graphtape -n {q(cond)} -a {q(' '.join(o['choices']))}")
    return "\n".join(lines)


# -- the TUI in a browser -----------------------------------------------------------------


def add_web_flags(parser: argparse.ArgumentParser) -> None:
    """``graphtape tui --web [--port N]``."""
    parser.add_argument("--web", action="store_true", help="serve the TUI in a browser instead (needs graphtape[web])")
    parser.add_argument("--port", type=_port, default=DEFAULT_WEB_PORT, metavar="N", help=f"port for --web (default {DEFAULT_WEB_PORT})")
    parser.add_argument("--web-allow-writes", action="store_true", help="let browser sessions replay, fork, export and save (read-only by default)")
    parser.add_argument("--web-sessions", type=_sessions, default=DEFAULT_WEB_SESSIONS, metavar="N", help=f"at most N browser sessions at once (default {DEFAULT_WEB_SESSIONS})")


def _sessions(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 1 <= value <= 64:
        raise argparse.ArgumentTypeError("between 1 and 64 sessions")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError("a port is between 1 and 65535")
    return value


def serve_web(url: str, run: str | None, port: int, *, allow_writes: bool = False, sessions: int = DEFAULT_WEB_SESSIONS) -> int:
    """Serve the TUI over HTTP on localhost: one app process per browser tab, behind a token (see tui.web)."""
    import os

    try:
        from graphtape.tui.web import GuardedServer, app_command
    except ImportError:
        raise CliError("--web needs textual-serve: pip install 'graphtape[web]'") from None

    # The store URL travels in the environment, not on a command line other users can read.
    os.environ["GRAPHTAPE_DB"] = url
    server = GuardedServer(app_command(run, read_only=not allow_writes), host="localhost", port=port, max_sessions=sessions)

    def ready(s: GuardedServer) -> None:
        mode = "replay, fork, export and save allowed" if allow_writes else "read-only: --web-allow-writes to replay, fork, export or save"
        print(f"serving the graphtape TUI at {s.url} ({mode}; at most {sessions} sessions; Ctrl+C stops it)", flush=True)

    try:
        server.serve(on_ready=ready)
    except OSError as exc:
        raise CliError(f"cannot serve on port {port}: {exc.strerror or exc} (try --port N)") from None
    return EXIT_OK
