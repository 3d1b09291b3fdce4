"""The replay's HTTP answerer: serves a node's own HTTP requests from the recording.

Requests are matched like tool calls (``CallBook``): by who made them (step,
subgraph path, node), by method and URL (the call's name) and by what they asked
(the query and the body, JSON parsed, redacted as the recording was; headers are
not compared: they carry dates, SDK versions and retry counts). Identical
repeated requests consume the recording in order. A request made inside a tool or
model call is that call's: answered with it (strict) or live with it, never here.

A request nothing answers is a miss, explained by the closest recorded requests.
In a strict replay it is refused: it fails inside the node as the client's
connection error and never leaves the machine. With ``on_miss="live"`` (a
re-recording) it goes out, and is still reported.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from graphtape.recorder import CallInfo
from graphtape.recorder.codec import to_plain
from graphtape.recorder.http_capture import HttpAnswer, HttpRefusal, Site
from graphtape.recorder.http_exchange import HTTP, asked, call_name

from graphtape.replay.calls import CallBook, LiveCall, Miss, RecordedCall
from graphtape.replay.normalize import ns_path


class RecordedHttp:
    """Answers one replay's HTTP requests from the recording's HTTP calls (see module docstring)."""

    def __init__(self, calls: list[CallInfo], *, offsets: dict[str, int] | None = None, miss_goes_live: bool = False) -> None:
        own = [matchable(c) for c in calls if c.kind == HTTP and not c.parent_call_id]
        self.book = CallBook(own, _same, delay=lambda _c: 0.0, offsets=offsets)
        self.miss_goes_live = miss_goes_live
        self.misses: list[Miss] = []
        self.served = 0
        self._seen: set[tuple] = set()
        self._lock = threading.Lock()

    def answer_http(self, inputs: dict[str, Any], site: Site) -> HttpAnswer | HttpRefusal | None:
        plain = to_plain(inputs)  # redacted as the recording was
        live = LiveCall(HTTP, call_name(plain["method"], plain["url"]), site.step, ns_path(site.ns), site.node, arguments=asked(plain), ns=site.ns)
        got = self.book.take(live)
        if isinstance(got, Miss):
            self._missed(got)
            if self.miss_goes_live:
                return None
            return HttpRefusal(_why(got))
        with self._lock:
            self.served += 1
        return _answer(got)

    def unused(self) -> list[RecordedCall]:
        """Recorded requests no live request asked for."""
        return self.book.unused()

    def _missed(self, miss: Miss) -> None:
        # A client that retries (urllib3, the openai SDK) asks again: one miss, reported once.
        live = miss.live
        key = (live.step, live.path, live.node, live.name, repr(live.arguments))
        with self._lock:
            if key in self._seen:
                return
            self._seen.add(key)
            self.misses.append(miss)


def matchable(call: CallInfo) -> CallInfo:
    """A recorded HTTP call as the book matches it: named by method and URL, asked its query and body."""
    inputs = call.inputs if isinstance(call.inputs, dict) else {}
    method, url = inputs.get("method"), inputs.get("url")
    name = call_name(method, url) if isinstance(method, str) and isinstance(url, str) else call.name
    return replace(call, name=name, inputs=asked(inputs))


def _same(value: Any) -> Any:
    return value  # arguments are already normalized by ``asked``


def _answer(got: RecordedCall) -> HttpAnswer:
    call = got.call
    if call.error_type:
        return HttpAnswer(error=(call.error_type, call.error_message))
    return HttpAnswer(output=call.output)


def _why(miss: Miss) -> str:
    if not miss.candidates:
        return "the recording has no HTTP request like it"
    c = miss.candidates[0]
    differs = ", ".join(c.differs) or "nothing"
    return f"no recorded request matches (closest: {c.name} at step {c.step} in node {c.node!r}, which differs in {differs})"


def live_http_note(store: Any, run_id: str | None, mode: Any) -> list[str]:
    """What a report says when the mode let HTTP requests through: how many went out, and why."""
    if run_id is None or mode.answers(HTTP):
        return []
    went = [c for c in store.calls(run_id) if c.kind == HTTP and not c.parent_call_id]
    if not went:
        return []
    n = len(went)
    return [f"{n} HTTP request{'s' if n != 1 else ''} went live: mode {mode.value} answers only {'tool calls' if mode.value == 'tools' else 'nothing'} from the recording (strict answers HTTP too)"]
