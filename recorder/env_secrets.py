"""The secrets this process holds in its environment, found by value wherever they turn up.

A key in no known format (a vendor's bare key, a database password) is still named in the
environment: ``OPENAI_API_KEY``, ``MY_SERVICE_TOKEN``, ``DB_PASSWORD``. A tool that echoes it,
or an error that quotes it, would store it as text no pattern recognises. The values of such
variables become literal patterns of the recorder's redactor (and an export's).
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from collections.abc import Mapping

from graphtape.recorder.redaction import names_secret

MIN_LENGTH = 8  # shorter values ("true", a port, "dev") are not secrets, and would mark ordinary text
_PLAIN_NAMES = frozenset({"PWD", "OLDPWD"})  # "pwd" reads as a password; these are the shell's directories
_NOT_SECRET = re.compile(r"(?i)(?:true|false|none|null|yes|no|on|off|disabled?|enabled?|\d+)")


def env_secret_patterns(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """RE2 literal patterns for the values of environment variables named like a secret, as
    written and as JSON text or a URL would carry them (escaped, percent-encoded).

    Read for every run (a ``load_dotenv()`` after ``Recorder()`` counts), at the cost of a
    length check and a look at the secret variables found last time while nothing changed."""
    global _memo
    env = os.environ if environ is None else environ
    if environ is None and _memo is not None:
        names, fingerprint, patterns = _memo
        if fingerprint == (len(env), tuple(env.get(n) for n in names)):
            return patterns
    names, values = [], set()
    for name, value in env.items():
        value = value.strip()
        if len(value) < MIN_LENGTH or "\n" in value or name in _PLAIN_NAMES or not names_secret(name) or _NOT_SECRET.fullmatch(value):
            continue
        if value.startswith(("/", "~", ".")) and os.path.exists(os.path.expanduser(value)):
            continue  # where a key file lies (GOOGLE_APPLICATION_CREDENTIALS), not the key
        names.append(name)
        values.update({value, json.dumps(value)[1:-1], urllib.parse.quote(value, safe="")})
    patterns = tuple(re.escape(v) for v in sorted(values, key=lambda v: (-len(v), v)))
    if environ is None:
        _memo = (tuple(names), (len(env), tuple(env.get(n) for n in names)), patterns)
    return patterns


_memo: tuple[tuple[str, ...], tuple, tuple[str, ...]] | None = None
