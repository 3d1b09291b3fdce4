"""What a tool call writes to the graph's state itself, besides what it returns.

A tool may write channels directly through the send function LangGraph puts in each task's
config (deepagents' ``StateBackend`` writes its ``files`` that way, reading them back with
the task's read function): nothing of it is in the tool's answer. A replay that answers the
tool from the recording must make the same writes, or the state it reaches differs from the
recorded one at the tool's step.

The send function is the task's writes collection's ``extend`` (a ``deque``): what a tool
call adds to that collection between its start and its end is what it wrote. Two tool calls
of one task running at once (a tool node's calls in a thread pool) add to the one collection,
so neither is told its writes; a call nested in another is told its own, and the outer one
everything written while it ran (answered from the recording, the inner call never runs). A
call still running when its node ends (a node that stopped waiting for it) is not told its
writes either: the node's own return went into the collection meanwhile.
Each write is kept as a call of kind ``sent`` of the tool call (``parent_call_id``), named by
its channel, with the value written as its output.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from langchain_core.runnables.config import var_child_runnable_config

SEND_KEY = "__pregel_send"  # LangGraph's CONFIG_KEY_SEND: the running task's write function


def task_writes() -> deque | None:
    """The running task's writes collection, from its config (LangChain's context variable);
    None where there is none to watch."""
    send = ((var_child_runnable_config.get() or {}).get("configurable") or {}).get(SEND_KEY)
    writes = getattr(send, "__self__", None)
    return writes if isinstance(writes, deque) and getattr(send, "__name__", None) == "extend" else None


class SendWatch:
    """Tool calls watching their task's writes: which were made while each ran (module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # id(writes) -> {call id: [writes, length at its start, not to be told, its task's id]}
        self._open: dict[int, dict[str, list[Any]]] = {}

    def start(self, call_id: str, writes: deque, enclosing: tuple[str, ...], task_id: str | None) -> None:
        """``call_id`` starts in task ``task_id``, whose writes are ``writes``, nested in the calls ``enclosing``."""
        with self._lock:
            calls = self._open.setdefault(id(writes), {})
            shared = False
            for other, entry in calls.items():
                if other not in enclosing:  # a sibling running at once: neither can tell its own
                    entry[2] = shared = True
            calls[call_id] = [writes, len(writes), shared, task_id]

    def task_ended(self, task_id: str) -> None:
        """Task ``task_id``'s node has returned: its calls still running are not told their writes."""
        with self._lock:
            for calls in self._open.values():
                for entry in calls.values():
                    if entry[3] == task_id:
                        entry[2] = True

    def end(self, call_id: str, writes: deque) -> list[tuple[str, Any]]:
        """The ``(channel, value)`` writes ``call_id`` made (none where a sibling ran alongside)."""
        with self._lock:
            calls = self._open.get(id(writes))
            entry = calls.pop(call_id, None) if calls is not None else None
            if calls is not None and not calls:
                del self._open[id(writes)]
        if entry is None or entry[2] or entry[0] is not writes:
            return []
        made = list(writes)[entry[1]:]
        # LangGraph's own channels (``__resume__``: an interrupt() taking its answer) are written
        # again by what the replay runs; only the state's are the tool's.
        return [(w[0], w[1]) for w in made if isinstance(w, tuple) and len(w) == 2 and isinstance(w[0], str) and not w[0].startswith("__")]
