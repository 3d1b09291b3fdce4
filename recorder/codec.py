"""Typed, safe encoding of graph values to JSON-able trees and back.

Recordings travel between people, so decoding never imports a name read from
the data and never unpickles: it rebuilds only allow-listed LangChain /
LangGraph types and types the user registered by name. Anything else comes
back as plain data carrying its type name.

Encoded trees use small envelopes: ``{"$t": kind, ...}``. Values worth
sharing between steps (messages, documents, long strings) can be replaced by
``{"$b": hash}`` references to content-addressed blobs through a ``BlobSink``;
a long message history, by a reference to shared blocks of it (``{"$t": "cat"}``,
see ``history_blocks``), so a history one message longer stores only its end;
a very long string, by a reference to its chunks (``{"$t": "scat"}``, see
``string_chunks``), so a text that grew stores only its new end.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import contextvars
import dataclasses
import datetime as dt
import decimal
import enum
import hashlib
import itertools
import math
import pathlib
import re
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import Any, Protocol

import orjson

from graphtape.recorder.errors import StoreError
from graphtape.recorder.history_blocks import BLOCK_AT, CAT, HistoryBlocks
from graphtape.recorder.lone_surrogates import displayable, has_lone_surrogate, json_bytes
from graphtape.recorder.prefix_memo import MIN_LENGTH as HISTORY_MIN
from graphtape.recorder.prefix_memo import PrefixMemo
from graphtape.recorder.redaction import MARK, Redactor, named_secret
from graphtape.recorder.store.column_text import from_column, to_column
from graphtape.recorder.string_chunks import CHUNKED_AT, SCAT, StringChunks, joined

ENVELOPE = "$t"
BLOB_REF = "$b"
TYPE_KEY = "__type__"
LONG_STRING = 1024
MAX_DEPTH = 200
# Encoding stops (and marks) this deep: what is stored sits inside more levels (a frame, the
# state, blob references, a fixture's steps), and reading refuses anything past MAX_DEPTH,
# so a value recorded at the limit must leave room for them or its step could not be read.
ENCODE_DEPTH = MAX_DEPTH - 24
ENCODE_BUDGET = 500_000  # values one encode() builds at most: shared parts of a graph-shaped value repeat
MAX_REPR_SCAN = 1_000_000  # characters of a repr scanned for secrets (only its first 2,000 are kept)
# How many values one decode may produce. Blobs referencing blobs multiply: 60 blobs
# each referencing the next twice are a few kilobytes and 2**60 values. Real states
# stay far below (11,000 messages are a few hundred thousand values).
MAX_VALUES = 5_000_000

# What a value's own code may raise that is not the value's failure: the person stopping the program.
_STOP = (KeyboardInterrupt, SystemExit)

_registry: dict[str, type] = {}
_STR_ONLY = frozenset({str})


def register_type(cls: type, name: str | None = None) -> type:
    """Allow ``cls`` (a dataclass, pydantic model or Enum) to be rebuilt when decoding.

    Decoding looks types up only in this registry, by the name recorded; it
    never imports modules. Usable as a class decorator.
    """
    _registry[name or qualified_name(cls)] = cls
    return cls


def registered_types() -> Mapping[str, type]:
    """The types decoding may rebuild, by recorded name."""
    return dict(_registry)


# Enum classes a typed decode may rebuild besides registered ones, by name: a replay lends
# those its graph's state schema names (``replay.state_types``), for as long as it runs.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]{4,}")  # an object's address in its default repr
_PRIVATE_MODULE = re.compile(r"\b_graphtape_(?:user|fixture)_(\w+?)_[0-9a-f]{8}\b")  # replay.loading's name for a file


def as_imported(text: str) -> str:
    """A repr without what differs from run to run: the object's address, the private module name."""
    return _ADDRESS.sub("", _PRIVATE_MODULE.sub(r"\1", text))

_lent_enums: contextvars.ContextVar[Mapping[str, type] | None] = contextvars.ContextVar("graphtape_lent_enums", default=None)


@contextlib.contextmanager
def enums_known(classes: Iterable[type]) -> Iterator[None]:
    """Within this block, typed decoding rebuilds members of these Enum classes (matched by the
    recorded class name, or its tail: a script's ``__main__.Color`` is ``agent.Color`` today)."""
    names: dict[str, type] = {}
    for cls in classes:
        if isinstance(cls, type) and issubclass(cls, enum.Enum):
            names.setdefault(qualified_name(cls), cls)
            names.setdefault(cls.__qualname__, cls)
    token = _lent_enums.set({**(_lent_enums.get() or {}), **names})
    try:
        yield
    finally:
        _lent_enums.reset(token)


def _enum_type(name: Any) -> type | None:
    """The Enum class a recorded member's class name stands for, if decoding may rebuild it."""
    if type(name) is not str:
        return None
    # Registered under the recorded name, or under another name (the envelope keeps the class's own).
    cls = _registry.get(name) or next((c for c in _registry.values() if qualified_name(c) == name), None)
    if isinstance(cls, type) and issubclass(cls, enum.Enum):
        return cls
    lent = _lent_enums.get()
    if not lent:
        return None
    parts = name.split(".")
    for i in range(len(parts)):
        cls = lent.get(".".join(parts[i:]))
        if cls is not None:
            return cls
    return None


class BlobSink(Protocol):
    """Receives shareable values and returns the reference that replaces them."""

    def put_blob(self, data: bytes) -> str: ...


class Fault(Exception):
    """A value could not be encoded; it is stored as a marked safe string."""


class _OverBudget(Exception):
    """One encode() built more than ``ENCODE_BUDGET`` values: the value it was given is marked whole."""


