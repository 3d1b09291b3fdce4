"""Text panels of the run screen: routes, calls, subgraphs."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from graphtape.recorder.records import CallInfo, RouteInfo
from graphtape.recorder.tracebacks import frame_text, raised_at
from graphtape.tui import http_view
from graphtape.tui.data import fold, short, to_json
from graphtape.tui.render import call_outcome, call_place, node_waits, plural, printable, traceback_lines

_KIND_STYLE = {"conditional": "bold magenta", "static": "dim", "send": "bold cyan", "command": "bold yellow", "parent-command": "bold yellow"}


def pretty(value: Any) -> str:
    try:
        return to_json(value)
    except TypeError:
        return repr(value)


class TextPanel(VerticalScroll):
    """A scrollable panel whose content the screen replaces."""

    def compose(self):
        yield Static(classes="panel-body")

    def show(self, renderable: Any) -> None:
        self.query_one(".panel-body", Static).update(renderable)


SEND_LINES = 12  # a Send packet's payload shows this many lines of JSON here (v shows it whole)


def error_rows(tasks: list[Any]) -> list[Text]:
    """Each failed node of the step: its error and where it was raised."""
    rows = []
    for t in tasks:
        if t.error_type:
            rows.append(Text(printable(f"✗ {t.node} raised {t.error_type}: {t.error_message or ''}"), style="bold red"))
            if t.traceback:
                rows.append(Text(f"  at {frame_text(raised_at(t.traceback))}", style="bold"))
            rows.extend(Text(line, style="red") for line in traceback_lines(t.traceback, 2, 10_000, full=True))
            rows.append(Text(""))
    return rows


def routes_renderable(routes: list[RouteInfo], nxt: list[str], step: int = 0, tasks: list[Any] = ()) -> Any:
    errors = error_rows(list(tasks))
    if not routes and step < 0:
        return Text(f"Step {step} holds the graph's input; the first nodes run in step 0." + (f"\n\nnext: {', '.join(nxt)}" if nxt else ""), style="dim")
    if not routes:
        return Group(*errors, Text("No route decisions in this step (it ended, failed or was interrupted).", style="dim"))
    rows = list(errors)
    for r in routes:
        head = Text()
        head.append(f"{r.kind:<14}", style=_KIND_STYLE.get(r.kind, ""))
        head.append(f"{r.source} → {', '.join(r.destinations) or '__end__'}", style="bold")
        rows.append(head)
        if r.router:
            rows.append(Text(f"    router {r.router} returned {fold(repr(r.returned), 200)}"))
        elif r.kind in ("command", "parent-command"):
            rows.append(Text(f"    Command {fold(pretty(r.returned).replace(chr(10), ' '), 200)}"))
        else:
            rows.append(Text("    static edge from the graph's structure", style="dim"))
        for i, packet in enumerate(r.sends):
            rows.append(Text(f"    Send #{i} → {packet.get('node')}:", style="cyan"))
            lines = pretty(packet.get("arg")).splitlines()
            shown = lines[:SEND_LINES] + ([f"… {plural(len(lines) - SEND_LINES, 'more line')} (v shows them all)"] if len(lines) > SEND_LINES else [])
            rows.append(Text("\n".join("        " + line for line in shown)))
    if nxt:
        rows.append(Text(f"\nnext: {', '.join(nxt)}", style="bold green"))
    return Group(*rows)


def tokens_text(call: CallInfo) -> str:
    """``'35 in / 60 out tokens'``, or "" when the provider reported none."""
    if call.input_tokens is None and call.output_tokens is None and call.total_tokens is None:
        return ""
    if call.input_tokens is None and call.output_tokens is None:
        return f"{call.total_tokens} tokens"
    return f"{call.input_tokens or 0} in / {call.output_tokens or 0} out tokens"


def http_detail(call: CallInfo, calls: list[CallInfo]) -> Any:
    """An HTTP request in full: who made it, the request (headers, body) and the response."""
    latency = "no response" if call.latency_ms is None else f"{call.latency_ms:.1f} ms"
    parent = http_view.parent_label(call, calls)
    head = f"http {call.name}  node={call.node} step={call.step}  {latency}" + (f"  part of {parent}" if parent else "")
    parts = [Text(head, style="bold"), Text("request headers:", style="bold"), Text(pretty(http_view.headers(call.inputs)))]
    body = http_view.request_body(call)
    if body not in (None, ""):
        parts += [Text("request body:", style="bold"), Text(pretty(body))]
    outcome = call_outcome(call.error_type, call.error_message, None, call.latency_ms)
    if outcome is not None:
        parts.append(Text(f"{outcome[0]}: {outcome[1]}", style="bold red"))
        return Group(*parts)
    status = http_view.status_text(call)
    parts.append(Text(f"response: {status}", style="bold red" if http_view.failed_status(call) else "bold green"))
    parts += [Text(pretty(http_view.headers(call.output))), Text("response body:", style="bold"), Text(pretty(http_view.response_body(call)))]
    return Group(*parts)


def call_detail(call: CallInfo, waited_ms: float | None = None, calls: list[CallInfo] = ()) -> Any:
    if call.kind == http_view.HTTP:
        return http_detail(call, list(calls))
    latency = "never returned" if call.latency_ms is None else f"{call.latency_ms:.1f} ms"
    tokens = tokens_text(call)
    where = f"node={call.node} step={call.step}" if not call.ns else f"in subgraph {call_place(call.node, call.ns)} (its step {call.step})"
    head = f"{call.kind} {call.name}  {where}  {latency}{'  streamed' if call.streamed else ''}{'  ' + tokens if tokens else ''}"
    parts = [Text(head, style="bold")]
    if call.kind == "model" and isinstance(call.inputs, dict):
        from graphtape.tui.widgets.transcript import render_message

        msgs = call.inputs.get("messages") or []
        parts.append(Text(f"input: {plural(len(msgs), 'message')}", style="bold"))
        parts.extend(render_message(m) for m in msgs if isinstance(m, dict))
        if call.inputs.get("tools"):
            parts.append(Text("tools sent: " + ", ".join(str((t.get("function") or t).get("name")) for t in call.inputs["tools"] if isinstance(t, dict)), style="yellow"))
        if call.output is not None:
            parts.append(Text("output:", style="bold"))
            parts.append(render_message(call.output) if isinstance(call.output, dict) else Text(pretty(call.output)))
    else:
        parts.append(Text("input:", style="bold"))
        parts.append(Text(pretty(call.inputs)))
        parts.append(Text("output:", style="bold"))
        parts.append(Text(pretty(call.output)))
    outcome = call_outcome(call.error_type, call.error_message, waited_ms, call.latency_ms)
    if outcome is not None:
        parts.append(Text(f"{outcome[0]}: {outcome[1]}", style="bold yellow" if outcome[0] == "abandoned" else "bold red"))
        if call.traceback:
            parts.append(Text(f"  at {frame_text(raised_at(call.traceback))}", style="bold"))
        parts.extend(Text(line, style="red") for line in traceback_lines(call.traceback, 0, 10_000, full=True))
    return Group(*parts)


class CallsPanel(VerticalScroll):
    """Calls of the step; the one picked in the list is shown in full below it."""

    class Picked(Message):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def compose(self):
        yield OptionList(id="call-list")
        yield Static(id="call-detail")

    def show_calls(self, calls: list[CallInfo], tasks: list[Any] = (), ns: str = "") -> None:
        """``calls`` of a step of namespace ``ns``: those made in its subgraphs name the subgraph too."""
        self.calls = calls
        self.waits = node_waits(calls, list(tasks))
        options = self.query_one("#call-list", OptionList)
        options.clear_options()
        detail = self.query_one("#call-detail", Static)
        if not calls:
            options.add_option(Option(Text("No tool, model or HTTP calls in this step.", style="dim"), disabled=True))
            detail.update("")
            return
        for i, c in enumerate(calls):
            ms = "      —  " if c.latency_ms is None else f"{c.latency_ms:>6.0f} ms"  # — : it never returned
            if c.kind == http_view.HTTP:
                options.add_option(Option(_http_label(c, calls, ms), id=str(i)))
                continue
            label = Text(f"{c.kind:<5} {c.name:<28} {call_place(c.node, c.ns, ns):<10} {ms}  ")
            if c.total_tokens is not None or c.input_tokens is not None:
                label.append(f"{c.input_tokens or 0}→{c.output_tokens or 0} tok  ", style="cyan")
            waited = self.waits.get(c.call_id)
            outcome = call_outcome(c.error_type, c.error_message, waited, c.latency_ms)
            if outcome is None:
                label.append(short(c.output, 50), style="dim")
            elif outcome[0] == "abandoned":
                label.append(f"gave up after {waited:.0f} ms" if waited is not None else "abandoned by its node", style="yellow")
            else:
                label.append(c.error_type or "", style="red")
            options.add_option(Option(label, id=str(i)))
        options.highlighted = 0
        detail.update(call_detail(calls[0], self.waits.get(calls[0].call_id), calls))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        if event.option_id is not None and getattr(self, "calls", None):
            call = self.calls[int(event.option_id)]
            self.query_one("#call-detail", Static).update(call_detail(call, self.waits.get(call.call_id), self.calls))


def _http_label(call: CallInfo, calls: list[CallInfo], ms: str) -> Text:
    """One line for an HTTP request: method and URL, node, timing, status; ``↳`` under its call."""
    nested = http_view.parent_label(call, calls) is not None
    label = Text(f"{'↳ http' if nested else 'http '} {call.name:<28} {call.node or '':<10} {ms}  ")
    outcome = call_outcome(call.error_type, call.error_message, None, call.latency_ms)
    if outcome is not None:
        label.append(call.error_type or "", style="red")
    else:
        label.append(http_view.status_text(call), style="red" if http_view.failed_status(call) else "green")
    return label


class SubgraphList(OptionList):
    """Subgraph namespaces run by this step's tasks; choosing one opens its steps."""

    class Opened(Message):
        def __init__(self, ns: str) -> None:
            super().__init__()
            self.ns = ns

    def show_namespaces(self, entries: list[tuple[str, str]]) -> None:
        self.clear_options()
        if not entries:
            self.add_option(Option(Text("No subgraph ran in this step.", style="dim"), disabled=True))
            return
        for ns, label in entries:
            self.add_option(Option(Text(printable(label)), id=ns))
        self.highlighted = 0

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option_id is not None:
            self.post_message(self.Opened(event.option_id))
