"""``graphtape import-rescue``: put the rows a recorder saved apart at close into the store they belong to.

Registered on the main parser by ``tui.cli.build_parser``; nothing heavy is imported until it runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

Command = Callable[[str, str, Callable[[argparse.Namespace], int]], argparse.ArgumentParser]


def register(command: Command) -> None:
    """Add ``import-rescue`` to the ``graphtape`` parser."""
    p = command(
        "import-rescue",
        "Put the rows of a graphtape-rescued-*.db file (saved at close when the store refused them) into the store.",
        cmd_import_rescue,
    )
    p.add_argument("file", metavar="FILE", help="the rescue file the recorder named when it closed")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def cmd_import_rescue(args: argparse.Namespace) -> int:
    """Import a rescue file; rows the store holds already are left out."""
    from pathlib import Path

    from graphtape.recorder import open_store
    from graphtape.recorder.errors import GraphtapeError
    from graphtape.recorder.rescue import import_rescue
    from graphtape.recorder.store import shown_url

    if not Path(args.file).is_file():
        raise GraphtapeError(f"{args.file}: not a file (give the graphtape-rescued-*.db path the recorder named when it closed)")
    store = open_store(args.db, create=True)
    try:
        store.require_writable("import-rescue adds the rescued rows")
        done = import_rescue(store, args.file)
        url = shown_url(store.url)
    finally:
        store.close()
    if done.unplaced:
        print(f"graphtape: warning: {done.unplaced}", file=sys.stderr)
    if args.json:
        print(json.dumps({"whole_runs": done.whole, "completed_runs": done.completed, "steps": done.steps, "calls": done.calls, "db": url, "left_out": done.unplaced or None}, indent=2))
        return 0
    parts = []
    if done.whole:
        parts.append(f"{len(done.whole)} whole run{'s' * (len(done.whole) != 1)}")
    if done.completed:
        parts.append(f"the rest of {len(done.completed)} run{'s' * (len(done.completed) != 1)} ({', '.join(r[:8] for r in done.completed[:5])})")
    print(f"{args.file}: imported {' and '.join(parts) or 'nothing'} into {url} ({done.steps} steps, {done.calls} calls; rows it held already left out)")
    return 0