class _Abort(Exception):
    """Carries an error raised by ``on_fault`` or the sink out of the encoder untouched
    (strict mode's RecorderFault must not be taken for a value that failed to read)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


def qualified_name(cls: type) -> str:
    """``module.QualName``, the module as it is imported: a file the command line loaded by its path
    (``--graph agent.py:graph``, as ``_graphtape_user_agent_<digest>``) names its classes as
    ``agent`` does, so a type recorded by ``import agent`` is the same type replayed from the file."""
    module = _PRIVATE_MODULE.sub(r"\1", cls.__module__)
    return f"{module}.{cls.__qualname__}"


def blob_hash(data: bytes) -> str:
    """Content address of an encoded blob."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def dumps(tree: Any) -> bytes:
    """Serialize an already-encoded tree."""
    return json_bytes(tree)


def loads(data: bytes | str) -> Any:
    """Parse bytes written by :func:`dumps`."""
    return orjson.loads(data)


class Encoder:
    """Turns live values into encoded trees, redacting as it walks.

    One encoder lives per run: it caches the blob reference of each shared
    object it has seen (by identity, holding a reference so ids stay valid),
    so a message present in every step is encoded once per run.
    """

    def __init__(
        self,
        redactor: Redactor | None = None,
        sink: BlobSink | None = None,
        on_fault: Callable[[str], None] | None = None,
    ) -> None:
        self.redactor = redactor or Redactor()
        self.sink = sink
        self.on_fault = on_fault
        self._shared: dict[int, tuple[Any, Any, dict]] = {}
        self._histories = PrefixMemo(watch_messages=True)  # message histories met before, by their head
        self._blocks = HistoryBlocks(self._put)  # long histories stored as shared blocks
        self._chunks = StringChunks(self._put)  # very long strings stored as shared chunks
        self._clean_keys: set[str] = set()  # long keys scrub() leaves as they are
        self._open: set[int] = set()  # ids of the containers being encoded now: a cycle comes back to one
        self._left = ENCODE_BUDGET  # values one encode() may still build (a shared DAG can be exponential)
        self._cycle_told = False
        # Send packets met in the piece of work under way (``packets_once``): a step's Sends are
        # its tasks channel's value, its router's answer and its routes' packets, and each
        # carries the state it hands over; encoded once, not three times.
        self._packets: dict[int, tuple[Any, Any]] | None = None

    @contextlib.contextmanager
    def packets_once(self) -> Iterator[None]:
        """Within the block, a ``Send`` met again is not encoded again (the objects do not change
        while one piece of a step is encoded; outside the block a packet is always encoded)."""
        self._packets = {}
        try:
            yield
        finally:
            self._packets = None

    def same_as(self, original: Any, copy: Any) -> None:
        """``original`` encodes as ``copy`` did while their stamps agree: a call's answer is
        recorded from a copy (LangGraph changes the message in place later), and the state then
        holds the original, unchanged or changed in what the stamp reads (its id, its name)."""
        hit = self._shared.get(id(copy))
        if hit is not None and hit[0] is copy and original is not copy:
            self._shared[id(original)] = (original, hit[1], hit[2])

    def forget(self) -> None:
        """Drop the identity cache (end of run)."""
        self._shared.clear()
        self._histories.clear()
        self._blocks.clear()
        self._chunks.clear()

    def encode(self, value: Any) -> Any:
        """Encode ``value``; never raises for odd values, marks them instead.

        A value that raises when read (a mapping whose backend went away, a
        property that fails) is marked unserializable on its own, with the
        error named, and counted through ``on_fault``; the rest is kept.
        """
        self._open.clear()
        self._left = ENCODE_BUDGET
        self._cycle_told = False
        try:
            return self._enc(value, 0, None)
        except _Abort as stop:
            raise stop.error from None
        except Exception as exc:  # noqa: BLE001 - a value this encoder fails on is marked, never the step lost
            # Over the budget, the value is one mark: a mark per value left would still be
            # written at the value's own size, larger than a reader agrees to build.
            why = f"more than {ENCODE_BUDGET} values (shared parts repeat)" if isinstance(exc, _OverBudget) else f"could not be encoded: {type(exc).__name__}"
            try:
                return self._fault(value, why, with_repr=False)
            except _Abort as stop:
                raise stop.error from None

    def _put(self, data: bytes) -> str:
        try:
            return self.sink.put_blob(data)
        except Exception as exc:  # noqa: BLE001 - the sink's failure is not the value's
            raise _Abort(exc) from exc

    # -- internals -----------------------------------------------------------
    def _fault(self, value: Any, why: str, *, with_repr: bool = True) -> dict:
        text = f"<{type(value).__name__}: {why}>"
        if with_repr:
            try:
                text = repr(value)
            except _STOP:
                raise
            except BaseException:  # noqa: BLE001 - a broken __repr__ must not break recording
                text = f"<{type(value).__name__} with failing repr>"
            # Scrubbed whole, then cut: a secret across the cut (a PEM block's END line) is still found.
            # Without the object's address (``<Client object at 0x7f…>``): a rerun holds the same
            # object elsewhere, and identical runs store identical values.
            text = as_imported(self.redactor.scrub(text[:MAX_REPR_SCAN]))
            if len(text) > 2000:
                text = text[:2000] + "…"
        self._report(f"{type(value).__name__}: {why}")
        return {ENVELOPE: "unserializable", "type": qualified_name(type(value)), "repr": text, "why": why}

    def _report(self, message: str) -> None:
        if self.on_fault is not None:
            try:
                self.on_fault(message)
            except Exception as exc:  # noqa: BLE001 - strict mode raises here: out of the encoder as it is
                raise _Abort(exc) from exc

    def _unreadable(self, value: Any, exc: Exception) -> dict:
        # Neither repr() nor str() of the value is asked for: reading it is what failed.
        name = type(value).__name__
        lines = [line.strip() for line in _safe_str(exc).splitlines() if line.strip()]
        message = self.redactor.scrub("; ".join(lines)[:MAX_REPR_SCAN])  # scrubbed, then cut: a key across the cut is whole
        if len(message) > 300:
            message = message[:300] + "…"
        why = f"could not be read: {type(exc).__name__}" + (f": {message}" if message else "")
        self._report(f"{name}: {why}")
        return {ENVELOPE: "unserializable", "type": qualified_name(type(value)), "repr": f"<{name}: {why}>", "why": why}

    def _shared_ref(self, value: Any, build: Callable[[], Any]) -> Any:
        if self.sink is None:
            return build()
        stamp = _stamp(value)
        hit = self._shared.get(id(value))
        if hit is not None and hit[0] is value and hit[1] == stamp:
            return hit[2]
        tree = build()
        ref = {BLOB_REF: self._put(json_bytes(tree))}
        self._shared[id(value)] = (value, stamp, ref)
        return ref

    def _enc(self, v: Any, depth: int, key: str | None) -> Any:
        if depth > ENCODE_DEPTH:
            return self._fault(v, "nested too deeply", with_repr=False)
        self._left -= 1
        if self._left < 0:
            raise _OverBudget
        t = type(v)
        if t is str:
            s = self.redactor.scrub(v)
            if not s.isascii() and has_lone_surrogate(s):
                s = {ENVELOPE: "str", "v": to_column(s)}  # exactly, though UTF-8 cannot hold it
            elif len(s) > LONG_STRING and self.sink is not None:
                if len(s) > CHUNKED_AT:
                    return self._chunks.encode(s)
                return {BLOB_REF: self._put(orjson.dumps(s))}
            return s
        if t is bool or v is None:
            return v
        if t is int:
            if -(2**63) <= v < 2**63:
                return v
            try:
                return {ENVELOPE: "int", "v": str(v)}
            except ValueError:  # more digits than Python writes in decimal (sys.set_int_max_str_digits)
                return self._fault(v, f"an int of {v.bit_length()} bits is too long to write", with_repr=False)
        if t is float:
            if math.isfinite(v):
                return v
            return {ENVELOPE: "float", "v": repr(v)}
        ident = id(v)
        # A message met before in this run (every prompt repeats the history): its reference,
        # without the walk, while the object is the one cached and has not changed since.
        hit = self._shared.get(ident)
        if hit is not None and hit[0] is v and hit[1] == _stamp(v):
            return hit[2]
        # A container met again while it is still being encoded is a cycle (a tree with parent
        # pointers): marked, counted, and the walk goes on with the rest.
        if ident in self._open:
            if not self._cycle_told:  # one fault per value, however many back-references it has
                self._cycle_told = True
                self._report(f"{type(v).__name__}: a cycle (the value contains itself)")
            return {ENVELOPE: "unserializable", "type": qualified_name(type(v)), "repr": f"<cycle: {type(v).__name__} contains itself>", "why": "cycle"}
        self._open.add(ident)
        try:
            if t is list:
                if len(v) >= HISTORY_MIN and self.sink is not None and _is_message(v[-1]):
                    done = self._histories.apply(v, lambda x: self._enc(x, depth + 1, key), _is_message)
                    if done is not None:
                        return self._blocks.encode(done) if len(done) >= BLOCK_AT else done
                if len(v) == 2 and self._secret_pair(v):
                    return [self._enc(v[0], depth + 1, key), self._secret(v[0], v[1], depth + 1)]
                argv = self.redactor.scrub_argv(v)  # a command line as a list: ["mysql", "-p", "S3cret!pw"]
                return [self._enc(x, depth + 1, key) for x in (v if argv is None else argv)]
            if t is tuple:
                if len(v) == 2 and self._secret_pair(v):
                    return {ENVELOPE: "tuple", "v": [self._enc(v[0], depth + 1, key), self._secret(v[0], v[1], depth + 1)]}
                argv = self.redactor.scrub_argv(v)
                return {ENVELOPE: "tuple", "v": [self._enc(x, depth + 1, key) for x in (v if argv is None else argv)]}
            # The innermost mapping or object whose reading raises is marked alone (try costs nothing until it catches).
            if t is dict or isinstance(v, Mapping) and not _is_special(v):
                return self._enc_dict(v, depth)
            return self._enc_other(v, depth)
        except (_Abort, _OverBudget, *_STOP):
            raise
        except BaseException as exc:  # noqa: BLE001 - user objects may raise anything when read (a CancelledError too)
            return self._unreadable(v, exc)
        finally:
            self._open.discard(ident)

    def _secret_pair(self, pair: list | tuple) -> bool:
        """Whether ``pair`` is a ``(name, value)`` pair whose name says its value is a secret: headers
        as httpx, requests and aiohttp take them, ``dict.items()``, a form's fields."""
        name, value = pair
        return type(name) is str and type(value) in (str, bytes) and bool(value) and self.redactor.is_secret_key(name)

    def _secret(self, key: str, value: Any, depth: int) -> Any:
        """``value``, under the secret key ``key``: the mark, or what of it may be kept (its
        scheme, a connection URL's host, a schema; see ``Redactor.kept_value``)."""
        kept = self.redactor.kept_value(key, value)
        if kept is None:
            return self.redactor.mark()
        return self._enc(kept, depth, key) if type(kept) is dict else kept

    def _enc_dict(self, v: Mapping, depth: int) -> Any:
        redactor = self.redactor
        is_secret = redactor.is_secret_key
        enc = self._enc
        d = depth + 1
        if ENVELOPE not in v and BLOB_REF not in v and _STR_ONLY.issuperset(map(type, v)):
            out: dict[str, Any] = {}
            # Keys are scrubbed like any text (a cache keyed by API key): skipped when too short
            # to hold a secret or already found clean.
            min_len = redactor.min_length
            clean = self._clean_keys
            scrubbed: list[list[Any]] | None = None
            named = named_secret(v, is_secret) if len(v) <= 8 else None  # {"name": "DB_PASSWORD", "value": ...}
            for k, x in v.items():
                if not k.isascii() and has_lone_surrogate(k):
                    return self._enc_pairs(v, d)  # a key JSON cannot hold: every key encoded, as pairs
                # An empty secret is not a secret; "x != ''" is not asked of arbitrary objects (numpy).
                if k == named and x is not None and (type(x) is not str or x):
                    val = redactor.mark()
                elif is_secret(k) and x is not None and (type(x) is not str or x):
                    val = self._secret(k, x, d)
                else:
                    val = enc(x, d, k)
                if scrubbed is None:
                    if len(k) < min_len or k in clean or (s := self._scrub_key(k)) is k:
                        out[k] = val
                        continue
                    scrubbed = [[key, y] for key, y in out.items()]
                    scrubbed.append([s, val])
                else:
                    scrubbed.append([k if len(k) < min_len or k in clean else self._scrub_key(k), val])
            if scrubbed is None:
                return out
            out = {key: y for key, y in scrubbed}
            if len(out) == len(scrubbed):
                return out
            # Scrubbing made two keys equal: keep both, as pairs.
            return {ENVELOPE: "dict", "v": scrubbed}
        return self._enc_pairs(v, d)

    def _enc_pairs(self, v: Mapping, d: int) -> Any:
        """A mapping as ``[key, value]`` pairs, each key encoded like any value (not a string, or not one JSON holds)."""
        redactor, enc = self.redactor, self._enc
        items = []
        for k, x in v.items():
            secret = isinstance(k, str) and redactor.is_secret_key(k) and x is not None and (type(x) is not str or x)
            items.append([enc(k, d, None), self._secret(k, x, d) if secret else enc(x, d, None)])
        return {ENVELOPE: "dict", "v": items}

    def _join_split_secrets(self, parts: list) -> list:
        """Content parts whose texts hold a secret only when read together (a key streamed
        across two or more parts, a private key cut in half) are joined into the first of
        them, so scrubbing sees the whole secret."""
        texts = [i for i, p in enumerate(parts) if isinstance(p, dict) and isinstance(p.get("text"), str)]
        if len(texts) < 2:
            return parts
        ends = list(itertools.accumulate(len(parts[i]["text"]) for i in texts))
        groups: list[tuple[int, int]] = []  # (first, last) positions in ``texts`` joined by one secret
        for start, end in self.redactor.spans("".join(parts[i]["text"] for i in texts)):
            first, last = bisect.bisect_right(ends, start), bisect.bisect_left(ends, end)
            if first < last:
                if groups and first <= groups[-1][1]:
                    before = groups.pop()
                    first, last = before[0], max(before[1], last)
                groups.append((first, last))
        if not groups:
            return parts
        out = list(parts)
        for first, last in groups:
            head = texts[first]
            out[head] = {**out[head], "text": "".join(parts[texts[k]]["text"] for k in range(first, last + 1))}
            for k in range(first + 1, last + 1):
                out[texts[k]] = {**out[texts[k]], "text": ""}
        return out

    def _scrub_key(self, k: str) -> str:
        s = self.redactor.scrub_key(k)
        if s is k:
            if len(self._clean_keys) >= 10_000:
                self._clean_keys.clear()  # ids as keys must not grow this forever
            self._clean_keys.add(k)
        return s

    def _enc_other(self, v: Any, depth: int) -> Any:
        kind = _special_kind(v)
        if kind == "secret":
            return self.redactor.mark()
        if kind == "message":
            return self._shared_ref(v, lambda: self._enc_message(v, depth))
        if kind == "document":
            return self._shared_ref(
                v,
                lambda: {
                    ENVELOPE: "lc.doc",
                    "v": self._enc({"page_content": v.page_content, "metadata": v.metadata, "id": v.id}, depth + 1, None),
                },
            )
        if kind == "send":
            packets = self._packets
            if packets is not None:
                met = packets.get(id(v))
                if met is not None and met[0] is v:
                    return met[1]
            out = {ENVELOPE: "lg.send", "node": v.node, "arg": self._enc(v.arg, depth + 1, None)}
            if packets is not None:
                packets[id(v)] = (v, out)
            return out
        if kind == "command":
            return {ENVELOPE: "lg.command", "v": self._enc(_command_fields(v), depth + 1, None)}
        if kind == "interrupt":
            return {ENVELOPE: "lg.interrupt", "v": self._enc({"value": v.value, "id": getattr(v, "id", None)}, depth + 1, None)}
        if isinstance(v, BaseException):
            return {ENVELOPE: "exc", "type": type(v).__name__, "message": self.redactor.scrub(_safe_str(v))}
        if isinstance(v, (bytes, bytearray, memoryview)):
            data = bytes(v)
            # Bytes are scanned as text, all of them, as strings are (a key in a request body, past
            # any length); a secret found replaces the whole value.
            text = data.decode("utf-8", "replace")
            if self.redactor.spans(text):
                self.redactor.mark()
                data = MARK.encode()
            out = {ENVELOPE: "bytes", "v": base64.b64encode(data).decode()}
            if type(v) is bytearray:
                out["mutable"] = True  # decoded as a bytearray again: a node may change it in place
            return out
        if isinstance(v, (set, frozenset)):
            items = [self._enc(x, depth + 1, None) for x in v]
            try:
                items.sort(key=orjson.dumps)
            except Exception:  # noqa: BLE001 - ordering is cosmetic
                pass
            return {ENVELOPE: "set", "v": items, "frozen": True} if isinstance(v, frozenset) else {ENVELOPE: "set", "v": items}
        if isinstance(v, enum.Enum):
            return {ENVELOPE: "enum", "type": qualified_name(type(v)), "v": self._enc(v.value, depth + 1, None)}
        if isinstance(v, dt.datetime):
            return {ENVELOPE: "datetime", "v": v.isoformat()}
        if isinstance(v, dt.date):
            return {ENVELOPE: "date", "v": v.isoformat()}
        if isinstance(v, dt.time):
            return {ENVELOPE: "time", "v": v.isoformat()}
        if isinstance(v, dt.timedelta):
            return {ENVELOPE: "timedelta", "v": [v.days, v.seconds, v.microseconds]}
        if isinstance(v, uuid.UUID):
            return {ENVELOPE: "uuid", "v": str(v)}
        if isinstance(v, decimal.Decimal):
            return {ENVELOPE: "decimal", "v": str(v)}
        if isinstance(v, pathlib.PurePath):
            return {ENVELOPE: "path", "v": str(v)}
        if isinstance(v, str):  # str subclasses
            return self._enc(str(v), depth, None)
        if isinstance(v, int):
            return self._enc(int(v), depth, None)
        if isinstance(v, float):
            return self._enc(float(v), depth, None)
        if isinstance(v, tuple) and hasattr(v, "_fields") and isinstance(v._fields, tuple):
            # A namedtuple: its field names are kept (and a field named like a secret is redacted).
            return {ENVELOPE: "obj", "type": _registered_name(type(v)), "v": self._enc(dict(zip(v._fields, v)), depth + 1, None)}
        if isinstance(v, (list, tuple)):
            return {ENVELOPE: "tuple" if isinstance(v, tuple) else "list", "v": [self._enc(x, depth + 1, None) for x in v]}
        fields = _object_fields(v)
        if fields is not None:
            return {ENVELOPE: "obj", "type": _registered_name(type(v)), "v": self._enc(fields, depth + 1, None)}
        return self._fault(v, "no safe encoding for this type")

    def _enc_message(self, m: Any, depth: int) -> dict:
        fields = {k: getattr(m, k) for k in type(m).model_fields if k != "type"}
        if isinstance(fields.get("content"), list):
            fields["content"] = self._join_split_secrets(fields["content"])
        # Drop defaults that carry nothing, to keep blobs small.
        for k in ("additional_kwargs", "response_metadata", "tool_calls", "invalid_tool_calls", "name", "usage_metadata", "tool_call_chunks", "artifact"):
            if k in fields and not fields[k]:
                del fields[k]
        return {ENVELOPE: "lc.msg", "cls": type(m).__name__, "v": self._enc(fields, depth + 1, None)}


