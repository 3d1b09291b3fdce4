"""Secret redaction applied to every value before it is encoded.

Three nets: values under keys that name a secret (password, token, api_key,
authorization, database_url, *_key ...), pydantic ``SecretStr`` values, and
strings that look like a credential wherever they appear (the formats of
``secret_formats``: a catalogue's and graphtape's own), plus patterns the user
adds. Keys are also honoured inside text: a serialized mapping (JSON, or the
Python repr LangChain puts in a ``ToolMessage`` when a tool returns a dict) and
``key=value`` / ``key: value`` text (environment files, YAML, URL queries,
libpq strings, HTTP headers).

Every pattern runs under RE2 (``linear_regex``): scrubbing any text takes time
linear in its length, whatever the text (``benchmarks/bench_redaction.py``).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Collection, Iterable, Iterator
from typing import Any

from graphtape.recorder.linear_regex import compile_linear
from graphtape.recorder.lone_surrogates import displayable

try:  # Python 3.11+
    from re import _parser as _sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre_parse  # type: ignore[no-redef]
from graphtape.recorder.secret_formats import OWN_PATTERNS, OWN_TEXT_PATTERNS, OWN_TOKENS, TOKEN_START, catalogue

MARK = "[REDACTED]"

# The formats graphtape itself writes (each has an example in tests/test_redaction.py);
# the catalogue's are added when a redactor is made (secret_formats.catalogue).
DEFAULT_PATTERNS = OWN_PATTERNS

# -- secret keys ---------------------------------------------------------------
# Keys are judged by their words (split on _ - . space and camelCase), so
# "passage" or "num_tokens" are not secrets while "dbPassword" and "x-api-key" are.

# A word that is, or ends with, one of these names a secret: "pwd", "clientsecret", "JSESSIONID".
_SECRET_WORDS = frozenset({"pass", "pwd", "auth", "jwt", "bearer", "dsn", "pgpassword"})
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
# Two words that together name a secret: api_key, aws_access_key_id, sessionId, database_url.
_SECRET_PAIRS = frozenset(
    {
        ("api", "key"),
        ("api", "keys"),
        ("access", "key"),
        ("access", "keys"),
        ("private", "keys"),
        ("secret", "keys"),
        ("signing", "keys"),
        ("encryption", "keys"),
        ("private", "key"),
        ("secret", "key"),
        ("signing", "key"),
        ("encryption", "key"),
        ("session", "key"),
        ("session", "id"),
        ("database", "url"),
        ("db", "url"),
        ("connection", "string"),
        ("conn", "string"),
        ("connection", "url"),
        ("webhook", "url"),
        ("webhook", "secret"),
    }
)
# "<something>_key" names a secret (ssh_key, hmac_key, subscription_key, AccountKey) unless the
# something says it is a lookup key: these never hold credentials.
_PLAIN_KEY_WORDS = frozenset(
    {
        "primary", "foreign", "sort", "cache", "partition", "routing", "idempotency", "unique", "composite",
        "lookup", "map", "dict", "hash", "object", "row", "group", "message", "public", "dedup", "dedupe",
        "order", "index", "table", "column", "field", "metadata", "shard", "join", "entity", "record",
        "item", "node", "state", "config", "setting", "ref", "reference", "natural", "surrogate", "tool",
        "run", "thread", "checkpoint", "step", "task", "trace", "span", "request", "query", "search",
        "result", "cursor", "page", "event", "dedupe", "s3", "blob", "file", "storage", "path", "bucket",
        "memory", "namespace", "cluster", "element", "list", "sorting", "unique", "grouping", "foreign",
        "input", "output", "stream", "channel", "interrupt", "model", "prompt", "content", "label", "name",
        "type", "format", "template", "translation", "locale", "schema", "version", "display", "hot", "short",
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
# Every built-in secret key holds one of these (see names_secret): text without any
# of them cannot hold a secret key, and the key/value scan is skipped.
_KEY_FRAGMENTS = ("pass", "pwd", "auth", "secret", "token", "key", "credential", "cookie", "session", "jwt", "bearer", "dsn", "url", "string")
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_KEY_CACHE_SIZE = 100_000  # keys (and short clean texts) remembered per run: a state keyed by ids holds many
_CLEAN_TEXT_LEN = 256  # text up to this long that holds no secret is remembered as clean


@functools.lru_cache(maxsize=65536)
def names_secret(key: str) -> bool:
    """Whether ``key`` names a secret by its words (the built-in rule, without user keys)."""
    words = [w.lower() for w in _WORD.findall(key)]
    secret = False
    only_token = True
    prev = ""
    for i, w in enumerate(words):
        if w in _SECRET_WORDS or w.endswith(_SECRET_ENDINGS):
            secret = True
            only_token = only_token and w == "token"
        elif (prev, w) in _SECRET_PAIRS or (w == "key" and i > 0 and prev not in _PLAIN_KEY_WORDS and not prev.isdigit()):
            secret = True
            only_token = False
        prev = w
    if secret and only_token and not _TOKEN_COUNT_WORDS.isdisjoint(words):
        return False
    return secret


# -- keys in text ----------------------------------------------------------------
# A key written into text, then its separator: "password": / 'api_key': / \"token\": (JSON inside
# a JSON string, at any depth of escaping) / an unquoted key=value or key: value after a delimiter
# (.env files, YAML, URL queries, libpq strings, HTTP headers). Only the key is matched: its
# value is read afterwards, and only when the key names a secret, so a value that is itself text
# holding keys (JSON inside a JSON string, a URL with a query) is still searched. RE2 has no
# backreferences: each quoting style is an alternative of its own, and a value's quotes are
# matched to its key's escaping depth by a pattern made for that depth.
_KEY = r"[A-Za-z0-9_.\- ]+"  # unbounded repeats: counted ones ({1,64}) blow up RE2's automaton
_BARE_KEY = r"[A-Za-z][A-Za-z0-9_.\-]*"
_KEY_AT = compile_linear(
    rf'(?P<esc>\\*)"(?P<k1>{_KEY})\\*"\s*[:=]\s*'
    rf"|'(?P<k2>{_KEY})'\s*[:=]\s*"
    # The spaces after a bare key's separator are left to the next match: in "error: token=x" they
    # are the delimiter before the next key.
    rf"|(?:^|[\s?&;,{{(\[\"'/\-]|\\[nrt])(?P<k4>{_BARE_KEY})[ \t]*[:=]"
)
_BARE_NAME = compile_linear(rf"{_BARE_KEY}$")  # the key at the end of a bare match (after its delimiter)
# A multipart form field: its name in the part's header (its quotes escaped too, in JSON text),
# its value after the blank line.
_EOL = r"(?:\r?\n|\\r\\n|\\n)"  # a line end, also escaped (a repr or JSON text of the body)
_FORM_FIELD = compile_linear(
    rf'(?i:content-disposition)[ \t]*:[ \t]*(?i:form-data)[^\r\n\\]*?\bname=\\*"(?P<k>[^"\\\r\n]+)\\*"[^\r\n\\]*'
    rf"(?:{_EOL}[^\r\n\\]+)*?{_EOL}{_EOL}(?P<v>[^\r\n\\]+)"
)
_FORM_KEY, _FORM_VALUE = _FORM_FIELD.groupindex["k"], _FORM_FIELD.groupindex["v"]
# An XML or HTML element's text under a tag naming a secret (<password>...</password>, a SOAP
# <wsse:Password>, <secret name="x">...</secret>): its closing tag is matched to its opening one
# by comparing the two names (RE2 has no backreferences).
_XML_ELEMENT = compile_linear(r"<(?P<open>[A-Za-z_][\w.\-:]*)(?:\s[^<>]*)?>(?P<v>[^<]+)</(?P<close>[A-Za-z_][\w.\-:]*)\s*>")
_XML_OPEN, _XML_VALUE, _XML_CLOSE = (_XML_ELEMENT.groupindex[g] for g in ("open", "v", "close"))
_SPACE = b" \t\r\n\f\v"
# The value after a secret key, matched where the key ends (anchored): a string in the quotes
# it is written with (escapes included, so an escaped quote does not end it), a bare number,
# or an unquoted word (an authorization scheme and its credential: "Token abc").
_NUMBER = r"-?[0-9][0-9A-Za-z.\-]*"
_SQ = r"'(?P<sq>(?:[^'\\\n]|\\.)*)'"
_BARE = r"(?P<bare>(?:(?i:basic|bearer|token|digest|apikey|key)[ \t]+)?[^\s\"',;&}\])\\]+)"
_SINGLE_QUOTED = compile_linear(rf"{_SQ}|(?P<num>{_NUMBER})")
_UNQUOTED = compile_linear(rf"{_SQ}|{_BARE}")
_QUOTE_AHEAD = compile_linear(r'\\*"')
_MAX_ESCAPES = 15  # a quote after at most this many backslashes is read (JSON in JSON, four deep)


_BRACKET_SCAN = 1 << 20  # an object under a secret key longer than this is left to the other rules


def _bracket_end(data: bytes, at: int) -> int | None:
    """Where the object or list opening at ``at`` closes (the index of its closing bracket), or
    None when it does not within ``_BRACKET_SCAN`` bytes. Quoted text is skipped, escapes too."""
    depth = 0
    quote = 0
    i, end = at, min(len(data), at + _BRACKET_SCAN)
    while i < end:
        c = data[i]
        if quote:
            if c == 0x5C:  # a backslash: the next byte is escaped
                i += 1
            elif c == quote:
                quote = 0
        elif c in (0x22, 0x27):
            quote = c
        elif c in (0x7B, 0x5B):
            depth += 1
        elif c in (0x7D, 0x5D):
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


@functools.lru_cache(maxsize=_MAX_ESCAPES + 1)
def _double_quoted(escapes: int) -> Any:
    """A double-quoted value whose quotes come after ``escapes`` backslashes, or a bare number.

    JSON inside a JSON string writes a quote after 2**d - 1 backslashes at depth d (``"``,
    ``\\"``, ``\\\\\\"``...): the value ends at the first quote whose run of backslashes has that
    length modulo 2**(d+1) (so an escaped backslash just before the closing quote is read right).
    Other layers (a Python repr of JSON doubles backslashes) end at the first quote after exactly
    that many. Any other run before a quote belongs to the value, and runs are always read whole.
    """
    depth = (escapes + 1).bit_length() - 1
    if 2**depth - 1 == escapes:
        period = 2 ** (depth + 1)

        def run(n: int) -> str:
            return rf"(?:\\{{{period}}})*\\{{{n}}}"

        inner = "|".join(run(n) for n in range(period) if n != escapes)
        end = run(escapes)
    else:
        inner = "|".join(([rf"\\{{0,{escapes - 1}}}"] if escapes else []) + [rf"\\{{{escapes + 1},}}"])
        end = rf"\\{{{escapes}}}"
    body = rf'(?:[^"\\\n]|\\+[^"\\\n]|(?:{inner})")*'
    return compile_linear(rf'{end}"(?P<dq>{body}){end}"|(?P<num>{_NUMBER})')


_MARK_BYTES = MARK.encode()


# -- user patterns -------------------------------------------------------------
_LEADING_FLAGS = re.compile(r"\(\?([imsU]+)\)")
# A flag group that turns on verbose mode, (?x) or (?ix:...): flag letters only, so a lookaround
# such as (?=x) or (?<!x) is left to RE2, which names it as one.
_VERBOSE_FLAG = re.compile(r"\(\?[aiLmsuU-]*x[aiLmsuU-]*[:)]")
_FLAG_LETTERS = ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"))


def _user_pattern(p: str | re.Pattern[str]) -> str:
    """Check one user pattern (it must run under RE2 and never match empty text); return it scoped to be joined."""
    if isinstance(p, re.Pattern):
        if not isinstance(p.pattern, str):
            raise ValueError(f"bad redaction pattern {p.pattern!r}: it must match text, not bytes")
        if p.flags & re.VERBOSE:
            raise ValueError(f"bad redaction pattern {p.pattern!r}: verbose mode (re.X) is not RE2 syntax; write it on one line")
        text, flags = p.pattern, "".join(letter for flag, letter in _FLAG_LETTERS if p.flags & flag)
    elif isinstance(p, str):
        text, flags = p, ""
    else:
        raise ValueError(f"bad redaction pattern {p!r}: expected a regular expression string")
    # A global flag like (?i) is legal only at the start of the whole regex: scope it to this pattern.
    while m := _LEADING_FLAGS.match(text):
        flags += m.group(1)
        text = text[m.end() :]
    scoped = f"(?{''.join(dict.fromkeys(flags))}:{text})" if flags else text
    shown = p.pattern if isinstance(p, re.Pattern) else p
    if _VERBOSE_FLAG.match(text) or "(?x)" in text:
        raise ValueError(f"bad redaction pattern {shown!r}: verbose mode (?x) is not RE2 syntax; write it on one line")
    try:
        alone = compile_linear(scoped)
    except ValueError as exc:
        raise ValueError(f"bad redaction pattern {shown!r}: {exc}") from None
    if alone.search("") is not None or _min_width(scoped) == 0:
        raise ValueError(f"bad redaction pattern {shown!r}: it can match empty text")
    return scoped


def _min_width(pattern: str) -> int | None:
    """The length of the shortest text ``pattern`` matches (read by Python's parser); ``None`` if unknown."""
    try:
        return int(_sre_parse.parse(pattern).getwidth()[0])
    except Exception:  # noqa: BLE001 - RE2-only syntax: the empty-text search above decides
        return None


@functools.lru_cache(maxsize=64)
def _compiled(user: tuple[str, ...]) -> tuple[Any, Any, Any]:
    """``(tokens, text patterns, either)``: RE2 alternations (cached: a redactor is made per run).

    Tokens are matched where a token may start, the start captured as ``start`` (kept when
    scrubbing); text patterns (private keys, URL passwords, the user's) anywhere. ``either``
    finds whether any of them is in a text in one pass: most text holds none, and then the two
    substitutions (each a pass of its own) need not run.
    """
    cat_tokens, cat_text = catalogue()
    token_pattern = TOKEN_START + "(?:" + "|".join(f"(?:{p})" for p in (*OWN_TOKENS, *cat_tokens)) + ")"
    text_pattern = "|".join(f"(?:{p})" for p in (*OWN_TEXT_PATTERNS, *cat_text, *user))
    tokens, text = compile_linear(token_pattern), compile_linear(text_pattern)
    try:
        either = compile_linear(f"(?:{token_pattern})|(?:{text_pattern})")
    except ValueError:  # the two together beyond RE2's budget (many user patterns): both passes run
        either = None
    return tokens, text, either


class Redactor:
    """Scrubs secrets and counts how many values it redacted.

    ``patterns`` are extra regular expressions (strings or compiled, in RE2
    syntax: no lookarounds, no backreferences) to scrub from any text; ``keys``
    are extra key fragments whose values are redacted whole (matched
    case-insensitively anywhere in a key). An invalid pattern raises
    ``ValueError`` here, before anything is recorded. Text in ``known_clean`` is
    returned as it is: text read back from a recording (a replay hands it back),
    redacted when it was recorded, at least as strictly as here.
    """

    #: Text shorter than this is never changed by the built-in formats (callers may skip it).
    min_length = 8

    def __init__(self, patterns: Iterable[str | re.Pattern[str]] = (), keys: Iterable[str] = (), *, known_clean: Collection[str] = frozenset()) -> None:
        if isinstance(patterns, (str, re.Pattern)):
            patterns = (patterns,)
        if isinstance(keys, str):
            keys = (keys,)
        user = tuple(_user_pattern(p) for p in patterns)
        self._tokens, self._text, self._either = _compiled(user)
        self._token_start = self._tokens.groupindex["start"]
        if user:
            self.min_length = 1  # a user pattern may match short text
        user_keys = []
        for k in keys:
            if not isinstance(k, str) or not k.strip():
                raise ValueError(f"bad redaction key {k!r}: expected a non-empty string")
            user_keys.append(k.lower())
        self._user_keys = tuple(user_keys)
        self._fragments = _KEY_FRAGMENTS + self._user_keys
        self._lock = threading.Lock()
        self._key_cache: dict[str, bool] = {}
        self._known_clean = known_clean
        self._found_clean: set[str] = set()  # short text scrub() left as it was
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
        # Bounded: unbounded key sets (ids as keys) must not grow this forever. Full, it keeps what
        # it holds (emptying it would have every key of a large mapping judged again each step).
        if len(self._key_cache) < _KEY_CACHE_SIZE:
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
            if len(self._scrubbed_keys) < _KEY_CACHE_SIZE:
                self._scrubbed_keys[key] = hit
            return key if hit[0] is None else new
        if hit[0] is None:
            return key
        self._bump(hit[1])
        return hit[0]

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where secrets are in ``text``, in order and not overlapping: credential formats and the
        values of secret keys (nothing counted or changed)."""
        if len(text) < self.min_length:
            return []
        try:
            found = self._format_spans(text)
        except UnicodeEncodeError:
            text = displayable(text)
            found = self._format_spans(text)
        if self._may_hold_keys(text):
            data = text.encode()
            chars = 0  # byte offsets to character offsets, counted forward once
            seen = 0
            for start, end in self._keyed_values(data):
                chars += len(data[seen:start].decode())
                value = len(data[start:end].decode())
                found.append((chars, chars + value))
                chars += value
                seen = end
        merged: list[tuple[int, int]] = []
        for start, end in sorted(found):  # a key two formats know (a token found anywhere too) is one span
            if merged and start < merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        return merged

    def scrub(self, text: str) -> str:
        """Replace credential-looking substrings of ``text`` (in time linear in its length)."""
        if len(text) < self.min_length or text in self._known_clean or text in self._found_clean:
            return text
        try:
            clean = self._either is not None and self._either.search(text) is None and not self._may_hold_keys(text)
        except UnicodeEncodeError:
            clean = False  # lone surrogates: the passes below read it as displayable text
        if clean:
            self._remember_clean(text)
            return text
        scanned = text
        try:
            new, n = self._tokens.subn(_mark_token, text)
        except UnicodeEncodeError:
            scanned = displayable(text)
            new, n = self._tokens.subn(_mark_token, scanned)
        new, k = self._text.subn(_mark_match, new)
        n += k
        if self._may_hold_keys(new):
            new, k = self._scrub_keyed(new)
            n += k
        if not n and scanned is not text:
            return text  # nothing to hide: the text as it was, lone surrogates and all (the encoder keeps them)
        if n:
            self._bump(n)
        elif new == text:
            self._remember_clean(text)
        return new

    def _remember_clean(self, text: str) -> None:
        # Short text repeats (a message's type, a tool's name, an id): scanned once.
        if len(text) <= _CLEAN_TEXT_LEN and len(self._found_clean) < _KEY_CACHE_SIZE:
            self._found_clean.add(text)

    def _format_spans(self, text: str) -> list[tuple[int, int]]:
        start = self._token_start
        return [(m.end(start), m.end()) for m in self._tokens.finditer(text)] + [m.span() for m in self._text.finditer(text)]

    def _may_hold_keys(self, text: str) -> bool:
        if "=" not in text and ":" not in text and "</" not in text:
            return False
        low = text.lower()
        return any(f in low for f in self._fragments)

    def _scrub_keyed(self, text: str) -> tuple[str, int]:
        """Redact the values of secret keys written into ``text``."""
        data = text.encode()
        parts: list[bytes] = []
        last = 0
        for start, end in self._keyed_values(data):
            parts.append(data[last:start])
            parts.append(_MARK_BYTES)
            last = end
        if not parts:
            return text, 0
        parts.append(data[last:])
        return b"".join(parts).decode(), (len(parts) - 1) // 2

    def _keyed_values(self, data: bytes) -> Iterator[tuple[int, int]]:
        """Byte spans of the values of secret keys in UTF-8 ``data``, in order, not overlapping:
        keys written with their values, and multipart form fields named like a secret."""
        forms = [m.span(_FORM_VALUE) for m in _FORM_FIELD.finditer(data) if self.is_secret_key(m.group(_FORM_KEY).decode(errors="replace"))] if b"form-data" in data.lower() else []
        if b"</" in data:
            forms += [m.span(_XML_VALUE) for m in _XML_ELEMENT.finditer(data) if self._names_a_secret_element(m.group(_XML_OPEN), m.group(_XML_CLOSE))]
        if not forms:
            yield from self._key_value_spans(data)
            return
        done = 0
        for start, end in sorted([*forms, *self._key_value_spans(data)]):
            if start >= done:
                yield start, end
                done = end

    def _names_a_secret_element(self, opening: bytes, closing: bytes) -> bool:
        if opening != closing:
            return False
        name = opening.decode(errors="replace")
        return self.is_secret_key(name.rpartition(":")[2])  # a namespace prefix (wsse:) says nothing

    def _key_value_spans(self, data: bytes) -> Iterator[tuple[int, int]]:
        """Byte spans of the values of secret keys written with their values, in order, not overlapping.

        Works on bytes: RE2 takes ``str`` by encoding all of it on every call, so reading
        each value where its key ends would cost the whole text again per key.
        """
        done = 0  # the end of the last value redacted: keys inside it are gone with it
        is_secret = self.is_secret_key
        for m in _KEY_AT.finditer(data):
            start, at = m.span()
            if start < done:
                continue
            # The match is short: its style and key are read from its text, not through group
            # lookups (each costs the RE2 wrapper more than the rest of this loop).
            core = data[start:at].rstrip(_SPACE)[:-1].rstrip(_SPACE)  # the match without its separator
            if core[-1:] == b"'":
                key = core[1:-1]
                value = _SINGLE_QUOTED
            elif core[-1:] == b'"':
                escapes = len(core) - len(core.lstrip(b"\\"))
                if escapes > _MAX_ESCAPES:
                    continue
                key = core[escapes + 1 :].rstrip(b'"').rstrip(b"\\")
                value = _double_quoted(escapes)
            else:
                key = _BARE_NAME.search(core).group(0)
                value = None
                while data[at : at + 1] in (b" ", b"\t"):
                    at += 1
            if not is_secret(key.decode().strip()):
                continue
            if data[at : at + 1] in (b"{", b"["):
                # An object or list under a secret key ({"password": {"current": ...}} in a tool's
                # JSON text): everything inside its brackets goes.
                close = _bracket_end(data, at)
                if close is not None and close > at + 1 and not data.startswith(_MARK_BYTES[:-1], at + 1) and not data.startswith(_MARK_BYTES, at):
                    yield at + 1, close
                    done = close
                continue
            if value is None:
                quote = _QUOTE_AHEAD.match(data, at)
                if quote is not None:
                    escapes = quote.end() - at - 1
                    if escapes > _MAX_ESCAPES:
                        continue
                    value = _double_quoted(escapes)
                else:
                    value = _UNQUOTED
            v = value.match(data, at)
            if v is None:
                continue
            vstart, vend = v.span(1 if data[at : at + 1] in (b'"', b"'", b"\\") else 2)
            if vstart == vend or data.startswith(_MARK_BYTES[:-1], vstart):
                continue
            yield vstart, vend
            done = vend


def _mark_token(m: Any) -> str:
    """The replacement of one token: the character (or escaped newline) before it stays."""
    return m.group("start") + _mark_keeping_key(m.group(0)[len(m.group("start")) :])


def _mark_match(m: Any) -> str:
    return _mark_keeping_key(m.group(0))


# A format that takes in the name it is written under ("authorization": "Basic ...",
# aws_secret_access_key = '...') keeps that name, its separator and quotes: the text then reads
# as the mapping it came from reads once its secret key is redacted ('key': '[REDACTED]'), so a
# replay that hands back the redacted mapping and a node that writes it out as text agree.
_NAMED = re.compile(r"""([A-Za-z_][\w\-]*)(["']?\s*[:=]\s*)(["']?)""")


def _mark_keeping_key(found: str) -> str:
    named = _NAMED.match(found)
    if named is None or named.end() >= len(found) or not names_secret(named.group(1)):
        return MARK
    quote = named.group(3)
    return found[: named.end()] + MARK + (quote if quote and found.endswith(quote) else "")
