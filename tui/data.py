"""What the TUI shows, computed without Textual: diffs, transcripts, watches.

Kept apart from the widgets so it can be tested and benchmarked headless, and
so the UI thread only ever receives finished results from a worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from deepdiff import DeepDiff

from graphtape.recorder.deferred import DeferredList, is_list, json_default, materialized
from graphtape.recorder.errors import GraphtapeError
from graphtape.recorder.records import StepDetail, StepInfo
from graphtape.tui.render import plural, printable

FOLD_AT = 160
FOLD_KEEP = 2  # appends kept at each end of a long run of them


@dataclass(frozen=True, slots=True)
class DiffEntry:
    """One difference between two states, at a path like ``messages[3].content``."""

    kind: str  # added | removed | changed | appended | skipped (appends left out of a view; new = how many)
    path: str
    old: Any = None
    new: Any = None


def path_text(parts: list[Any]) -> str:
    """``['messages', 3, 'content']`` -> ``messages[3].content``."""
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out or "(root)"


def diff_states(old: dict[str, Any], new: dict[str, Any]) -> list[DiffEntry]:
    """Differences between two states, with list growth shown as appends.

    Lists that share a prefix are compared only past it (so a 1,000-message
    history that gained one message costs one comparison, not a thousand);
    everything else goes through deepdiff. A long run of appends to one list
    comes back folded to its ends (see :func:`fold_appends`), and deferred
    lists are read only where an entry shows them: diffing step 1 against step
    10,000 decodes four messages, not 10,000.
    """
    entries: list[DiffEntry] = []
    for key in sorted(set(old) | set(new), key=str):
        if key not in old:
            entries.append(DiffEntry("added", path_text([key]), None, new[key]))
            continue
        if key not in new:
            entries.append(DiffEntry("removed", path_text([key]), old[key], None))
            continue
        a, b = old[key], new[key]
        if a == b:
            continue
        if is_list(a) and is_list(b):
            if isinstance(a, DeferredList) != isinstance(b, DeferredList):
                a, b = materialized(a), materialized(b)
            k = a.shared_prefix(b) if isinstance(a, DeferredList) else _common_prefix(a, b)
            if k == len(a):
                entries.extend(_appends(key, b, k))
                continue
            entries.extend(fold_appends(_deep(a[k:], b[k:], [key], offset=k)))
            continue
        entries.extend(fold_appends(_deep(a, b, [key])))
    return entries


def count_differences(entries: list[DiffEntry]) -> int:
    """How many differences ``entries`` stand for (a folded run of appends counts each append)."""
    return sum(e.new if e.kind == "skipped" else 1 for e in entries)


def _appends(key: str, items: Any, start: int, keep: int = FOLD_KEEP) -> list[DiffEntry]:
    """Entries for ``items[start:]`` appended to list ``key``, folded to their ends when many."""
    n = len(items)
    if n - start <= 2 * keep + 1:
        return [DiffEntry("appended", path_text([key, i]), None, v) for i, v in zip(range(start, n), items[start:n])]
    head = [DiffEntry("appended", path_text([key, start + j]), None, v) for j, v in enumerate(items[start : start + keep])]
    tail = [DiffEntry("appended", path_text([key, n - keep + j]), None, v) for j, v in enumerate(items[n - keep : n])]
    return [*head, _skipped(path_text([key]), start + keep, n - keep - 1), *tail]


def _skipped(owner: str, first: int, last: int) -> DiffEntry:
    """The entry standing for appends ``first..last`` (inclusive) to list ``owner``, left out of view."""
    return DiffEntry("skipped", f"{owner}[{first}]…[{last}]", None, last - first + 1)


def _common_prefix(a: list, b: list) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


_KINDS = {
    "values_changed": "changed",
    "type_changes": "changed",
    "dictionary_item_added": "added",
    "dictionary_item_removed": "removed",
    "iterable_item_added": "added",
    "iterable_item_removed": "removed",
    "attribute_added": "added",
    "attribute_removed": "removed",
    "set_item_added": "added",
    "set_item_removed": "removed",
}


def _deep(a: Any, b: Any, prefix: list[Any], offset: int = 0) -> list[DiffEntry]:
    if not isinstance(a, (dict, list)) or not isinstance(b, (dict, list)):
        return [DiffEntry("changed", path_text(prefix), a, b)]
    if isinstance(a, dict) and isinstance(b, dict):
        # Only the keys that differ go to deepdiff: a mapping of 100,000 keys with one changed
        # took it over a second, each step the TUI showed. Mappings compare by key, so nothing
        # it reports changes.
        keep = [k for k in a.keys() | b.keys() if k not in a or k not in b or not _same(a[k], b[k])]
        a, b = {k: a[k] for k in keep if k in a}, {k: b[k] for k in keep if k in b}
    tree = DeepDiff(a, b, view="tree", verbose_level=2, cutoff_intersection_for_pairs=1.0, cutoff_distance_for_pairs=1.0)
    out = []
    for report, levels in tree.items():
        kind = _KINDS.get(report)
        if kind is None:
            continue
        for level in levels:
            parts = list(level.path(output_format="list"))
            if offset and parts and isinstance(parts[0], int) and isinstance(a, list):
                parts[0] += offset
            old = None if kind == "added" else level.t1
            new = None if kind == "removed" else level.t2
            if kind == "added" and isinstance(a, list) and len(parts) == 1 and isinstance(parts[0], int) and parts[0] >= len(a) + offset:
                kind = "appended"
            out.append(DiffEntry(kind, path_text(prefix + parts), old, new))
    out.sort(key=lambda e: e.path)
    return out


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - values that cannot be compared go to deepdiff
        return False


def fold_appends(entries: list[DiffEntry], keep: int = FOLD_KEEP) -> list[DiffEntry]:
    """``entries`` with each long run of appends to one list cut to its first and last ``keep``.

    The cut-out middle becomes one ``skipped`` entry (``new`` holds how many),
    so diffing step 1 against step 10,000 shows the other changes on the
    first screen instead of after 10,000 appended messages.
    """
    out: list[DiffEntry] = []
    i, n = 0, len(entries)
    while i < n:
        e = entries[i]
        if e.kind != "appended":
            out.append(e)
            i += 1
            continue
        owner = e.path.rpartition("[")[0]
        j = i + 1
        while j < n and entries[j].kind == "appended" and entries[j].path.rpartition("[")[0] == owner:
            j += 1
        if j - i <= 2 * keep + 1:
            out.extend(entries[i:j])
        else:
            first, last = (int(entries[x].path.rpartition("[")[2].rstrip("]")) for x in (i + keep, j - keep - 1))
            out += [*entries[i : i + keep], _skipped(owner, first, last), *entries[j - keep : j]]
        i = j
    return out


def changed_keys(detail: StepDetail | None) -> set[str]:
    """State keys the step's tasks wrote to."""
    if detail is None:
        return set()
    keys: set[str] = set()
    for t in detail.tasks:
        if isinstance(t.writes, dict):
            keys.update(t.writes)
    return keys