def _stamp(v: Any) -> Any:
    # Messages get mutated in place (add_messages assigns ids): re-encode when they do.
    # Read from the instance dict: a pydantic model answers a missing attribute (a human
    # message's tool_calls, a message's page_content) through a slow raising __getattr__.
    fields = getattr(v, "__dict__", None)
    if type(fields) is not dict:
        fields = {k: getattr(v, k, None) for k in ("content", "page_content", "id", "tool_calls", "name")}
    content = fields.get("content")
    if content is None:
        content = fields.get("page_content")
    size = len(content) if isinstance(content, (str, list)) else 0
    return (fields.get("id"), size, len(fields.get("tool_calls") or ()), fields.get("name"))


def _safe_str(v: Any) -> str:
    try:
        return str(v)
    except _STOP:
        raise
    except BaseException:  # noqa: BLE001
        return f"<{type(v).__name__}>"


def _registered_name(cls: type) -> str:
    for name, known in _registry.items():
        if known is cls:
            return name
    return qualified_name(cls)


def _object_fields(v: Any) -> dict | None:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}
    dump = getattr(v, "model_dump", None)
    if callable(dump) and hasattr(type(v), "model_fields"):
        return {k: getattr(v, k) for k in type(v).model_fields}
    return None


def _command_fields(c: Any) -> dict:
    out: dict[str, Any] = {}
    if c.graph is not None:
        out["graph"] = c.graph
    if c.update is not None:
        out["update"] = c.update
    if c.resume is not None:
        out["resume"] = c.resume
    if c.goto:
        out["goto"] = c.goto
    return out


