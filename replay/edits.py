"""Fork edits: ``KEY=JSON`` and ``dotted.path=JSON`` turned into a state update.

Parsing edits is replay's job: the CLI's ``fork --set`` and the TUI's fork
prompt both hand their text here, and get one ``ReplayError`` line back
when an edit is malformed or names what the state does not hold.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from graphtape.recorder.codec import TYPE_KEY
from graphtape.replay.runner import ReplayError

__all__ = ["parse_edits"]


def parse_edits(sets: list[str], state: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``["a.b=1", "c=\\"x\\""]`` -> an update of top-level keys; a dotted path edits a copy of the key's value.

    ``state()`` reads the state being edited, only when a dotted path needs it.
    """
    if not sets:
        raise ReplayError("nothing to fork with: give at least one --set KEY=JSON")
    update: dict[str, Any] = {}
    current: dict[str, Any] | None = None
    for item in sets:
        path, sep, text = item.partition("=")
        if not sep or not path:
            raise ReplayError(f"bad --set {item!r}: use KEY=JSON, like answer='\"no\"' or retries=0")
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ReplayError(f"bad --set {item!r}: the value is not JSON ({exc.msg} at column {exc.colno}); quote strings: key='\"text\"'") from None
        key, *rest = path.split(".")
        if not rest and not isinstance(value, dict):
            update[key] = value
            continue
        if current is None:
            current = state()
        if not rest:
            # A whole object for a value recorded as a model keeps its class's mark: the fork
            # hands the graph that model (JSON cannot name a class).
            was = current.get(key)
            marked = isinstance(was, dict) and isinstance(was.get(TYPE_KEY), str) and TYPE_KEY not in value
            update[key] = {TYPE_KEY: was[TYPE_KEY], **value} if marked else value
            continue
        if key not in update:
            if key not in current:
                raise ReplayError(f"bad --set {item!r}: the state has no key {key!r} (keys: {', '.join(sorted(current)) or 'none'})")
            update[key] = json.loads(json.dumps(current[key], default=str))
        _set_path(update, [key, *rest], value, item)
    return update


def _set_path(root: dict[str, Any], path: list[str], value: Any, item: str) -> None:
    node: Any = root
    for i, part in enumerate(path[:-1]):
        nxt = path[i + 1]
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise ReplayError(f"bad --set {item!r}: no {'.'.join(path[: i + 1])!r} in the state") from None
        if not isinstance(node, (dict, list)):
            raise ReplayError(f"bad --set {item!r}: {'.'.join(path[: i + 1])!r} holds a {type(node).__name__}, cannot set {nxt!r} in it")
    last = path[-1]
    try:
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    except (IndexError, ValueError):
        raise ReplayError(f"bad --set {item!r}: no index {last!r} in {'.'.join(path[:-1])!r}") from None