def fold(text: str, limit: int = FOLD_AT) -> str:
    """Shorten long strings for a one-line view (control characters shown as "?")."""
    text = printable(text.replace("\n", "⏎ "))
    return text if len(text) <= limit else f"{text[: limit - 12]}… (+{len(text) - limit + 12} chars)"


def to_json(value: Any) -> str:
    """A recorded value as indented JSON, deferred lists read in full (call it off the UI thread).

    A store error while reading a deferred list (damaged, or refused as too large) is raised
    as itself, not as the ``TypeError`` orjson wraps it in, so callers can show it in one line."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=json_default).decode()
    except orjson.JSONEncodeError as exc:
        if isinstance(exc.__cause__, GraphtapeError):
            raise exc.__cause__ from None
        raise


def diff_text(entries: list[DiffEntry]) -> str:
    """Every entry of a diff with its values in full, for reading what the one-line view cuts."""
    out = []
    for e in entries:
        if e.kind == "skipped":
            out.append(f"⋮ {e.path}: {e.new:,} more appended (left out)")
            continue
        mark = {"added": "+", "appended": "+", "removed": "-", "changed": "~"}.get(e.kind, "?")
        out.append(f"{mark} {e.path} ({e.kind})")
        if e.kind in ("removed", "changed"):
            out.append(_indent(("old: " if e.kind == "changed" else "") + to_json(e.old)))
        if e.kind != "removed":
            out.append(_indent(("new: " if e.kind == "changed" else "") + to_json(e.new)))
    return "\n".join(out) or "no differences"


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def short(value: Any, limit: int = 60) -> str:
    """A compact one-line rendering of any recorded value."""
    if isinstance(value, str):
        return fold(repr(value), limit)
    if isinstance(value, dict) and "type" in value and "content" in value:
        return fold(f"{value['type']}: {content_text(value.get('content'))}", limit)
    if is_list(value):
        return f"[{plural(len(value), 'item')}]"
    if isinstance(value, dict):
        return "{" + fold(", ".join(f"{k}: {short(v, 20)}" for k, v in list(value.items())[:4]), limit - 2) + "}"
    return fold(repr(value), limit)


def content_text(content: Any) -> str:
    """Message content as text (LangChain content may be a list of blocks)."""
    if isinstance(content, str):
        return printable(content)
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict):
                parts.append(str(block.get("text", block.get("type", ""))))
            else:
                parts.append(str(block))
        return printable(" ".join(parts))
    return "" if content is None else printable(str(content))


def is_message(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") in {"human", "ai", "tool", "system", "function", "chat", "remove"} and "content" in value


def message_lists(state: dict[str, Any]) -> dict[str, Any]:
    """State keys that hold chat transcripts (lists of messages, deferred or not)."""
    return {k: v for k, v in state.items() if is_list(v) and len(v) and all(is_message(m) for m in v[-3:])}


def first_of(steps: list[StepInfo], start: int, direction: int, predicate) -> int | None:
    """Index of the next step (from ``start``, exclusive) matching ``predicate``."""
    i = start + direction
    while 0 <= i < len(steps):
        if predicate(steps[i]):
            return i
        i += direction
    return None


def value_at(state: dict[str, Any], key: str) -> Any:
    return state.get(key, _MISSING)


_MISSING = object()


def split_edits(text: str) -> list[str]:
    """``'answer="no" plan.retries=0'`` -> ``['answer="no"', 'plan.retries=0']``: fork edits typed on one line.

    Each edit is ``KEY=JSON`` (or ``dotted.path=JSON``); the JSON value ends
    where the decoder stops, so values may hold spaces. Raises ``ValueError``
    with a message for people when a key or a value is malformed.
    """
    import json

    decoder = json.JSONDecoder()
    edits: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        eq = text.find("=", i)
        key = text[i:eq] if eq >= 0 else text[i:]
        if eq < 0 or not key or any(c.isspace() for c in key):
            raise ValueError(f"expected KEY=JSON at {(key.split() or [''])[0]!r}: write edits like answer=\"no\" retries=0")
        try:
            _, end = decoder.raw_decode(text, eq + 1)
        except json.JSONDecodeError as exc:
            hint = ' (quote strings: key="text")' if exc.msg == "Expecting value" else ""
            raise ValueError(f"the value of {key} is not JSON: {exc.msg} at column {exc.pos + 1}{hint}") from None
        if end < n and not text[end].isspace():
            raise ValueError(f"the value of {key} is not JSON: unexpected {text[end]!r} at column {end + 1} (quote strings: key=\"text\")")
        edits.append(text[i:end])
        i = end
    if not edits:
        raise ValueError("type at least one edit: KEY=JSON, like answer=\"no\" or plan.retries=0")
    return edits
