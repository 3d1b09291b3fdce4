"""``graphtape diff RUN_A RUN_B``: compare two recorded runs and name where they went different ways.

Registered on the main parser by ``tui.cli.build_parser``. Exits 0 when the
runs behaved the same, 1 when they differ (the report says where), 2 on an
error (one line). Only reads the store: nothing is run or written.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from graphtape.tui.cli_args import RUN_HELP

Command = Callable[[str, str, Callable[[argparse.Namespace], int]], argparse.ArgumentParser]

EXIT_SAME, EXIT_DIFFER = 0, 1


def register(command: Command) -> None:
    """Add ``diff`` to the ``graphtape`` parser."""
    p = command("diff", "Compare two recorded runs step by step (aligned by what ran); exit 1 if they differ.", cmd_diff)
    p.add_argument("run_a", metavar="RUN_A", help=f"the run to compare against, say the one that worked: {RUN_HELP}")
    p.add_argument("run_b", metavar="RUN_B", help=f"the run compared with it: {RUN_HELP}")
    p.add_argument("--ignore", action="append", default=[], metavar="PATH", help="state path to leave out, like messages.*.id or **.timestamp; repeatable")
    p.add_argument("--ns", default=None, metavar="NS", help="compare only this subgraph (its path, like child, or a namespace graphtape show prints)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")


def cmd_diff(args: argparse.Namespace) -> int:
    """Diff two runs; print the report (or JSON) and say in the exit code whether they differ."""
    from graphtape.recorder import open_store
    from graphtape.replay.run_diff import diff_runs

    store = open_store(args.db, create=False)
    try:
        a, b = store.resolve_run(args.run_a), store.resolve_run(args.run_b)
        result = diff_runs(a, b, store=store, ignore=args.ignore, ns=args.ns)
    finally:
        store.close()
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False, default=str))
    else:
        print(result.report())
    return EXIT_SAME if result.same else EXIT_DIFFER
