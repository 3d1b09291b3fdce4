"""What to do when a PostgreSQL store does not open, said after the driver's own words.

``FATAL: database "runs" does not exist`` or ``Connection refused`` says what failed but not
what to try; a newcomer pointing graphtape at a server for the first time meets these first.
The driver's text stays first: it is what a search for the problem finds.
"""

from __future__ import annotations

import re
import shlex

# (a pattern in the driver's text, any case; what to try). The first that matches is said.
_TRY = (
    (re.compile(r'database "([^"]{1,200})" does not exist', re.IGNORECASE), "create it first (createdb {0}), or name a database that exists"),
    (re.compile(r'role "[^"]{1,200}" does not exist', re.IGNORECASE), "name a role that exists as the URL's user (postgresql://USER@host/db)"),
    (re.compile(r"password authentication failed|no password supplied", re.IGNORECASE), "check the password: in the URL, $GRAPHTAPE_DB or ~/.pgpass"),
    (re.compile(r"connection refused", re.IGNORECASE), "no server answers at that host and port: start PostgreSQL, or fix the host and port in the URL"),
    (re.compile(r"failed to resolve host|could not translate host name|name or service not known", re.IGNORECASE), "check the host name in the URL"),
    (re.compile(r"server does not support ssl", re.IGNORECASE), "the server takes no SSL: drop sslmode=require from the URL"),
)


def open_hint(text: str) -> str:
    """``: what to try`` for a PostgreSQL open error graphtape recognises, else ``""``."""
    for pattern, advice in _TRY:
        found = pattern.search(text)
        if found:
            return ": " + advice.format(*(shlex.quote(g) for g in found.groups()))
    return ""
