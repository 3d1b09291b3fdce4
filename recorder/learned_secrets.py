"""Secrets a run's calls were handed, found by value wherever the run quotes them afterwards.

A tool called with ``password=...`` has that argument redacted by its key, but what the call
does with it comes back without the key: SQLAlchemy's ``IntegrityError`` says ``[parameters:
('bob', '…')]`` and keeps the values in its ``params``, a client's error quotes the token it
was refused with, a tool's answer echoes it. Once a call's inputs hand over a value under a
secret key, in a ``(name, value)`` pair named like a secret, or as a ``SecretStr``, the run's
redactor knows that value: the call's output, error, error fields and traceback, and whatever
the run records after (a ``ToolNode``'s error message in the state, the failed task's and the
run's error), have it replaced like any secret. So do the run's input, config and context, a
task's writes (``{"api_key": ...}`` in the state) and a human's answer to an interrupt: a node
that quotes such a value later (``f"calling with {key}"``) has it hidden there too.

Only values of at least ``MIN_LENGTH`` characters are learned, and never one that reads as a
flag, a number or a word (``anonymous``, ``Required``): such a value (or a short one: ``yes``,
``admin``, a port) would take the same word out of every later text of the run. Values are
learned from structured inputs only (mappings, lists, pairs), and a mapping under a secret key
is not looked into: a tool schema's ``{"password": {"description": "The user's password"}}``
holds no secret to look for elsewhere. A connection URL under its key (``database_url``) is
learned as its password: the URL quoted later keeps its scheme, user and host.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from graphtape.recorder.linear_regex import compile_linear
from graphtape.recorder.env_secrets import MIN_LENGTH  # shorter values are not told apart from ordinary words
from graphtape.recorder.redaction import MARK, Redactor, names_connection
from graphtape.recorder.secret_parts import connection_password

MAX_LENGTH = 16_384  # a longer value is a document, not a credential (and each text is searched for it)
MAX_LEARNED = 64  # values a run remembers: every text the run records afterwards is searched for each
_MAX_VISITS = 2_000  # values of one call's inputs looked at (a model call's are its whole history)
_MAX_DEPTH = 6
_MAX_LISTED = 32  # strings of a list under a secret key ({"api_keys": [...]}) learned
_SCHEME = compile_linear(r"(?i)(?:basic|bearer|token|digest|apikey|key)[ \t]+(\S+)$")  # "Bearer …": the credential alone too
_SECRET_TYPES = frozenset({"SecretStr", "SecretBytes"})
_NOT_SECRET = compile_linear(r"(?i)(?:true|false|none|null|yes|no|on|off|disabled?|enabled?|[\d.\-+]+|\[REDACTED\])")


def secret_values(inputs: Any, is_secret_key: Callable[[str], bool]) -> set[str]:
    """The values ``inputs`` hands over under a secret key, in a secret ``(name, value)`` pair,
    or as a ``SecretStr``, that are worth looking for elsewhere (see the module's docstring)."""
    found: set[str] = set()
    budget = [_MAX_VISITS]

    def keep(value: Any) -> None:
        if isinstance(value, bytes):
            try:
                value = value.decode()
            except UnicodeDecodeError:
                return
        elif not isinstance(value, str):
            reveal = getattr(value, "get_secret_value", None) if _kind(type(value)) is _SECRET else None
            if reveal is None:
                return
            try:
                value = reveal()
            except Exception:  # noqa: BLE001 - an odd secret type: its redaction stands on its own
                return
            if isinstance(value, bytes):
                keep(value)
                return
            if not isinstance(value, str):
                return
        value = value.strip()
        scheme = _SCHEME.match(value)
        for v in (value, scheme.group(1)) if scheme else (value,):
            if MIN_LENGTH <= len(v) <= MAX_LENGTH and v not in MARK and not _NOT_SECRET.fullmatch(v) and not _a_word(v):
                found.add(v)

    def walk(value: Any, depth: int) -> None:
        budget[0] -= 1
        if budget[0] < 0 or depth > _MAX_DEPTH:
            return
        kind = _kind(type(value))
        if kind is _MAPPING:
            try:
                items = list(value.items())
            except Exception:  # noqa: BLE001 - a mapping that fails to read is encoded (and marked) elsewhere
                return
            for k, v in items:
                if budget[0] < 0:
                    return
                if not (isinstance(k, str) and is_secret_key(k)):
                    walk(v, depth + 1)
                elif isinstance(v, str) and names_connection(k) and (password := connection_password(v)) is not None:
                    keep(password)  # {"database_url": "postgresql://app:pw@db/x"}: its password, not the URL
                elif isinstance(v, (list, tuple)):
                    for item in v[:_MAX_LISTED]:
                        keep(item)  # {"api_keys": [...]}: its strings (a mapping in it is not looked into)
                else:
                    keep(v)
        elif kind is _SEQUENCE:
            if len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], (str, bytes)) and is_secret_key(value[0]):
                keep(value[1])  # a header, a form field: (name, value)
                return
            for v in value:
                if _KINDS.get(type(v), _SKIP) is None:
                    continue  # a message of a history, a number: nothing to look into
                if budget[0] < 0:
                    return
                walk(v, depth + 1)
        elif kind is _SECRET:
            keep(value)

    walk(inputs, 0)
    return found


