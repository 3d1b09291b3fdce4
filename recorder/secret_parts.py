"""Which part of a matched credential format is the secret, so only that part is marked.

A format matches the context that tells a credential apart (a URL's scheme and user, a query
parameter's name, an authorization scheme) along with the credential itself. Marking the whole
match took away what a user reads a recording for: ``/a?api_key=X&page=2`` read
``/a[REDACTED]&page=2`` and ``postgresql://app:X@db:5432/orders`` read ``[REDACTED]db:5432/orders``.
Here the context is kept and only the credential goes: ``/a?api_key=[REDACTED]&page=2``,
``postgresql://app:[REDACTED]@db:5432/orders``, ``Bearer [REDACTED]``.

Each rule reads only the matched text (short, and already bounded by the format), anchored, in
RE2: linear in the match.
"""

from __future__ import annotations

from graphtape.recorder.linear_regex import compile_linear

# (RE2's match objects take group numbers, not names: each rule's groups are in order.)
# A URL's credentials: scheme://user:password@ (the catalogue's form starts at "://"). The
# password is everything between the user's colon and the last "@" (it may hold "@" and ":").
_URL_PASSWORD = compile_linear(r"(?:[A-Za-z][A-Za-z0-9+.\-]*)?://([^\s/:@\"'<>]*):([^\s/\"'<>]+)@")
# A token given as a URL's user, with no password: https://<token>@github.com.
_URL_TOKEN = compile_linear(r"[A-Za-z][A-Za-z0-9+.\-]*://([A-Za-z0-9_\-]+)@")
# A query or fragment parameter (plain or percent-encoded): ?api_key=, &sig=, %3Ftoken%3D.
_QUERY = compile_linear(r"(?:[?&#]|%3[Ff]|%26|%23)[A-Za-z0-9_\-]+(?:=|%3[Dd])")
# A webhook's URL: its host and route name the service, its path is the credential.
_WEBHOOK = compile_linear(r"https://(?:hooks\.slack\.com/(?:services|workflows)/|(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/)")
# An npm registry line: //registry.npmjs.org/:_authToken=<token> (or :_auth=, :_password=).
_NPM = compile_linear(r"//[^\s]*/:_(?:authToken|auth|password)=[ \t]*")
# An authorization scheme before its credential ("Bearer abc...", "Basic dXNl...", "SSWS 00a..."),
# after the header's name when the format takes it in.
_SCHEME = compile_linear(
    r"((?i:authori[sz]ation|authentication)[\"']?[ \t]*(?:[:=]|,[ \t]*b?[\"'])[ \t]*[\"']?)?"
    r"([A-Za-z][A-Za-z0-9_\-]*)(?:[ \t]+|%20|\+)"
)
# Without the header's name before it, a word is kept as a scheme only when it is one of these.
_SCHEME_WORDS = frozenset({"bearer", "basic", "token", "digest", "apikey", "key", "ssws", "oauth", "dpop"})
# A user name this long, of a token's letters, may be the credential itself (GitHub's
# https://<token>:x-oauth-basic@github.com): it goes with the password.
_TOKEN_USER = 24
_TOKEN_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


