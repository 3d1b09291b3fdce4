"""Give restored state values the types today's graph declares for them.

A state key annotated with a Pydantic model or a dataclass (``plan: Plan`` in a
``TypedDict`` state) holds that object while the graph runs. The recording keeps its
fields and its class's name, and reads it back as a dict marked with that name (only a
``register_type``-d class comes back as itself): a replay or a fork resuming mid-run
would hand the next node a dict where it reads ``state["plan"].steps``. The graph's own
schema says what each key holds: a restored value recorded as one of the classes that
key's annotation names (matched by name; nothing is ever imported) is validated back
into that type with pydantic. A value recorded as a plain dict stays a dict, and one
that does not fit (the schema changed since) is left as recorded: the comparison shows
what that changes.

An Enum member is recorded with its class's name too; while a replay runs, a member of
a class the schema names (at any depth: ``list[Stage]``, a model's field) comes back as
that member (``Stage.DONE``, not ``"done"``; ``codec.enums_known``).
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import typing
from collections.abc import Iterator
from typing import Any

from graphtape.recorder.codec import TYPE_KEY
from graphtape.replay.reachable_tools import reachable_tools
from graphtape.recorder.waiting_subgraphs import node_path

_NO_TYPES: dict[str, Any] = {}
_DEPTH = 32  # how deep a restored value is looked into (a model inside lists inside dicts...)


class StateTypes:
    """Per namespace, the adapters of the state keys that hold models (read once, when first asked)."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph
        self._by_graph: dict[str, dict[str, Any]] = {}
        self._tools: dict[str, Any] | None = None
        self._classes: list[tuple[Any, frozenset[str]]] | None = None
        self._returns = ToolReturns()

    def revive(self, ns: str, values: dict[str, Any]) -> None:
        """Turn plain recorded values of model-typed keys in ``values`` (namespace ``ns``) into those
        models, in place, and so the arguments of pending ``Send`` packets to model-typed nodes."""
        path = node_path(ns)
        inputs = self._inputs(path)
        if inputs:
            _revive_sends(values, inputs)
        # Tools' answers are looked for only in a state the recording marked a class in: finding
        # the tools a graph's code reaches walks that code, which most replays need not pay for.
        marked = _holds_marked(values, 0)
        tools = self._tools_by_name() if marked else None
        if tools:
            for value in values.values():
                _revive_artifacts(value, tools, self._returns, 0)
        adapters = self._adapters(path)
        if adapters:
            _revive_keys(values, adapters)
            start = values.get("__start__")
            if isinstance(start, dict):  # the run's input, not applied yet (a replay from the input step)
                values["__start__"] = start = dict(start)
                _revive_keys(start, adapters)
        classes = self._tool_classes() if marked else None
        if classes:  # what a tool returned, kept where no annotation says what it holds
            for key, value in values.items():
                values[key] = _revive_marked(value, classes, 0)

    def revive_edit(self, ns: str, update: dict[str, Any]) -> dict[str, Any]:
        """A fork's edit with the types the state declares: a value of a model-typed key edited
        from the recording's copy (marked with its class: ``fork --set plan.steps=...``) is
        validated into that type, as a restored value is. One that does not fit, or that is not
        marked (a plain dict passed to ``fork``), stays as given."""
        adapters = self._adapters(node_path(ns))
        out = dict(update)
        for key, (adapter, names) in adapters.items():
            value = out.get(key)
            if _recorded_as(value, names, 0):
                try:
                    out[key] = adapter.validate_python(_unmarked(value, 0))
                except Exception:  # noqa: BLE001 - LangGraph hands it on as given, as it would without graphtape
                    continue
        return out

    def enums(self) -> set[type]:
        """The Enum classes the state schemas of the graph and its subgraphs name, at any depth
        (``Optional[Stage]``, ``list[Stage]``, a model's field): a restored member of one comes
        back as that member, not as its bare value (``codec.enums_known``)."""
        found: set[type] = set()
        for graph in (self.graph, *(g for _, g in _subgraphs(self.graph))):
            for schema in _schemas(graph):
                try:
                    hints = typing.get_type_hints(schema)
                except Exception:  # noqa: BLE001 - an annotation that does not resolve today
                    continue
                for ann in hints.values():
                    _enums_in(ann, found, set(), 0)
        return found

    def _tools_by_name(self) -> dict[str, Any]:
        """The tools of every ``ToolNode`` in the graph and its subgraphs, then those the nodes' own
        code calls (``reachable_tools``), by name: a restored tool message's artifact is typed by
        the return annotation of the tool that made it."""
        if self._tools is None:
            self._tools = {}
            graphs = (self.graph, *(g for _, g in _subgraphs(self.graph)))
            for graph in graphs:
                for node in (getattr(graph, "nodes", None) or {}).values():
                    found = getattr(getattr(node, "bound", None), "tools_by_name", None)
                    if isinstance(found, dict):
                        for name, tool in found.items():
                            self._tools.setdefault(name, tool)
            try:
                for name, tool in reachable_tools(graphs[0], graphs[1:]).items():
                    self._tools.setdefault(name, tool)
            except Exception:  # noqa: BLE001 - code that cannot be looked into: its tools' answers stay as recorded
                pass
        return self._tools

    def _tool_classes(self) -> list[tuple[Any, frozenset[str]]]:
        """A validator for each model or dataclass a known tool's return annotation names (its
        artifact's, for a ``content_and_artifact`` tool), with the names a recording gives it: a
        tool's answer a node put under a key annotated ``list`` or ``Any`` (or a functional
        entrypoint's saved value) is that class again."""
        if self._classes is None:
            classes: set[type] = set()
            for tool in self._tools_by_name().values():
                ann = _tool_annotation(tool)
                if ann is not None:
                    _models_in(ann, classes, 0)
            self._classes = [found for found in map(_class_adapter, classes) if found is not None]
        return self._classes

    def _adapters(self, path: str) -> dict[str, Any]:
        if path not in self._by_graph:
            graph = self._graph_at(path)
            self._by_graph[path] = _model_keys(graph) if graph is not None else _NO_TYPES
        return self._by_graph[path]

    def _inputs(self, path: str) -> dict[str, Any]:
        key = "inputs:" + path
        if key not in self._by_graph:
            graph = self._graph_at(path)
            self._by_graph[key] = _node_inputs(graph) if graph is not None else _NO_TYPES
        return self._by_graph[key]

    def _graph_at(self, path: str) -> Any:
        return self.graph if not path else dict(_subgraphs(self.graph)).get(path)


