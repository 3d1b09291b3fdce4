"""A chat transcript of a messages list: role, content, tool calls, tool results."""

from __future__ import annotations

import orjson
from rich.console import Group
from rich.panel import Panel
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from graphtape.tui.data import content_text
from graphtape.tui.render import printable

_ROLE_STYLE = {"human": "bold cyan", "ai": "bold magenta", "tool": "bold yellow", "system": "bold blue"}


def render_message(m: dict) -> Panel:
    role = m.get("type", "?")
    body = Text(content_text(m.get("content")) or "", overflow="fold")
    parts = [body]
    for call in m.get("tool_calls") or []:
        args = orjson.dumps(call.get("args", {})).decode()
        parts.append(Text(printable(f"→ call {call.get('name')}({args})  id={call.get('id', '')}"), style="yellow"))
    title = role
    if role == "tool":
        title = f"tool result: {m.get('name') or ''} (call {m.get('tool_call_id', '')})"
        if m.get("status") == "error":
            body.stylize("red")
    return Panel(Group(*parts), title=Text(printable(title)), title_align="left", border_style=_ROLE_STYLE.get(role, "white"))


class Transcript(VerticalScroll):
    """Shows the last messages of a transcript (the worker hands over only those).

    Drawn only while on screen: stepping with the tab hidden just keeps the
    latest messages, so each step does not lay out 200 panels nobody sees.
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._pending: tuple[str | None, list[dict], int] | None = None

    def compose(self):
        yield Static(id="transcript-body")

    def show_messages(self, key: str | None, latest: list[dict], total: int) -> None:
        """Show the ``latest`` messages of the ``total`` in state key ``key`` (``None``: the state has no transcript)."""
        self._pending = (key, latest, total)
        if self.is_on_screen:
            self._draw()

    def on_show(self) -> None:
        if self._pending is not None:
            self._draw()

    def _draw(self) -> None:
        if self._pending is None:
            return
        key, shown, total = self._pending
        self._pending = None
        body = self.query_one("#transcript-body", Static)
        if not key:
            body.update(Text("This step's state holds no messages list.", style="dim"))
            return
        head = Text(f"{key}: {total} messages", style="bold")
        if total > len(shown):
            head.append(f" (showing the last {len(shown)})", style="dim")
        body.update(Group(head, *(render_message(m) for m in shown)))
        # A transcript opens at its end, like a chat: once the new text is laid out
        # (its wrapped height known), not before, or the end lands short of the last box.
        self.call_after_refresh(self.scroll_end, animate=False, immediate=True)
