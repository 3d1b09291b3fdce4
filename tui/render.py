"""Plain-text rendering of runs and steps for the terminal (``graphtape runs`` / ``show``).

Works on the dicts from :mod:`tui.views`. One line per fact, values shortened
to fit the width; a step's update and state are JSON with long strings folded.
"""

from __future__ import annotations

import dataclasses
import json
import textwrap
import time
from typing import Any

from graphtape.recorder.terminal_text import command_line, joined_lines, printable  # noqa: F401  (printable re-exported: the TUI imports it from here)
from graphtape.recorder.tracebacks import format_frames, frame_text, raised_at
from graphtape.recorder.waiting_subgraphs import node_path
from graphtape.tui import http_view

__all__ = ["fold", "run_text", "runs_table", "short", "step_text"]

FOLD_AT = 200
FOLD_KEEP = 120
MESSAGE_TYPES = {"human", "ai", "tool", "system", "function", "chat", "remove"}
VERSION_ORDER = ("graphtape", "langgraph", "langchain-core", "langgraph-checkpoint", "sqlalchemy", "python")


# -- small formatters -------------------------------------------------------


def fmt_time(ts: float | None) -> str:
    return local_time(ts, "%Y-%m-%d %H:%M:%S")


def local_time(ts: float | None, fmt: str) -> str:
    """A recorded time in local time; ``?`` for one no clock can show (a damaged or hostile
    store's 1e308 or -1e18), ``-`` for none."""
    if ts is None:
        return "-"
    try:
        return time.strftime(fmt, time.localtime(ts))
    except (OverflowError, OSError, ValueError, TypeError):
        return "?"


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if not 0 <= seconds < 10**9:  # negative, NaN or over 30 years: a damaged or hostile store's times
        return "?"
    if seconds < 60:
        return f"{seconds:.2f} s"
    minutes, sec = divmod(int(round(seconds)), 60)
    return f"{minutes} m {sec:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} m"


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return ""
    if ms < 0.1:
        return "<0.1 ms"
    if ms < 10:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    return fmt_duration(ms / 1000)


def compact(value: Any) -> str:
    """One-line JSON (non-JSON leftovers shown with ``str``)."""
    return json.dumps(value, ensure_ascii=False, default=str, separators=(", ", ": "))


