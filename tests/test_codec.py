"""The codec: typed and plain decoding of every envelope, blobs, and safety against hostile data."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import math
import pathlib
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import orjson
import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AIMessageChunk, ChatMessage, FunctionMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage
from langgraph.types import Command, Interrupt, Send
from pydantic import BaseModel, SecretStr

from graphtape.recorder.codec import (
    BLOB_REF,
    ENCODE_BUDGET,
    ENCODE_DEPTH,
    ENVELOPE,
    MAX_DEPTH,
    TYPE_KEY,
    DecodedBlobs,
    DecodeError,
    Decoder,
    Encoder,
    blob_hash,
    collect_refs,
    enums_known,
    register_type,
    to_plain,
)
from graphtape.recorder.errors import RecorderFault
from graphtape.recorder.redaction import Redactor


class Sink:
    """An in-memory BlobSink that counts what it is given."""

    def __init__(self) -> None:
        self.blobs: dict[str, Any] = {}
        self.puts = 0

    def put_blob(self, data: bytes) -> str:
        self.puts += 1
        h = blob_hash(data)
        self.blobs[h] = orjson.loads(data)
        return h


def through_json(tree: Any) -> Any:
    return orjson.loads(orjson.dumps(tree))


def round_trip(value: Any, *, typed: bool, sink: Sink | None = None) -> Any:
    sink = sink if sink is not None else Sink()
    tree = through_json(Encoder(sink=sink).encode(value))
    return Decoder(sink.blobs, typed=typed).decode(tree)


class Color(enum.Enum):
    RED = "red"


class Shade(enum.IntEnum):
    DARK = 2


@register_type
@dataclasses.dataclass
class Order:
    order_id: str
    lines: list[int]
    placed: dt.date


@register_type
class Profile(BaseModel):
    name: str
    tags: tuple[str, ...] = ()


@dataclasses.dataclass
class Unregistered:
    x: int


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque thing>"


# ---------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------

SCALARS = [
    None,
    True,
    0,
    -(2**63),
    2**63,  # past int64: an envelope
    -(10**30),
    1.5,
    "text",
    "",
    "x" * 5000,  # long string: a blob when a sink is given
    [1, [2, [3]]],
    {"a": {"b": [1, 2]}},
]


@pytest.mark.parametrize("value", SCALARS, ids=repr)
@pytest.mark.parametrize("typed", [True, False])
def test_json_values_round_trip_unchanged(value: Any, typed: bool) -> None:
    out = round_trip(value, typed=typed)
    if typed or not (isinstance(value, int) and not -(2**63) <= value < 2**63):
        assert out == value
    else:
        assert out == str(value)  # a huge int reads as its digits when plain


TYPED_VALUES = {
    "tuple": (1, "a", (2, 3)),
    "dict-int-keys": {1: "one", (1, 2): "pair", None: "none"},
    "dict-envelope-keys": {"$t": "obj", "type": "os.system", "v": {"command": "echo hi"}},
    "dict-blob-key": {"$b": "0" * 32},
    "bytes": b"\x00\xffbinary",
    "bytearray": bytearray(b"abc"),
    "set": {3, 1, 2},
    "frozenset": frozenset({"a", "b"}),
    "datetime": dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.timezone(dt.timedelta(hours=2))),
    "naive-datetime": dt.datetime(2024, 5, 6, 7, 8, 9),
    "date": dt.date(2024, 2, 29),
    "time": dt.time(23, 59, 58, 1),
    "timedelta": dt.timedelta(days=2, seconds=3, microseconds=4),
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "decimal": decimal.Decimal("3.14159265358979323846264338327950288"),
    "path": pathlib.PurePosixPath("/tmp/some/file.txt"),
    "nested": {"when": [dt.date(2020, 1, 1), (uuid.UUID(int=1), b"x")]},
    "registered-dataclass": Order("A-1", [1, 2], dt.date(2024, 1, 2)),
    "registered-pydantic": Profile(name="ada", tags=("x", "y")),
}


@pytest.mark.parametrize("name", TYPED_VALUES)
def test_typed_round_trip(name: str) -> None:
    value = TYPED_VALUES[name]
    out = round_trip(value, typed=True)
    assert out == value
    assert type(out) is type(value) or name in ("frozenset", "bytearray")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")], ids=repr)
def test_non_finite_floats(value: float) -> None:
    for typed in (True, False):
        out = round_trip(value, typed=typed)
        assert isinstance(out, float) and (math.isnan(out) if math.isnan(value) else out == value)


MESSAGES = [
    HumanMessage("hello", id="h1", name="ada"),
    SystemMessage("be brief", id="s1"),
    AIMessage(
        "calling",
        id="a1",
        tool_calls=[{"name": "lookup", "args": {"q": 1, "deep": {"x": [1, 2]}}, "id": "c1", "type": "tool_call"}],
        usage_metadata={"input_tokens": 10, "output_tokens": 4, "total_tokens": 14},
        response_metadata={"model_name": "m-1", "finish_reason": "tool_calls"},
        additional_kwargs={"refusal": None},
    ),
    AIMessage([{"type": "text", "text": "block content"}], id="a2"),
    ToolMessage("result", tool_call_id="c1", id="t1", artifact={"rows": [1]}, status="error"),
    ChatMessage("custom role", role="critic", id="c9"),
    FunctionMessage("fn out", name="fn", id="f1"),
    RemoveMessage(id="h1"),
    AIMessageChunk("partial", id="chunk-1"),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_messages_typed_and_plain(message: Any) -> None:
    typed = round_trip(message, typed=True)
    assert type(typed) is type(message) and typed == message
    plain = round_trip(message, typed=False)
    assert plain["type"] == {"AIMessageChunk": "ai"}.get(type(message).__name__, message.type)
    assert plain["id"] == message.id
    assert plain["content"] == message.content
    assert orjson.loads(orjson.dumps(plain)) == plain  # plain data is JSON
    if isinstance(message, AIMessage) and message.tool_calls:
        assert plain["tool_calls"] == message.tool_calls
        assert plain["usage_metadata"] == {"input_tokens": 10, "output_tokens": 4, "total_tokens": 14}


def test_langgraph_and_langchain_objects() -> None:
    doc = Document(page_content="page", metadata={"source": "a.txt"}, id="d1")
    send = Send("worker", {"x": 1, "when": dt.date(2020, 1, 1)})
    command = Command(goto=["a", Send("b", 2)], update={"k": 1}, resume={"ok": True})
    intr = Interrupt(value={"question": "?"}, id="i-1")
    assert round_trip(doc, typed=True) == doc
    assert round_trip(send, typed=True) == send
    out = round_trip(command, typed=True)
    assert (out.goto, out.update, out.resume) == (command.goto, command.update, command.resume)
    assert round_trip(intr, typed=True) == intr
    assert round_trip(doc, typed=False) == {TYPE_KEY: "Document", "page_content": "page", "metadata": {"source": "a.txt"}, "id": "d1"}
    assert round_trip(send, typed=False) == {TYPE_KEY: "Send", "node": "worker", "arg": {"x": 1, "when": "2020-01-01"}}
    assert round_trip(command, typed=False) == {
        TYPE_KEY: "Command",
        "goto": ["a", {TYPE_KEY: "Send", "node": "b", "arg": 2}],
        "update": {"k": 1},
        "resume": {"ok": True},
    }
    assert round_trip(intr, typed=False) == {TYPE_KEY: "Interrupt", "value": {"question": "?"}, "id": "i-1"}


def test_plain_forms_are_json_friendly() -> None:
    value = {
        "t": (1, 2),
        "b": b"hi",
        "s": {2, 1},
        "when": dt.datetime(2024, 1, 1, 12, 0),
        "u": uuid.UUID(int=5),
        "d": decimal.Decimal("1.10"),
        "e": Color.RED,
        1: "int key",
        (1, 2): "tuple key",
        "order": Order("A-1", [1], dt.date(2024, 1, 2)),
        "profile": Profile(name="ada"),
        "other": Unregistered(3),
        "err": ValueError("boom"),
    }
    plain = to_plain(value)
    assert orjson.loads(orjson.dumps(plain)) == plain
    assert plain["t"] == [1, 2] and plain["s"] == [1, 2]
    assert plain["b"] == {TYPE_KEY: "bytes", "base64": "aGk="}
    assert plain["when"] == "2024-01-01T12:00:00" and plain["u"] == str(uuid.UUID(int=5)) and plain["d"] == "1.10"
    assert plain["e"] == "red"
    assert plain["1"] == "int key" and plain["[1,2]"] == "tuple key"
    assert plain["order"] == {TYPE_KEY: f"{__name__}.Order", "order_id": "A-1", "lines": [1], "placed": "2024-01-02"}
    assert plain["profile"] == {TYPE_KEY: f"{__name__}.Profile", "name": "ada", "tags": []}
    assert plain["other"] == {TYPE_KEY: f"{__name__}.Unregistered", "x": 3}
    assert plain["err"] == {TYPE_KEY: "exception", "type": "ValueError", "message": "boom"}


def test_unregistered_and_unknown_types_come_back_as_plain_data() -> None:
    # A dataclass nobody registered: typed decoding cannot rebuild it, so it stays data.
    out = round_trip(Unregistered(7), typed=True)
    assert out == {TYPE_KEY: f"{__name__}.Unregistered", "x": 7}
    # An enum is recorded with its type name but read back as its value (nothing is imported).
    assert round_trip(Color.RED, typed=True) == "red"
    # An object with no safe encoding is marked, not pickled.
    faults: list[str] = []
    tree = Encoder(on_fault=faults.append).encode({"o": Opaque()})
    assert faults and "Opaque" in faults[0]
    for typed in (True, False):
        out = Decoder({}, typed=typed).decode(through_json(tree))["o"]
        assert out[TYPE_KEY] == f"{__name__}.Opaque" and out["unserializable"] is True and out["repr"] == "<Opaque thing>"
    # Envelope kinds from a newer graphtape read as plain data.
    future = {ENVELOPE: "lg.something-new", "a": 1, "b": [1, 2]}
    for typed in (True, False):
        assert Decoder({}, typed=typed).decode(future) == {TYPE_KEY: "lg.something-new", "a": 1, "b": [1, 2]}
    # A message class the decoder does not know stays data too.
    msg = {ENVELOPE: "lc.msg", "cls": "FancyMessage", "v": {"content": "hi"}}
    assert Decoder({}, typed=True).decode(msg) == {TYPE_KEY: "FancyMessage", "content": "hi"}


def test_frozensets_and_bytearrays_come_back_as_themselves() -> None:
    """A node may rely on a frozenset being hashable or a bytearray being changeable in place."""
    typed = round_trip({"f": frozenset({2, 1}), "s": {1}, "ba": bytearray(b"ab"), "b": b"ab"}, typed=True)
    assert typed == {"f": frozenset({1, 2}), "s": {1}, "ba": bytearray(b"ab"), "b": b"ab"}
    assert [type(typed[k]) for k in ("f", "s", "ba", "b")] == [frozenset, set, bytearray, bytes]
    # Shown and compared as before: a list, and bytes as base64.
    plain = round_trip({"f": frozenset({2, 1}), "ba": bytearray(b"ab")}, typed=False)
    assert plain == {"f": [1, 2], "ba": {TYPE_KEY: "bytes", "base64": "YWI="}}
    # A set stored by an earlier graphtape (no marker) is still a set.
    assert Decoder({}, typed=True).decode({ENVELOPE: "set", "v": [1]}) == {1}


def test_enum_members_come_back_only_for_classes_lent_or_registered() -> None:
    tree = through_json(Encoder().encode([Color.RED, Shade.DARK]))
    assert Decoder({}, typed=True).decode(tree) == ["red", 2]  # nothing lent: their values
    with enums_known([Color]):
        assert Decoder({}, typed=True).decode(tree) == [Color.RED, 2]
        with enums_known([Shade]):
            assert Decoder({}, typed=True).decode(tree) == [Color.RED, Shade.DARK]
        assert Decoder({}, typed=True).decode(tree) == [Color.RED, 2]
        assert Decoder({}, typed=False).decode(tree) == ["red", 2]  # shown and compared as values
        # Recorded by a script (``__main__.Color``): the same class today, by its name's tail.
        assert Decoder({}, typed=True).decode({ENVELOPE: "enum", "type": "__main__.Color", "v": "red"}) is Color.RED
        # A member the class no longer has stays its recorded value.
        assert Decoder({}, typed=True).decode({ENVELOPE: "enum", "type": tree[0]["type"], "v": "mauve"}) == "mauve"
    assert Decoder({}, typed=True).decode(tree) == ["red", 2]


def test_a_registered_enum_comes_back_as_itself() -> None:
    class Mood(enum.Enum):
        CALM = "calm"

    register_type(Mood, "tests.Mood")
    assert round_trip(Mood.CALM, typed=True) is Mood.CALM


class GoneMapping(Mapping):
    """A lazy mapping whose backend went away: reading it raises."""

    def __getitem__(self, key: str) -> Any:
        raise ConnectionError("backend gone\nretry with token sk-" + "k" * 24)

    def __iter__(self) -> Iterator[str]:
        raise ConnectionError("backend gone\nretry with token sk-" + "k" * 24)

    def __len__(self) -> int:
        return 1


@dataclasses.dataclass
class FailingField:
    name: str

    def __getattribute__(self, attr: str) -> Any:
        if attr == "name":
            raise RuntimeError("lazy field failed")
        return super().__getattribute__(attr)


def test_values_that_raise_when_read_are_marked_alone() -> None:
    faults: list[str] = []
    tree = Encoder(on_fault=faults.append).encode({"ok": [1, "two"], "gone": GoneMapping(), "deep": [{"f": FailingField("x")}]})
    assert tree["ok"] == [1, "two"]
    gone = Decoder({}, typed=False).decode(through_json(tree))["gone"]
    assert gone["unserializable"] is True and gone[TYPE_KEY] == f"{__name__}.GoneMapping"
    assert "ConnectionError: backend gone" in gone["repr"] and "\n" not in gone["repr"] and "sk-" not in gone["repr"]
    assert tree["deep"][0]["f"][ENVELOPE] == "unserializable" and "RuntimeError: lazy field failed" in tree["deep"][0]["f"]["why"]
    assert len(faults) == 2 and "GoneMapping" in faults[0] and "FailingField" in faults[1]
    assert all("sk-" not in f and "\n" not in f for f in faults)


def test_an_on_fault_that_raises_leaves_the_encoder_as_it_is() -> None:
    """Strict mode raises from on_fault: that error, once, not a value marked in its place."""
    calls: list[str] = []

    def strict(why: str) -> None:
        calls.append(why)
        raise RecorderFault(f"could not encode ({why})")

    with pytest.raises(RecorderFault, match="GoneMapping"):
        Encoder(on_fault=strict).encode({"a": {"b": [GoneMapping()]}})
    with pytest.raises(RecorderFault, match="Opaque"):
        Encoder(on_fault=strict).encode({"a": {"b": [Opaque()]}})
    assert len(calls) == 2


def test_registered_name_must_match_exactly() -> None:
    tree = through_json(Encoder().encode(Order("A-1", [], dt.date(2024, 1, 1))))
    tree["type"] = tree["type"].upper()
    out = Decoder({}, typed=True).decode(tree)
    assert isinstance(out, dict) and out[TYPE_KEY].endswith("ORDER")


def test_register_type_under_another_name() -> None:
    @dataclasses.dataclass
    class Point:
        x: int
        y: int

    register_type(Point, "tests.Point")
    tree = Encoder().encode(Point(1, 2))
    assert tree["type"] == "tests.Point"
    assert round_trip(Point(1, 2), typed=True) == Point(1, 2)


def test_registered_type_that_changed_is_a_decode_error() -> None:
    tree = through_json(Encoder().encode(Order("A-1", [], dt.date(2024, 1, 1))))
    tree["v"]["surprise"] = 1
    with pytest.raises(DecodeError, match="no longer fits"):
        Decoder({}, typed=True).decode(tree)
    assert Decoder({}, typed=False).decode(tree)["surprise"] == 1


def test_secrets_never_encode() -> None:
    tree = Encoder().encode({"key": SecretStr("hunter2-hunter2"), "nested": [SecretStr("x")]})
    assert "hunter2" not in orjson.dumps(tree).decode()
    assert tree == {"key": "[REDACTED]", "nested": ["[REDACTED]"]}


def test_secrets_used_as_keys_are_scrubbed_and_colliding_keys_kept_apart() -> None:
    a, b = "sk-" + "a" * 30, "sk-" + "b" * 30
    redactor = Redactor()
    tree = Encoder(redactor=redactor).encode({"short": 1, a: "client a", "tail": 2})
    assert tree == {"short": 1, "[REDACTED]": "client a", "tail": 2}  # order kept
    assert redactor.count == 1
    # Two secrets scrub to the same key: both entries are kept, as pairs.
    tree = Encoder().encode({a: 1, b: 2, "[REDACTED]": 3})
    assert "sk-" not in orjson.dumps(tree).decode()
    assert tree[ENVELOPE] == "dict" and [v for _, v in tree["v"]] == [1, 2, 3]
    assert Decoder({}, typed=False).decode(through_json(tree)) == {"[REDACTED]": 3}
    # Keys under the shortest pattern are not scrubbed (the fast path), user patterns included.
    assert Encoder(redactor=Redactor(patterns=[r"acct-\d{4}"])).encode({"acct-1234": 1, "x": 2}) == {"[REDACTED]": 1, "x": 2}


# ---------------------------------------------------------------------------
# Blobs
# ---------------------------------------------------------------------------


def test_messages_and_long_strings_become_shared_blobs() -> None:
    sink = Sink()
    enc = Encoder(sink=sink)
    m = HumanMessage("hi", id="h1")
    long = "y" * 2000
    first = enc.encode({"messages": [m], "doc": long})
    second = enc.encode({"messages": [m, AIMessage("yo", id="a1")], "doc": long})
    assert first["messages"][0] == second["messages"][0] and set(first["messages"][0]) == {BLOB_REF}
    assert set(first["doc"]) == {BLOB_REF}
    assert sink.puts == 4  # the message once (identity cache), the string twice (same hash), the new message once
    assert len(sink.blobs) == 3
    assert collect_refs(second) == {first["messages"][0][BLOB_REF], second["messages"][1][BLOB_REF], first["doc"][BLOB_REF]}
    out = Decoder(sink.blobs, typed=True).decode(second)
    assert out == {"messages": [m, AIMessage("yo", id="a1")], "doc": long}


def test_equal_messages_share_one_blob_even_as_different_objects() -> None:
    sink = Sink()
    a = Encoder(sink=sink).encode(HumanMessage("same", id="x"))
    b = Encoder(sink=sink).encode(HumanMessage("same", id="x"))
    assert a == b and len(sink.blobs) == 1


def test_message_changed_in_place_is_encoded_again() -> None:
    sink = Sink()
    enc = Encoder(sink=sink)
    m = HumanMessage("first")
    before = enc.encode(m)
    m.id = "assigned-later"  # what add_messages does to messages without ids
    after = enc.encode(m)
    assert before != after
    assert Decoder(sink.blobs, typed=True).decode(after).id == "assigned-later"


def test_missing_blob_reads_as_a_marker() -> None:
    out = Decoder({}, typed=True).decode({"m": {BLOB_REF: "f" * 32}})
    assert out == {"m": {TYPE_KEY: "missing-blob", "ref": "f" * 32}}


def test_plain_decoding_reuses_blobs_already_decoded() -> None:
    sink = Sink()
    enc = Encoder(sink=sink)
    shared = HumanMessage("in every state", id="h1")
    older = through_json(enc.encode({"messages": [shared]}))
    newer = through_json(enc.encode({"messages": [shared, AIMessage("new", id="a1")]}))
    decoded: dict[str, Any] = {}
    first = Decoder(sink.blobs, decoded=decoded).decode(older)
    assert set(decoded) == collect_refs(older)
    second = Decoder({}, decoded=decoded).decode(older)  # no blobs needed: all decoded before
    assert second == first and second["messages"][0] is first["messages"][0]
    third = Decoder(sink.blobs, decoded=decoded).decode(newer)
    assert third == Decoder(sink.blobs).decode(newer) and third["messages"][0] is first["messages"][0]
    with pytest.raises(ValueError, match="plain"):
        Decoder(sink.blobs, typed=True, decoded=decoded)


def test_decoded_blobs_are_bounded_oldest_out_first() -> None:
    memo = DecodedBlobs(size=2)
    memo.keep({"a": 1, "b": 2})
    assert memo.lookup(["a", "x"]) == {"a": 1}
    memo.keep({"c": 3})
    assert len(memo) == 2 and memo.lookup(["a", "b", "c"]) == {"b": 2, "c": 3}


# ---------------------------------------------------------------------------
# Hostile data
# ---------------------------------------------------------------------------

MALICIOUS = [
    {ENVELOPE: "obj", "type": "os.system", "v": {"command": "touch {marker}"}},
    {ENVELOPE: "obj", "type": "subprocess.Popen", "v": {"args": ["touch", "{marker}"]}},
    {ENVELOPE: "obj", "type": "builtins.eval", "v": {"source": "open('{marker}', 'w')"}},
    {ENVELOPE: "lc.msg", "cls": "os.system", "v": {"command": "touch {marker}"}},
    {ENVELOPE: "lc.msg", "cls": "__import__", "v": {"name": "antigravity"}},
    {ENVELOPE: "enum", "type": "os.system", "v": "touch {marker}"},
    {ENVELOPE: "exc", "type": "os.system", "message": "touch {marker}"},
    {ENVELOPE: "unserializable", "type": "os.system", "repr": "touch {marker}"},
    {ENVELOPE: "pickle", "v": "gASVIAAAAAAAAACMAm9zlIwGc3lzdGVtlJOUjAh0b3VjaCB4eJSFlFKULg=="},
    {ENVELOPE: "lg.send", "node": "os.system", "arg": "touch {marker}"},
]

HOSTILE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    before = set(sys.modules)
    from graphtape.recorder.codec import Decoder
    import graphtape.recorder.codec
    loaded = set(sys.modules)
    trees = json.loads(sys.argv[1])
    results = []
    for typed in (True, False):
        for tree in trees:
            try:
                results.append(repr(Decoder({}, typed=typed).decode(tree))[:200])
            except Exception as exc:
                results.append(type(exc).__name__)
    new = sorted(set(sys.modules) - loaded)
    print(json.dumps({"new_modules": new, "results": results}))
    """
)