def _revive_keys(values: dict[str, Any], adapters: dict[str, tuple[Any, frozenset[str]]]) -> None:
    for key, (adapter, names) in adapters.items():
        value = values.get(key)
        if _recorded_as(value, names, 0):
            try:
                values[key] = adapter.validate_python(_unmarked(value, 0))
            except Exception:  # noqa: BLE001 - a value today's schema does not take stays as recorded
                continue


def _subgraphs(graph: Any) -> Iterator[tuple[str, Any]]:
    try:
        yield from graph.get_subgraphs(recurse=True)
    except Exception:  # noqa: BLE001 - a graph that cannot list them: its subgraphs keep recorded values
        return


def _schemas(graph: Any) -> list[Any]:
    builder = getattr(graph, "builder", None)
    return list(getattr(builder, "schemas", None) or ())


def _model_keys(graph: Any) -> dict[str, tuple[Any, frozenset[str]]]:
    """The graph's state keys whose annotation holds a Pydantic model or a dataclass: an adapter
    each, and the names a recording gives the classes it holds."""
    out: dict[str, Any] = {}
    for schema in _schemas(graph):
        try:
            hints = typing.get_type_hints(schema)
        except Exception:  # noqa: BLE001 - an annotation that does not resolve today: nothing to revive by
            continue
        for key, ann in hints.items():
            if key in out:
                continue
            found = _adapter(ann)
            if found is None and key == _STRUCTURED and _has_type_var(ann, 0):
                # langchain's create_agent annotates it with a TypeVar; the agent's own
                # response_format says what it holds.
                schema = _response_schema(graph)
                found = _adapter(schema) if schema is not None else None
            if found is not None:
                out[key] = found
    return out