_KIND_CACHE: dict[type, str | None] = {}


def _special_kind(v: Any) -> str | None:
    t = type(v)
    if t in _KIND_CACHE:
        return _KIND_CACHE[t]
    kind = None
    names = {c.__module__ + "." + c.__name__ for c in t.__mro__}
    if "langchain_core.messages.base.BaseMessage" in names:
        kind = "message"
    elif "langchain_core.documents.base.Document" in names:
        kind = "document"
    elif "pydantic.types.SecretStr" in names or "pydantic.types.SecretBytes" in names or "pydantic.v1.types.SecretStr" in names:
        kind = "secret"
    elif "langgraph.types.Send" in names:
        kind = "send"
    elif "langgraph.types.Command" in names:
        kind = "command"
    elif "langgraph.types.Interrupt" in names:
        kind = "interrupt"
    _KIND_CACHE[t] = kind
    return kind


def _is_message(v: Any) -> bool:
    return _special_kind(v) == "message"


def _is_special(v: Any) -> bool:
    return _special_kind(v) is not None


# ---------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------


class DecodeError(ValueError):
    """The recorded data is malformed."""


BlobLoader = Callable[[list[str]], Mapping[str, Any]]


def collect_refs(tree: Any, out: set[str] | None = None) -> set[str]:
    """Every blob hash referenced in an encoded tree."""
    if out is None:
        out = set()
    stack = [tree]
    while stack:
        x = stack.pop()
        if type(x) is dict:
            ref = x.get(BLOB_REF)
            if type(ref) is str and len(x) == 1:
                out.add(ref)
            else:
                stack.extend(x.values())
        elif type(x) is list:
            # Lists of references (a message history) are the bulk: take them in one pass.
            refs = [r for i in x if type(i) is dict and len(i) == 1 and type(r := i.get(BLOB_REF)) is str]
            out.update(refs)
            if len(refs) < len(x):
                stack.extend(i for i in x if not (type(i) is dict and len(i) == 1 and type(i.get(BLOB_REF)) is str))
    return out