def test_decoding_never_imports_or_runs_names_from_the_data(tmp_path) -> None:
    marker = tmp_path / "pwned"
    trees = orjson.loads(orjson.dumps(MALICIOUS).decode().replace("{marker}", str(marker)))
    # Warm up the allow-listed imports (LangChain messages, LangGraph types) in the
    # child first, so anything imported while decoding would come from the data.
    warm = {ENVELOPE: "lc.msg", "cls": "AIMessage", "v": {"content": "x"}}
    warm_send = {ENVELOPE: "lg.send", "node": "n", "arg": 1}
    script = HOSTILE_SCRIPT.replace(
        "loaded = set(sys.modules)",
        f"Decoder({{}}, typed=True).decode({warm!r}); Decoder({{}}, typed=True).decode({warm_send!r})\nloaded = set(sys.modules)",
    )
    proc = subprocess.run([sys.executable, "-c", script, orjson.dumps(trees).decode()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = orjson.loads(proc.stdout.splitlines()[-1])
    assert report["new_modules"] == [], "decoding imported modules named by the data"
    assert not marker.exists()
    assert "antigravity" not in proc.stdout.split('"results"')[0]


@pytest.mark.parametrize("tree", [t for t in MALICIOUS if t[ENVELOPE] != "lg.send"], ids=lambda t: f"{t[ENVELOPE]}:{t.get('type') or t.get('cls') or ''}")
def test_hostile_envelopes_stay_plain_data(tree: dict, tmp_path) -> None:
    for typed in (True, False):
        out = Decoder({}, typed=typed).decode(orjson.loads(orjson.dumps(tree).decode().replace("{marker}", str(tmp_path / "x"))))
        assert type(out) in (dict, str)  # data, never an object built from the named type
    assert not (tmp_path / "x").exists()


# ---------------------------------------------------------------------------
# Depth
# ---------------------------------------------------------------------------


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def test_deep_values_are_marked_not_crashed() -> None:
    faults: list[str] = []
    tree = Encoder(on_fault=faults.append).encode({"deep": nested(MAX_DEPTH * 3)})
    assert faults and "deeply" in faults[0]
    text = orjson.dumps(tree)  # still JSON (orjson itself refuses past 255 levels)
    assert b"nested too deeply" in text
    shallow = nested(ENCODE_DEPTH - 5)
    assert Decoder({}, typed=True).decode(Encoder().encode(shallow)) == shallow
    # Marked where it leaves room for the levels a store and a fixture wrap it in: reads back.
    marked = Encoder().encode({"deep": nested(MAX_DEPTH + 50)})
    assert Decoder({}, typed=False).decode({"s": {"v": [[[marked]]]}})


def test_cycles_are_marked_not_crashed() -> None:
    loop: list = []
    loop.append(loop)
    d: dict = {}
    d["self"] = d
    faults: list[str] = []
    tree = Encoder(on_fault=faults.append).encode({"list": loop, "dict": d})
    assert len(faults) == 1 and "cycle" in faults[0]  # one fault per value encoded, each cycle marked
    assert orjson.dumps(tree).count(b"contains itself") == 2


def test_a_tree_with_parent_pointers_encodes_at_once_with_its_cycles_marked() -> None:
    from dataclasses import dataclass, field

    @dataclass
    class Node:
        name: str
        parent: Any = None
        kids: list = field(default_factory=list)

    root = node = Node("root")
    for i in range(50):  # without cycle detection: ~2**50 paths through the parent pointers (a hang)
        left, right = Node(f"l{i}", node), Node(f"r{i}", node)
        node.kids += [left, right]
        node = left
    faults: list[str] = []
    tree = Encoder(on_fault=faults.append).encode({"tree": root})
    assert faults == ["Node: a cycle (the value contains itself)"]
    assert b'"l49"' in orjson.dumps(tree)


def test_a_value_whose_shared_parts_multiply_is_cut_at_the_budget() -> None:
    value: list = []
    for _ in range(60):
        value = [value, value]  # 2**60 paths
    faults: list[str] = []
    tree = Encoder(on_fault=faults.append).encode(value)
    assert len(faults) == 1 and "more than" in faults[0]
    assert tree == {ENVELOPE: "unserializable", "type": "builtins.list", "repr": "<list: more than 500000 values (shared parts repeat)>", "why": "more than 500000 values (shared parts repeat)"}


def test_a_mapping_over_the_budget_is_one_mark_not_a_mark_per_value() -> None:
    """Marks for the values left would be written at the value's own size: a store a reader refuses."""
    faults: list[str] = []
    encoder = Encoder(on_fault=faults.append)
    tree = encoder.encode({f"k{i}": i for i in range(ENCODE_BUDGET + 10)})
    assert len(orjson.dumps(tree)) < 300 and tree["why"].startswith("more than") and len(faults) == 1
    assert encoder.encode({"after": [1, 2]}) == {"after": [1, 2]}  # the next value has the whole budget again


def test_deeply_nested_recorded_data_is_refused() -> None:
    tree: Any = 1
    for _ in range(MAX_DEPTH + 10):
        tree = {"k": tree}
    with pytest.raises(DecodeError, match="too deeply"):
        Decoder({}, typed=False).decode(tree)
    # Blob references count towards the depth too: a blob cannot hide depth.
    blobs = {f"{i:032x}": {BLOB_REF: f"{i + 1:032x}"} for i in range(MAX_DEPTH + 10)}
    with pytest.raises(DecodeError):
        Decoder(blobs, typed=True).decode({BLOB_REF: f"{0:032x}"})


def test_self_referencing_blob_does_not_hang() -> None:
    h = "a" * 32
    with pytest.raises(DecodeError):
        Decoder({h: [{BLOB_REF: h}]}, typed=True).decode({BLOB_REF: h})


# ---------------------------------------------------------------------------
# Malformed envelopes and exact timedeltas
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tree",
    [
        {ENVELOPE: "tuple", "v": None},
        {ENVELOPE: "dict", "v": [[1]]},
        {ENVELOPE: "lc.msg", "cls": "AIMessage", "v": [1]},
        {ENVELOPE: "lg.command", "v": {"evil": 1}},
        {ENVELOPE: "lg.interrupt", "v": 3},
        {ENVELOPE: "lc.doc", "v": {"nope": 1}},
        {ENVELOPE: "datetime", "v": "not a date"},
    ],
    ids=["tuple-none", "dict-pair", "msg-list", "command-kwarg", "interrupt-int", "doc-fields", "bad-date"],
)
def test_malformed_envelopes_raise_decode_error(tree: dict) -> None:
    try:
        Decoder({}, typed=True).decode(tree)
    except DecodeError:
        return
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"raised {type(exc).__name__} instead of DecodeError")