def _a_word(value: str) -> bool:
    """Whether ``value`` is a word (``anonymous``, ``Required``, ``OPTIONAL``): under a secret key
    it says how the secret is handled more often than it is one, and learned, it would go from
    every later sentence of the run that uses it."""
    return value.isalpha() and (value.islower() or value.istitle() or value.isupper())


_MAPPING, _SEQUENCE, _SECRET = "mapping", "sequence", "secret"
_SKIP = object()
_KINDS: dict[type, str | None] = {str: None, bytes: None, int: None, float: None, bool: None, type(None): None, dict: _MAPPING, list: _SEQUENCE, tuple: _SEQUENCE}


def _kind(t: type) -> str | None:
    """What the walk does with a value of type ``t`` (remembered: a model call's inputs are
    its history, thousands of messages of a few types, none of them looked into)."""
    kind = _KINDS.get(t, _SKIP)
    if kind is not _SKIP:
        return kind
    if issubclass(t, Mapping):
        kind = _MAPPING
    elif issubclass(t, (list, tuple)):
        kind = _SEQUENCE
    elif _is_secret_type(t):
        kind = _SECRET
    else:
        kind = None
    if len(_KINDS) < 10_000:
        _KINDS[t] = kind
    return kind


def _is_secret_type(t: type) -> bool:
    return any(c.__name__ in _SECRET_TYPES and c.__module__.startswith("pydantic") for c in t.__mro__)


def _forms(value: str) -> set[str]:
    """``value`` as text may carry it: as is, escaped in JSON, in a Python repr (a tuple of
    parameters), percent-encoded (a URL, a form body)."""
    forms = {value, json.dumps(value)[1:-1], repr(value)[1:-1], urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value, safe="")}
    return {f for f in forms if len(f) >= MIN_LENGTH}


class RunRedactor(Redactor):
    """A run's :class:`Redactor`, which also hides the secret values its calls were handed
    (:meth:`learn`), wherever they turn up in what the run records after."""

    def __init__(self, patterns: Iterable[Any] = (), keys: Iterable[str] = (), *, known_clean: Collection[str] = frozenset()) -> None:
        super().__init__(patterns, keys, known_clean=known_clean)
        self._learn_lock = threading.Lock()
        self._learned_values: set[str] = set()
        self.learned: tuple[str, ...] = ()  # the forms searched for, longest first

    def learn(self, inputs: Any) -> None:
        """Remember the secret values a call's ``inputs`` hands over (see :func:`secret_values`)."""
        values = secret_values(inputs, self.is_secret_key)
        if not values or values <= self._learned_values:
            return
        with self._learn_lock:
            for value in sorted(values - self._learned_values):
                if len(self._learned_values) >= MAX_LEARNED:
                    break
                self._learned_values.add(value)
            forms = {f for v in self._learned_values for f in _forms(v)}
            self.learned = tuple(sorted(forms, key=lambda f: (-len(f), f)))

    def scrub(self, text: str) -> str:
        text = super().scrub(text)
        if not self.learned or len(text) < MIN_LENGTH:
            return text  # until a value is learned the redactor scrubs as any does
        for form in self.learned:
            if form in text:
                for _ in range(text.count(form)):
                    self.mark()  # counted as each redaction is
                text = text.replace(form, MARK)
        return text

    def _may_hold_secret(self, text: str) -> bool:
        return super()._may_hold_secret(text) or any(form in text for form in self.learned)

    def _direct_spans(self, text: str) -> list[tuple[int, int]]:
        found = super()._direct_spans(text)
        if not self.learned:
            return found
        extra = []
        for form in self.learned:
            at = text.find(form)
            while at >= 0:
                extra.append((at, at + len(form)))
                at = text.find(form, at + len(form))
        if not extra:
            return found
        merged: list[tuple[int, int]] = []
        for start, end in sorted(found + extra):
            if merged and start < merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        return merged