def count_values(tree: Any) -> int:
    """How many values an encoded tree holds (items of every list and dict), blob references counted as one."""
    n = 0
    stack = [tree]
    while stack:
        x = stack.pop()
        if type(x) is list:
            n += len(x)
            stack.extend(x)
        elif type(x) is dict:
            n += len(x)
            stack.extend(x.values())
    return n


_MISSING = object()


class DecodedBlobs:
    """Plain-decoded blobs by hash: bounded (oldest out first) and thread-safe.

    Blobs are content-addressed and never change, so a hash always decodes to
    the same plain value. Neighbouring states share almost every message;
    keeping their decoded values lets a state of 11,000 messages decode only
    the few it does not share. The values are handed to every caller that
    decodes the same blob: treat plain decoded data as read-only.
    """

    def __init__(self, size: int = 32_768) -> None:
        self.size = size
        self._values: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._values)

    def lookup(self, hashes: Iterable[str]) -> dict[str, Any]:
        """The values held for ``hashes`` (those not held are left out).

        Reads take no lock and leave the order alone (a state's 11,000 hits
        would cost more to reorder than to find): the oldest kept is dropped
        first, and a value still in use is simply decoded again.
        """
        get = self._values.get
        return {h: v for h in hashes if (v := get(h, _MISSING)) is not _MISSING}

    def keep(self, items: Mapping[str, Any]) -> None:
        """Hold these decoded values, dropping the oldest past ``size``."""
        with self._lock:
            self._values.update(items)
            while len(self._values) > self.size:
                self._values.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


