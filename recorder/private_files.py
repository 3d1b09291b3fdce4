"""Files graphtape writes from recorded data: whole or not at all, readable by their owner only.

The data is written to a new file beside the target (a random name, created exclusively, mode
0600), then renamed over it. A symlink at the target is replaced, never followed: a link planted
where a fixture, a test or a saved state goes cannot make graphtape write somewhere else.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path


def write_private(path: str | os.PathLike, data: bytes, *, overwrite: bool = False, mode: int = 0o600) -> None:
    """Write ``data`` to ``path`` (folders made as needed). An existing file, or a link, is
    replaced only with ``overwrite``; otherwise ``FileExistsError``. Raises ``OSError``.
    ``mode``: 0600 for recorded data; a generated test, which is source, may be 0644."""
    target = Path(path)
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
