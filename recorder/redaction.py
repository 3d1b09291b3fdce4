"""Secret redaction applied to every value before it is encoded.

Three nets: values under keys that name a secret (password, token, api_key,
authorization, database_url, *_key ...), pydantic ``SecretStr`` values, and
strings that look like a credential wherever they appear (the formats of
``secret_formats``: a catalogue's and graphtape's own), plus patterns the user
adds. Keys are also honoured inside text: a serialized mapping (JSON, or the
Python repr LangChain puts in a ``ToolMessage`` when a tool returns a dict),
``key=value`` / ``key: value`` text (environment files, YAML, URL queries,
libpq strings, HTTP headers) and command lines (``--password hunter2``, and the
short flags of the commands that take a password so: ``mysql -phunter2``). A
secret told in prose ("my password is hunter2") or after an arrow ("password ->
hunter2", "api_key → ...") goes when the word told reads as one.

Only the credential is marked, not what tells it apart (``secret_parts``): a URL keeps its
scheme, user and host, a query its parameter names, a header its scheme, and a value under a
secret key keeps what its JSON text keeps (``Redactor.kept_value``), a tool's JSON schema too.

Every pattern runs under RE2 (``linear_regex``): scrubbing any text takes time
linear in its length, whatever the text (``benchmarks/bench_redaction.py``).
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Collection, Iterable, Iterator
from typing import Any

from graphtape.recorder.bracket_ends import BracketEnds
from graphtape.recorder.encoded_secrets import hidden_spans
from graphtape.recorder.linear_regex import compile_linear
from graphtape.recorder.secret_tables import may_hold_table, table_spans
from graphtape.recorder.lone_surrogates import displayable
from graphtape.recorder.schema_shapes import holds_values, is_schema
from graphtape.recorder.secret_parts import CONNECTION_PAIRS, marked_in_place, scheme_length, secret_spans

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
_SECRET_WORDS = frozenset({"pass", "pwd", "pw", "pword", "passw", "privkey", "auth", "jwt", "bearer", "dsn", "pgpassword"})
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
    "creds",  # creds, aws_creds, dbCreds
    "auth",  # oauth, basicauth, HTTPAuth (auth alone is a word of its own above)
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
        ("security", "code"),  # a card's CVV
        ("verification", "code"),  # a one-time code sent by SMS or email
        ("mfa", "code"),
        ("social", "security"),
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
# A key whose last word is one of these says something about a secret (a form's password_field,
# token_type, a Kubernetes secret_name, where a key file lies) and holds no secret itself.
_ABOUT_WORDS = frozenset(
    {
        "field", "fields", "label", "hint", "placeholder", "selector", "policy", "length", "strength", "rules",
        "requirements", "expiry", "expiration", "expires", "ttl", "type", "name", "names", "file", "path", "env",
        "var", "prompt", "format", "algorithm", "algo", "scheme", "provider", "endpoint", "required", "enabled",
    }
)
# These name a personal or one-time code only as a key's last word (pin, user_pin, userPin, cvv2)
# or before one of _CODE_NOUNS (pin_code, otp_number); elsewhere they say something about the
# code (pin_length, otp_attempts) or are another word (pin_memory, otp_app, erlang-otp-...).
_CODE_WORDS = frozenset({"pin", "pincode", "otp", "totp", "hotp", "cvv", "cvc", "ssn"})
_CODE_NOUNS = frozenset({"code", "codes", "number", "num", "no", "value"})
# Every built-in secret key holds one of these (see names_secret): text without any
# of them cannot hold a secret key, and the key/value scan is skipped.
_KEY_FRAGMENTS = (
    "pass", "pw", "auth", "secret", "token", "key", "cred", "privkey", "cookie", "session", "jwt", "bearer", "dsn", "url", "string",
    "pin", "otp", "cvv", "cvc", "ssn", "security", "verification", "mfa",
)
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
# Separators as other scripts and web pages write them: a fullwidth colon or equals sign (CJK
# text), no-break and ideographic spaces. The scan for keys reads them as their ASCII kin, one
# character for one, so offsets into the text hold ("password：hunter2", "token&nbsp;= x").
_WIDE_SEPARATORS = {0xFF1A: ":", 0xFF1D: "=", 0x00A0: " ", 0x2007: " ", 0x202F: " ", 0x3000: " "}
_ANY_WIDE_SEPARATOR = re.compile("[\uff1a\uff1d\u00a0\u2007\u202f\u3000]").search


def _ascii_separators(text: str) -> str:
    """``text`` with its wide separators read as ASCII ones (the same text when it has none)."""
    return text.translate(_WIDE_SEPARATORS) if _ANY_WIDE_SEPARATOR(text) is not None else text

# A value under a secret key keeps anything only when it may hold one of these (kept_value);
# a longer one goes whole without a scan.
_KEPT_HINTS = (" ", "://", "=")
_KEPT_MAX = 4096
_KEY_CACHE_SIZE = 100_000  # keys (and short clean texts) remembered per run: a state keyed by ids holds many
_CLEAN_TEXT_LEN = 256  # text up to this long that holds no secret is remembered as clean


@functools.lru_cache(maxsize=65536)
def names_secret(key: str) -> bool:
    """Whether ``key`` names a secret by its words (the built-in rule, without user keys)."""
    return _key_kind(key) is not None


@functools.lru_cache(maxsize=65536)
def _key_kind(key: str) -> str | None:
    """``"secret"`` when ``key`` names a secret, ``"code"`` when only a personal or one-time code
    (pin, otp, cvv, ssn: in text, redacted only when the value holds a digit), else None."""
    words = [w.lower() for w in _WORD.findall(key)]
    secret = code = False
    only_token = True
    prev = ""
    for i, w in enumerate(words):
        if w in _SECRET_WORDS or w.endswith(_SECRET_ENDINGS):
            secret = True
            only_token = only_token and w == "token"
        elif (prev, w) in _SECRET_PAIRS or (w == "key" and i > 0 and prev not in _PLAIN_KEY_WORDS and not prev.isdigit()):
            secret = True
            only_token = False
        elif w in _CODE_WORDS and _names_the_code(words, i):
            code = True
        prev = w
    if secret and only_token and not _TOKEN_COUNT_WORDS.isdisjoint(words):
        secret = False
    if secret and len(words) > 1 and words[-1] in _ABOUT_WORDS:
        secret = False  # password_field, token_type, secret_name, api_key_file: about a secret, not one
    return "secret" if secret else "code" if code else None


@functools.lru_cache(maxsize=4096)
def names_connection(key: str) -> bool:
    """Whether ``key`` names a connection (database_url, DSN, connection_string): its value's
    secret is the password of its URL, not the URL (a webhook_url's path is a secret)."""
    words = [w.lower() for w in _WORD.findall(key)]
    return "dsn" in words or any(pair in CONNECTION_PAIRS for pair in zip(words, words[1:]))


def _names_the_code(words: list[str], i: int) -> bool:
    rest = [w for w in words[i + 1 :] if not w.isdigit()]
    return not rest or (len(rest) == 1 and rest[0] in _CODE_NOUNS)


# -- keys in text ----------------------------------------------------------------
# A key written into text, then its separator: "password": / 'api_key': / \"token\": (JSON inside
# a JSON string, at any depth of escaping) / an unquoted key=value or key: value after a delimiter
# (.env files, YAML, URL queries, libpq strings, HTTP headers). Only the key is matched: its
# value is read afterwards, and only when the key names a secret, so a value that is itself text
# holding keys (JSON inside a JSON string, a URL with a query) is still searched. RE2 has no
# backreferences: each quoting style is an alternative of its own, and a value's quotes are
# matched to its key's escaping depth by a pattern made for that depth.
# A quoted key may spell a letter as a JSON escape ("pass\\u0077ord"): read unescaped.
_KEY = r"(?:[A-Za-z0-9_.\- ]|\\+u[0-9A-Fa-f]{4})+"  # unbounded repeats: counted ones ({1,64}) blow up RE2's automaton
_BARE_KEY = r"[A-Za-z][A-Za-z0-9_.\-]*"
# A command-line flag whose name holds a key fragment (--password, -token, --db-password): only
# its name is matched, so the spaces after a flag that takes no secret stay the delimiter of what
# follows ("--verbose password=x"); its value, after = or a space, is read afterwards.
_FRAGMENT = "(?i:" + "|".join(_KEY_FRAGMENTS) + ")"
_FLAG_NAME = rf"(?:{_FRAGMENT}|[A-Za-z][A-Za-z0-9_.\-]*{_FRAGMENT})[A-Za-z0-9_.\-]*"
_KEY_AT = compile_linear(
    # (a quoted key may be an index: os.environ["API_KEY"] = "...", settings['token'] = ...)
    rf'(?P<esc>\\*)"(?P<k1>{_KEY})\\*"\]?\s*[:=]\s*'
    rf"|'(?P<k2>{_KEY})'\]?\s*[:=]\s*"
    # The spaces after a bare key's separator are left to the next match: in "error: token=x" they
    # are the delimiter before the next key. (PowerShell's $env:API_KEY = "..." too.)
    rf"|(?:^|[\s?&;,{{(\[\"'/\-]|\\[nrt]|(?i:\$env:))(?P<k4>{_BARE_KEY})[ \t]*[:=]"
    rf"|(?:^|[\s\"'`(\[]|\\[nrt])--?(?P<k5>{_FLAG_NAME})"
)
_BARE_NAME = compile_linear(rf"{_BARE_KEY}$")  # the key at the end of a bare match (after its delimiter)
_ESCAPE = compile_linear(rb"\\+u([0-9A-Fa-f]{4})")  # a JSON \uXXXX escape, at any depth of escaping
_ASCII_ESCAPE = r"\\+u00[2-7][0-9A-Fa-f]"  # one spelling a letter, a digit or a sign: no JSON writer's own


@functools.lru_cache(maxsize=4096)
def _unescaped(key: bytes) -> bytes:
    """A key read from UTF-8 text with its ``\\uXXXX`` escapes read."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)).encode(errors="replace"), key)


# -- flags that take a secret after a space ---------------------------------------
# "--password hunter2", "--api-key abc", "-token xyz": the flag's last word names the secret
# (--password-file, --token-ttl, --auth-url, --edit-key name something else) and none of its
# words makes it a switch or a command (--no-password, --ask-pass, --password-stdin take no
# value; gpg's --change-passphrase takes a user id). See _flag_value for what the value may be.
_SWITCH_WORDS = frozenset(
    {
        "no", "ask", "prompt", "skip", "use", "require", "requires", "disable", "enable", "allow", "without", "with",
        "show", "print", "read", "generate", "reset", "revoke", "rotate", "forget", "forgot", "clear", "delete",
        "remove", "check", "verify", "validate", "insecure", "list", "get", "save", "store", "keep", "change",
        "discard", "retain", "match", "filter", "search", "find", "lookup", "query", "dump", "export", "import",
    }
)
# "<something>-key" takes a key after a space only with these (most flags ending in -key take
# a key id or a file: gpg's --edit-key, --sort-key, --ssh-key ~/.ssh/id_rsa).
_FLAG_KEY_WORDS = frozenset({"api", "access", "secret", "private", "signing", "encryption", "session", "account", "subscription", "hmac", "master", "license", "admin"})
# Words that follow a flag named in prose ("pass --token to the CLI", "--password always wins").
_FLAG_PROSE = frozenset(
    w.encode()
    for w in (
        "to", "and", "or", "nor", "the", "a", "an", "is", "are", "was", "were", "be", "been", "being", "with", "without",
        "for", "from", "in", "on", "of", "off", "as", "at", "by", "into", "onto", "via", "per", "if", "when", "whenever",
        "while", "then", "than", "instead", "only", "also", "not", "but", "so", "that", "this", "these", "those", "it",
        "its", "you", "your", "we", "our", "they", "their", "he", "she", "i", "must", "should", "can", "cannot", "could",
        "will", "would", "may", "might", "shall", "do", "does", "did", "has", "have", "had", "here", "there", "always",
        "never", "often", "usually", "still", "just", "now", "again", "first", "last", "next", "before", "after", "above",
        "below", "flag", "flags", "option", "options", "switch", "argument", "arguments", "arg", "args", "parameter",
        "parameters", "value", "values", "setting", "settings", "field", "command", "which", "where", "what", "who",
        "how", "why", "e.g", "i.e", "etc", "too", "either", "neither", "each", "every", "all", "any", "both", "like",
        "unless", "until", "since", "because", "though", "although", "however", "otherwise", "overrides", "override",
        "takes", "accepts", "sets", "expects", "needs", "works", "required", "requisite", "sufficient", "optional",
        "include", "substack", "none", "null", "true", "false", "yes", "string", "text", "name", "file", "path",
    )
)
# A metavar in a help text (--password PASSWORD, --token TEXT): not a secret.
_METAVARS = frozenset(
    w.encode()
    for w in (
        "TEXT", "STRING", "STR", "VALUE", "VAL", "INTEGER", "INT", "NUMBER", "NUM", "PATH", "FILE", "FILENAME", "DIR",
        "NAME", "ARG", "DATA", "BOOL", "BOOLEAN", "FLOAT", "JSON", "LIST", "USER", "EMAIL", "URL", "KEY", "KEYID", "ID",
    )
)
# A value starting so is another flag, a variable, a placeholder, a path, the shell's or the line's end.
_NOT_A_FLAG_VALUE = frozenset(b"-$<{[|>;&()~/.\r\n")


@functools.lru_cache(maxsize=4096)
def _flag_takes_secret(name: str) -> bool:
    """Whether ``--name VALUE`` (a space, not ``=``) gives a secret as VALUE."""
    if name in ("passin", "passout"):  # openssl's -passin pass:SECRET
        return True
    words = [w.lower() for w in _WORD.findall(name) if not w.isdigit()]
    if not words or not names_secret(name) or not _SWITCH_WORDS.isdisjoint(words) or name[-1:] in ".-":
        return False
    last, prev = words[-1], (words[-2] if len(words) > 1 else "")
    return (
        last in _SECRET_WORDS
        or last.endswith(_SECRET_ENDINGS)
        or (prev, last) in _SECRET_PAIRS
        or (last == "key" and prev in _FLAG_KEY_WORDS)
        or last in _CODE_WORDS
        or (prev in _CODE_WORDS and last in _CODE_NOUNS)
    )


def _flag_value(value: bytes) -> bool:
    """Whether ``value``, the unquoted word after a flag that takes a secret, can be the secret:
    not a word of prose, a metavar (PASSWORD, TEXT, a secret's name), a placeholder
    (pass:<password>) or where openssl is to read it (file:path, env:VAR, fd:3)."""
    word = value.rstrip(b".,;:!?")
    if word.lower() in _FLAG_PROSE or b"<" in word or word.startswith((b"file:", b"env:", b"fd:")):
        return False
    if word.replace(b"_", b"").replace(b"-", b"").isalpha() and (word.upper() in _METAVARS or names_secret(word.decode())):
        return False  # --password PASSWORD, --token TEXT, -secretkey key, --password password
    return True


# -- secrets well-known commands take in short flags --------------------------------
# "-p" is a port, a plugin or a path in most commands: it is a password only in the commands
# named here, and only on their own command line (up to a line end, ;, | or &). mysql and its
# tools take it attached ("-phunter2"; "-p db" asks for it and names a database); sshpass, a
# registry or cloud login and the MongoDB tools take it attached or after a space (sshpass only
# before the command it runs: "sshpass -f f ssh -p 22" is ssh's port); redis-cli takes -a, curl
# -u/-U/--user user:password (the password, or a key given as the user: "-u sk_test_...:").
_ARG = r"[^\s\"'`;|&\\]"  # a character of an unquoted argument
_CMD_VALUE = rf"(?:'[^'\r\n]*'|\\*\"[^\"\\\r\n]*\\*\"|[^\s\"'`;|&\\\-]{_ARG}*)"
# After mysql's "-p" and a space, only a word that may be a password (a digit or a sign in it):
# "mysql -p shop" names a database and is not read further.
_CMD_SECRET_WORD = rf"(?:'[^'\r\n]*'|\\*\"[^\"\\\r\n]*\\*\"|[^\s\"'`;|&\\\-]{_ARG}*[0-9!@#$%^*+=~]{_ARG}*)"
_CMD_START = r"(?:^|[\s\"'`(;|&/=]|\\[nrt])"
_CMD_ARGS = r"(?:[ \t][^\r\n;|&\\]*?)?[ \t]"  # the command's arguments before the flag
_USER_PASS = (
    rf"(?:'[^':\r\n]*:(?P<c1>[^'\r\n]+)'|\\*\"[^\":\\\r\n]*:(?P<c2>[^\"\\\r\n]+)\\*\""
    rf"|[^\s\"'`;|&\\:\-][^\s\"'`;|&\\:]*:(?P<c3>{_ARG}+)|(?P<c4>[^\s\"'`;|&\\:\-][^\s\"'`;|&\\:]*):(?:[\s\"'`;|&\\]|$))"
)
_COMMAND_SECRET = compile_linear(
    _CMD_START
    + r"(?:(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mysqlshow|mysqlslap|mysqlpump|mysqlsh"
    + r"|mariadb|mariadb-dump|mariadb-admin|mariadb-import|mariadb-check|mariadb-show|mariadb-slap)"
    + rf"{_CMD_ARGS}-p(?:(?P<mysql>{_CMD_VALUE})|[ \t]+(?P<mysql_spaced>{_CMD_SECRET_WORD}))"
    + rf"|sshpass(?:[ \t]+(?:-[fdP][ \t]*{_ARG}+|-[ev]+))*[ \t]+-p[ \t]*(?P<sshpass>{_CMD_VALUE})"
    + r"|(?:(?:docker|podman|buildah|skopeo|nerdctl|oras|helm[ \t]+registry|az(?:[ \t]+acr)?|oc|cf)[ \t]+login"
    + r"|mongo|mongosh|mongodump|mongorestore|mongoexport|mongoimport|mongostat|mongotop|mongofiles)"
    + rf"{_CMD_ARGS}-p[ \t]*(?P<login>{_CMD_VALUE})"
    + rf"|(?:redis-cli|valkey-cli|keydb-cli){_CMD_ARGS}-a[ \t]+(?P<redis>{_CMD_VALUE})"
    + rf"|curl{_CMD_ARGS}(?:-[uU][ \t]*|--(?:proxy-)?user(?:[ \t]+|=)){_USER_PASS})"
)
_COMMAND_GROUPS = tuple(_COMMAND_SECRET.groupindex[g] for g in ("mysql", "mysql_spaced", "sshpass", "login", "redis", "c1", "c2", "c3", "c4"))
# mysql's "-p db" asks for the password and names a database; a word there that reads as a
# password ("-p S3cret!pw", as an agent writes it) is taken for one all the same.
_MYSQL_SPACED = _COMMAND_SECRET.groupindex["mysql_spaced"]
_COMMAND_WORDS = (b"mysql", b"mariadb", b"sshpass", b"login", b"mongo", b"-cli", b"curl")
_COMMAND_FRAGMENTS = ("mysql", "mariadb", "login", "mongo", "-cli")  # sshpass and curl hold pass and url, key fragments

# -- secrets told in prose ---------------------------------------------------------
# "my password is hunter2", "the API key was abc123def456": the word after "<name> is/was" goes
# when it reads as a secret, not as a word: it holds a digit or a symbol (the pattern asks, so
# "the password is incorrect" and "the token is valid" are not even matched) and _told_secret
# finds no quantity, version, file or term of the trade in it ("the token is 2048 bits").
_PROSE = compile_linear(
    # Stated with a colon after the verb ("my api key is: sk-abc", "the secret was: xyzzy"): the
    # colon is a key's separator, and the word after it goes unless it reads as prose (_stated_secret).
    r"(?i:\b(?P<stated_noun>password|passphrase|passcode|passwd|(?:api|secret|access|private)[ \t_\-]?key"
    r"|(?:access[ \t_\-]|refresh[ \t_\-]|auth[ \t_\-]|bearer[ \t_\-])?token|secret)[ \t]+(?:is|was)[ \t]*:[ \t]*)"
    r"(?P<stated_v>[^\s]+)"
    r"|(?i:\b(?P<noun>password|passphrase|passcode|passwd|pass|pin(?:[ \t]+code)?|(?:api|secret|access|private)[ \t_\-]?key"
    r"|(?:access[ \t_\-]|refresh[ \t_\-]|auth[ \t_\-]|bearer[ \t_\-])?token|secret)(?:[ \t]+(?:is|was)[ \t]*:?|'s)[ \t]+)"
    # A word with a digit or a symbol, or a long word of letters (a password of words:
    # "correcthorsebatterystaple", told from "incorrect" by _told_secret).
    r"(?P<v>'[^'\r\n\\]{6}[^'\r\n\\]*'|\"[^\"\r\n\\]{6}[^\"\r\n\\]*\"|[^\s]*[0-9!@#$%^&*+=~][^\s]*|[\"'`]?[A-Za-z][A-Za-z_\-]{5,}[^\s]*)"
    # A passphrase of three words or more that ends its sentence ("is blue sky river."), read by _passphrase_end.
    r"|(?i:\b(?P<phrase_noun>password|passphrase|passcode|passwd)(?:[ \t]+(?:is|was)[ \t]*:?|'s)[ \t]+)"
    r"(?P<phrase_v>[A-Za-z0-9][A-Za-z0-9'\-]*(?:[ \t]+[A-Za-z0-9][A-Za-z0-9'\-]*){2,})(?:[.,;!?)\"'\r\n]|\\[nr]|$)"
    # With no verb ("user bob and password hunter2hunter2", "api key Zq9Lk2mP4xZ8w..."): only a
    # word with a digit or a symbol, read more strictly (_told_secret's ``verb``).
    # Set to a value: "set the password to Pa55w0rdX", "changed my passphrase to 'blue sky'".
    r"|(?i:\b(?:set|change|changed|reset|update|updated)[ \t]+(?:the[ \t]+|my[ \t]+|your[ \t]+|our[ \t]+|its[ \t]+|their[ \t]+)?"
    r"(?P<to_noun>password|passphrase|passcode|passwd)[ \t]+to[ \t]+)"
    r"(?P<to_v>'[^'\r\n\\]{6}[^'\r\n\\]*'|\"[^\"\r\n\\]{6}[^\"\r\n\\]*\"|[^\s]*[0-9!@#$%^&*+=~][^\s]*|[\"'`]?[A-Za-z][A-Za-z_\-]{5,}[^\s]*)"
    r"|(?i:\b(?P<bare_noun>password|passphrase|passcode|passwd|(?:api|secret|access|private)[ \t_\-]?key"
    r"|(?:access[ \t_\-]|refresh[ \t_\-]|auth[ \t_\-]|bearer[ \t_\-])?token)[ \t]+)(?P<bare_v>[^\s<>\"'=]*[0-9!@#$%^&*+~][^\s<>\"'=]*)(?:[\s.,;:!?)]|$)"
)
_PROSE_NOUN, _PROSE_VALUE = _PROSE.groupindex["noun"], _PROSE.groupindex["v"]
_PROSE_STATED_NOUN, _PROSE_STATED_VALUE = _PROSE.groupindex["stated_noun"], _PROSE.groupindex["stated_v"]
_PROSE_BARE_NOUN, _PROSE_BARE_VALUE = _PROSE.groupindex["bare_noun"], _PROSE.groupindex["bare_v"]
_PROSE_TO_NOUN, _PROSE_TO_VALUE = _PROSE.groupindex["to_noun"], _PROSE.groupindex["to_v"]
_PROSE_PHRASE_NOUN, _PROSE_PHRASE_VALUE = _PROSE.groupindex["phrase_noun"], _PROSE.groupindex["phrase_v"]
# Text holding none of these holds no secret told in prose (a verb, or a noun then a space).
_PROSE_HINTS = (b" is", b" was", b"'s ", b" to ", b"pass", b"key ", b"token ")
# A secret's name, then an arrow or a dash, then the secret: "password -> hunter2", "api_key →
# sk9x8LmQpZ", "DB_PASSWORD ==> S3cret!pw", "Wi-Fi password — hunter2" (notes, chat, lists of
# credentials). An arrow also leads from one step to the next ("Settings -> Password -> Change",
# "login --> password --> dashboard"), so the word after it goes only when it reads as a secret
# (_told_secret, as in prose). "=>" is a key's separator of its own (Ruby, PHP): see _KEY_AT.
_ARROW = (
    r"(?:-{1,2}>|==>|~>|\x{2192}|\x{21d2}|\x{21e8}|\x{21a6}|\x{27f6}|\x{27f9}|\x{2794}|\x{279c}|\x{27a1}|\x{2013}|\x{2014}"
    r"|\\+u(?i:2192|21d2|27f6|27f9|2013|2014))"  # the last: an arrow or dash JSON wrote as an escape
)
_ARROW_SECRET = compile_linear(
    rf"(?:^|[\s?&;,{{(\[\"'/*`|]|\\[nrt])(?P<k>{_BARE_KEY})[*`'\"]*[ \t]*{_ARROW}[ \t]*"
    r"(?P<v>'[^'\r\n\\]+'|\"[^\"\r\n\\]+\"|(?i:(?:bearer|basic|token)[ \t]+)?[^\s\"'\\]+)"  # (a backslash: an escape of the text around)
)
_ARROW_KEY, _ARROW_VALUE = _ARROW_SECRET.groupindex["k"], _ARROW_SECRET.groupindex["v"]
_ARROW_HINTS = (b">", b"\xe2\x86", b"\xe2\x87", b"\xe2\x9f", b"\xe2\x9e", b"\xe2\x80\x93", b"\xe2\x80\x94", b"\\u2")
# Secrets with no separator before them: a flag that may take one and a word after it, a
# command's short flag, one told in prose, a key's name spelt with an escaped letter. Text
# without one of these needs no scan for keys unless it holds = or :, and most text has none.
_LOOSE_PATTERN = re.sub(
    r"\(\?P<\w+>",
    "(?:",
    "|".join(
        (
            rf"(?:^|[\s\"'`(\[]|\\[nrt])--?{_FLAG_NAME}[ \t]+[^\s\-]",
            _COMMAND_SECRET.pattern,
            _PROSE.pattern,
            rf"{_FRAGMENT}[A-Za-z0-9_.\-]*[*`'\"]*[ \t]*{_ARROW}",
            _ASCII_ESCAPE,
        )
    ),
)
_LOOSE = compile_linear(_LOOSE_PATTERN)
_ASCII_ESCAPES = compile_linear(_ASCII_ESCAPE)
# Words of the trade that mix letters and digits ("the token is base64", "the key is AES256").
_TECHNICAL = frozenset(
    w.encode()
    for w in (
        "base16", "base32", "base58", "base62", "base64", "base64url", "sha1", "sha224", "sha256", "sha384", "sha512", "sha3",
        "md4", "md5", "crc32", "utf8", "utf16", "utf32", "hs256", "hs384", "hs512", "rs256", "rs384", "rs512", "es256",
        "es384", "es512", "ps256", "ps384", "ps512", "eddsa25519", "ed25519", "ed448", "x25519", "aes128", "aes192", "aes256",
        "chacha20", "poly1305", "x509", "oauth1", "oauth2", "ipv4", "ipv6", "http1", "http2", "http3", "tls12", "tls13",
        "pkcs1", "pkcs7", "pkcs8", "pkcs11", "pkcs12", "argon2", "argon2i", "argon2d", "argon2id", "pbkdf2", "rsa1024",
        "rsa2048", "rsa3072", "rsa4096", "p256", "p384", "p521", "secp256k1", "secp256r1", "prime256v1", "int8", "int16",
        "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64", "bfloat16", "win32",
        "win64", "x86_64", "amd64", "arm64", "aarch64", "python3", "py3", "k8s", "i18n", "l10n", "e2e", "s3", "ec2", "gpt2",
    )
)
_UNIT_LETTERS = b"abcdefghijklmnopqrstuvwxyz%"
_NUMBER_FOLLOWERS = frozenset({b"", b"and", b"or", b"but", b"so", b"please", b"then", b"if", b"for", b"on", b"to", b"at", b"thanks"})
_LETTERS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_DIGITS = frozenset(b"0123456789")
_SYMBOLS = frozenset(b"!@#$%^&*+=~?")


def _names_a_file(word: bytes) -> bool:
    """A file or host name: id_ed25519.pub, api2.example.com (a dot, then 1 to 5 letters)."""
    stem, dot, ext = word.rpartition(b".")
    return bool(stem) and 1 <= len(ext) <= 5 and ext.isalpha()


def _quantity(word: bytes) -> bool:
    """A number and its unit (2048bits, 3600s, 12%, 1,024), an issue number (#42), a version
    (v2.3.1), a date (2024-05-06, and its time), in lower case."""
    if word[:1] == b"#":
        return word[1:].isdigit()
    if len(word) >= 10 and word[4:5] == word[7:8] == b"-" and (word[:4] + word[5:7] + word[8:10]).isdigit():
        return True
    number = word[1:] if word[:1] == b"v" and word[1:2].isdigit() else word
    digits = number.rstrip(_UNIT_LETTERS)
    return len(number) - len(digits) <= 6 and digits.replace(b".", b"").replace(b",", b"").isdigit()


def _word_in(value: bytes) -> tuple[int, int]:
    """Where the word is in ``value``, a word read after a secret's name: inside its quotes, or
    without the punctuation that ends a sentence or a clause."""
    start, end = 0, len(value)
    if end > 2 and value[:1] in (b"'", b'"', b"`") and value[-1:] == value[:1]:
        return 1, end - 1
    while end > start and value[end - 1 : end] in (b".", b",", b";", b":", b"?", b")", b'"', b"'", b"`"):
        end -= 1
    while start < end and value[start : start + 1] in (b'"', b"'", b"`"):
        start += 1
    return start, end


def _stated_secret(value: bytes, more: bool) -> tuple[int, int] | None:
    """Where the secret is in ``value``, the word after "<noun> is:" (``more``: words follow it on
    its line), or None when it reads as prose: a word of prose ("is: not set", "is: required"), a
    placeholder or a variable ("is: <your key>", "is: $TOKEN"), a secret's name, or a plain word
    the sentence goes on after ("is: valid until Friday"). Any other word is taken: the colon
    says a value follows, so it need not look like a secret ("the secret is: xyzzy")."""
    start, end = _word_in(value)
    word = value[start:end]
    if not word or word[:1] in b"$<{[*(" or _MARK_BYTES[:-1] in word:
        return None
    low = word.lower()
    if low in _FLAG_PROSE or low in _PASSWORD_STATES or (word.isalpha() and (more or names_secret(word.decode()))):
        return None
    return start, end


def _told_secret(noun: bytes, value: bytes, after: bytes, *, verb: bool = True) -> tuple[int, int] | None:
    """Where the secret is in ``value``, the word after "<noun> is" (``after``: the word after
    that), or None when the word reads as prose, a quantity or a name, not as a secret. Without
    the verb ("password hunter2hunter2") the word must mix letters with digits or symbols, and a
    key's or a token's be 16 characters or more.

    A secret mixes letters with digits or symbols (hunter2, P@ssw0rd, x9Kq2mZ7pL) and is 6
    characters or more; a PIN, passcode or password told as digits is 4 of them or more, last or
    before a conjunction ("my PIN is 4821 and...", not "the password is 2048 bits"). A plain word
    is never one: a password that is a word cannot be told from "the password is incorrect".
    """
    start, end = _word_in(value)
    word = value[start:end]
    if not word or word[:1] in b"$<{[*(/~." or _MARK_BYTES[:-1] in word or b"://" in word:
        return None
    low = word.lower()
    if low in _TECHNICAL or (b"-" in low and low.rsplit(b"-", 1)[1].isalpha()) or _names_a_file(low):
        return None
    digits = sum(c in _DIGITS for c in word)
    if not verb and (len(word) < (8 if noun[:4].lower() == b"pass" else 16) or not any(c in _LETTERS for c in word)):
        return None
    if digits and digits + word.count(b"-") == len(word):  # a number, or digits in groups (0000-1111)
        told = noun[:3].lower() == b"pin" or noun[:5].lower() in (b"passc", b"passw")
        date = len(word) == 10 and word[4:5] == word[7:8] == b"-"
        if told and digits >= 4 and after.lower() in _NUMBER_FOLLOWERS and not date:
            return start, end
        return None
    if len(word) < 6 or _quantity(low) or not any(c in _LETTERS for c in word):
        return None
    if digits or any(c in _SYMBOLS for c in word):
        return start, end
    quoted = start > 0 and value[start - 1 : start] in (b"'", b'"', b"`")
    if noun[:4].lower() == b"pass" and _a_password_of_letters(low, after.lower(), quoted, end < len(value)):
        return start, end
    return None


# Words that say what a password is like, or how it is kept, rather than what it is: eight
# letters or more, and none of the endings below ("the password is incorrect", "is plaintext").
_PASSWORD_STATES = frozenset(
    w.encode()
    for w in (
        "incorrect", "whatever", "therefore", "lowercase", "uppercase", "plaintext", "cleartext", "somewhere",
        "elsewhere", "anywhere", "nowhere", "however", "moreover", "otherwise", "nonempty", "overwritten",
        "forgotten", "hardcoded", "alphanumeric", "whitespace", "unicode", "ascii", "anything", "something", "different", "mandatory", "complex", "together", "obsolete",
        "outdated", "unsafe", "insecure", "too", "short", "strong", "correct", "secure", "username",
    )
)
# Endings of adjectives, participles and adverbs: "is expired", "is protected", "is typically".
_STATE_ENDINGS = tuple(
    e.encode()
    for e in (
        "ed", "ly", "ing", "able", "ible", "ive", "ent", "ant", "ory", "ary", "ful", "less", "ous", "al", "ic",
        "ure", "ise", "ize", "en", "ion", "ity", "ness", "ment", "ate", "ish", "est", "er", "ward", "wards",
    )
)


def _a_password_of_letters(low: bytes, after: bytes, quoted: bool, closed: bool) -> bool:
    """Whether ``low``, a word of letters told as a password ("the password is
    correcthorsebatterystaple"), reads as one: quoted (words too: "is 'blue sky river'"), or eight
    letters or more, last in its sentence (``closed``: punctuation after it), and not a word that
    says what the password is like (incorrect, expired, stored)."""
    letters = low.replace(b"-", b"").replace(b"_", b"")
    if quoted:
        letters = letters.replace(b" ", b"")
    if not letters.isalpha() or low in _PASSWORD_STATES or names_secret(low.decode()):
        return False
    if quoted:
        return True
    return len(low) >= 8 and (closed or after in _NUMBER_FOLLOWERS) and not low.endswith(_STATE_ENDINGS)


# A passphrase of words told without quotes ("my password is correct horse battery staple",
# "passphrase: blue sky river, keep it safe"): the words up to the end of the sentence, when
# none of them reads as prose (a word of _FLAG_PROSE or _PHRASE_PROSE, an adverb) and the first
# is no participle ("is stored in the vault", "is rotated every ninety days").
_PHRASE_WORD = compile_linear(rb"[A-Za-z0-9][A-Za-z0-9'\-]*")
# At most 8 words more: a 9th says "too long" as well as any more would, and reading on to the
# end of a line of words from each secret's name in it would cost time quadratic in the line.
_PHRASE_MORE = compile_linear(rb"(?:[ \t]+[A-Za-z0-9][A-Za-z0-9'\-]*){1,8}")
_PHRASE_END = frozenset(b".,;!?)\"'\n\r")
_PHRASE_PROSE = frozenset(
    w.encode()
    for w in (
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "sixteen",
        "twenty", "thirty", "ninety", "hundred", "characters", "character", "chars", "letters", "letter", "digits",
        "digit", "words", "long", "short", "please", "thanks", "same", "different", "hidden", "secret", "private",
        "safe", "unknown", "missing", "wrong", "invalid", "valid", "expired", "empty", "blank", "weak", "strong",
        "enough", "least", "most", "more", "less", "very", "really", "my", "his", "her", "them", "me", "us", "him",
        "no", "yet", "already", "soon", "later", "today", "tomorrow", "yesterday", "days", "hours", "minutes", "weeks",
        "is", "are", "was", "were", "be", "am", "need", "needs", "used", "use", "get", "got", "see", "ask",
    )
)
_PASS_NOUNS = (b"password", b"passphrase", b"passcode", b"passwd")


def _passphrase_end(data: bytes, start: int, least: int) -> int | None:
    """The end of a passphrase of ``least`` words or more (at most 8) starting at ``start``, or
    None when the words there read as prose or do not end a sentence (see above)."""
    first = _PHRASE_WORD.match(data, start)
    if first is None:
        return None
    more = _PHRASE_MORE.match(data, first.end())
    if more is None:
        return None
    words = [first.group(0).lower(), *more.group(0).lower().split()]
    end = more.end()
    if not least <= len(words) <= 8:
        return None
    if not (end == len(data) or data[end] in _PHRASE_END or data.startswith((b"\\n", b"\\r"), end)):
        return None  # the sentence goes on: "is case sensitive: ..." (a colon), "is 12 chars/long"
    if words[0].endswith((b"ed", b"ing", b"ly")) or words[0] in _PASSWORD_STATES - {b"correct"}:
        return None
    if any(w in _FLAG_PROSE or w in _PHRASE_PROSE or w.endswith(b"ly") for w in words):
        return None
    return end


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
_SEPARATORS = frozenset(b":=")
# The value after a secret key, matched where the key ends (anchored): a string in the quotes
# it is written with (escapes included, so an escaped quote does not end it), a bare number,
# or an unquoted word (an authorization scheme and its credential: "Token abc").
_NUMBER = r"-?[0-9][0-9A-Za-z.\-]*"
_SQ = r"'(?P<sq>(?:[^'\\\n]|\\.)*)'"
_BARE = r"(?P<bare>(?:(?i:basic|bearer|token|digest|apikey|key)[ \t]+)?[^\s\"',;&}\])\\]+)"
_SINGLE_QUOTED = compile_linear(rf"{_SQ}|(?P<num>{_NUMBER})")
_UNQUOTED = compile_linear(rf"{_SQ}|{_BARE}")
_QUOTE_AHEAD = compile_linear(r'\\*"')
# Type names written after a key and a colon in code: "api_key: str | None = None".
_TYPE_NAMES = frozenset(
    w.encode()
    for w in (
        "str", "bytes", "int", "float", "bool", "Any", "None", "dict", "list", "tuple", "set", "object", "SecretStr",
        "SecretBytes", "Optional[str]", "str|None", "Optional[SecretStr]", "string", "String", "number", "boolean",
    )
)
# A name written where a secret key's value is expected, then a separator: the value is a scheme
# or the next key's name ("password: Api-Key = x9F...", "password: X-Api-Key: abc"), and the
# word after the separator is the secret.
_NAME_THEN_SEPARATOR = compile_linear(rb"[A-Za-z][A-Za-z0-9_.\-]*:?[ \t]*(?:[:=]>?|=>)[ \t]*")
# The words after a bare key's first word on its own line ("passphrase: blue sky river mountain").
_MORE_WORDS = compile_linear(rb"(?:[ \t]+[^\s\"',;&}\])\\:=#]+)+")
_LINE_LEAD = frozenset(b" \t")
_MAX_ESCAPES = 15  # a quote after at most this many backslashes is read (JSON in JSON, four deep)


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
# A value written so is a boolean or nothing, never a secret (a mapping's True or None is kept too).
_NO_SECRET_WORDS = frozenset({b"true", b"false", b"null"})
_VALUE_END_BYTES = frozenset(b" \t\r\n,;&}])#")
_GLUED = compile_linear(rb"[^\s\"',;&}\])\\\[]+")  # a word glued to a mark: the rest of its secret


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` sorted, overlapping ones made one."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _marked(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each of ``spans`` (sorted, not overlapping) replaced by the mark."""
    parts, last = [], 0
    for start, end in spans:
        parts += [text[last:start], MARK]
        last = end
    parts.append(text[last:])
    return "".join(parts)


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
    finds whether any of them, or a secret key without a separator (``_LOOSE_PATTERN``), is in
    a text in one pass: most text holds none, and then the two substitutions (each a pass of
    its own) need not run.
    """
    cat_tokens, cat_text = catalogue()
    token_pattern = TOKEN_START + "(?:" + "|".join(f"(?:{p})" for p in (*OWN_TOKENS, *cat_tokens)) + ")"
    text_pattern = "|".join(f"(?:{p})" for p in (*OWN_TEXT_PATTERNS, *cat_text, *user))
    tokens, text = compile_linear(token_pattern), compile_linear(text_pattern)
    try:
        # A secret with no separator before it (a flag's, a command's, one told in prose) is
        # found by this pass too: text without one needs no scan for keys unless it holds "=" or ":".
        either = compile_linear(f"(?:{token_pattern})|(?:{text_pattern})|(?:{_LOOSE_PATTERN})")
    except ValueError:  # the two together beyond RE2's budget (many user patterns): both passes run
        either = None
    return tokens, text, either


_GATE_LENGTH = 2048  # text longer than this is asked whether it may hold keys by one RE2 pass


@functools.lru_cache(maxsize=64)
def _fragment_gate(fragments: tuple[str, ...]) -> Any:
    """One pattern finding any of ``fragments`` (case-blind), or an escape (a key's letter: "\\u0077")."""
    return compile_linear("(?i:" + "|".join(re.escape(f) for f in fragments) + f")|{_ASCII_ESCAPE}")


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
        self._fragments = _KEY_FRAGMENTS + _COMMAND_FRAGMENTS + self._user_keys
        self._gate = _fragment_gate(self._fragments)
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

    def kept_value(self, key: str, value: Any) -> Any:
        """What of ``value``, under the secret key ``key``, may be recorded, or None when it goes
        whole (then not yet counted). A string keeps what the same key and value written as JSON
        text keep, so a node that writes a replayed mapping out as text writes what was recorded:
        a scheme ("Bearer [REDACTED]"), a private key's BEGIN and END lines, cookie names, a
        connection URL but its password (``database_url``: "postgresql://app:[REDACTED]@db/x").
        A JSON schema that gives no instance is kept whole (a tool's ``{"password": {"type":
        "string"}}``); any other value goes."""
        if type(value) is bool:
            return value  # {"use_auth": True}: a switch (JSON text keeps its bare true too)
        if type(value) is str:
            if len(value) > _KEPT_MAX or not any(map(value.__contains__, _KEPT_HINTS)):
                return None
            text = json.dumps({key: value})
            out = self.scrub(text)
            made = out.count(MARK) - text.count(MARK)  # each redaction writes a mark: none, none counted
            try:
                back = json.loads(out)
            except ValueError:
                back = None
            kept = back.get(key) if type(back) is dict and len(back) == 1 else None
            cookie = key.lower().endswith(("cookie", "cookies"))
            if type(kept) is str and kept != MARK and MARK in kept:
                data = kept.encode()
                if marked_in_place(data, 0, names_connection(key), cookie) == len(data):
                    return kept
            return MARK if made else None
        if type(value) is dict and is_schema(value) and not holds_values(value):
            return value
        return None

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

    def scrub_argv(self, items: list | tuple) -> list[str] | None:
        """``items`` with its secrets marked (counted) when it is a command line given as a list of
        arguments that hands one over (``["mysql", "-p", "S3cret!pw"]``, ``["gh", "--token", "x"]``,
        ``["curl", "-u", "user:pass"]``), else None. Each argument alone says too little: a
        password is known by the flag or the command before it. The arguments are read as the
        command line they make, by the rules for command lines in text."""
        if not may_be_argv(items):
            return None
        found = _argv_spans(items, self._keyed_values)
        if not found:
            return None
        out = list(items)
        for i, cuts in found.items():
            data = items[i].encode(errors="surrogatepass")
            parts, last = [], 0
            for start, end in cuts:
                parts += [data[last:start], _MARK_BYTES]
                last = end
            out[i] = b"".join([*parts, data[last:]]).decode(errors="surrogatepass")
            self._bump(len(cuts))
        return out

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
        """Where secrets are in ``text``, in order and not overlapping: credential formats, the
        values of secret keys, and either hidden by an encoding (nothing counted or changed)."""
        if len(text) < self.min_length:
            return []
        found = self._direct_spans(text)
        hidden = self._hidden_spans(text)
        return _merged(found + hidden) if hidden else found

    def _hidden_spans(self, text: str) -> list[tuple[int, int]]:
        """Secrets base64, percent-encoding or a literal in pieces hide from the direct scan."""
        try:
            found = hidden_spans(text, self._direct_spans, self._may_hold_secret)
        except UnicodeEncodeError:  # lone surrogates: read as displayable text (offsets stay)
            found = hidden_spans(displayable(text), self._direct_spans, self._may_hold_secret)
        return _merged(found) if found else found

    def _may_hold_secret(self, text: str) -> bool:
        """Whether the direct scan may find anything in ``text`` (the first pass of :meth:`scrub`)."""
        if len(text) < self.min_length:
            return False
        try:
            return self._either is None or self._either.search(text) is not None or self._may_hold_keys(text) or self._may_hold_lists(text)
        except UnicodeEncodeError:
            return True

    def _direct_spans(self, text: str) -> list[tuple[int, int]]:
        """:meth:`spans` of the text as written (no encoding undone)."""
        if len(text) < self.min_length:
            return []
        try:
            found = self._format_spans(text)
        except UnicodeEncodeError:
            text = displayable(text)
            found = self._format_spans(text)
        if self._may_hold_keys(text) or self._may_hold_lists(text) or _LOOSE.search(text) is not None:
            data = _ascii_separators(text).encode()
            chars = 0  # byte offsets to character offsets, counted forward once
            seen = 0
            for start, end in self._keyed_values(data):
                chars += len(data[seen:start].decode())
                value = len(data[start:end].decode())
                found.append((chars, chars + value))
                chars += value
                seen = end
        return _merged(found)  # a key two formats know (a token found anywhere too) is one span

    def scrub(self, text: str) -> str:
        """Replace credential-looking substrings of ``text`` (in time linear in its length)."""
        return self._scrub(text, True)

    def _scrub(self, text: str, decode: bool) -> str:
        if len(text) < self.min_length or text in self._known_clean or text in self._found_clean:
            return text
        try:
            # One pass says whether a format (or a flag's, a command's, a told secret) is in the
            # text: most text holds none, and then the two substituting passes need not run (nor,
            # without a secret key's name and its separator, the scan for keys).
            found = self._either is None or self._either.search(text) is not None
            keys = self._may_hold_keys(text) or self._may_hold_lists(text)
        except UnicodeEncodeError:
            found = keys = True  # lone surrogates: the passes below read it as displayable text
        # What an encoding may hide has a search of its own (``encoded_secrets``' gate), not a part
        # of the first pass: ids and hashes pass that gate, and must not send text through the two
        # substituting passes for it.
        hidden = self._hidden_spans(text) if decode else []
        if hidden:  # marked first: the passes below would take a piece and leave the rest unread
            self._bump(len(hidden))
            return self._scrub(_marked(text, hidden), False)
        if not found and not keys:
            self._remember_clean(text)
            return text
        scanned = new = text
        n = 0
        if found:
            try:
                new, n = self._tokens.subn(_mark_token, text)
            except UnicodeEncodeError:
                scanned = displayable(text)
                new, n = self._tokens.subn(_mark_token, scanned)
            marked = [0]  # a match may hold no secret after all (secret_spans): not counted

            def mark(m: Any) -> str:
                out = _mark_match(m)
                marked[0] += out != m.group(0)
                return out

            new = self._text.sub(mark, new)
            n += marked[0]
            keys = self._may_hold_keys(new) or self._may_hold_lists(new) or _LOOSE.search(new) is not None
        if keys:
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
        spans = []
        for m in self._tokens.finditer(text):
            at = m.end(start)
            spans += [(at + a, at + b) for a, b in secret_spans(text[at : m.end()])]
        for m in self._text.finditer(text):
            at = m.start()
            spans += [(at + a, at + b) for a, b in secret_spans(m.group(0))]
        return spans

    def _may_hold_keys(self, text: str) -> bool:
        """Whether ``text`` may hold a secret key with its separator (key=value, key: value,
        <key>...</key>): a separator, and a fragment of a key's name (or a command's).
        Secrets without a separator are found by the one pass of ``scrub`` (``_LOOSE``)."""
        if "=" not in text and ":" not in text and "</" not in text and "\uff1a" not in text and "\uff1d" not in text and not may_hold_table(text):
            return False
        if len(text) > _GATE_LENGTH:  # one pass of RE2 costs less than a scan per fragment
            return self._gate.search(text) is not None
        low = text.lower()
        return any(map(low.__contains__, self._fragments)) or ("\\u" in low and _ASCII_ESCAPES.search(low) is not None)

    def _may_hold_lists(self, text: str) -> bool:
        """Whether ``text`` may hold a list of quoted strings that gives a secret with no separator
        before it: a command line (["mysql", "-p", "x"]) or a pair (("X-Api-Key", "x"))."""
        if "[" not in text and "(" not in text:
            return False
        if "[" in text and ('"-' in text or "'-" in text):
            return True
        if '["' not in text and "['" not in text and '("' not in text and "('" not in text and "(b'" not in text:
            return False
        low = text.lower()
        return any(map(low.__contains__, self._fragments))

    def _scrub_keyed(self, text: str) -> tuple[str, int]:
        """Redact the values of secret keys written into ``text``."""
        plain = _ascii_separators(text)
        if plain is not text:  # marked in the text as written: its wide separators are kept
            data = plain.encode()
            spans, chars, seen = [], 0, 0
            for start, end in self._keyed_values(data):
                chars += len(data[seen:start].decode())
                spans.append((chars, chars + len(data[start:end].decode())))
                chars, seen = spans[-1][1], end
            return (_marked(text, spans), len(spans)) if spans else (text, 0)
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
        low = data.lower()
        forms = [m.span(_FORM_VALUE) for m in _FORM_FIELD.finditer(data) if self._secret_value(m.group(_FORM_KEY).decode(errors="replace"), m.group(_FORM_VALUE))] if b"form-data" in low else []
        if b"</" in data:
            forms += [m.span(_XML_VALUE) for m in _XML_ELEMENT.finditer(data) if self._names_a_secret_element(m.group(_XML_OPEN), m.group(_XML_CLOSE), m.group(_XML_VALUE))]
        if b"-" in data and any(map(low.__contains__, _COMMAND_WORDS)):
            forms += _command_spans(data)
        if b"value" in low or (b'", "' in data or b"', '" in data or b'","' in data or b"','" in data or b"', b'" in data) and (
            b'["' in data or b"['" in data or b'("' in data or b"('" in data or b"(b'" in data
        ):
            forms += self._named_value_spans(data)
        if b"[" in data and (b'"-' in data or b"'-" in data):
            forms += _array_spans(data, self._keyed_values)
        if any(map(low.__contains__, _PROSE_HINTS)):
            forms += _prose_spans(data)
        if any(map(data.__contains__, _ARROW_HINTS)):
            forms += self._arrow_spans(data)
        if (b"\t" in data or b"|" in data or b"," in data or b"\\t" in data) and (b"\n" in data or b"\\n" in data):
            forms += table_spans(data, self._secret_value, self._gate)
        if not forms:
            yield from self._key_value_spans(data)
            return
        done = 0
        for start, end in sorted([*forms, *self._key_value_spans(data)]):
            if start >= done:
                yield start, end
                done = end

    def _named_value_spans(self, data: bytes) -> list[tuple[int, int]]:
        """Byte spans of values a mapping or a pair names as secrets beside them: {"name":
        "DB_PASSWORD", "value": "x"} (a Kubernetes env entry, a HAR header, a form field, in
        JSON, a repr or YAML) and ("X-Api-Key", "x") (a header as a pair, a list of them)."""
        spans = []
        for m in _NAMED_PAIR.finditer(data):
            pair = m.group(0)[:1] in (b"[", b"(")
            key = next((g for g in m.groups() if g is not None), b"")
            if not self.is_secret_key(key.decode(errors="replace")):
                continue
            at = m.end()
            first = data[at : at + 1]
            if first == b'"':
                v, group = _double_quoted(0).match(data, at), "dq"
            elif first == b"'":
                v, group = _SINGLE_QUOTED.match(data, at), "sq"
            elif pair:
                continue
            else:
                v, group = _UNQUOTED.match(data, at), "bare"
            index = v.re.groupindex[group] if v is not None else 0
            if v is None or v.start(index) < 0:
                continue
            start, end = v.span(index)
            value = data[start:end]
            if start == end or value.startswith(_MARK_BYTES[:-1]):
                continue
            if pair and not _pair_value(value):
                continue  # ["password", "email"]: a list of two names
            spans.append((start, end))
        return spans

    def _arrow_spans(self, data: bytes) -> list[tuple[int, int]]:
        """Byte spans of secrets written after their name and an arrow ("password -> hunter2"):
        the word after the arrow, when it reads as a secret (``_ARROW_SECRET``)."""
        spans = []
        for m in _ARROW_SECRET.finditer(data):
            key_at, (start, end) = m.start(_ARROW_KEY), m.span(_ARROW_VALUE)
            name = m.group(_ARROW_KEY).rstrip(b"-.").decode()
            if not name or not (self.is_secret_key(name) or _two_word_name(data, key_at, name)):
                continue
            value = data[start:end]
            scheme = value.split(None, 1)
            if len(scheme) == 2 and value[:1] not in (b"'", b'"'):  # "Authorization -> Bearer abc...": the credential
                start, value = end - len(scheme[1]), scheme[1]
            after = data[end : end + 24].split(None, 1) if data[end : end + 1].isspace() else ()
            noun = _WORD.findall(name)[-1].lower().encode()
            told = _told_secret(noun, value, after[0].rstrip(b".,;:!?") if after else b"")
            if told is not None and self._code_value(name, value[told[0] : told[1]]):
                spans.append((start + told[0], start + told[1]))
        return spans

    def _names_a_secret_element(self, opening: bytes, closing: bytes, value: bytes) -> bool:
        if opening != closing:
            return False
        name = opening.decode(errors="replace")
        return self._secret_value(name.rpartition(":")[2], value)  # a namespace prefix (wsse:) says nothing

    def _secret_value(self, key: str, value: bytes) -> bool:
        """Whether ``value``, written in text under ``key``, is a secret to redact."""
        return self.is_secret_key(key) and self._code_value(key, value)

    def _code_value(self, key: str, value: bytes) -> bool:
        """False for a value under a key that names only a code (pin, otp, cvv, ssn) that holds no
        digit: "Pin: release a=stable" (APT's pinning), "OTP: sent", "SSN: on file"."""
        if _key_kind(key) != "code" or any(c in _DIGITS for c in value):
            return True
        low = key.lower()
        return any(k in low for k in self._user_keys)

    def _key_value_spans(self, data: bytes) -> Iterator[tuple[int, int]]:
        """Byte spans of the values of secret keys written with their values, in order, not overlapping.

        Works on bytes: RE2 takes ``str`` by encoding all of it on every call, so reading
        each value where its key ends would cost the whole text again per key.
        """
        done = 0  # the end of the last value redacted: keys inside it are gone with it
        is_secret = self.is_secret_key
        brackets = None  # where the brackets of values close, made when a value opens one
        for m in _KEY_AT.finditer(data):
            start, at = m.span()
            if start < done:
                continue
            # The match is short: its style and key are read from its text, not through group
            # lookups (each costs the RE2 wrapper more than the rest of this loop).
            core = data[start:at].rstrip(_SPACE)
            flag = False
            key_at = -1
            if core[-1] not in _SEPARATORS:
                # A flag (-token, --db-password): its value after = or : (as a bare key's), or
                # after spaces when the flag is one that takes a secret so.
                key = core[core.index(b"-") :].lstrip(b"-")
                after = at
                while data[at : at + 1] in (b" ", b"\t"):
                    at += 1
                if data[at : at + 1] in (b":", b"="):
                    at += 1
                elif at == after or at == len(data) or data[at] in _NOT_A_FLAG_VALUE or not _flag_takes_secret(key.decode()):
                    continue
                else:
                    flag = True
                value = None
                while data[at : at + 1] in (b" ", b"\t"):
                    at += 1
            elif (core := core[:-1].rstrip(_SPACE).removesuffix(b"]"))[-1:] == b"'":  # the match without its separator
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
                key_at = start + len(core) - len(key)  # where its line starts is asked only of a secret key's
                while data[at : at + 1] in (b" ", b"\t"):
                    at += 1
            if b"\\" in key:
                key = _unescaped(key)
            name = key.decode().strip()  # ASCII: the patterns match no other key
            if not flag and not is_secret(name) and (key_at < 0 or not _two_word_name(data, key_at, name)):
                continue
            if flag:
                if data[at : at + 1] == b"\\" and _QUOTE_AHEAD.match(data, at) is None:
                    continue  # an escaped line end: the flag ends its line
            elif data.startswith(_MARK_BYTES, at):  # marked by a format already (its "[" opens no list)
                glued = _glued_tail(data, at)
                if glued is not None:
                    yield glued
                    done = glued[1]
                continue
            elif data[at : at + 1] in (b"{", b"[") or (data[at : at + 1] == b"(" and data[at + 1 : at + 2] in (b'"', b"'")):
                # An object or list under a secret key ({"password": {"current": ...}} in a tool's
                # JSON text, auth=("bob", "hunter2") in code): everything inside its brackets goes.
                brackets = brackets or BracketEnds(data)
                close = brackets.end(at)
                if close is not None and close > at + 1 and not data.startswith(_MARK_BYTES[:-1], at + 1) and not data.startswith(_MARK_BYTES, at):
                    if value is _double_quoted(0) and data[at] == 0x7B and _schema_text(data[at : close + 1]):
                        continue  # a tool's schema for a password: its keys are scanned as any text's
                    yield at + 1, close
                    done = close
                continue
            if data[at : at + 1] == b"=" and data[at - 1 : at] == b"=":
                continue  # "password == x": code that compares, not a value
            if (data[at : at + 1] == b"=" and data[at - 1 : at] == b":") or (data[at : at + 1] == b">" and data[at - 1 : at] == b"="):
                at += 1  # "password := x", "password => x"
                while data[at : at + 1] in (b" ", b"\t"):
                    at += 1
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
            if vstart == vend:
                continue
            if data.startswith(_MARK_BYTES[:-1], vstart):
                glued = _glued_tail(data, vstart)
                if glued is not None:
                    yield glued
                    done = glued[1]
                continue
            if (b"[REDACTED" in data[vstart : vend + 12] or data.startswith(b"-----BEGIN ", vstart)) and marked_in_place(data, vstart, names_connection(name), name.lower().endswith(("cookie", "cookies"))) is not None:
                continue  # "Bearer [REDACTED]", postgresql://app:[REDACTED]@db/orders: its secret is marked
            if flag and (data[vstart : vstart + 1] == b"$" or (vstart == at and not _flag_value(data[vstart:vend]))):
                continue  # a variable ("$TOKEN"), or not a secret: prose about the flag, a metavar
            if not self._code_value(name, data[vstart:vend]):
                continue
            if value is _UNQUOTED and data[vstart:vend].lower() in _NO_SECRET_WORDS and (vend == len(data) or data[vend] in _VALUE_END_BYTES):
                continue  # "always-auth=true", "auth: false": a switch, as JSON's bare true is
            if value is _UNQUOTED and vstart == at and _code_not_a_secret(data[vstart:vend], data[at - 1 : at]):
                continue
            if value is _UNQUOTED and vstart == at and key_at >= 0 and _prose_after(data, vstart, vend):
                continue  # "password: is required", "API key: it must be rotated"
            if value is _UNQUOTED and vstart == at and data[vstart : vstart + 1] != b"'":
                vend = self._unquoted_end(data, vstart, vend, key_at if key_at >= 0 and _starts_its_line(data, key_at) else -1)
                if data[vend : vend + 1] in (b" ", b"\t") and data[m.end() - 1] == 0x3A and name.lower().endswith(("password", "passphrase", "passcode", "passwd")):
                    vend = _passphrase_end(data, vstart, 2) or vend  # "passphrase: blue sky river, keep it safe"
            if "auth" in name.lower():  # "Authorization: Token [REDACTED]": the scheme says how, not what
                vstart += scheme_length(data[vstart:vend])
            yield vstart, vend
            done = vend

    @staticmethod
    def _unquoted_end(data: bytes, vstart: int, vend: int, key_at: int) -> int:
        """Where an unquoted value read up to ``vend`` really ends: past the next key's value
        when the word read is a scheme or a key name followed by a separator ("password: X-Api-Key:
        abc", "password: Api-Key = x9F..."); when its key starts its line (at ``key_at``, else -1),
        past the rest of the line when the words after it read as a passphrase, not as prose, and
        past a YAML block scalar's lines ("password: |" and the lines indented under it)."""
        own_line = key_at >= 0
        if own_line and _BLOCK_SCALAR.fullmatch(data[vstart:vend]) is not None:
            return _block_end(data, vend, key_at, vend)
        nxt = vend
        while data[nxt : nxt + 1] in (b" ", b"\t"):
            nxt += 1
        named = _NAME_THEN_SEPARATOR.match(data, vstart) if data[vend - 1 : vend] in (b":", b"=") or data[nxt : nxt + 1] in (b":", b"=") else None
        if named is not None and named.end() >= vend and named.end() < len(data):
            more = _UNQUOTED.match(data, named.end())
            if more is not None and more.end() > named.end():
                return more.end()
        if own_line and data[vend : vend + 1] in (b" ", b"\t"):
            more = _MORE_WORDS.match(data, vend)
            if more is not None and not any(w.lower() in _FLAG_PROSE for w in more.group(0).split()):
                end = more.end()
                if data[end : end + 1] in (b"", b"\n", b"\r", b"#") or data.startswith((b"\\n", b"\\r"), end) or data[end : end + 2] in (b" #", b"\t#"):
                    return end  # the line holds nothing else: it is the value (YAML, .env, INI)
        return vend


_SCHEMA_TEXT = 16_384  # a longer object under a secret key is marked whole, not parsed


def _schema_text(text: bytes) -> bool:
    """Whether ``text``, an object in JSON text under a secret key, is a JSON schema that gives
    no instance (see ``schema_shapes``): it holds no secret of its key's, and stays readable.
    Its nested schemas are parsed again when their keys are met, at most ``MAX_DEPTH`` deep."""
    if len(text) > _SCHEMA_TEXT:
        return False
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return is_schema(value) and not holds_values(value)


def _glued_tail(data: bytes, at: int) -> tuple[int, int] | None:
    """The word glued to the marks at ``at`` (a secret key's value), if any: a format marked the
    value's head ("npm_" and 36 letters of a longer token, AKIA... glued to more), and the rest
    of the word is the secret's too."""
    tail = at
    while data.startswith(_MARK_BYTES, tail):
        tail += len(_MARK_BYTES)
    rest = _GLUED.match(data, tail) if tail > at else None
    return (tail, rest.end()) if rest is not None else None


def _two_word_name(data: bytes, key_at: int, name: str) -> bool:
    """Whether the bare key ``name`` at ``key_at`` ends a secret's name of two words written with a
    space, as people write it in text: "API key: x", "access key = x", "Secret key: x" (one of
    ``_SECRET_PAIRS``; "Primary key: id" and "the key: a value" are not)."""
    i = key_at - 1
    if data[i : i + 1] not in (b" ", b"\t"):
        return False
    j = i
    while j > 0 and i - j <= 12 and data[j - 1] in _LETTERS:
        j -= 1
    if j == i or (j > 0 and data[j - 1] in _LETTERS):
        return False
    return (data[j:i].lower().decode(), name.lower()) in _SECRET_PAIRS


def _prose_after(data: bytes, vstart: int, vend: int) -> bool:
    """Whether the unquoted word at ``vstart:vend`` after a bare key in text starts a sentence
    rather than giving a value: a word of prose with more words after it ("password: is required",
    "The secret: there is none.")."""
    return data[vstart:vend].lower() in _FLAG_PROSE and data[vend : vend + 1] in (b" ", b"\t") and data[vend + 1 : vend + 2].isalpha()


_IDENTIFIER = compile_linear(rb"[A-Za-z_][A-Za-z_]*(?:\.[A-Za-z_][A-Za-z_]*)*")


def _code_not_a_secret(value: bytes, separator: bytes) -> bool:
    """Whether ``value``, unquoted after a secret key in text, is code rather than a secret: a
    type annotation ("api_key: str = ..."), an expression in brackets ("auth = (url.user, ...)",
    or one already redacted), a variable named like a secret ("secret = self.api_key")."""
    if value.rstrip(b",") in _TYPE_NAMES and separator != b"=":
        return True
    if value[:1] in (b"(", b"[", b"{"):
        return True
    return (b"_" in value or b"." in value) and _IDENTIFIER.fullmatch(value) is not None and names_secret(value.decode())


_BLOCK_SCALAR = compile_linear(rb"[|>][+\-]?[1-9]?[+\-]?")


def _block_end(data: bytes, after: int, key_at: int, default: int) -> int:
    """The end of a YAML block scalar's text: the lines after ``after``'s line indented deeper
    than the line of the key at ``key_at`` (blank lines between them too); ``default`` if none."""
    line_start = data.rfind(b"\n", 0, key_at) + 1
    base = len(data[line_start:key_at]) - len(data[line_start:key_at].lstrip(b" \t-"))
    at = data.find(b"\n", after)
    end = default
    while at >= 0:
        nxt = data.find(b"\n", at + 1)
        line = data[at + 1 : nxt if nxt >= 0 else len(data)].rstrip(b"\r")
        if line.strip():
            if len(line) - len(line.lstrip(b" \t")) <= base:
                break
            end = at + 1 + len(line)
        at = nxt
    return end


def _starts_its_line(data: bytes, at: int) -> bool:
    """Whether the key at ``at`` starts its line (after indentation, a YAML list's dash, ``export``)."""
    i = at
    while i > 0 and data[i - 1] in _LINE_LEAD:
        i -= 1
    lead = b"-" if data[i - 1 : i] == b"-" else b"export" if data[i - 6 : i] == b"export" and i < at else b""
    if lead:
        i -= len(lead)
        while i > 0 and data[i - 1] in _LINE_LEAD:
            i -= 1
    return i == 0 or data[i - 1 : i] in (b"\n", b"\r") or (data[i - 2 : i] in (b"\\n", b"\\r") and data[i - 3 : i - 2] != b"\\")


_ARGV_MAX = 256  # arguments of a list read as a command line (a longer list is data)
_ARGV_PLAIN = bytes.maketrans(b"\"'\\\n\r;|&`", b"_" * 9)  # bytes that would end or quote an argument


# A value named by the key beside it, or the first item of a pair (see _named_value_spans).
_NAMED_PAIR = compile_linear(
    r'"(?:name|key|Name|Key)"[ \t]*:[ \t]*"(?P<k1>[A-Za-z0-9_.\- ]+)"[ \t\r\n]*,[ \t\r\n]*"(?:value|Value)"[ \t]*:[ \t]*'
    r"|'(?:name|key|Name|Key)'[ \t]*:[ \t]*'(?P<k2>[A-Za-z0-9_.\- ]+)'[ \t\r\n]*,[ \t\r\n]*'(?:value|Value)'[ \t]*:[ \t]*"
    r"|(?:^|[\s\-])(?:name|key):[ \t]*[\"']?(?P<k3>[A-Za-z0-9_.\-]+)[\"']?[ \t]*(?:\r?\n|\\n)[ \t]*value:[ \t]*"
    r"|[\[(][ \t]*\"(?P<k4>[A-Za-z0-9_.\- ]+)\"[ \t]*,[ \t]*"
    r"|[\[(][ \t]*b?'(?P<k5>[A-Za-z0-9_.\- ]+)'[ \t]*,[ \t]*b?"
)


def _pair_value(value: bytes) -> bool:
    """Whether the second item of a pair named like a secret reads as one: not a word or a
    name (["password", "email"] lists two fields), but a word with a digit or a sign, or a
    long one."""
    if any(c in _SPACE for c in value):
        return False
    if value.replace(b"_", b"").replace(b"-", b"").isalpha() and names_secret(value.decode(errors="replace")):
        return False  # a name: ["password", "confirm_password"]
    return len(value) >= 16 or (len(value) >= 6 and any(c in _DIGITS or c in _SYMBOLS for c in value))


def named_secret(mapping: Any, is_secret_key: Any) -> str | None:
    """The key of ``mapping``'s value when the mapping names that value a secret beside it:
    ``{"name": "DB_PASSWORD", "value": "x"}`` (a Kubernetes env entry, a HAR header, a form
    field), else None."""
    for value_key in ("value", "Value"):
        if value_key in mapping:
            break
    else:
        return None
    for name_key in ("name", "key", "Name", "Key"):
        name = mapping.get(name_key)
        if type(name) is str and is_secret_key(name):
            return value_key
    return None


def may_be_argv(items: list | tuple) -> bool:
    """Whether ``items`` may be a command line: two to ``_ARGV_MAX`` strings, one of them a flag."""
    if not 2 <= len(items) <= _ARGV_MAX:
        return False
    flag = False
    for x in items:
        if type(x) is not str:
            return False
        flag = flag or x[:1] == "-"
    return flag


def _argv_spans(items: list | tuple, keyed_values: Any) -> dict[int, list[tuple[int, int]]]:
    """The secrets ``keyed_values`` finds in the command line ``items`` make, as byte spans of
    each argument's UTF-8 text, by argument. Each argument is written in one word (quoted when
    it holds spaces; quotes, backslashes and shell signs in it read as ``_``, one byte each, so
    its bytes keep their places)."""
    words, where, at = [], [], 0
    for x in items:
        data = x.encode(errors="surrogatepass").translate(_ARGV_PLAIN)
        quote = not data or any(c in _SPACE for c in data)
        word = b"'" + data + b"'" if quote else data
        where.append((at + quote, at + quote + len(data)))
        words.append(word)
        at += len(word) + 1
    line = b" ".join(words)
    found: dict[int, list[tuple[int, int]]] = {}
    for start, end in keyed_values(line):
        for i, (first, last) in enumerate(where):
            if start < last and end > first:
                found.setdefault(i, []).append((max(start, first) - first, min(end, last) - first))
    return found




# A list of quoted strings in text (JSON, a Python repr): ["mysql", "-p", "S3cret!pw"].
_ITEM_DQ = r'"(?:[^"\\\r\n]|\\.)*"'
_ITEM_SQ = r"'(?:[^'\\\r\n]|\\.)*'"
_GAP = r"[ \t\r\n]*"
_STRING_ARRAY = compile_linear(
    rf"\[{_GAP}(?:{_ITEM_DQ}{_GAP},{_GAP})+{_ITEM_DQ}{_GAP},?{_GAP}\]|\[{_GAP}(?:{_ITEM_SQ}{_GAP},{_GAP})+{_ITEM_SQ}{_GAP},?{_GAP}\]"
)
_ARRAY_ITEM = compile_linear(rf"{_ITEM_DQ}|{_ITEM_SQ}")


def _array_spans(data: bytes, keyed_values: Any) -> list[tuple[int, int]]:
    """Byte spans of the secrets in lists of quoted strings in ``data`` that make a command line
    (read by ``_argv_spans``); an argument written with escapes goes whole."""
    spans = []
    for array in _STRING_ARRAY.finditer(data):
        raws = [(m.start() + 1, m.end() - 1) for m in _ARRAY_ITEM.finditer(data, array.start(), array.end())]
        items = []
        for start, end in raws:
            raw = data[start:end]
            try:
                items.append(json.loads(b'"' + raw + b'"') if b"\\" in raw and data[start - 1] == 0x22 else raw.decode())
            except ValueError:
                items.append(raw.decode(errors="replace"))
        if not may_be_argv(items):
            continue
        for i, cuts in _argv_spans(items, keyed_values).items():
            start, end = raws[i]
            if items[i].encode(errors="surrogatepass") != data[start:end]:
                spans.append((start, end))  # escaped: its bytes are not the argument's
            else:
                spans += [(start + a, start + b) for a, b in cuts]
    return spans


def _command_spans(data: bytes) -> list[tuple[int, int]]:
    """Byte spans of the secrets well-known commands take in short flags (``_COMMAND_SECRET``)."""
    spans = []
    for m in _COMMAND_SECRET.finditer(data):
        for group in _COMMAND_GROUPS:
            start, end = m.span(group)
            if start >= 0:
                break
        quotes = len(data[start:end]) - len(data[start:end].lstrip(b"\\"))
        if data[start + quotes : start + quotes + 1] in (b"'", b'"'):  # a quoted value: what is inside
            start, end = start + quotes + 1, end - quotes - 1
        if group == _MYSQL_SPACED and _told_secret(b"password", data[start:end], b"") is None:
            continue  # a database's name
        if end > start and data[start : start + 1] != b"$" and not data.startswith(_MARK_BYTES[:-1], start):
            spans.append((start, end))
    return spans


def _prose_spans(data: bytes) -> list[tuple[int, int]]:
    """Byte spans of secrets told in prose ("my password is hunter2"), read by ``_told_secret``."""
    spans = []
    for m in _PROSE.finditer(data):
        for noun, value, verb in (
            (_PROSE_STATED_NOUN, _PROSE_STATED_VALUE, True),
            (_PROSE_NOUN, _PROSE_VALUE, True),
            (_PROSE_TO_NOUN, _PROSE_TO_VALUE, True),
            (_PROSE_PHRASE_NOUN, _PROSE_PHRASE_VALUE, True),
            (_PROSE_BARE_NOUN, _PROSE_BARE_VALUE, False),
        ):
            start, end = m.span(value)
            if start >= 0:
                break
        after = data[end : end + 24].split(None, 1) if data[end : end + 1].isspace() else ()
        after = after[0] if after else b""
        if noun == _PROSE_STATED_NOUN:
            told = _stated_secret(data[start:end], bool(after) and data[end : end + 1] in (b" ", b"\t") and data[end - 1 : end] not in b".,;:!?")
        elif noun == _PROSE_PHRASE_NOUN:
            told = None
        else:
            told = _told_secret(m.group(noun), data[start:end], after.rstrip(b".,;:!?"), verb=verb)
        if verb and m.group(noun).lower().startswith(_PASS_NOUNS) and data[start : start + 1] not in (b'"', b"'", b"`"):
            phrase = _passphrase_end(data, start, 3)
            if phrase is not None and (told is None or phrase > start + told[1]):
                told = (0, phrase - start)
        if told is not None:
            spans.append((start + told[0], start + told[1]))
    return spans


def _mark_token(m: Any) -> str:
    """The replacement of one token: the character (or escaped newline) before it stays."""
    return m.group("start") + _mark_keeping_key(m.group(0)[len(m.group("start")) :])


def _mark_match(m: Any) -> str:
    return _mark_keeping_key(m.group(0))


# A format that takes in the name it is written under ("authorization": "Basic ...",
# aws_secret_access_key = '...') keeps that name, its separator and quotes: the text then reads
# as the mapping it came from reads once its secret key is redacted ('key': '[REDACTED]'), so a
# replay that hands back the redacted mapping and a node that writes it out as text agree.
_NAMED = re.compile(r"""([A-Za-z_][\w\-]*)(["']?\s*(?:[:=]|,)\s*b?)(["']?)""")  # (a pair: "Authorization", "Basic ...")


def _mark_keeping_key(found: str) -> str:
    spans = secret_spans(found)
    if spans != [(0, len(found))]:  # a URL's password, a parameter's value, a scheme's credential
        return _marked(found, spans) if spans else found
    named = _NAMED.match(found)
    if named is None or named.end() >= len(found) or not names_secret(named.group(1)):
        return MARK
    quote = named.group(3)
    return found[: named.end()] + MARK + (quote if quote and found.endswith(quote) else "")