# Blob hash -> how many values its plain decoded value holds (a hash names one value forever).
_HELD: dict[str, int] = {}
_HELD_KEPT = 200_000


def reused_cost(ref: str, value: Any, left: int = MAX_VALUES) -> tuple[int, int]:
    """What taking blob ``ref``'s decoded ``value`` again costs a decode: ``(values, text)``, the
    values it holds and the characters (or bytes) of its strings.

    A value taken again is the same object, but everything that walks it (JSON output, a
    diff, the TUI) walks it once per place: a million references to one blob of 2,000
    strings must cost what they expand to, not a million, and two thousand references to
    one 8 MB string cost 16 GB to print, not 8 MB. Counted once per blob, the values at most
    ``left`` + 1 (a decode refuses past its budget anyway).
    """
    held = _HELD.get(ref)
    if held is None:
        values = text = 0
        stack = [value]
        while stack and values <= left:
            x = stack.pop()
            t = type(x)
            if t is str or t is bytes:
                text += len(x)
            elif t is list or t is tuple:
                values += len(x)
                stack.extend(x)
            elif t is dict:
                values += len(x)
                stack.extend(x.values())
        if values > left:
            return values, text  # not kept: a larger budget may ask again
        if len(_HELD) >= _HELD_KEPT:
            _HELD.clear()
        held = _HELD[ref] = (values, text)
    return held