def test_large_timedelta_keeps_microseconds() -> None:
    value = dt.timedelta(days=999_999, microseconds=1)
    assert round_trip(value, typed=True) == value


@pytest.mark.parametrize(
    "tree",
    [
        {ENVELOPE: "lc.doc", "v": {}},
        {ENVELOPE: "lg.send", "node": 1, "arg": None},
        {ENVELOPE: "timedelta", "v": "soon"},
        {ENVELOPE: "timedelta", "v": [1, 2]},
        {ENVELOPE: "int", "v": "9" * 5000},
        {ENVELOPE: "bytes", "v": 3},
        {ENVELOPE: "tuple", "v": [{ENVELOPE: "lg.command", "v": {"evil": 1}}]},
        {BLOB_REF: ["not", "a", "hash"]},
    ],
    ids=["doc-empty", "send-node", "timedelta-str", "timedelta-short", "int-huge", "bytes-int", "nested", "blob-list"],
)
def test_malformed_envelopes_name_what_was_wrong(tree: dict) -> None:
    with pytest.raises(DecodeError, match=r"^malformed recorded value \((lc\.doc|lg\.send|timedelta|int|bytes|lg\.command|blob reference)\): "):
        Decoder({}, typed=True).decode(tree)


SHAPES = [None, 1, -1.5, "x", [], [1], [[1]], [[1, 2, 3]], {}, {"a": 1}, {"evil": 1}, {ENVELOPE: "tuple", "v": None}]
KINDS = ["tuple", "list", "set", "dict", "int", "float", "bytes", "datetime", "date", "time", "timedelta", "uuid", "decimal", "path", "enum", "exc", "unserializable", "lc.msg", "lc.doc", "lg.send", "lg.command", "lg.interrupt", "obj", "unknown"]


