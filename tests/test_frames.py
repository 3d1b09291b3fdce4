"""FrameBuilder and FrameState: every step rebuilt from its keyframe plus deltas equals the real state.

Values are plain Python objects with an explicit encoder, so these tests pin the
frame format itself; the store contract tests cover frames inside real runs.
"""

from __future__ import annotations

import random

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphtape.recorder.frames import MAX_CHAIN, FrameBuilder, FrameState


class Item:
    """A list element with identity, like a message object in a state channel."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value


def encode(x: object) -> object:
    if isinstance(x, Item):
        return {"item": list(x.value) if isinstance(x.value, tuple) else x.value}
    if isinstance(x, list):
        return [encode(i) for i in x]
    return x


def real_size(frame: dict) -> int:
    return len(orjson.dumps(frame))


def deltas_until_cap(frame: dict) -> int:
    # Keyframes have no "x" key; making them huge forces deltas until MAX_CHAIN.
    return 10**9 if "x" not in frame else 1


def always_key(frame: dict) -> int:
    return 0


SIZE_POLICIES = {"real": real_size, "deltas": deltas_until_cap, "keys": always_key}


def expected(values: dict) -> dict:
    return {ch: encode(v) for ch, v in values.items()}


def build_all(history: list[tuple[dict, dict, dict, set]], size_of) -> list[tuple[dict, bool]]:
    fb = FrameBuilder(encode)
    frames = []
    for values, versions, seen, updated in history:
        frame, is_key = fb.build(values, versions, seen, updated, size_of)
        # What the store keeps is JSON: round-trip so nothing shares objects with the builder.
        frames.append((orjson.loads(orjson.dumps(frame)), is_key))
    return frames


def replay(frames: list[tuple[dict, bool]], i: int, *, in_place: bool = False) -> tuple[FrameState, int]:
    """Rebuild step ``i`` the way the store does: from the latest keyframe at or before it."""
    start = max(j for j in range(i + 1) if frames[j][1])
    fs = FrameState(in_place=in_place)
    for frame, is_key in frames[start : i + 1]:
        fs.apply(frame, is_key)
    return fs, i - start + 1


def check_history(history: list[tuple[dict, dict, dict, set]], size_of) -> list[tuple[dict, bool]]:
    frames = build_all(history, size_of)
    assert frames[0][1], "the first frame is always a keyframe"
    for i, (values, versions, seen, _) in enumerate(history):
        fs, reads = replay(frames, i)
        assert fs.values == expected(values), f"step {i}"
        assert fs.versions == versions, f"step {i}"
        assert fs.seen == seen, f"step {i}"
        assert reads <= MAX_CHAIN
    # Growing lists in place (as state_at does) gives the same states, in any order, and
    # leaves the frames as they were: the store reuses a parsed keyframe for many reads.
    stored = orjson.dumps(frames)
    for i in [*reversed(range(len(history))), *range(len(history))]:
        fs, _ = replay(frames, i, in_place=True)
        assert fs.values == expected(history[i][0]), f"step {i}, in place"
        assert fs.versions == history[i][1] and fs.seen == history[i][2], f"step {i}, in place"
    assert orjson.dumps(frames) == stored, "reading in place changed a stored frame"
    # Sequential reading (applying every frame in order) gives the same states.
    fs = FrameState()
    for i, (frame, is_key) in enumerate(frames):
        fs.apply(frame, is_key)
        assert fs.values == expected(history[i][0])
    return frames


# ---------------------------------------------------------------------------
# Worked examples
# ---------------------------------------------------------------------------


def test_growing_list_is_stored_as_prefix_plus_append() -> None:
    a, b, c = Item("a"), Item("b"), Item("c")
    fb = FrameBuilder(encode)
    key, is_key = fb.build({"m": [a, b]}, {"m": 1}, {}, {"m"}, real_size)
    assert is_key and key["v"] == {"m": [{"item": "a"}, {"item": "b"}]}
    big = {"m": [a, b, c]}
    # Make the keyframe look large so the next frame may be a delta.
    delta, is_key = fb.build(big, {"m": 2}, {}, {"m"}, lambda f: 10**6 if "x" not in f else 10)
    assert not is_key
    assert delta["l"] == {"m": {"k": 2, "a": [{"item": "c"}]}}
    assert delta["v"] == {} and delta["cv"] == {"m": 2}


@pytest.mark.parametrize("policy", SIZE_POLICIES)
def test_lists_grow_shrink_and_change_in_the_middle(policy: str) -> None:
    items = [Item(i) for i in range(6)]
    x = Item("x")
    steps = [
        [items[0]],
        items[:3],  # grow
        items[:5],  # grow
        items[:2],  # shrink
        [items[0], x, items[2], items[3]],  # replaced in the middle
        [Item(0), x, items[2]],  # first element replaced by an equal-valued new object
        [],  # emptied
        [items[4], items[5]],  # refilled
    ]
    history = [({"m": v, "n": i}, {"m": i + 1, "n": i + 1}, {"node": {"m": i}}, {"m", "n"}) for i, v in enumerate(steps)]
    check_history(history, SIZE_POLICIES[policy])


@pytest.mark.parametrize("policy", SIZE_POLICIES)
def test_channels_removed_added_and_changing_type(policy: str) -> None:
    a, b = Item("a"), Item("b")
    history = [
        ({"m": [a], "s": "one"}, {"m": 1, "s": 1}, {"n1": {"m": 1}}, {"m", "s"}),
        ({"m": [a, b]}, {"m": 2}, {"n1": {"m": 2}}, {"m"}),  # "s" removed, its version too
        ({"m": [a, b], "s": "back"}, {"m": 2, "s": 3}, {"n2": {"s": 3}}, {"s"}),  # re-added; n1 forgotten
        ({"m": "not a list any more", "s": "back"}, {"m": 4, "s": 3}, {"n2": {"s": 3}}, {"m"}),
        ({"m": [b, a], "s": ["now", "a", "list"]}, {"m": 5, "s": 5}, {}, {"m", "s"}),
        ({}, {}, {}, set()),
        ({"m": [a]}, {"m": 7}, {"n3": {}}, {"m"}),
    ]
    check_history(history, SIZE_POLICIES[policy])


def test_list_mutated_in_place_is_seen_when_marked_updated() -> None:
    a, b, c = Item("a"), Item("b"), Item("c")
    shared = [a, b]
    fb = FrameBuilder(encode)
    frames = [fb.build({"m": shared}, {"m": 1}, {}, {"m"}, deltas_until_cap)]
    shared.append(c)  # the same list object, changed in place
    frames.append(fb.build({"m": shared}, {"m": 2}, {}, {"m"}, deltas_until_cap))
    shared[0] = Item("z")
    frames.append(fb.build({"m": shared}, {"m": 3}, {}, {"m"}, deltas_until_cap))
    fs = FrameState()
    states = []
    for frame, is_key in frames:
        fs.apply(orjson.loads(orjson.dumps(frame)), is_key)
        states.append(fs.values["m"])
    assert states == [[{"item": "a"}, {"item": "b"}], [{"item": "a"}, {"item": "b"}, {"item": "c"}], [{"item": "z"}, {"item": "b"}, {"item": "c"}]]


def test_unchanged_channel_is_not_re_encoded() -> None:
    calls = []

    def counting(x: object) -> object:
        calls.append(x)
        return encode(x)

    big = [Item(i) for i in range(50)]
    fb = FrameBuilder(counting)
    fb.build({"m": big, "n": 0}, {"m": 1, "n": 1}, {}, {"m", "n"}, real_size)
    calls.clear()
    delta, _ = fb.build({"m": big, "n": 1}, {"m": 1, "n": 2}, {}, {"n"}, real_size)
    assert calls == [1], "only the updated scalar is encoded"
    assert "m" not in delta.get("v", {}) and "m" not in delta.get("l", {})


def test_chain_is_capped_and_keyframes_follow_size() -> None:
    history = [({"m": [Item(i)]}, {"m": i}, {}, {"m"}) for i in range(MAX_CHAIN * 2 + 5)]
    frames = check_history(history, deltas_until_cap)
    keys = [i for i, (_, k) in enumerate(frames) if k]
    assert keys == [0, MAX_CHAIN, 2 * MAX_CHAIN]

    # Real sizes: a large state with small changes makes few keyframes.
    items: list[Item] = [Item("x" * 200) for _ in range(20)]
    history = []
    for i in range(200):
        items = items + [Item(i)]
        history.append(({"m": items}, {"m": i}, {}, {"m"}))
    frames = check_history(history, real_size)
    assert sum(k for _, k in frames) < 20


def test_force_key_starts_over_from_scratch() -> None:
    a, b = Item("a"), Item("b")
    fb = FrameBuilder(encode)
    fb.build({"m": [a]}, {"m": 1}, {"s": {"m": 1}}, {"m"}, deltas_until_cap)
    fb.force_key()
    frame, is_key = fb.build({"m": [a, b]}, {"m": 2}, {"s": {"m": 2}}, {"m"}, deltas_until_cap)
    assert is_key
    fs = FrameState()
    fs.apply(frame, True)
    assert fs.values == {"m": [{"item": "a"}, {"item": "b"}]}
    assert fs.versions == {"m": 2} and fs.seen == {"s": {"m": 2}}


def test_frames_written_before_version_removals_still_read() -> None:
    """Deltas without the optional "cx"/"vsx" keys (older files) apply as before."""
    fs = FrameState()
    fs.apply({"v": {"a": 1}, "cv": {"a": 1}, "vs": {"n": {"a": 1}}}, True)
    fs.apply({"v": {"b": [1]}, "l": {}, "x": ["a"], "cv": {"b": 2}, "vs": {}}, False)
    fs.apply({"v": {}, "l": {"b": {"k": 1, "a": [2, 3]}}, "x": [], "cv": {"b": 3}, "vs": {}}, False)
    assert fs.values == {"b": [1, 2, 3]}
    assert fs.versions == {"a": 1, "b": 3}
    assert fs.seen == {"n": {"a": 1}}


# ---------------------------------------------------------------------------
# Property-based: random histories
# ---------------------------------------------------------------------------

CHANNELS = ["a", "b", "c", "d"]
OPS = ["keep", "append", "truncate", "replace_middle", "fresh_copy", "in_place_append", "scalar", "remove", "new_list"]

step_ops = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 6)), min_size=len(CHANNELS), max_size=len(CHANNELS))
step_meta = st.tuples(st.integers(0, 3), st.sampled_from(["note", "forget_node", "drop_version"]))
histories = st.lists(st.tuples(step_ops, step_meta), min_size=1, max_size=40)


def run_live(spec: list, size_of) -> tuple[list[tuple[dict, bool]], list[tuple[dict, dict, dict]]]:
    """Drive a FrameBuilder with live objects, as a graph would, recording the truth at each step.

    Unchanged channels keep the very same object and are left out of ``updated``;
    changed ones are new objects or lists changed in place, and are in ``updated``.
    """
    fb = FrameBuilder(encode)
    values: dict[str, object] = {}
    versions: dict[str, int] = {}
    seen: dict[str, dict[str, int]] = {}
    frames, truth = [], []
    counter = 0
    for step, (ops, (node, meta)) in enumerate(spec):
        updated: set[str] = set()
        for ch, (op, arg) in zip(CHANNELS, ops):
            cur = values.get(ch)
            counter += 1
            if op == "keep" or (op == "remove" and ch not in values):
                continue
            if op == "remove":
                del values[ch]
                versions.pop(ch, None)
                continue
            if op == "scalar":
                values[ch] = [None, arg, f"s{arg}", {"k": arg}][arg % 4]
            elif op == "new_list" or not isinstance(cur, list):
                values[ch] = [Item((counter, i)) for i in range(arg)]
            elif op == "append":
                values[ch] = cur + [Item((counter, i)) for i in range(arg + 1)]
            elif op == "truncate":
                values[ch] = cur[: min(arg, len(cur))]
            elif op == "replace_middle":
                new = list(cur)
                if new:
                    new[arg % len(new)] = Item(("r", counter))
                values[ch] = new
            elif op == "fresh_copy":
                values[ch] = [Item(x.value) for x in cur]
            elif op == "in_place_append":
                cur.append(Item(("p", counter)))
            updated.add(ch)
            versions[ch] = step + 1
        if meta == "forget_node" and seen:
            del seen[sorted(seen)[node % len(seen)]]
        elif meta == "drop_version" and versions:
            del versions[sorted(versions)[node % len(versions)]]
        else:
            seen[f"n{node}"] = {ch: versions[ch] for ch in sorted(updated) if ch in versions}
        frame, is_key = fb.build(dict(values), dict(versions), {n: dict(s) for n, s in seen.items()}, updated, size_of)
        frames.append((orjson.loads(orjson.dumps(frame)), is_key))
        truth.append((expected(values), dict(versions), {n: dict(s) for n, s in seen.items()}))
    return frames, truth


@settings(max_examples=200, deadline=None)
@given(histories, st.sampled_from(sorted(SIZE_POLICIES)))
def test_random_histories_round_trip(spec: list, policy: str) -> None:
    frames, truth = run_live(spec, SIZE_POLICIES[policy])
    assert frames[0][1]
    for i, (values, versions, seen) in enumerate(truth):
        fs, reads = replay(frames, i)
        assert (fs.values, fs.versions, fs.seen) == (values, versions, seen), f"step {i}"
        assert reads <= MAX_CHAIN


@pytest.mark.parametrize("seed", range(5))
def test_long_random_history_with_fixed_seed(seed: int) -> None:
    """A few long runs (hundreds of steps) with plain random, to cross several keyframes."""
    rnd = random.Random(seed)
    items: list[Item] = []
    history = []
    values: dict[str, object] = {}
    for step in range(400):
        r = rnd.random()
        if r < 0.85:
            items = items + [Item((step, "m"))]
        elif r < 0.9 and items:
            items = items[: len(items) - rnd.randint(1, 3)]  # drop the last few, as trimming does
        elif items:
            items = list(items)
            items[rnd.randrange(len(items))] = Item((step, "edit"))
        values["messages"] = items
        values["count"] = step
        if rnd.random() < 0.1:
            values.pop("extra", None)
        elif rnd.random() < 0.2:
            values["extra"] = {"step": step}
        history.append((dict(values), {"messages": step, "count": step}, {"agent": {"count": step}}, {"messages", "count", "extra"}))
    frames = check_history(history, real_size)
    assert sum(k for _, k in frames) < len(frames) / 4
