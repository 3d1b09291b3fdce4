"""Secret redaction applied to every value before it is encoded.

Three nets: values under keys that name a secret (password, token, api_key,
authorization, ...), pydantic ``SecretStr`` values, and strings that look like
a credential wherever they appear (``sk-...`` keys, bearer tokens, AWS and
GitHub keys, private key blocks), plus patterns the user adds. Keys are also
honoured inside text that holds a serialized mapping (JSON, or the Python
repr LangChain puts in a ``ToolMessage`` when a tool returns a dict).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterable

try:  # Python 3.11+
    from re import _parser as _sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre_parse  # type: ignore[no-redef]

MARK = "[REDACTED]"

# Built-in credential patterns. scrub() only runs them on text holding one of the
# literals it checks first (a substring test is ~20x cheaper than the regex), so a
# new pattern needs its literal added there and an example in tests/test_redaction.py.
DEFAULT_PATTERNS = (
    r"sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{16,}",
    r"(?i:bearer)\s+[A-Za-z0-9._~+/\-]{12,}=*",
    r"AKIA[0-9A-Z]{16}",
    r"gh[pousr]_[A-Za-z0-9]{30,}",
    r"github_pat_[A-Za-z0-9_]{22,}",
    r"xox[abprs]-[A-Za-z0-9\-]{10,}",
    r"AIza[0-9A-Za-z_\-]{35}",
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
)

# -- secret keys ---------------------------------------------------------------
# Keys are judged by their words (split on _ - . space and camelCase), so
# "passage" or "num_tokens" are not secrets while "dbPassword" and "x-api-key" are.

# A word that is, or ends with, one of these names a secret: "pwd", "clientsecret", "JSESSIONID".
_SECRET_WORDS = frozenset({"pass", "pwd", "auth"})
_SECRET_ENDINGS = (
    "password",
    "passwords",
    "passwd",
    "passphrase",
    "passcode",
    "secret",
    "secrets",
    "token",
    "apikey",
    "apikeys",
    "authorization",
    "authorisation",
    "credential",
    "credentials",
    "cookie",
    "cookies",
    "sessionid",
    "privatekey",
    "accesskey",
    "secretkey",
)
# Two words that together name a secret: api_key, aws_access_key_id, sessionId.
_SECRET_PAIRS = frozenset(
    {
        ("api", "key"),
        ("api", "keys"),
        ("access", "key"),
        ("private", "key"),
        ("secret", "key"),
        ("signing", "key"),
        ("encryption", "key"),
        ("session", "key"),
        ("session", "id"),
    }
)
# With one of these, "token" means model tokens: token_count, input_token_details, token_usage.
_TOKEN_COUNT_WORDS = frozenset(
    {
        "count",
        "counts",
        "num",
        "number",
        "used",
        "usage",
        "details",
        "detail",
        "max",
        "min",
        "limit",
        "budget",
        "length",
        "remaining",
        "input",
        "output",
        "total",
        "prompt",
        "completion",
        "reasoning",
        "cached",
        "cache",
        "ids",
        "logprobs",
    }
)
# A quoted key, ":" or "=", then a quoted value or a bare number: "password": "x",
# 'api_key': 'x', \"token\": \"x\" (JSON inside JSON), "pin": 1234.
_KEY_VALUE = re.compile(
    r"""(?P<q>\\?["'])(?P<key>[A-Za-z0-9_.\- ]{1,64})(?P=q)\s*[:=]\s*"""
    r"""(?:(?P<vq>\\?["'])(?P<val>.*?)(?P=vq)|(?P<bare>-?[0-9][0-9A-Za-z.\-]*))"""
)
# Every built-in secret key holds one of these (see names_secret): text without any
# of them cannot hold a secret key, and the key/value scan is skipped.
_KEY_FRAGMENTS = ("pass", "pwd", "auth", "secret", "token", "key", "credential", "cookie", "session")
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_KEY_CACHE_SIZE = 10_000


@functools.lru_cache(maxsize=8192)
def names_secret(key: str) -> bool:
    """Whether ``key`` names a secret by its words (the built-in rule, without user keys)."""
    words = [w.lower() for w in _WORD.findall(key)]
    secret = False
    only_token = True
    prev = ""
    for w in words:
        if w in _SECRET_WORDS or w.endswith(_SECRET_ENDINGS):
            secret = True
            only_token = only_token and w == "token"
        elif (prev, w) in _SECRET_PAIRS:
            secret = True
            only_token = False
        prev = w
    if secret and only_token and not _TOKEN_COUNT_WORDS.isdisjoint(words):
        return False
    return secret


# -- user patterns -------------------------------------------------------------
_LEADING_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")
_FLAG_LETTERS = ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"), (re.VERBOSE, "x"), (re.ASCII, "a"))
# Backreferences and conditionals count groups, which joining patterns renumbers.
_GROUP_REFERENCE = re.compile(r"\\[1-9]|\(\?P=|\(\?\(")


def _min_width(pattern: str) -> int | None:
    # The length of the shortest text the pattern matches; None if unknown (re's parser is internal).
    try:
        return int(_sre_parse.parse(pattern).getwidth()[0])
    except Exception:  # noqa: BLE001 - only an optimisation
        return None


def _user_pattern(p: str | re.Pattern[str]) -> tuple[str, re.Pattern[str], int]:
    """Check one user pattern; return it rewritten to be joinable, compiled alone, and its minimum length."""
    if isinstance(p, re.Pattern):
        if not isinstance(p.pattern, str):
            raise ValueError(f"bad redaction pattern {p.pattern!r}: it must match text, not bytes")
        text, flags, alone = p.pattern, "".join(letter for flag, letter in _FLAG_LETTERS if p.flags & flag), p
    elif isinstance(p, str):
        text, flags = p, ""
        try:
            alone = re.compile(p)
        except re.error as exc:
            raise ValueError(f"bad redaction pattern {p!r}: {exc}") from None
    else:
        raise ValueError(f"bad redaction pattern {p!r}: expected a regular expression string")
    # A global flag like (?i) is legal only at the start of the whole regex: scope it to this pattern.
    while m := _LEADING_FLAGS.match(text):
        flags += m.group(1)
        text = text[m.end() :]
    if flags:
        # A trailing comment in verbose mode would swallow the closing parenthesis.
        text = f"(?{''.join(dict.fromkeys(flags))}:{text}{chr(10) if 'x' in flags else ''})"
    width = _min_width(text)
    if width == 0 or alone.match("") is not None:
        raise ValueError(f"bad redaction pattern {alone.pattern!r}: it can match empty text")
    return text, alone, width or 1


_BUILTIN_MIN_LEN = min(_min_width(p) or 1 for p in DEFAULT_PATTERNS)


class Redactor:
    """Scrubs secrets and counts how many values it redacted.

    ``patterns`` are extra regular expressions (strings or compiled) to scrub
    from any text; ``keys`` are extra key fragments whose values are redacted
    whole (matched case-insensitively anywhere in a key). An invalid pattern
    raises ``ValueError`` here, before anything is recorded.
    """

    def __init__(self, patterns: Iterable[str | re.Pattern[str]] = (), keys: Iterable[str] = ()) -> None:
        if isinstance(patterns, (str, re.Pattern)):
            patterns = (patterns,)
        if isinstance(keys, str):
            keys = (keys,)
        joined: list[str] = []
        alone: list[re.Pattern[str]] = []
        min_len = _BUILTIN_MIN_LEN
        for p in patterns:
            text, compiled, width = _user_pattern(p)
            min_len = min(min_len, width)
            # Joining renumbers groups: keep patterns that refer to theirs on their own.
            if compiled.groups and (compiled.groupindex or _GROUP_REFERENCE.search(text)):
                alone.append(compiled)
            else:
                joined.append(text)
        try:
            self._all = re.compile("|".join(f"(?:{p})" for p in (*DEFAULT_PATTERNS, *joined)))
            self._user = re.compile("|".join(f"(?:{p})" for p in joined)) if joined else None
        except re.error as exc:  # each compiled alone, so this would be our bug; still say which
            raise ValueError(f"bad redaction patterns {joined!r}: {exc}") from None
        self._alone = tuple(alone)
        self._min_len = min_len
        #: Text shorter than this is never changed by :meth:`scrub` (callers may skip it).
        self.min_length = min_len
        user_keys = []
        for k in keys:
            if not isinstance(k, str) or not k.strip():
                raise ValueError(f"bad redaction key {k!r}: expected a non-empty string")
            user_keys.append(k.lower())
        self._user_keys = tuple(user_keys)
        self._fragments = _KEY_FRAGMENTS + self._user_keys
        self._lock = threading.Lock()
        self._key_cache: dict[str, bool] = {}
        self._scrubbed_keys: dict[str, tuple[str | None, int]] = {}
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
            hit = self._judge_key(key)
        return hit

    def _judge_key(self, key: str) -> bool:
        # Kept out of is_secret_key: a closure here would cost every cached call a cell.
        hit = names_secret(key)
        if not hit and self._user_keys:
            low = key.lower()
            hit = any(k in low for k in self._user_keys)
        if len(self._key_cache) >= _KEY_CACHE_SIZE:
            self._key_cache.clear()  # unbounded key sets (ids as keys) must not grow this forever
        self._key_cache[key] = hit
        return hit

    def scrub_key(self, key: str) -> str:
        """:meth:`scrub` for a mapping key: the same result, remembered (keys repeat a lot).

        Returns ``key`` itself when nothing in it is a secret; each redaction is
        counted every time, as :meth:`scrub` counts it.
        """
        hit = self._scrubbed_keys.get(key)
        if hit is None:
            before = self.count
            new = self.scrub(key)
            hit = (None if new == key else new, self.count - before)
            if len(self._scrubbed_keys) >= _KEY_CACHE_SIZE:
                self._scrubbed_keys.clear()
            self._scrubbed_keys[key] = hit
            return key if hit[0] is None else new
        if hit[0] is None:
            return key
        self._bump(hit[1])
        return hit[0]

    def scrub(self, text: str) -> str:
        """Replace credential-looking substrings of ``text``."""
        if len(text) < self._min_len:
            return text
        # Each built-in pattern needs one of these literals (see DEFAULT_PATTERNS); without
        # any, only the user's patterns can match, and the big alternation is skipped.
        low = text.lower()
        if (
            "sk-" in text
            or "AKIA" in text
            or "AIza" in text
            or "xox" in text
            or "PRIVATE KEY-----" in text
            or ("_" in text and "gh" in text)
            or "bearer" in low
        ):
            new, n = self._all.subn(MARK, text)
        elif self._user is not None:
            new, n = self._user.subn(MARK, text)
        else:
            new, n = text, 0
        for rx in self._alone:
            new, k = rx.subn(MARK, new)
            n += k
        if ('"' in text or "'" in text) and any(f in low for f in self._fragments):
            new, k = self._scrub_keyed(new)
            n += k
        if n:
            self._bump(n)
        return new

    def _scrub_keyed(self, text: str) -> tuple[str, int]:
        """Redact the values of secret keys in serialized mappings inside ``text``."""
        hits = 0

        def replace(m: re.Match[str]) -> str:
            nonlocal hits
            value = m.group("val") if m.group("vq") else m.group("bare")
            if not value or value == MARK or not self.is_secret_key(m.group("key")):
                return m.group(0)
            hits += 1
            start, end = m.span("val") if m.group("vq") else m.span("bare")
            base = m.start()
            whole = m.group(0)
            return whole[: start - base] + MARK + whole[end - base :]

        return _KEY_VALUE.sub(replace, text), hits
