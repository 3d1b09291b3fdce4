"""Record modes of the pytest plugin: when a fixture may be (re)written."""

from __future__ import annotations

import os

from graphtape.recorder.choices import Choice


class RecordMode(Choice):
    """What ``--graphtape-record`` lets a test write, named after vcrpy's modes.

    ``none`` (the default) only replays: a missing fixture fails the test.
    ``missing`` records a fixture that does not exist yet by running the graph
    live with the marker's ``inputs=``. ``rewrite`` re-records every fixture a
    test uses: today's code runs with tool and model calls answered from the
    fixture where they still match (live where they do not), and the result
    replaces the file. With ``CI=true`` only ``none`` is allowed.
    """

    NONE = "none"
    MISSING = "missing"
    REWRITE = "rewrite"

    @property
    def records(self) -> bool:
        """Whether this mode may write fixture files."""
        return self is not RecordMode.NONE


def in_ci(environ: os._Environ[str] | dict[str, str] | None = None) -> bool:
    """Whether ``CI`` says this is a CI run (``true``, ``1`` or ``yes``, any case)."""
    env = os.environ if environ is None else environ
    return env.get("CI", "").strip().lower() in ("true", "1", "yes")


__all__ = ["RecordMode", "in_ci"]