def clean(value: Any) -> Any:
    """``value`` (a record, a list, a dict, a string) with every string made :func:`printable`.

    For the records the TUI shows as text (runs, steps, routes, calls, events): Textual
    writes a string's characters to the terminal as they are, escape sequences included.
    """
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, list):
        return [clean(v) for v in value]
    if isinstance(value, tuple):
        return tuple(clean(v) for v in value)
    if isinstance(value, dict):
        return {clean(k) if isinstance(k, str) else k: clean(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: clean(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init})
    return value


def plural(n: int, word: str) -> str:
    """``1 item``, ``2 items``: a count with its noun in the right number."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def clip(text: str, width: int) -> str:
    """One line, at most ``width`` characters (an ellipsis marks the cut)."""
    text = " ".join(str(text).splitlines()).replace("\t", " ")
    return text if len(text) <= width else text[: max(width - 1, 1)] + "…"


def cut_middle(path: str, width: int) -> str:
    """``path`` in at most ``width`` cells, cut in the middle so its tail (what tells sibling
    paths apart: ``…observation.status`` from ``…observation.result``) stays whole.

    The tail keeps about two thirds of the room and starts at a ``.`` or ``[`` where one is
    near, so it shows whole path segments; the head keeps the start (the state key).
    """
    if len(path) <= width:
        return path
    if width < 2:
        return "…"[:width]
    room = width - 1  # one cell for the ellipsis
    size = max(1, (room * 2) // 3)
    start = len(path) - size
    # Widen the tail back to the start of its segment when that costs little, else narrow it
    # forward to the next segment; the head keeps at least a few characters of the key.
    back = max(path.rfind(".", 0, start + 1) + 1, path.rfind("[", 0, start + 1))
    forward = min((i for i in (path.find(".", start), path.find("[", start)) if i >= 0), default=-1)
    if back > 0 and start - back <= room // 4 and room - (len(path) - back) >= 3:
        start = back
    elif 0 <= forward - start <= size // 2:
        start = forward + 1 if path[forward] == "." else forward
    tail = path[start:]
    head = path[: room - len(tail)]
    return f"{head}…{tail}"


def fold(value: Any, at: int = FOLD_AT, keep: int = FOLD_KEEP) -> Any:
    """``value`` with every string longer than ``at`` cut to ``keep`` characters plus a note."""
    if isinstance(value, str):
        return value if len(value) <= at else f"{value[:keep]}… [{len(value) - keep} more chars; --full shows all]"
    if isinstance(value, dict):
        return {k: fold(v, at, keep) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [fold(v, at, keep) for v in value]
    return value


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") in MESSAGE_TYPES and "content" in value


def _left_out(value: Any) -> int:
    """How many items ``value`` stands for if it is a preview's mark of items left out
    (``recorder.store.previews``: a listing reads a long list's ends), else 0."""
    if isinstance(value, dict) and value.get("__type__") == "more" and isinstance(value.get("items"), int):
        return value["items"]
    return 0


def _is_history(value: Any) -> bool:
    """A list of chat messages (a preview's marks of messages left out among them)."""
    return isinstance(value, list) and any(_is_message(v) for v in value) and all(_is_message(v) or _left_out(v) for v in value)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p if isinstance(p, str) else p.get("text", "") if isinstance(p, dict) else "" for p in content]
        return " ".join(p for p in parts if p) or compact(content)
    return compact(content)


def call_sig(name: str, args: Any) -> str:
    """``name(key="value", ...)`` for a tool call."""
    if isinstance(args, dict):
        return f"{name}({', '.join(f'{k}={compact(v)}' for k, v in args.items())})"
    return f"{name}({compact(args)})"


def message_line(msg: dict[str, Any]) -> str:
    """A chat message as one line: who, what they said, which tools they called."""
    kind = msg.get("type")
    text = _content_text(msg.get("content", ""))
    if kind == "tool":
        status = msg.get("status")
        mark = " [error]" if status == "error" else ""
        name = msg.get("name")  # a ToolMessage a node builds itself often has none: "tool ?" read as a fault
        return f"tool {name}{mark}: {text}" if name else f"tool{mark}: {text}"
    if kind == "remove":  # RemoveMessage: no content, only the message it takes out of the history
        target = msg.get("id")
        return "remove all messages" if target == "__remove_all__" else f"remove message {target or '?'}"
    line = f"{kind}: {json.dumps(text, ensure_ascii=False)}" if text else f"{kind}:"
    calls = msg.get("tool_calls") or []
    if calls:
        line += " → " + ", ".join(call_sig(c.get("name", "?"), c.get("args", {})) for c in calls if isinstance(c, dict))
    return line


def short(value: Any) -> str:
    """A value in one (unclipped) line, with messages, interrupts and missing data made readable."""
    if isinstance(value, dict) and value.get("__type__") == "missing-blob":
        return f"<stored value {value.get('ref', '?')[:8]} is missing from the database>"
    if isinstance(value, dict) and value.get("__type__") == "Interrupt":
        return short(value.get("value"))
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict) and value[0].get("__type__") == "Interrupt":
        return short(value[0])
    if _is_message(value):
        return message_line(value)
    if _is_history(value):
        return messages_line(value)
    return compact(value)


def messages_line(messages: list[dict[str, Any]]) -> str:
    """Several messages as one line: how many, and the last (removals counted as such).

    A preview's marks of messages left out count the messages they stand for."""
    count = len(messages) + sum(_left_out(m) - 1 for m in messages if _left_out(m))
    messages = [m for m in messages if not _left_out(m)]
    last = message_line(messages[-1])
    if count == 1:
        return last
    if all(m.get("type") == "remove" for m in messages):
        return f"remove {count} messages" if all(m.get("id") != "__remove_all__" for m in messages) else "remove all messages"
    return f"{count} messages, last {last}"


def _status(run: dict[str, Any]) -> str:
    reason = run.get("status_reason")
    return f"{run['status']} ({reason})" if reason else run["status"]


def _table(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        out = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(cells)]
        return "  ".join(out).rstrip()

    return [line(headers), *(line(r) for r in rows)]


# -- runs -------------------------------------------------------------------

REPLAY_TAG = "replay-of:"  # the tag a replay carries; a run with a parent and without it is a fork


def is_replay_of(parent_run_id: str | None, tags: Any) -> bool:
    """Whether a run with this parent and these tags is a replay (else, with a parent, a fork)."""
    return bool(parent_run_id) and any(str(t).startswith(REPLAY_TAG) for t in tags or ())


def origin(parent_run_id: str | None, tags: Any, chars: int = 8) -> str:
    """``replay of 1a2b3c4d`` or ``fork of 1a2b3c4d`` for a derived run, else nothing: `last` and
    a run's name skip such runs, so every list marks them."""
    if not parent_run_id:
        return ""
    return f"{'replay' if is_replay_of(parent_run_id, tags) else 'fork'} of {parent_run_id[:chars]}"


def runs_table(runs: list[dict[str, Any]], width: int = 120) -> str:
    """The ``graphtape runs`` table, made to fit ``width``.

    Narrower than the full table, it gives up in this order: full ids (a unique
    8-character prefix is what every command takes), the year and seconds of the
    start, the redaction and fault columns when they are all zero, the source of a
    replay or fork (FROM ``replay of 1a2b3c4d`` becomes KIND ``replay``), then name length.
    The FROM column is there only when a listed run is a replay or a fork.
    """
    ids = [r["id"] for r in runs]
    short_ids = [_unique_prefix(i, ids) for i in ids]
    unused = set() if any(r.get("parent_run_id") for r in runs) else {"from"}
    zero = unused | {key for key in ("redactions", "faults") if not any(r.get(key) for r in runs)}
    short_time = "%m-%d %H:%M"
    attempts = (
        (ids, "%Y-%m-%d %H:%M:%S", unused),
        (short_ids, "%Y-%m-%d %H:%M:%S", unused),
        (short_ids, short_time, unused),
        (short_ids, short_time, zero),
        (short_ids, short_time, zero | {"source"}),
    )
    for shown_ids, time_format, dropped in attempts:
        lines = _runs_lines(runs, shown_ids, time_format, dropped, 40)
        if max(len(line) for line in lines) <= width:
            return joined_lines(lines)
    over = max(len(line) for line in lines) - width
    name_width = max(8, max([len(r["name"]) for r in runs] or [4]) - over)
    return joined_lines(_runs_lines(runs, short_ids, short_time, zero | {"source"}, min(40, name_width)))


def _unique_prefix(run_id: str, ids: list[str], length: int = 8) -> str:
    while length < len(run_id) and sum(1 for other in ids if other.startswith(run_id[:length])) > 1:
        length += 4
    return run_id[:length]


def _runs_lines(runs: list[dict[str, Any]], ids: list[str], time_format: str, dropped: set[str], name_width: int) -> list[str]:
    columns = [
        ("ID", lambda i, r: ids[i]),
        ("NAME", lambda i, r: clip(r["name"], name_width)),
        ("STATUS", lambda i, r: _status(r)),
        ("STEPS", lambda i, r: str(r["step_count"])),
        ("STARTED", lambda i, r: local_time(r["started_at"], time_format)),
        ("DURATION", lambda i, r: fmt_duration(r["duration_s"])),
        ("FROM", lambda i, r: origin(r.get("parent_run_id"), r.get("tags"))),
        ("KIND", lambda i, r: origin(r.get("parent_run_id"), r.get("tags")).partition(" ")[0]),  # FROM without its source
        ("REDACTIONS", lambda i, r: str(r["redactions"])),
        ("FAULTS", lambda i, r: str(r["faults"])),
    ]
    # Where a run came from is one column: FROM with the source's id, or, narrow ("source" dropped), KIND alone.
    dropped = dropped | ({"from"} if "source" in dropped and "from" not in dropped else {"kind"})
    kept = [(h, cell) for h, cell in columns if h.lower() not in dropped]
    rows = [[cell(i, r) for _, cell in kept] for i, r in enumerate(runs)]
    headers = [h for h, _ in kept]
    return _table(headers, rows, right={i for i, h in enumerate(headers) if h in ("STEPS", "DURATION", "REDACTIONS", "FAULTS")})


# -- one run ------------------------------------------------------------------


def task_preview(task: dict[str, Any], width: int = 120, interrupts: bool = True) -> str:
    """What a task did, in one line of ``width``: its error or interrupt, the message it added, its scalar updates."""
    if task.get("error_type"):
        return clip(f"[error] {task['error_type']}: {task.get('error_message') or ''}".rstrip(), width)
    head = f"[interrupt] {short(task['interrupts'])}  " if interrupts and task.get("interrupts") else ""
    writes = task.get("writes")
    if not isinstance(writes, dict):
        return clip(head + (short(writes) if writes not in (None, {}) else ""), width)
    messages = writes.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages and _is_message(messages[-1]) else messages if _is_message(messages) else None
    rest = [
        f"{key}={short(value)}"
        for key, value in writes.items()
        if last is None or (key != "messages" and not isinstance(value, (dict, list)))
    ]
    tail = "  ".join(rest)
    if last is None:
        return clip(head + tail, width) if head or tail else "(no update)"
    # The message is the story; keep the small scalar updates (counters, flags) visible after it.
    room = width - len(head) - (len(tail) + 2 if tail else 0)
    said = messages_line(messages) if _is_history(messages) else message_line(last)
    return clip(head + clip(said, max(room, width // 2)) + (f"  {tail}" if tail else ""), width)


def _versions(versions: dict[str, str]) -> str:
    keys = [k for k in VERSION_ORDER if k in versions] + sorted(k for k in versions if k not in VERSION_ORDER)
    return ", ".join(f"{k} {versions[k]}" for k in keys)


def _calls_cell(calls: dict[str, int]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in sorted(calls.items()))


def _step_flags(step: dict[str, Any]) -> str:
    flags = [name for name in ("error", "interrupt", "resumed", "pending") if step.get(name)]
    return " ".join(f"[{f}]" for f in flags)


def _step_time(step: dict[str, Any]) -> float | None:
    # Node time: the slowest task (parallel tasks overlap). The step's own duration is measured
    # between checkpoints, which LangGraph may save after the next step has started.
    times = [t["duration_ms"] for t in step["tasks"] if t.get("duration_ms") is not None]
    return max(times) if times else step.get("duration_ms")


def _ns_label(ns: str) -> str:
    return ns if ns else "(root)"


def run_text(view: dict[str, Any], width: int = 120) -> str:
    """The ``graphtape show RUN`` page: a header, then one block per superstep."""
    run = view["run"]
    out = [clip(f"run {run['id']}  {run['name']}", max(width, 40))]  # one line: a name cannot forge more

    def field(label: str, value: str) -> None:
        out.append(clip(f"  {label:<10}{value}", width))

    field("status", _status(run))
    if run.get("error_type") or run.get("error_message"):
        field("error", f"{run.get('error_type') or 'error'}: {run.get('error_message') or ''}")
        where = _failed_at(view)
        if where is not None:
            step, frame = where
            field("at", frame_text(frame))
            field("traceback", command_line("graphtape", "show", run["id"][:8], "--step", step))
    ref = run.get("graph_ref")
    field("graph", f"{run['graph_name']}   {ref}" if ref and ref != run["graph_name"] else run["graph_name"] + ("" if ref else "   (no graph reference: replay needs --graph module:attr)"))
    parent = run.get("parent_run_id")
    replayed = is_replay_of(parent, run.get("tags"))
    if parent:
        field("replayed" if replayed else "forked", f"from {parent} at step {run.get('fork_step')}")
        if view.get("fork_edit") and not replayed:
            field("edit", describe_edit(view["fork_edit"]))
    field("thread", run.get("thread_id") or "-")
    ended = f"   duration {fmt_duration(run['duration_s'])}" if run.get("ended_at") else "   (still running, or killed)"
    field("started", fmt_time(run["started_at"]) + ended)
    steps = view["steps"]
    if steps and not view["ns"]:  # the root's count, as `runs` and the TUI show it
        field("steps", f"{run['step_count']} ({steps[0]['step']}..{steps[-1]['step']})")
    if view.get("inputs") is None and parent:
        # A replay or fork resumes the parent's checkpoint: the graph was given no input of its own.
        field("input", f"none: it resumed run {parent[:8]} after step {run.get('fork_step')}" + ("" if replayed else ", with the edit applied"))
    else:
        field("input", short(view.get("inputs")))
    if view.get("output") is not None:
        field("output", short(view["output"]))
    totals = view.get("call_totals") or {}
    if totals:
        tokens = f" · {view['total_tokens']} tokens" if view.get("total_tokens") else ""
        field("calls", _calls_cell(totals) + tokens)
    if run.get("tags"):
        field("tags", ", ".join(run["tags"]))
    if run.get("redactions") or run.get("faults"):
        note = f"{run['redactions']} values redacted, {run['faults']} recorder faults"
        log = view.get("fault_log") or []
        field("recording", note + (f" (first: {log[0]})" if log else ""))
    if run["status"] == "incomplete":
        # The steps the store did not take, and where they went (a rescue file to import), said in the fault log.
        log = view.get("fault_log") or []
        said = next((line for line in reversed(log) if "import-rescue" in line or "could not be written" in line or "dropped" in line), None)
        said = (said or run.get("status_reason") or "some rows were not written").removeprefix("store write failed: StoreError: ")
        # Wrapped, not clipped: it names the rescue file to import, whole.
        for i, part in enumerate(textwrap.wrap(printable(clip(said, 6 * width)), max(width - 12, 40), break_on_hyphens=False, break_long_words=False)[:6]):
            out.append(f"  {'missing' if i == 0 else '':<10}{part}")
    if view.get("versions"):
        field("versions", _versions(view["versions"]))
    others = {ns: n for ns, n in view.get("namespaces", {}).items() if ns != view["ns"]}
    if view["ns"]:
        field("namespace", view["ns"])
    if others:
        field("subgraphs" if not view["ns"] else "others", ", ".join(f"{_ns_label(ns)} ({plural(n, 'step')})" for ns, n in others.items()) + "   (see them with --ns NS)")

    out.append("")
    if not steps:
        out.append("  no steps recorded" + (f" in namespace {view['ns']!r}" if view["ns"] else ""))
        return joined_lines(out)
    rows = [
        [
            str(s["step"]),
            ", ".join(s["nodes"]) if s["nodes"] else f"({s['source'] or 'input'})",
            s["summary"],
            _calls_cell(s["calls"]),
            fmt_ms(_step_time(s)),
            _step_flags(s),
        ]
        for s in steps
    ]
    header, *lines = _table(["STEP", "NODES", "ROUTE", "CALLS", "TIME", ""], rows, right={0, 4})
    indent = " " * (max(len("STEP"), *(len(r[0]) for r in rows)) + 2)  # under NODES
    out.append(header)
    for step, line in zip(steps, lines):
        out.append(line)
        for task in step["tasks"]:
            if task["node"] == "__start__" and not step["summary"]:
                continue
            prefix = f"{task['node']}: " if len(step["tasks"]) > 1 else ""
            # Events tell the interrupt/resume story once; don't repeat it per task.
            preview = task_preview(task, width - len(indent) - len(prefix), interrupts=not step.get("events"))
            if preview != "(no update)" or not step.get("events"):
                out.append(indent + prefix + preview)
            for sub_ns in task.get("subgraph_ns") or []:
                out.append(clip(f"{indent}subgraph steps: " + command_line("graphtape", "show", run["id"][:8], "--ns", sub_ns), width))
        for event in step.get("events", []):
            out.append(clip(f"{indent}[{event['kind']}] {short(event.get('value'))}", width))
    focus = next((s["step"] for s in steps if s["error"] or s["interrupt"]), steps[-1]["step"])
    ns_args = ("--ns", view["ns"]) if view["ns"] else ()
    out += ["", "one step in full (update, routes, calls, state): " + command_line("graphtape", "show", run["id"][:8], "--step", focus, *ns_args)]
    return joined_lines(out)


# -- one step -----------------------------------------------------------------


def _block(value: Any, indent: int, full: bool) -> list[str]:
    text = json.dumps(value if full else fold(value), ensure_ascii=False, indent=2, default=str)
    return [" " * indent + line for line in text.splitlines()]


def _route_lines(route: dict[str, Any], width: int) -> list[str]:
    dest = ", ".join(route.get("destinations") or []) or "(nowhere)"
    arrow = "⇉" if route["kind"] == "send" else "→"
    why = route["kind"]
    if route.get("router"):
        why += f" via {route['router']}"
        if route["kind"] == "send":
            why += f", {len(route.get('sends') or [])} Send packet(s)"
        elif route.get("returned") is not None:
            why += f", returned {short(route['returned'])}"
    elif route.get("returned") is not None:
        why += f": {short(route['returned'])}"
    lines = [clip(f"  {route['source']} {arrow} {dest}   {why}", width)]
    for send in route.get("sends") or []:
        arg = send.get("arg")
        call = arg.get("tool_call") if isinstance(arg, dict) else None
        body = call_sig(call.get("name", "?"), call.get("args", {})) if isinstance(call, dict) else short(arg)
        lines.append(clip(f"      Send({send.get('node')}): {body}", width))
    return lines


def _http_call_lines(call: dict[str, Any], calls: list[dict[str, Any]], width: int) -> list[str]:
    """An HTTP request: method, URL, status, timing; under the call it was made in, if any."""
    parent = http_view.parent_label(call, calls)
    lead = "    ↳ http " if parent else "  http  "
    bits = [f"{lead}{call['name']}", http_view.status_text(call), fmt_ms(call.get("latency_ms"))]
    if call.get("node") and not parent:
        bits.append(f"in node {call['node']}")
    if parent:
        bits.append(f"(part of {parent})")
    lines = [clip("  ".join(b for b in bits if b), width)]
    indent = "        " if parent else "      "
    body = http_view.request_body(call)
    if body not in (None, ""):
        lines.append(clip(f"{indent}sent {short(body)}", width))
    outcome = call_outcome(call.get("error_type"), call.get("error_message"), call.get("waited_ms"), call.get("latency_ms"))
    if outcome is not None:
        lines.append(clip(f"{indent}{outcome[0]} {outcome[1]}", width))
    else:
        lines.append(clip(f"{indent}got  {short(http_view.response_body(call))}", width))
    return lines


def call_place(node: str | None, call_ns: str, ns: str = "") -> str:
    """Where a call was made, seen from namespace ``ns``: its node, after the subgraphs it was
    made in when it was made below ``ns`` (``tracker › agent``: a supervisor's agent's call)."""
    if call_ns == ns:
        return node or ""
    inner = call_ns[len(ns) + 1 :] if ns and call_ns.startswith(ns + "|") else call_ns
    return " › ".join([*node_path(inner).split("|"), node or "?"])


def _call_lines(call: dict[str, Any], width: int, calls: list[dict[str, Any]] = (), ns: str = "") -> list[str]:
    if call["kind"] == http_view.HTTP:
        return _http_call_lines(call, list(calls), width)
    bits = [f"  {call['kind']:<5} {call['name']}", fmt_ms(call.get("latency_ms"))]
    if call.get("input_tokens") is not None or call.get("output_tokens") is not None:
        bits.append(f"tokens {call.get('input_tokens') or 0} in / {call.get('output_tokens') or 0} out")
    if call.get("ns", ns) != ns:
        bits.append(f"in subgraph {call_place(call.get('node'), call['ns'], ns)}")
    elif call.get("node"):
        bits.append(f"in node {call['node']}")
    if call.get("streamed"):
        bits.append("streamed")
    lines = [clip("  ".join(b for b in bits if b), width)]
    inputs = call.get("inputs")
    if call["kind"] == "model" and isinstance(inputs, dict) and "messages" in inputs:
        msgs = inputs["messages"]
        if msgs and all(isinstance(m, list) for m in msgs):
            msgs = [m for batch in msgs for m in batch]
        inputs = msgs
    lines.append(clip(f"      in   {short(inputs)}", width))
    outcome = call_outcome(call.get("error_type"), call.get("error_message"), call.get("waited_ms"), call.get("latency_ms"))
    if outcome is not None:
        lines.append(clip(f"      {outcome[0]} {outcome[1]}", width))
        if outcome[0] == "abandoned" and call.get("output") is not None:
            lines.append(clip(f"      out  {short(call.get('output'))}  (came too late: the node had gone on)", width))
    else:
        lines.append(clip(f"      out  {short(call.get('output'))}", width))
    return lines


def step_text(view: dict[str, Any], width: int = 120, full: bool = False) -> str:
    """The ``graphtape show RUN --step N`` page."""
    run, step = view["run"], view["step"]
    where = f"  namespace {view['ns']}" if view["ns"] else ""
    nodes = ", ".join(step["nodes"]) or f"({step.get('source') or 'input'})"
    out = [f"run {run['id']}  {run['name']}  step {step['step']}{where}  {nodes}"]
    facts = [f"source {step.get('source') or '-'}", fmt_ms(step.get("duration_ms")), f"checkpoint {step.get('checkpoint_id') or '-'}"]
    flags = _step_flags(step)
    out.append("  " + " · ".join(f for f in facts if f) + (f"   {flags}" if flags else ""))
    if step.get("summary"):
        out.append(f"  {step['summary']}")
    if step.get("pending"):
        out.append("  this step started but never produced a checkpoint; the state shown is the one before it")

    out += ["", "tasks" if view["tasks"] else "tasks: none"]
    for task in view["tasks"]:
        head = [f"  {task['node']}", fmt_ms(task.get("duration_ms")), f"task {task['task_id'][:8]}"]
        if task.get("cached"):
            head.append("cached")
        if task.get("carried") is not None:
            head.append("not run: carried from an earlier run")
        out.append("  ".join(h for h in head if h))
        for attempt in task.get("attempts") or []:
            outcome = f"failed {attempt.get('et')}: {attempt.get('em') or ''}" if attempt.get("et") else "ended"
            out.append(clip(f"    attempt {attempt.get('n')} {outcome} ({fmt_ms(attempt.get('ms'))}), retried", width))
        if task.get("attempts"):
            last = len(task["attempts"]) + 1
            out.append(f"    attempt {last} " + ("failed too" if task.get("error_type") else "succeeded"))
        if task.get("error_type"):
            out.append(clip(f"    error {task['error_type']}: {task.get('error_message') or ''}", width))
            out += traceback_lines(task.get("traceback"), 6, width, full)
        for value in task.get("interrupts") or []:
            out.append(clip(f"    interrupt {short(value)}", width))
        if task.get("subgraph_ns"):
            out.append(f"    subgraph steps in: {', '.join(task['subgraph_ns'])}")
        if task.get("writes") not in (None, {}):
            out.append("    update")
            out += _block(task["writes"], 6, full)

    out += ["", "routes" if view["routes"] else "routes: none"]
    for route in view["routes"]:
        out += _route_lines(route, width)

    out += ["", "calls" if view["calls"] else "calls: none"]
    for call in view["calls"]:
        out += _call_lines(call, width, view["calls"], view["ns"])
        out += traceback_lines(call.get("traceback"), 6, width, full)

    if view["events"]:
        out += ["", "events"]
        for event in view["events"]:
            node = f" in {event['node']}" if event.get("node") else ""
            out.append(clip(f"  {event['kind']}{node}: {short(event.get('value'))}", width))

    out += ["", f"next: {', '.join(view['next']) if view['next'] else '(end of run)'}"]
    out += ["", f"state after step {step['step']}"]
    out += _block(view["state"], 2, full)
    nav = []
    if view.get("first_step") is not None and step["step"] > view["first_step"]:
        nav.append(f"--step {step['step'] - 1}")
    if view.get("last_step") is not None and step["step"] < view["last_step"]:
        nav.append(f"--step {step['step'] + 1}")
    if nav:
        out += ["", f"neighbours: {command_line('graphtape', 'show', run['id'][:8])} {' / '.join(nav)}"]
    return joined_lines(out)


ABANDONED = "Unfinished"  # the recorder's marker for a call still running when its run ended, or cancelled by its caller


def call_outcome(error_type: str | None, error_message: str | None, waited_ms: float | None = None, latency_ms: float | None = None) -> tuple[str, str] | None:
    """``(label, text)`` for a call that did not simply return: ``abandoned`` (its node gave up
    waiting after ``waited_ms``, a timeout, while the call went on) or ``error``; ``None`` for a
    call that returned in time."""
    if waited_ms is not None and error_type in (None, ABANDONED):
        gave_up = f"its node stopped waiting after {waited_ms:.0f} ms and went on; "
        if error_type == ABANDONED and latency_ms is not None:
            return "abandoned", gave_up + "the call was cancelled"  # by its caller (asyncio.wait_for): it ended then
        if error_type == ABANDONED or latency_ms is None:
            return "abandoned", gave_up + "the call had not returned when the run ended"
        return "abandoned", gave_up + f"the call returned after {latency_ms:.0f} ms, too late to count"
    if error_type == ABANDONED:
        return "abandoned", error_message or "the call had not returned when the run ended"
    if error_type:
        return "error", f"{error_type}: {error_message or ''}".rstrip()
    return None


LATE_SLACK_S = 0.001  # a call ending this much after its task still ended with it (as replay counts it)


def node_waits(calls: list[Any], tasks: list[Any]) -> dict[str, float]:
    """Call id -> how long its node waited before giving up on it (a timeout): calls still running
    when their node's task ended, whether they never returned or returned too late.

    Works on dicts or records alike (``call_id``, ``task_id``, ``started_at``, ``latency_ms``;
    a task's ``task_id``, ``started_at``, ``duration_ms``).
    """

    def get(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)

    spans = {}
    for t in tasks:
        start, ms = get(t, "started_at"), get(t, "duration_ms")
        if start is not None and ms is not None:
            spans[get(t, "task_id")] = (start, start + ms / 1000)
    waits = {}
    for c in calls:
        span, started, latency = spans.get(get(c, "task_id")), get(c, "started_at"), get(c, "latency_ms")
        if span is None or started is None:
            continue
        end = span[1]
        unfinished = get(c, "error_type") == ABANDONED
        # Late: it began while its node ran and came back after the node had finished.
        began_inside = span[0] - LATE_SLACK_S <= started <= end + LATE_SLACK_S
        late = latency is not None and get(c, "error_type") is None and began_inside and started + latency / 1000 > end + LATE_SLACK_S
        if unfinished or late:
            waits[get(c, "call_id")] = max(0.0, (end - started) * 1000)
    return waits


TRACE_SHOWN = 6  # innermost frames of a traceback shown without --full


def traceback_lines(frames: list | None, indent: int, width: int, full: bool = False) -> list[str]:
    """A stored traceback, innermost frames last (the last ``TRACE_SHOWN`` unless ``full``)."""
    if not frames:
        return []
    pad = " " * indent
    lines = [pad + "traceback (innermost last)" + ("" if full or len(frames) <= TRACE_SHOWN else "; --full for every frame")]
    return lines + [clip(pad + "  " + line, width) for line in format_frames(frames, last=None if full else TRACE_SHOWN)]


def _failed_at(view: dict[str, Any]) -> tuple[int, list] | None:
    """(step, frame) where the run's error was raised: the innermost frame of the user's own code."""
    for step in view.get("steps") or []:
        for task in step.get("tasks") or []:
            frames = task.get("traceback")
            if task.get("error_type") and frames:
                return step["step"], raised_at(frames)
    return None




def describe_edit(edit: Any) -> str:
    """A fork's edit or a replay's mode in one line: ``fork (live): retries=5 as node act``."""
    if not isinstance(edit, dict):
        return short(edit)
    if edit.get("kind") != "fork":
        return f"{edit.get('kind') or 'replay'} ({edit.get('mode') or '?'})" + (f" in {edit['ns']}" if edit.get("ns") else "")
    update = edit.get("update")
    changes = ", ".join(f"{k}={short(v)}" for k, v in update.items()) if isinstance(update, dict) else short(update)
    where = f" as node {edit['as_node']}" if edit.get("as_node") else ""
    return f"fork ({edit.get('mode') or '?'}): {changes}{where}" + (f" in {edit['ns']}" if edit.get("ns") else "")