_STRUCTURED = "structured_response"  # where langchain's create_agent keeps a response_format's parsed answer


def _has_type_var(ann: Any, depth: int) -> bool:
    if depth > 8:
        return False
    if isinstance(ann, typing.TypeVar):
        return True
    return any(_has_type_var(arg, depth + 1) for arg in typing.get_args(ann))


def _response_schema(graph: Any) -> Any:
    """The schema of a langchain ``create_agent`` graph's ``response_format`` (a model, a dataclass,
    a union of them), or None. The agent keeps no attribute for it: its model node is a function
    that holds the strategy it was built with (``ToolStrategy``, ``ProviderStrategy``,
    ``AutoStrategy``), found among what that function closes over by its public class. Nothing
    is imported: without langchain loaded there is no such agent."""
    module = sys.modules.get("langchain.agents.structured_output")
    kinds = tuple(k for k in (getattr(module, n, None) for n in ("ToolStrategy", "ProviderStrategy", "AutoStrategy")) if isinstance(k, type))
    if not kinds:
        return None
    node = (getattr(getattr(graph, "builder", None), "nodes", None) or {}).get("model")
    runnable = getattr(node, "runnable", None)
    for fn in (getattr(runnable, "func", None), getattr(runnable, "afunc", None)):
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:  # a cell not filled yet
                continue
            if isinstance(value, kinds):
                schema = getattr(value, "schema", None)
                return None if isinstance(schema, dict) else schema  # a JSON schema's answer is a plain dict
    return None


def _adapter(ann: Any) -> tuple[Any, frozenset[str]] | None:
    """A validator for an annotation that holds models or dataclasses, with the names a recording
    gives those classes; None for one that holds none (or that pydantic cannot validate)."""
    classes: set[type] = set()
    _models_in(ann, classes, 0)
    if not classes:
        return None
    try:
        from pydantic import TypeAdapter

        adapter = TypeAdapter(ann)
    except Exception:  # noqa: BLE001 - pydantic cannot build a validator for it
        return None
    names = {f"{c.__module__}.{c.__qualname__}" for c in classes} | {c.__qualname__ for c in classes}
    return adapter, frozenset(names)


def _class_adapter(cls: type) -> tuple[Any, frozenset[str]] | None:
    """A validator for one model or dataclass, with the names a recording gives that class alone."""
    try:
        from pydantic import TypeAdapter

        adapter = TypeAdapter(cls)
    except Exception:  # noqa: BLE001 - pydantic cannot build a validator for it
        return None
    return adapter, frozenset({f"{cls.__module__}.{cls.__qualname__}", cls.__qualname__})


def _node_inputs(graph: Any) -> dict[str, tuple[Any, frozenset[str]]]:
    """The graph's nodes whose ``input_schema`` is a model or a dataclass (a ``Send`` packet's argument
    is one): a validator each, as for state keys."""
    out: dict[str, Any] = {}
    for name, spec in (getattr(getattr(graph, "builder", None), "nodes", None) or {}).items():
        schema = getattr(spec, "input_schema", None)
        found = _adapter(schema) if isinstance(schema, type) else None
        if found is not None:
            out[name] = found
    return out


def _revive_sends(values: dict[str, Any], inputs: dict[str, tuple[Any, frozenset[str]]]) -> None:
    """Pending ``Send`` packets whose argument the recording kept as a marked dict, for a node whose
    input is a model: that model again, as the run sent it."""
    from langgraph.types import Send

    sends = values.get(_TASKS)
    if not isinstance(sends, list):
        return
    out = []
    for packet in sends:
        found = inputs.get(packet.node) if isinstance(packet, Send) else None
        if found is not None and _recorded_as(packet.arg, found[1], 0):
            try:
                packet = Send(packet.node, found[0].validate_python(_unmarked(packet.arg, 0)))
            except Exception:  # noqa: BLE001 - an argument today's schema does not take stays as recorded
                pass
        out.append(packet)
    values[_TASKS] = out


_TASKS = "__pregel_tasks"


