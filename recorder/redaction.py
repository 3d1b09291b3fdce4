"""Secret redaction applied to every value before it is encoded.

Three nets: values under keys that name a secret (password, token, api_key,
authorization, ...), pydantic ``SecretStr`` values, and strings that look like
a credential wherever they appear (``sk-...`` keys, bearer tokens, AWS and
GitHub keys, private key blocks), plus patterns the user adds.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

MARK = "[REDACTED]"

SECRET_KEY = re.compile(
    r"(pass(word|wd|phrase)?|secret|token|api[_-]?key|apikey|authori[sz]ation|credential|private[_-]?key|access[_-]?key|session[_-]?id|cookie)",
    re.IGNORECASE,
)
# Keys that contain a secret word but hold counts or metadata, not secrets.
NOT_SECRET_KEY = re.compile(r"(^|_)(tokens?_(count|usage|used)|max_tokens|(input|output|total|prompt|completion|reasoning|cached)_tokens?|token_usage|usage)$|^tokens$", re.IGNORECASE)

DEFAULT_PATTERNS = (
    r"sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{16,}",
    r"(?i:bearer)\s+[A-Za-z0-9._~+/\-]{12,}=*",
    r"AKIA[0-9A-Z]{16}",
    r"gh[pousr]_[A-Za-z0-9]{30,}",
    r"xox[abprs]-[A-Za-z0-9\-]{10,}",
    r"AIza[0-9A-Za-z_\-]{35}",
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
)


class Redactor:
    """Scrubs secrets and counts how many values it redacted."""

    def __init__(self, patterns: Iterable[str] = (), keys: Iterable[str] = ()) -> None:
        extra = list(patterns)
        self._pattern = re.compile("|".join(f"(?:{p})" for p in (*DEFAULT_PATTERNS, *extra)))
        self._key = SECRET_KEY if not keys else re.compile(SECRET_KEY.pattern + "|" + "|".join(re.escape(k) for k in keys), re.IGNORECASE)
        self._lock = threading.Lock()
        self._key_cache: dict[str, bool] = {}
        self.count = 0

    def _bump(self, n: int = 1) -> None:
        with self._lock:
            self.count += n

    def mark(self) -> str:
        """The replacement for a whole secret value (counted)."""
        self._bump()
        return MARK

    def is_secret_key(self, key: str) -> bool:
        """Whether a mapping key names a secret (cached: keys repeat a lot)."""
        hit = self._key_cache.get(key)
        if hit is None:
            hit = bool(self._key.search(key)) and not NOT_SECRET_KEY.search(key)
            if len(self._key_cache) < 10_000:
                self._key_cache[key] = hit
        return hit

    def scrub(self, text: str) -> str:
        """Replace credential-looking substrings of ``text``."""
        if len(text) < 12:
            return text
        new, n = self._pattern.subn(MARK, text)
        if n:
            self._bump(n)
        return new
