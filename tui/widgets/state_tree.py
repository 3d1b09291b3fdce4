"""The state at a step as a collapsible tree, loaded lazily as nodes open."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode, UnknownNodeID

from graphtape.recorder.deferred import DeferredList, is_list
from graphtape.recorder.errors import GraphtapeError
from graphtape.tui.render import printable
from graphtape.tui.data import fold, is_message, short

_CHILD_LIMIT = 500


class StateTree(Tree):
    """Top-level keys first; children are added only when a node is expanded.

    Keys written in the selected step are highlighted. Each node's ``data``
    holds ``(path, value)`` so the screen can copy the selected value. A long
    list read deferred from the store decodes the items it shows in a worker
    when first opened ("loading…" meanwhile), never on the UI thread.
    """

    def __init__(self, **kwargs) -> None:
        super().__init__("state", **kwargs)
        self.show_root = False
        self.guide_depth = 3

    def show_state(self, state: dict[str, Any], changed: set[str], graph_input: Any = None) -> None:
        """Replace the tree with ``state``; ``changed`` keys are marked.

        An empty state with a ``graph_input`` is a run's step -1: the input is
        shown instead, under a line saying so.
        """
        kept = self._cursor_key()
        self.clear()
        self.root.data = ([], state)
        if not state and graph_input is not None:
            self.root.add_leaf(Text("no state yet: step -1 holds the graph's input; the first nodes run in step 0", style="dim"))
            self._add(self.root, ["input"], self._label("input", graph_input), graph_input)
            self.root.expand_all()
            return
        for key, value in state.items():
            label = self._label(str(key), value)
            if key in changed:
                label.stylize("bold green", 0, len(str(key)))
                label = Text("● ", style="bold green") + label
            else:
                label = Text("  ") + label
            self._add(self.root, [key], label, value)
        self.root.expand()
        if kept is not None or self.has_focus:
            # Stepping keeps the cursor on the same key, so v, c and Enter keep meaning the same value.
            keys = list(state)
            self.cursor_line = keys.index(kept) if kept in keys else 0

    def _cursor_key(self) -> Any:
        """The top-level key under the cursor, if the cursor is on one."""
        node = self.cursor_node if self.cursor_line >= 0 else None
        path = node.data[0] if node is not None and node.data else None
        return path[0] if path else None

    def on_focus(self) -> None:
        # Focus arrives with the cursor on a line, never on nothing (where Down seems dead and
        # v would show the whole state).
        if self.cursor_line < 0 and self.root.children:
            self.cursor_line = 0

    def _label(self, key: str, value: Any) -> Text:
        text = Text(printable(f"{key}"), style="bold")
        text.append(" " if is_message(value) else ": ")  # a message's summary starts with its role
        if isinstance(value, dict) or is_list(value):
            text.append(short(value, 70), style="dim")
        elif isinstance(value, str):
            text.append(fold(repr(value)), style="green")
        else:
            text.append(repr(value), style="cyan")
        return text

    def _add(self, parent: TreeNode, path: list, label: Text, value: Any) -> None:
        if (isinstance(value, dict) or is_list(value)) and len(value):
            parent.add(label, data=(path, value), allow_expand=True)
        else:
            parent.add_leaf(label, data=(path, value))

    def on_tree_node_expanded(self, event: Tree.NodeExpanded) -> None:
        node = event.node
        if node.children or node.data is None:
            return
        path, value = node.data
        if isinstance(value, DeferredList) and not value.loaded(0, min(len(value), _CHILD_LIMIT)):
            node.add_leaf(Text("loading…", style="dim"))
            self.run_worker(lambda: self._load_children(node, value), thread=True, group="tree-items")
            return
        self._add_children(node)

    def _load_children(self, node: TreeNode, value: DeferredList) -> None:
        try:
            value.load(0, min(len(value), _CHILD_LIMIT))
        except GraphtapeError as exc:
            self.app.call_from_thread(self._show_failure, node, str(exc))
            return
        self.app.call_from_thread(self._add_children, node)

    def _show_failure(self, node: TreeNode, error: str) -> None:
        node.remove_children()
        node.add_leaf(Text(printable(f"cannot read these items: {error}"), style="bold red"))

    def _add_children(self, node: TreeNode) -> None:
        try:
            if self.get_node_by_id(node.id) is not node:
                return
        except UnknownNodeID:
            return  # the tree was refilled (another step) while the items loaded
        node.remove_children()
        path, value = node.data
        items = list(value.items()) if isinstance(value, dict) else list(enumerate(value[:_CHILD_LIMIT]))
        for k, v in items[:_CHILD_LIMIT]:
            name = f"[{k}]" if isinstance(k, int) else str(k)
            self._add(node, [*path, k], self._label(name, v), v)
        if len(value) > _CHILD_LIMIT:
            node.add_leaf(Text(f"… {len(value) - _CHILD_LIMIT} more", style="dim"))

    def selected_value(self) -> tuple[list, Any] | None:
        """The (path, value) under the cursor, if any."""
        node = self.cursor_node
        return None if node is None or node.data is None else node.data
