"""Tracebacks of node and tool errors, kept as plain frames for a postmortem.

A frame is ``[file, line, function, source line]``: what a reader needs to
find the failing code, and nothing that runs. The source line is scrubbed
like every recorded string (a key pasted into code shows up here). Paths
are shortened so a fixture does not carry the recording machine's layout:
installed packages from ``site-packages/`` on, Python's own modules from
``stdlib/`` on, files under the working directory relative to it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from types import TracebackType
from typing import Any

MAX_FRAMES = 40  # the innermost frames are kept: that is where it failed
MAX_LINE = 300  # characters of a source line kept (cut once scrubbed: a key across the cut is found whole)
MAX_LINE_READ = 20_000  # characters of a source line read
_INSTALLED = ("site-packages" + os.sep, "dist-packages" + os.sep)

Frame = list[Any]  # [file, line, function, source]


def frames_of(error: BaseException) -> list[Frame] | None:
    """The frames of ``error``'s traceback, innermost last; ``None`` when it has none.

    Read at once (the source lines too), while the traceback still exists;
    scrubbed later, off the graph's thread (:func:`scrubbed_frames`). Never
    raises: a traceback that cannot be read is simply not kept.
    """
    try:
        return _frames(error.__traceback__)
    except Exception:  # noqa: BLE001 - a traceback is a nicety; recording goes on without it
        return None


def scrubbed_frames(frames: list[Frame], scrub: Callable[[str], str]) -> list[Frame]:
    """``frames`` with every string passed through the redactor (a key pasted into code shows up here)."""
    return [[scrub(file), line, scrub(function), scrub(code)[:MAX_LINE] if code else ""] for file, line, function, code in frames]


def _frames(tb: TracebackType | None) -> list[Frame] | None:
    if tb is None:
        return None
    import traceback

    summary = traceback.extract_tb(tb)
    cut = len(summary) - MAX_FRAMES
    frames: list[Frame] = []
    if cut > 0:
        frames.append(["…", 0, f"{cut} outer frames not kept", ""])
        summary = summary[cut:]
    for f in summary:
        code = (f.line or "")[:MAX_LINE_READ]
        frames.append([short_path(f.filename), f.lineno or 0, f.name, code])
    return frames


@functools.cache
def _stdlib_dirs() -> tuple[str, ...]:
    """Python's own library folders, longest first (read when a path is first shortened: the
    CLI's listings never need them, and ``sysconfig`` costs their start-up)."""
    import sysconfig

    paths = sysconfig.get_paths()
    return tuple(sorted({os.path.normpath(paths[k]) + os.sep for k in ("stdlib", "platstdlib") if paths.get(k)}, key=len, reverse=True))


def short_path(path: str) -> str:
    """``site-packages/pkg/mod.py`` for installed code, ``stdlib/mod.py`` for Python's own, a relative path under the working directory."""
    for marker in _INSTALLED:
        at = path.rfind(marker)
        if at >= 0:
            return "site-packages/" + path[at + len(marker) :].replace(os.sep, "/")
    for prefix in _stdlib_dirs():
        if path.startswith(prefix):
            return "stdlib/" + path[len(prefix) :].replace(os.sep, "/")
    try:
        here = os.getcwd()
    except OSError:
        return path
    if path.startswith(here + os.sep):
        return path[len(here) + 1 :].replace(os.sep, "/")
    return path


def valid_frames(value: Any) -> list[Frame] | None:
    """Frames read back from a store or a fixture, kept only if they have the frame shape."""
    if not isinstance(value, list):
        return None
    out = []
    for f in value[: MAX_FRAMES + 1]:
        if isinstance(f, list) and len(f) == 4 and isinstance(f[0], str) and isinstance(f[1], int) and isinstance(f[2], str) and isinstance(f[3], str):
            out.append([f[0], f[1], f[2], f[3]])
    return out or None


def format_frames(frames: list[Frame], *, last: int | None = None) -> list[str]:
    """``File "x.py", line 3, in f`` and its source line, per frame (the ``last`` innermost)."""
    shown = frames[-last:] if last else frames
    lines = []
    if last and len(frames) > last:
        lines.append(f"… {len(frames) - last} outer frames")
    for file, line, function, code in shown:
        if file == "…":
            lines.append(f"… {function}")
            continue
        lines.append(f'File "{file}", line {line}, in {function}')
        if code:
            lines.append(f"    {code}")
    return lines


def raised_at(frames: list[Frame]) -> Frame:
    """The frame to point at: the innermost outside installed packages and Python's own modules."""
    own = [f for f in frames if not f[0].startswith(("site-packages/", "stdlib/", "…"))]
    return (own or frames)[-1]


def frame_text(frame: Frame) -> str:
    """``agent.py:12 in act: raise X``: one frame on one line."""
    return f"{frame[0]}:{frame[1]} in {frame[2]}" + (f": {frame[3]}" if frame[3] else "")
