"""The encoder's message-history memo: a history seen again is encoded as a fresh encoder would."""

from __future__ import annotations

import orjson
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from graphtape.recorder.codec import Encoder, blob_hash
from graphtape.recorder.prefix_memo import KEEP, MIN_LENGTH


class Sink:
    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    def put_blob(self, data: bytes) -> str:
        h = blob_hash(data)
        self.blobs[h] = data
        return h


def fresh(value):
    """What an encoder that never saw anything before makes of ``value``."""
    return Encoder(sink=Sink()).encode(value)


def conversation(n: int) -> list:
    kinds = [lambda i: HumanMessage(content=f"question {i}", id=f"h{i}"), lambda i: AIMessage(content=f"answer {i}", id=f"a{i}"), lambda i: ToolMessage(content=f"result {i}", tool_call_id=f"c{i}", id=f"t{i}")]
    return [kinds[i % 3](i) for i in range(n)]


def test_a_growing_history_encodes_as_a_fresh_encoder_would_every_step():
    enc = Encoder(sink=Sink())
    history = conversation(MIN_LENGTH)
    for i in range(30):
        prompt = list(history)  # a model call's copy of the same messages
        assert enc.encode({"messages": history}) == fresh({"messages": history})
        assert enc.encode(prompt) == fresh(prompt)
        history = [*history, AIMessage(content=f"more {i}", id=f"m{i}")]


def test_an_id_given_in_place_after_encoding_is_seen():
    # add_messages gives a message its id in place after a node returned it (already encoded).
    enc = Encoder(sink=Sink())
    history = conversation(MIN_LENGTH + 2)
    history[4].id = None
    before = enc.encode(history)
    history[4].id = "assigned-later"
    after = enc.encode([*history, HumanMessage(content="next", id="n")])
    assert after[4] != before[4]
    assert after == fresh([*history, HumanMessage(content="next", id="n")])


def test_content_changed_in_place_is_seen():
    enc = Encoder(sink=Sink())
    history = conversation(MIN_LENGTH + 2)
    enc.encode(history)
    history[2].content += " (edited)"
    assert enc.encode(history) == fresh(history)


def test_a_history_that_lost_its_head_or_was_reordered_is_encoded_again():
    enc = Encoder(sink=Sink())
    history = conversation(MIN_LENGTH + 4)
    enc.encode(history)
    for other in (history[1:], list(reversed(history)), history[:3] + history[5:]):
        assert enc.encode(other) == fresh(other)


def test_lists_that_are_not_message_histories_are_encoded_as_before():
    enc = Encoder(sink=Sink())
    history = conversation(MIN_LENGTH)
    mixed = [*history, {"role": "user", "content": "a dict, not a message"}, "text"]
    assert enc.encode(mixed) == fresh(mixed)
    grown = [*mixed, AIMessage(content="after", id="z")]
    assert enc.encode(grown) == fresh(grown)
    numbers = list(range(50))
    assert enc.encode(numbers) == numbers


def test_a_secret_in_a_new_message_is_still_redacted():
    enc = Encoder(sink=(sink := Sink()))
    history = conversation(MIN_LENGTH)
    enc.encode(history)
    key = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"
    out = enc.encode([*history, AIMessage(content=f"the key is {key}", id="s")])
    stored = b"".join(sink.blobs[ref["$b"]] for ref in out if isinstance(ref, dict) and "$b" in ref)
    assert key.encode() not in stored and b"the key is" in stored


def test_more_histories_than_kept_are_all_encoded_right():
    enc = Encoder(sink=Sink())
    threads = [conversation(MIN_LENGTH + i) for i in range(KEEP + 3)]
    for _ in range(3):
        for t in threads:
            t.append(AIMessage(content="again", id=f"x{len(t)}"))
            assert orjson.dumps(enc.encode(t)) == orjson.dumps(fresh(t))
