"""Regression-fixture commands: export, import, test-gen.

Registered on the main parser by ``tui.cli.build_parser``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

Command = Callable[[str, str, Callable[[argparse.Namespace], int]], argparse.ArgumentParser]


def register(command: Command) -> None:
    """Add this module's subcommands to the ``graphtape`` parser."""