def _revive_artifacts(value: Any, tools: dict[str, Any], returns: ToolReturns, depth: int) -> None:
    """Tool messages in a restored value (a message list, a ``Send``'s state) whose artifact the
    recording kept as a marked dict: given the type their tool's return annotation names, in place."""
    from langchain_core.messages import BaseMessage, ToolMessage
    from langgraph.types import Send

    if depth > _DEPTH:
        return
    if isinstance(value, ToolMessage):
        tool = tools.get(value.name) if value.name else None
        if tool is not None and isinstance(value.artifact, (dict, list)):
            value.artifact = returns.revive(tool, value.artifact)
    elif isinstance(value, BaseMessage):
        return
    elif isinstance(value, Send):
        _revive_artifacts(value.arg, tools, returns, depth + 1)
    elif isinstance(value, dict):
        for v in value.values():
            _revive_artifacts(v, tools, returns, depth + 1)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _revive_artifacts(v, tools, returns, depth + 1)


def _holds_marked(value: Any, depth: int) -> bool:
    """Whether ``value`` holds a dict the recording marked with a class name, where
    ``_revive_marked`` and ``_revive_artifacts`` look: in containers, tool messages' artifacts and
    pending ``Send`` packets."""
    from langchain_core.messages import ToolMessage
    from langgraph.types import Send

    if depth > _DEPTH:
        return False
    if isinstance(value, dict):
        return TYPE_KEY in value or any(_holds_marked(v, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_marked(v, depth + 1) for v in value)
    if isinstance(value, ToolMessage):
        return _holds_marked(value.artifact, depth + 1)
    if isinstance(value, Send):
        return _holds_marked(value.arg, depth + 1)
    return False


def _revive_marked(value: Any, classes: list[tuple[Any, frozenset[str]]], depth: int) -> Any:
    """``value`` with each dict the recording marked as one of ``classes`` validated into it (the
    outermost such dict: it takes what it holds along); containers are changed in place."""
    from langchain_core.messages import ToolMessage
    from langgraph.types import Send

    if depth > _DEPTH:
        return value
    if isinstance(value, dict):
        name = value.get(TYPE_KEY)
        if isinstance(name, str):
            for adapter, names in classes:
                if name in names or _qualname_tail(name, names):
                    try:
                        return adapter.validate_python(_unmarked(value, 0))
                    except Exception:  # noqa: BLE001 - a value today's class does not take stays as recorded
                        return value
        for k, v in value.items():
            value[k] = _revive_marked(v, classes, depth + 1)
    elif isinstance(value, list):
        value[:] = [_revive_marked(v, classes, depth + 1) for v in value]
    elif isinstance(value, tuple) and not hasattr(value, "_fields"):
        value = tuple(_revive_marked(v, classes, depth + 1) for v in value)
    elif isinstance(value, ToolMessage):
        if isinstance(value.artifact, (dict, list)):
            value.artifact = _revive_marked(value.artifact, classes, depth + 1)
    elif isinstance(value, Send):
        value.arg = _revive_marked(value.arg, classes, depth + 1)
    return value


def _models_in(ann: Any, found: set[type], depth: int) -> None:
    """The Pydantic models and dataclasses an annotation holds, with those their fields hold."""
    if depth > 8:
        return
    if isinstance(ann, type):
        if ann in found:
            return
        fields: dict[str, Any] = {}
        if dataclasses.is_dataclass(ann):
            found.add(ann)
            try:
                fields = typing.get_type_hints(ann)
            except Exception:  # noqa: BLE001
                fields = {}
        elif _is_model(ann):
            found.add(ann)
            fields = {k: f.annotation for k, f in ann.model_fields.items()}
        for sub in fields.values():
            _models_in(sub, found, depth + 1)
        return
    for arg in typing.get_args(ann):
        _models_in(arg, found, depth + 1)


def _enums_in(ann: Any, found: set[type], walked: set[type], depth: int) -> None:
    """The Enum classes an annotation names, with those the models and dataclasses in it name."""
    if depth > 8:
        return
    if isinstance(ann, type):
        if issubclass(ann, enum.Enum):
            found.add(ann)
            return
        if ann in walked:
            return
        walked.add(ann)
        fields: dict[str, Any] = {}
        try:
            if dataclasses.is_dataclass(ann):
                fields = typing.get_type_hints(ann)
            elif _is_model(ann):
                fields = {k: f.annotation for k, f in ann.model_fields.items()}
        except Exception:  # noqa: BLE001 - fields that do not resolve today
            fields = {}
        for sub in fields.values():
            _enums_in(sub, found, walked, depth + 1)
        return
    for arg in typing.get_args(ann):
        _enums_in(arg, found, walked, depth + 1)


def _is_model(cls: type) -> bool:
    from langchain_core.messages import BaseMessage
    from pydantic import BaseModel

    return issubclass(cls, BaseModel) and not issubclass(cls, BaseMessage)  # messages are decoded as themselves


def _recorded_as(value: Any, names: frozenset[str], depth: int) -> bool:
    """Whether the value holds an object the recording marked with one of ``names``."""
    if depth > _DEPTH:
        return False
    if isinstance(value, dict):
        name = value.get(TYPE_KEY)
        if isinstance(name, str) and (name in names or _qualname_tail(name, names)):
            return True
        return any(_recorded_as(v, names, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_recorded_as(v, names, depth + 1) for v in value)
    return False


def _qualname_tail(name: str, names: frozenset[str]) -> bool:
    """``__main__.Outer.Plan`` recorded by a script, ``agent.Outer.Plan`` imported today: the same class path."""
    parts = name.split(".")
    return any(".".join(parts[i:]) in names for i in range(1, len(parts)))


def _unmarked(value: Any, depth: int) -> Any:
    """The value without the recording's class markers (a model that forbids extra keys would refuse them)."""
    if depth > _DEPTH:
        return value
    if isinstance(value, dict):
        return {k: _unmarked(v, depth + 1) for k, v in value.items() if k != TYPE_KEY}
    if isinstance(value, list):
        return [_unmarked(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(_unmarked(v, depth + 1) for v in value)
    return value


class ToolReturns:
    """What each tool's function says it returns, to give its recorded answer that type again.

    A tool returning a Pydantic model or a dataclass (or one as the artifact of a
    ``content_and_artifact`` tool) is recorded as a dict marked with the class's name: a
    replay answering it from the recording would hand the caller a dict where it reads
    ``receipt.cents``. The tool's own return annotation says what it holds; as for state keys,
    a recorded value marked as one of the classes it names is validated back into them.
    """

    def __init__(self) -> None:
        self._by_tool: dict[int, tuple[Any, tuple[Any, frozenset[str]] | None]] = {}

    def revive(self, tool: Any, value: Any) -> Any:
        """``value`` (a ``content_and_artifact`` tool's artifact, another tool's whole answer) as the tool made it."""
        hit = self._by_tool.get(id(tool))
        if hit is None or hit[0] is not tool:
            hit = self._by_tool[id(tool)] = (tool, _tool_return(tool))
        found = hit[1]
        if found is None or not _recorded_as(value, found[1], 0):
            return value
        try:
            return found[0].validate_python(_unmarked(value, 0))
        except Exception:  # noqa: BLE001 - a value today's annotation does not take stays as recorded
            return value


def _tool_return(tool: Any) -> tuple[Any, frozenset[str]] | None:
    """The validator of a tool's return annotation (for a ``content_and_artifact`` tool, of its
    artifact's) and the names a recording gives the classes in it; None where there are none."""
    ann = _tool_annotation(tool)
    return _adapter(ann) if ann is not None else None


def _tool_annotation(tool: Any) -> Any:
    """What a tool's function says it returns (for a ``content_and_artifact`` tool, its artifact); None if unsaid."""
    ann: Any = None
    for fn in (getattr(tool, "func", None), getattr(tool, "coroutine", None), getattr(type(tool), "_run", None)):
        try:
            ann = typing.get_type_hints(fn).get("return") if fn is not None else None
        except Exception:  # noqa: BLE001 - an annotation that does not resolve today: nothing to revive by
            ann = None
        if ann is not None:
            break
    if ann is not None and getattr(tool, "response_format", None) == "content_and_artifact":
        args = typing.get_args(ann)
        ann = args[1] if typing.get_origin(ann) is tuple and len(args) == 2 else None
    return ann
