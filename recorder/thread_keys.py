"""The thread a run is stored and looked up under, with no secret in it.

A thread id is the caller's text: some apps use a session token or a user's key as one.
The run's config is redacted as any value is, but the thread is also a column the store
looks runs up by (a resume in another process finds its run there), so a redacted marker
would make two such threads one. A thread id holding a secret is stored as a digest of
itself instead: the same thread always gives the same key, and the key gives nothing away.
"""

from __future__ import annotations

import hashlib

from graphtape.recorder.redaction import Redactor

PREFIX = "redacted-thread-"


def run_thread(run_id: str) -> str:
    """The thread a run given none is stored under, named after the run (its nodes saw no thread)."""
    return f"graphtape-{run_id}"


def stored_thread_id(thread_id: str, redactor: Redactor) -> str:
    """``thread_id`` as it is stored: itself, unless the redactor finds a secret in it."""
    if redactor.scrub(thread_id) == thread_id:
        return thread_id
    return PREFIX + hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()[:24]
