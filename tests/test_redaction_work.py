"""Scrubbing reads text a bounded number of times, whatever the text: work counted, not timed.

Text built so that each secret's name in it makes redaction read on to the end of the text
(objects under secret keys that never close, a line of words after "password is" many times)
cost time quadratic in its length: minutes for a megabyte, under the GIL, in the user's agent.
"""

from __future__ import annotations

import random

import pytest

from graphtape.recorder import redaction
from graphtape.recorder.bracket_ends import SCAN, BracketEnds
from graphtape.recorder.redaction import MARK, Redactor


class CountedBytes(bytes):
    """Bytes that count the reads made of them."""

    reads = 0

    def __getitem__(self, key):  # type: ignore[no-untyped-def]
        CountedBytes.reads += 1
        return super().__getitem__(key)


def reference_end(data: bytes, at: int) -> int | None:
    """Where the bracket at ``at`` closes, read afresh every time (the rule BracketEnds remembers)."""
    depth, quote = 0, 0
    i = at
    while i < min(len(data), at + SCAN):
        c = data[i]
        if quote:
            if c == 0x5C:
                i += 1
            elif c == quote:
                quote = 0
        elif c in b"\"'":
            quote = c
        elif c in b"{[(":
            depth += 1
        elif c in b"}])":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


@pytest.mark.parametrize("seed", range(40))
def test_bracket_ends_are_where_a_fresh_scan_finds_them(seed: int) -> None:
    rng = random.Random(seed)
    data = bytes(rng.choice(b'{}[]()"\'\\ax:') for _ in range(rng.randrange(1, 300)))
    ends = BracketEnds(data)
    openings = [i for i, c in enumerate(data) if c in b"{[("]
    rng.shuffle(openings)  # asked in any order, remembered answers agree with fresh ones
    for at in openings:
        assert ends.end(at) == reference_end(data, at), (data, at)


def test_unclosed_objects_under_secret_keys_are_read_once() -> None:
    data = CountedBytes(b'{"password": ' * 2000)
    ends = BracketEnds(data)
    CountedBytes.reads = 0
    for at in range(0, len(data), len(b'{"password": ')):
        assert ends.end(at) is None
    assert CountedBytes.reads < 4 * len(data)  # a fresh scan per key: about 1000 times the text


def test_unclosed_objects_under_secret_keys_still_redact_what_closes() -> None:
    text = '{"password": ' * 50 + '{"password": {"current": "hunter2"}}'
    assert "hunter2" not in Redactor().scrub(text)


def test_a_line_of_words_after_a_password_is_read_a_few_words_at_a_time() -> None:
    line = b"password is " + b"word " * 1000
    more = redaction._PHRASE_MORE.match(line, len(b"password is word"))
    assert more is not None and len(more.group(0).split()) <= 8
    r = Redactor()
    assert r.scrub("my password is correct horse battery staple.") == f"my password is {MARK}."
    assert r.scrub("my password is " + "word " * 20 + ".") == "my password is " + "word " * 20 + "."