@pytest.mark.parametrize("typed", [True, False], ids=["typed", "plain"])
@pytest.mark.parametrize("kind", KINDS)
def test_any_envelope_shape_decodes_or_raises_decode_error(kind: str, typed: bool) -> None:
    for v in SHAPES:
        for extra in ({}, {"cls": "AIMessage"}, {"cls": ["x"]}, {"node": "n", "arg": v}, {"type": "tests.test_codec.Order"}):
            tree = {ENVELOPE: kind, "v": v, **extra}
            try:
                Decoder({}, typed=typed).decode(tree)
            except DecodeError:
                pass
            except Exception as exc:  # noqa: BLE001
                pytest.fail(f"{tree!r} raised {type(exc).__name__}: {exc}")


def test_timedelta_is_stored_exactly_and_old_float_seconds_still_decode() -> None:
    value = dt.timedelta(days=-3, seconds=5, microseconds=7)
    assert Encoder().encode(value) == {ENVELOPE: "timedelta", "v": [-3, 5, 7]}
    assert round_trip(value, typed=False) == value.total_seconds()
    old = {ENVELOPE: "timedelta", "v": 90061.5}
    assert Decoder({}, typed=True).decode(old) == dt.timedelta(days=1, hours=1, minutes=1, seconds=1.5)
    assert Decoder({}, typed=False).decode(old) == 90061.5