class Decoder:
    """Rebuilds values from encoded trees.

    ``typed=True`` rebuilds LangChain messages, documents, LangGraph Send /
    Command / Interrupt and registered types, so LangGraph can resume from
    them. ``typed=False`` gives plain JSON-like data for display and diffing
    (messages become dicts with ``type``).

    ``decoded`` (plain only) maps blob hashes to values already decoded: they
    are used as they are, and each blob decoded here is added to it, so one
    blob referenced many times is decoded once (see :class:`DecodedBlobs`).

    One decode produces at most ``max_values`` values (a blob taken from
    ``decoded`` counts the values it holds): references that multiply past it raise
    ``DecodeError`` instead of running without end. A decoder decodes one
    tree at a time.
    """

    def __init__(
        self,
        blobs: Mapping[str, Any],
        typed: bool = False,
        decoded: MutableMapping[str, Any] | None = None,
        max_values: int = MAX_VALUES,
        charge: Callable[[int], None] | None = None,
    ) -> None:
        if typed and decoded is not None:
            raise ValueError("decoded blobs are plain values: they cannot stand in for typed ones")
        self.blobs = blobs
        self.typed = typed
        self.decoded = decoded
        self.max_values = max_values
        self.charge = charge  # told the text a blob taken again holds (a store read's byte budget)
        self._taken: set[str] = set()
        self._left = max_values
        self._inside = 0  # > 0 while a blob is being expanded
        self._weights: dict[str, int] = {}

    def decode(self, tree: Any) -> Any:
        self._left = self.max_values
        self._inside = 0
        self._weights: dict[str, int] = {}
        self._taken = set()
        return self._dec(tree, 0)

    def _take_again(self, ref: str, value: Any) -> None:
        """Pay for blob ``ref`` taken once more: the values it holds, and its text (to ``charge``)."""
        values, text = reused_cost(ref, value, self._left)
        self._spend(values)
        if self.charge is not None and text:
            self.charge(text)

    def _nested_blob(self, ref: str, depth: int) -> Any:
        # Only references inside blobs can multiply (a blob expanded in every copy of the
        # blob that holds it): weigh the expansion first, so a bomb is refused before it is built.
        weight = self._weigh(ref, depth)
        self._spend(weight)
        after = self._left
        self._inside += 1
        value = self._dec(self.blobs[ref], depth + 1)
        self._inside -= 1
        # Charge what it really cost if the weighing fell short (it stops at the depth bound).
        self._left = min(after, self._left + weight)
        return value

    def _weigh(self, ref: str, depth: int) -> int:
        """How many values blob ``ref`` expands to, as :meth:`_dec` counts them (memoized per decode)."""
        weights = self._weights
        hit = weights.get(ref)
        if hit is not None:
            return hit
        weights[ref] = 0  # a cycle: decoding it stops at the depth bound
        total = 0
        stack = [(self.blobs[ref], depth + 1)]
        while stack and total <= self._left:
            x, d = stack.pop()
            if d > MAX_DEPTH:
                continue
            t = type(x)
            if t is list:
                total += len(x)
                stack.extend((i, d + 1) for i in x)
            elif t is dict:
                total += len(x)
                r = x.get(BLOB_REF)
                if len(x) == 1 and type(r) is str:
                    if r in self.blobs and not (self.decoded is not None and r in self.decoded):
                        total += self._weigh(r, d)
                elif (v := x.get("v")) is not None and ENVELOPE in x and type(v) is list:
                    total += len(v)
                    pairs = x[ENVELOPE] == "dict"
                    for i in v:
                        if pairs and type(i) is list:
                            stack.extend((j, d + 1) for j in i)
                        else:
                            stack.append((i, d + 1))
                    stack.extend((val, d + 1) for k, val in x.items() if k != "v")
                else:
                    stack.extend((val, d + 1) for val in x.values())
        weights[ref] = total
        return total

    def _spend(self, n: int) -> None:
        # Every container pays for its items: the count is the number of values built.
        self._left -= n
        if self._left < 0:
            raise DecodeError(
                f"recorded value expands to more than {self.max_values:,} values "
                "(blob references that multiply, from a damaged or hostile recording): refused"
            )

    def _dec(self, x: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise DecodeError("recorded value is nested too deeply")
        t = type(x)
        if t is list:
            self._left -= len(x)
            if self._left < 0:
                self._spend(0)
            d = depth + 1
            get = self.decoded.get if self.decoded is not None else None
            if get is None:
                return [self._dec(i, d) for i in x]
            # A message history: mostly references decoded before, taken without a call each
            # (but each paying for what it holds: see reused_cost).
            out = []
            values = text = 0
            for i in x:
                if type(i) is dict and len(i) == 1 and type(r := i.get(BLOB_REF)) is str and (hit := get(r, _MISSING)) is not _MISSING:
                    out.append(hit)
                    held = reused_cost(r, hit, self._left)
                    values += held[0]
                    text += held[1]
                else:
                    out.append(self._dec(i, d))
            if values:
                self._spend(values)
            if text and self.charge is not None:
                self.charge(text)
            return out
        if t is not dict:
            return x
        self._left -= len(x)
        if self._left < 0:
            self._spend(0)
        if BLOB_REF in x and len(x) == 1:
            ref = x[BLOB_REF]
            if type(ref) is not str:
                raise DecodeError(f"malformed recorded value (blob reference): {ref!r:.80} is not a hash")
            decoded = self.decoded
            if decoded is not None and ref in decoded:
                value = decoded[ref]
                self._take_again(ref, value)
                return value
            if ref not in self.blobs:
                return {TYPE_KEY: "missing-blob", "ref": ref}
            if self._inside:
                value = self._nested_blob(ref, depth)
            else:
                self._inside = 1
                value = self._dec(self.blobs[ref], depth + 1)
                self._inside = 0
            if decoded is not None:
                decoded[ref] = value
            elif ref in self._taken and self.charge is not None:
                self.charge(reused_cost(ref, value, self._left)[1])  # built again: its values are counted, not its text
            else:
                self._taken.add(ref)
            return value
        kind = x.get(ENVELOPE)
        if kind is None:
            return {k: self._dec(v, depth + 1) for k, v in x.items()}
        try:
            return self._dec_envelope(kind, x, depth)
        except (DecodeError, StoreError):  # a store error: the read's budget ran out building it
            raise
        except Exception as exc:  # noqa: BLE001 - recordings are data from elsewhere: any shape may arrive
            raise DecodeError(f"malformed recorded value ({_kind_name(kind)}): {_reason(exc)}") from exc

    def _dec_envelope(self, kind: str, x: dict, depth: int) -> Any:
        d = depth + 1
        v = x.get("v")
        if type(v) is list:
            self._spend(len(v))
        if kind == "tuple":
            items = [self._dec(i, d) for i in v]
            return tuple(items) if self.typed else items
        if kind == "list":
            return [self._dec(i, d) for i in v]
        if kind == CAT:
            return self._concatenate(v, d)
        if kind == SCAT:
            return self._joined(v, d)
        if kind == "set":
            items = [self._dec(i, d) for i in v]
            if self.typed:
                try:
                    return frozenset(items) if x.get("frozen") is True else set(items)
                except TypeError:
                    return items
            return items
        if kind == "dict":
            pairs = [(self._dec(k, d), self._dec(val, d)) for k, val in v]
            if self.typed:
                try:
                    return dict(pairs)
                except TypeError:
                    pass
            return {_plain_key(k): val for k, val in pairs}
        if kind == "str":
            if type(v) is not str:
                raise DecodeError("malformed recorded value (str): not text")
            text = from_column(v)
            return text if self.typed else displayable(text)
        if kind == "int":
            return int(v) if self.typed else v
        if kind == "float":
            return float(v)
        if kind == "bytes":
            if not self.typed:
                return {TYPE_KEY: "bytes", "base64": v}
            data = base64.b64decode(v)
            return bytearray(data) if x.get("mutable") is True else data
        if kind == "timedelta":
            return _timedelta(v) if self.typed else _seconds(v)
        if kind in ("datetime", "date", "time", "uuid", "decimal", "path"):
            return _scalar(kind, v) if self.typed else v
        if kind == "enum":
            value = self._dec(v, d)
            cls = _enum_type(x.get("type")) if self.typed else None
            if cls is not None:
                try:
                    return cls(value)
                except Exception:  # noqa: BLE001 - a member today's class no longer has: its value, as recorded
                    pass
            return value
        if kind == "exc":
            return {TYPE_KEY: "exception", "type": x.get("type"), "message": x.get("message")}
        if kind == "unserializable":
            text, kind_name = x.get("repr"), x.get("type")  # recorded before these were left out: read without them too
            return {
                TYPE_KEY: _PRIVATE_MODULE.sub(r"\1", kind_name) if type(kind_name) is str else kind_name,
                "unserializable": True,
                "repr": as_imported(text) if type(text) is str else text,
            }
        if kind == "lc.msg":
            return self._message(x.get("cls"), self._dec(v, d))
        if kind == "lc.doc":
            fields = self._dec(v, d)
            if self.typed:
                from langchain_core.documents import Document

                return Document(**fields)
            return {TYPE_KEY: "Document", **fields}
        if kind == "lg.send":
            node, arg = x.get("node"), self._dec(x.get("arg"), d)
            if type(node) is not str:
                raise DecodeError(f"malformed recorded value (lg.send): node {node!r:.80} is not a name")
            if self.typed:
                from langgraph.types import Send

                return Send(node, arg)
            return {TYPE_KEY: "Send", "node": node, "arg": arg}
        if kind == "lg.command":
            fields = self._dec(v, d)
            if self.typed:
                from langgraph.types import Command

                return Command(**fields)
            return {TYPE_KEY: "Command", **fields}
        if kind == "lg.interrupt":
            fields = self._dec(v, d)
            if self.typed:
                from langgraph.types import Interrupt

                return Interrupt(value=fields.get("value"), id=fields.get("id") or "")
            return {TYPE_KEY: "Interrupt", **fields}
        if kind == "obj":
            name = x.get("type")
            fields = self._dec(v, d)
            cls = _registry.get(name) if self.typed else None
            if cls is not None:
                try:
                    return cls(**fields)
                except Exception as exc:  # noqa: BLE001
                    raise DecodeError(f"recorded {name} no longer fits its registered type: {exc}") from None
            return {TYPE_KEY: name, **fields} if isinstance(fields, dict) else {TYPE_KEY: name, "value": fields}
        return {TYPE_KEY: str(kind), **{k: val for k, val in x.items() if k != ENVELOPE}}

    def _concatenate(self, parts: list, depth: int) -> list:
        """A history stored as blocks (``history_blocks``): its parts' items in order."""
        out: list = []
        for part in parts:
            items = self._dec(part, depth)
            if type(items) is dict and items.get(TYPE_KEY) == "missing-blob":
                items = [items]  # as a missing message reads: marked, and the rest of the history still reads
            if type(items) is not list:
                raise DecodeError(f"malformed recorded value (cat): a part is {type(items).__name__}, not a list")
            self._spend(len(items))  # every list built is paid for: repeated parts cannot multiply unseen
            out += items
        return out

    def _joined(self, parts: Any, depth: int) -> str:
        """A very long string stored as chunks (``string_chunks``): its chunks joined."""
        if type(parts) is not list:
            raise DecodeError(f"malformed recorded value (scat): its chunks are {type(parts).__name__}, not a list")
        pieces = [self._dec(p, depth) for p in parts]
        try:
            text, repeated = joined(pieces)
        except ValueError as exc:
            raise DecodeError(f"malformed recorded value (scat): {exc}") from None
        if repeated and self.charge is not None:
            self.charge(repeated)  # a chunk written out again costs its text again, as a blob taken again does
        return text

    def _message(self, cls_name: str, fields: dict) -> Any:
        if not self.typed:
            out = {"type": _MESSAGE_TYPES.get(cls_name, cls_name)}
            out.update(fields)
            return out
        cls = _message_class(cls_name)
        if cls is None:
            return {TYPE_KEY: cls_name, **fields}
        return cls(**fields)


_MESSAGE_TYPES = {
    "AIMessage": "ai",
    "AIMessageChunk": "ai",
    "HumanMessage": "human",
    "HumanMessageChunk": "human",
    "SystemMessage": "system",
    "SystemMessageChunk": "system",
    "ToolMessage": "tool",
    "ToolMessageChunk": "tool",
    "FunctionMessage": "function",
    "FunctionMessageChunk": "function",
    "ChatMessage": "chat",
    "ChatMessageChunk": "chat",
    "RemoveMessage": "remove",
}


def _message_class(name: str) -> type | None:
    if name not in _MESSAGE_TYPES:
        return None
    import langchain_core.messages as m

    return getattr(m, name, None)


def _plain_key(k: Any) -> str:
    return k if isinstance(k, str) else orjson.dumps(k, default=str).decode()


def _scalar(kind: str, v: Any) -> Any:
    if kind == "datetime":
        return dt.datetime.fromisoformat(v)
    if kind == "date":
        return dt.date.fromisoformat(v)
    if kind == "time":
        return dt.time.fromisoformat(v)
    if kind == "uuid":
        return uuid.UUID(v)
    if kind == "decimal":
        return decimal.Decimal(v)
    return pathlib.PurePosixPath(v)


def _timedelta(v: Any) -> dt.timedelta:
    # [days, seconds, microseconds]; recordings made before that hold float seconds.
    if type(v) is list and len(v) == 3 and all(type(i) is int for i in v):
        return dt.timedelta(days=v[0], seconds=v[1], microseconds=v[2])
    if type(v) in (int, float):
        return dt.timedelta(seconds=v)
    raise DecodeError(f"malformed recorded value (timedelta): {v!r:.80}")


def _seconds(v: Any) -> float:
    return v if type(v) in (int, float) else _timedelta(v).total_seconds()


def _kind_name(kind: Any) -> str:
    return kind if type(kind) is str else repr(kind)[:40]


def _reason(exc: Exception) -> str:
    # One line, bounded: pydantic errors span many lines and can quote whole values.
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = "; ".join(lines) or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "…"


def to_plain(value: Any) -> Any:
    """Encode then decode without blobs: a JSON-friendly view of a live value."""
    return Decoder({}, typed=False).decode(Encoder().encode(value))