# A private key block: its BEGIN and END lines say what kind of key it is; its body is the key.
_PEM_BEGIN = compile_linear(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = compile_linear(r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----$")
# A bare Artifactory key, matched with the separator or quote around it (the catalogue's form).
_AROUND = compile_linear(r"[\s=:\"]?(AKC[A-Za-z0-9]+)[\s\"]?")
# A key's name and separator a scheme's credential turned out to be ("token_type=bearer
# access_token=X": "access_token" was read as the credential): the name stays, its value goes.
_NAME_THEN_VALUE = compile_linear(r"([A-Za-z][A-Za-z0-9]*(?:[_\-][A-Za-z0-9]+)+[ \t]*[:=][ \t]*)[^\s=]")
_KEY_ENDINGS = ("token", "key", "secret", "password", "code")
# A Cookie header: its name=value pairs, each value a secret (a session id rarely comes first).
_COOKIE = compile_linear(r"(?i:cookie)[\"']?[ \t]*:[ \t]*[\"']?")
_COOKIE_ATTRIBUTES = frozenset({"path", "domain", "expires", "max-age", "secure", "httponly", "samesite", "partitioned", "priority", "version", "comment"})
_COOKIE_PAIR = compile_linear(r"[ \t]*([^\s;=\"'\\]+)(?:=([^;\s\"'\\]*))?;?")


def secret_spans(found: str) -> list[tuple[int, int]]:
    """Where, in ``found`` (the text a credential format matched), the secrets are: the whole of
    it unless a rule above knows the context around the credential. Never an empty span; no
    span at all when the match holds no secret after all (a private key's BEGIN line alone, or
    with its body already marked). Each rule is asked only of a match that starts or ends as
    it must (most matches are tokens none of them reads: one test each)."""
    first, head = found[:1], found[:80]
    if found[-1:] == "@" and "://" in head:
        m = _URL_PASSWORD.fullmatch(found)
        if m is not None:
            user = m.group(1)
            if len(user) >= _TOKEN_USER and set(user) <= _TOKEN_LETTERS:
                return [(m.start(1), m.end(2))]
            return [m.span(2)]
        m = _URL_TOKEN.fullmatch(found)
        return [m.span(1)] if m is not None else [(0, len(found))]
    rule = _QUERY if first in ("?", "&", "#", "%") else _NPM if first == "/" else _WEBHOOK if first == "h" else None
    if rule is not None:
        m = rule.match(found)
        if m is not None and m.end() < len(found):
            return [(m.end(), len(found))]
    if found.startswith("-----BEGIN"):
        m = _PEM_BEGIN.match(found)
        if m is not None:
            end = _PEM_END.search(found, m.end())
            return _body(found, m.end(), end.start() if end is not None else len(found))
    if " " in head or "\t" in head or "%20" in head or "+" in head:
        m = _SCHEME.match(found)
        if m is not None and m.end() < len(found) and (m.start(1) >= 0 or m.group(2).lower() in _SCHEME_WORDS):
            named = _NAME_THEN_VALUE.match(found, m.end())
            if named is not None and named.group(1).rstrip(" \t:=").lower().endswith(_KEY_ENDINGS):
                return [(named.end(1), len(found))]
            return [(m.end(), len(found))]
    if "AKC" in found[:4]:
        m = _AROUND.fullmatch(found)
        if m is not None:
            return [m.span(1)]
    if head[:6].lower() == "cookie":
        m = _COOKIE.match(found)
        if m is not None and m.end() < len(found):
            return _cookie_values(found, m.end())
    return [(0, len(found))]


def _body(found: str, start: int, end: int) -> list[tuple[int, int]]:
    """``found[start:end]``, a key's body, without the line ends around it (escaped ones too)."""
    while True:
        if found[start : start + 1] in ("\n", "\r", " ", "\t") and start < end:
            start += 1
        elif found.startswith(("\\n", "\\r"), start) and start + 2 <= end:
            start += 2
        else:
            break
    while True:
        if found[end - 1 : end] in ("\n", "\r", " ", "\t") and end > start:
            end -= 1
        elif found[end - 2 : end] in ("\\n", "\\r") and end - 2 >= start:
            end -= 2
        else:
            break
    return [(start, end)] if end > start else []  # a BEGIN line alone: no key in it


def _cookie_values(found: str, at: int) -> list[tuple[int, int]]:
    """The values of a Cookie (or Set-Cookie) header's pairs from ``at``, but a Set-Cookie
    attribute's; a pair without "=" whole, as is what no pair could be read from."""
    spans = []
    while at < len(found):
        m = _COOKIE_PAIR.match(found, at)
        if m is None or m.end() == at:
            return [*spans, (at, len(found))]
        if m.group(1).lower() in _COOKIE_ATTRIBUTES:
            pass  # Set-Cookie's Path=/, HttpOnly, Max-Age=3600: how the cookie is kept, not what it holds
        elif m.start(2) < 0:
            spans.append(m.span(1))
        elif m.end(2) > m.start(2):
            spans.append(m.span(2))
        at = m.end()
    return spans or [(0, len(found))]


# -- values under a secret key whose secret a format has marked already -------------------
# Text that names its secret ("Authorization: Bearer abc...", DATABASE_URL=postgresql://app:pw@db)
# is read twice: the formats mark the credential in place, then the scan for keys reads the
# key's value. A value whose only secret is already marked keeps what is around the mark.
_MARK = b"[REDACTED]"
_MARKED_SCHEME = compile_linear(rb"[A-Za-z][A-Za-z0-9_\-]*[ \t]+\[REDACTED\]")
# A connection URL: scheme://user:[REDACTED]@host:port/path?plain=parameters (no sign a
# secret could hide behind: a parameter holding one is marked, and a mark's "[" ends the match).
_MARKED_URL = compile_linear(
    rb"[A-Za-z][A-Za-z0-9+.\-]*://(?:[A-Za-z0-9_.%\-]*:)?\[REDACTED\]@[A-Za-z0-9_.%\-]+(?::[0-9]+)?(?:/[A-Za-z0-9_.%\-/]*)?(?:\?[A-Za-z0-9_.%\-=&]*)?"
)
# A private key whose body is the mark (its END line too, unless it was cut short).
_MARKED_PEM = compile_linear(
    rb"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[ \t]*(?:\r?\n|(?:\\r)?\\n)?\[REDACTED\]"
    rb"(?:[ \t]*(?:\r?\n|(?:\\r)?\\n)?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)?"
)
_VALUE_ENDS = frozenset(b" \t\r\n\"'`,;}])\\")
_SCHEME_BYTES = frozenset(w.encode() for w in _SCHEME_WORDS)
# Keys that name a connection (its URL's secret is its password), not a webhook (whose path is one).
CONNECTION_PAIRS = frozenset({("database", "url"), ("db", "url"), ("connection", "url"), ("connection", "string"), ("conn", "string")})


def marked_in_place(data: bytes, start: int, connection: bool, cookie: bool) -> int | None:
    """The end of the value at ``start`` in ``data`` when the formats have marked its secret in
    place and nothing else of it can be one: an authorization scheme and the mark ("Bearer
    [REDACTED]"), a private key's BEGIN and END lines around the mark, or, under a key naming a connection (``connection``), a URL whose password is
    the mark, or under a cookie's key (``cookie``) pairs whose values are all the mark (a
    Set-Cookie attribute aside). None otherwise: the value is read and marked whole, as any value of a secret key."""
    m = _MARKED_SCHEME.match(data, start) or _MARKED_PEM.match(data, start)
    if m is not None and (m.re is _MARKED_PEM or m.group(0).split(None, 1)[0].lower() in _SCHEME_BYTES):
        end = m.end()
    elif cookie:
        end = _marked_cookies_end(data, start)
        if end is None:
            return None
    elif connection:
        m = _MARKED_URL.match(data, start)
        if m is None:
            return None
        end = m.end()
    else:
        return None
    return end if end == len(data) or data[end] in _VALUE_ENDS else None


_COOKIE_PAIR_BYTES = compile_linear(rb"[ \t]*([^\s;=\"'\\]+)(?:=([^;\s\"'\\]*))?(?:;[ \t]*)?")
_COOKIE_ATTRIBUTE_BYTES = frozenset(a.encode() for a in _COOKIE_ATTRIBUTES)


def _marked_cookies_end(data: bytes, at: int) -> int | None:
    """The end of a run of cookie pairs at ``at`` whose every value is the mark (or which are
    Set-Cookie attributes), or None when one holds anything else."""
    marked = False
    while at < len(data) and data[at] not in _VALUE_ENDS:
        m = _COOKIE_PAIR_BYTES.match(data, at)
        if m is None or m.end() == at:
            return None
        if m.group(2) == _MARK:
            marked = True
        elif m.group(1).lower() not in _COOKIE_ATTRIBUTE_BYTES:
            return None
        at = m.end()
    return at if marked else None


_SCHEME_VALUE_BYTES = compile_linear(rb"([A-Za-z]+[ \t]+)[^\s]+")


def scheme_length(value: bytes) -> int:
    """How long the authorization scheme and its spaces are at the start of ``value``, a secret
    key's value in text, when the rest is one word, its credential ("Token abc..."); else 0."""
    m = _SCHEME_VALUE_BYTES.fullmatch(value)
    if m is None or m.group(1).rstrip().lower() not in _SCHEME_BYTES:
        return 0
    return m.end(1)


_CONNECTION_URL = compile_linear(
    r"[A-Za-z][A-Za-z0-9+.\-]*://[A-Za-z0-9_.%\-]*:([^\s/\"'<>?#]+)@[A-Za-z0-9_.%\-]+(?::[0-9]+)?(?:/[A-Za-z0-9_.%\-/]*)?"
)


def connection_password(value: str) -> str | None:
    """The password of ``value`` when it is a connection URL whose only secret that is
    (scheme://user:password@host:port/path, no parameters), else None."""
    m = _CONNECTION_URL.fullmatch(value)
    return m.group(1) if m is not None else None
