"""Files graphtape writes from recorded data: whole or not at all, readable by their owner only.

The data is written to a new file beside the target (a random name, created exclusively, mode
0600), then renamed over it. A symlink at the target is replaced, never followed: a link planted
where a fixture, a test or a saved state goes cannot make graphtape write somewhere else. A link
among the folders on the way is followed only while it stays inside the current directory: a
``fixtures/runs`` that a cloned repository or a fixture bundle made a link to ``~/.config`` is
refused, not written through. A path the user names outside it (``/srv/fixtures``,
``../shared``) is theirs to name, links and all.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path


class LinkLeadsOut(OSError):
    """A folder on the way to a file is a link that leads out of the folder it was reached from."""

    def __init__(self, link: Path, within: str) -> None:
        super().__init__(
            errno.EXDEV,
            f"{link} is a link to {os.path.realpath(link)}, outside {within}: graphtape does not write through it "
            "(give the folder it points to yourself if that is where you mean)",
            str(link),
        )


def link_leading_out(path: str | os.PathLike, within: str | os.PathLike) -> Path | None:
    """The first link among the folders of ``path`` (under ``within``) that resolves outside
    ``within``; None when there is none, or when ``path`` does not lie in ``within`` as written."""
    root = Path(os.path.abspath(within))
    folder = Path(os.path.abspath(path)).parent
    if folder != root and root not in folder.parents:
        return None  # named outside as written: the user's own choice of place
    real_root = Path(os.path.realpath(root))
    current = root
    for part in folder.relative_to(root).parts:
        current = current / part
        if os.path.islink(current):
            real = Path(os.path.realpath(current))
            if real != real_root and real_root not in real.parents:
                return current if Path(path).is_absolute() else current.relative_to(root)
    return None


def refuse_link_out(path: str | os.PathLike) -> None:
    """Raise ``LinkLeadsOut`` when a folder on the way to ``path`` is a link out of the current
    directory (asked before any work, so a refusal costs nothing; asked again by ``write_private``)."""
    link = link_leading_out(path, Path.cwd())
    if link is not None:
        raise LinkLeadsOut(link, "the current directory")


def write_private(path: str | os.PathLike, data: bytes, *, overwrite: bool = False, mode: int = 0o600) -> None:
    """Write ``data`` to ``path`` (folders made as needed). An existing file, or a link, is
    replaced only with ``overwrite``; otherwise ``FileExistsError``. Raises ``OSError``
    (``LinkLeadsOut`` when a folder on the way is a link out of the current directory).
    ``mode``: 0600 for recorded data; a generated test, which is source, may be 0644."""
    target = Path(path)
    refuse_link_out(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # a file where a folder of the path should be: not "the target exists"
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(target.parent)) from None
    if not overwrite and os.path.lexists(target):
        raise FileExistsError(f"{target} exists")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)  # O_EXCL, 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if mode != 0o600:
                os.fchmod(f.fileno(), mode)
        if overwrite:
            os.replace(tmp, target)
            return
        try:
            os.link(tmp, target)  # fails if something appeared at the target meanwhile
        except FileExistsError:
            raise
        except OSError:  # a filesystem without hard links: checked above, as close as it gets
            os.replace(tmp, target)
            return
        os.unlink(tmp)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
