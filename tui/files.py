"""Where the TUI's copies and saves go: private files, and a word on when a copy cannot arrive."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping


def clipboard_blocked(env: Mapping[str, str] | None = None, tmux_option: Callable[[str], str | None] | None = None) -> str | None:
    """Why a copy (OSC 52) will not reach the clipboard, when that can be told; ``None`` otherwise.

    tmux passes OSC 52 from programs on only with ``set-clipboard on``; GNU screen
    and macOS Terminal do not take it at all. ``env`` and ``tmux_option`` (reads a
    global tmux option) default to this process's environment and the tmux it runs in.
    """
    env = os.environ if env is None else env
    if env.get("TMUX"):
        setting = (tmux_option or _tmux_option)("set-clipboard")
        if setting is None or setting == "on":
            return None
        return f"tmux does not pass copies on (set-clipboard is {setting or 'unset'}: add `set -g set-clipboard on` to ~/.tmux.conf)"
    if env.get("STY"):
        return "GNU screen does not pass copies on to the terminal"
    if env.get("TERM_PROGRAM") == "Apple_Terminal":
        return "macOS Terminal does not take copies from programs (OSC 52)"
    return None


def _tmux_option(name: str) -> str | None:
    """A global option of the tmux this runs in; ``None`` when it cannot be read."""
    if shutil.which("tmux") is None:
        return None
    try:
        return subprocess.run(["tmux", "show-options", "-gv", name], capture_output=True, text=True, timeout=2).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
