"""Commands that re-run recordings: replay, fork, export, import, test-gen.

Registered on the main parser by ``tui.cli.build_parser``; like the rest of
the CLI, nothing heavy is imported until a command runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

Command = Callable[[str, str, Callable[[argparse.Namespace], int]], argparse.ArgumentParser]


def register(command: Command) -> None:
    """Add this module's subcommands to the ``graphtape`` parser."""
