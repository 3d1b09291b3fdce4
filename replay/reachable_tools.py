"""The tools a graph's nodes can call, found in the code of the nodes themselves.

A tool called outside a ``ToolNode`` (a node or a functional ``@task`` running
``my_tool.invoke(...)``) leaves its answer in the state: a tool message whose artifact is a
dataclass, a returned Pydantic model. The recording keeps those as dicts marked with a class
name, and a replay resumed mid-run must hand them back as the classes the run had, without
importing anything the recording names. The tool's own return annotation names those classes;
the tool is a live object the user's node reaches: through its function's closure, the globals
its code names (``my_tool``, ``tools_module.my_tool``), its defaults, and the tasks, runnables and
functions those lead to. Only those are walked, within a budget: nothing is called or imported.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Iterable
from typing import Any

_BUDGET = 4000  # objects looked at per graph: a node's code reaches a bounded neighbourhood
_DEPTH = 8  # functions calling functions calling... a tool


def reachable_tools(graph: Any, subgraphs: Iterable[Any]) -> dict[str, Any]:
    """The ``BaseTool`` objects the nodes of ``graph`` and ``subgraphs`` reach in their code, by name
    (the first found for a name)."""
    from langchain_core.tools import BaseTool

    found: dict[str, Any] = {}
    seen: set[int] = set()
    todo: list[tuple[Any, int]] = []
    for g in (graph, *subgraphs):
        todo.extend((node, 0) for node in (getattr(g, "nodes", None) or {}).values())
    while todo and len(seen) < _BUDGET:
        obj, depth = todo.pop()
        if id(obj) in seen or depth > _DEPTH:
            continue
        seen.add(id(obj))
        if isinstance(obj, BaseTool):
            found.setdefault(obj.name, obj)
            continue
        todo.extend((nxt, depth + 1) for nxt in _leads(obj))
    return found


def _leads(obj: Any) -> list[Any]:
    """What ``obj`` (a function, a task, a runnable, a graph node) hands on to: never a module's
    whole contents, never an arbitrary object's attributes."""
    if isinstance(obj, types.MethodType):
        # ``self.courier.invoke(...)`` in a method node: the attributes of ``self`` its code names
        return [obj.__func__, *_named_attributes(obj.__self__, _names(obj.__func__.__code__, 0))]
    if isinstance(obj, functools.partial):
        return [obj.func, *obj.args, *obj.keywords.values()]
    if inspect.isfunction(obj):
        return _function_leads(obj)
    if isinstance(obj, (list, tuple)):
        return list(obj)
    if isinstance(obj, dict):
        return list(obj.values())
    if isinstance(obj, type):
        return []
    if not _is_runnable_like(obj):
        call = inspect.getattr_static(type(obj), "__call__", None)
        # A node that is an object with ``__call__``: that method, and what of the object it names.
        return [call, *_named_attributes(obj, _names(call.__code__, 0))] if inspect.isfunction(call) else []
    # A graph node (bound), a task (func), langgraph's RunnableCallable (func, afunc), a sequence
    # (steps), a binding (bound): the attributes those classes keep what they run in.
    out: list[Any] = []
    for attr in ("bound", "func", "afunc", "steps"):
        try:
            value = getattr(obj, attr, None)
        except Exception:  # noqa: BLE001 - an attribute that fails to read: nothing to follow
            continue
        if value is not None:
            out.append(value)
    return out


def _is_runnable_like(obj: Any) -> bool:
    """A LangChain runnable, a LangGraph node or a functional task: the classes whose
    ``bound``/``func``/``steps`` hold the user's code."""
    from langchain_core.runnables import Runnable

    if isinstance(obj, Runnable):
        return True
    module = type(obj).__module__ or ""
    return module.startswith(("langgraph.", "langchain_core.", "langchain."))


def _function_leads(fn: types.FunctionType) -> list[Any]:
    out: list[Any] = []
    for cell in fn.__closure__ or ():
        try:
            out.append(cell.cell_contents)
        except ValueError:  # a cell not filled yet
            continue
    out.extend(fn.__defaults__ or ())
    out.extend((fn.__kwdefaults__ or {}).values())
    names = _names(fn.__code__, 0)
    g = fn.__globals__
    reached = [*out, *(v for v in (g.get(n) for n in names) if v is not None)]
    out = [v for v in reached if not isinstance(v, types.ModuleType)]
    for value in reached:
        # ``tools.ship.invoke(...)``, ``deps.ship.invoke(...)``: the attributes the code names
        out.extend(_named_attributes(value, names))
    return out


def _named_attributes(obj: Any, names: set[str]) -> list[Any]:
    """The values ``obj`` (a module, or a plain object of the user's: a class holding its tools)
    keeps under ``names``, read from its ``__dict__``: no property or ``__getattr__`` is run."""
    if isinstance(obj, (type, list, tuple, dict)) or inspect.isfunction(obj) or (not isinstance(obj, types.ModuleType) and _is_runnable_like(obj)):
        return []
    try:
        kept = object.__getattribute__(obj, "__dict__")
    except Exception:  # noqa: BLE001 - a slotted object, or one that hides its attributes
        return []
    if not isinstance(kept, dict):
        return []
    return [v for v in (kept.get(n) for n in names) if v is not None and not isinstance(v, types.ModuleType)]


def _names(code: types.CodeType, depth: int) -> set[str]:
    """The global and attribute names a function's code (and the functions defined in it) use."""
    names = set(code.co_names)
    if depth < 4:
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                names |= _names(const, depth + 1)
    return names
