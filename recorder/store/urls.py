"""Database URLs as they may be shown: on screens, in JSON, in errors, in the web page.

A URL can carry a password in two places: its user info (``postgresql://app:PW@db/x``) and
its query (``?password=PW``, ``?sslpassword=PW``, libpq's options). Both are masked; a text
that does not parse as a URL keeps nothing between ``://`` and ``@``.
"""

from __future__ import annotations

import sqlalchemy as sa

from graphtape.recorder.redaction import names_secret

MASK = "***"


def shown_url(url: str) -> str:
    """A store URL as it may be shown: a SQLite file as its path, any password masked."""
    if url.startswith("sqlite:///") and "?" not in url:
        return url[len("sqlite:///") :]
    try:
        parsed = sa.engine.make_url(url)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy parses: mask by hand
        return _masked_text(url)
    if "@" in (parsed.host or ""):  # an unescaped @ in the password: SQLAlchemy split at the first
        return _masked_text(url)
    query = {k: (MASK if names_secret(k) else v) for k, v in parsed.query.items()}
    try:
        shown = parsed.set(query=query).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a URL that parses but does not render: show nothing of it
        return "the database"
    return shown.replace("%2A%2A%2A", MASK)


def _masked_text(text: str) -> str:
    """``text`` with whatever sits between ``://`` and the last ``@`` of its authority masked."""
    scheme, sep, rest = text.partition("://")
    if not sep:
        return text if "@" not in text and "password" not in text.lower() else "the database"
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = MASK + "@" + authority.rpartition("@")[2]
    shown = f"{scheme}://{authority}{slash}{path}"
    return shown if "password" not in shown.lower() and "?" not in shown else shown.partition("?")[0]
