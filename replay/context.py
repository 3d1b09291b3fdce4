"""The recorded run's Runtime context, rebuilt for a replay.

A graph built with ``context_schema`` reads ``runtime.context`` in its nodes and
routers; a replay without it fails where the recording did not. The recording
keeps the context as plain data; it is rebuilt with the graph's own
``context_schema`` (a dataclass or pydantic model the user's code declares), never
with a type named in the recording.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from graphtape.recorder import GraphtapeError

_TYPE_KEY = "__type__"


def recorded_context(graph: Any, plain: Any) -> Any:
    """The context to hand the replayed graph: ``plain`` built as its ``context_schema``.

    A schema that is a plain mapping type (a ``TypedDict``) takes the fields as a
    dict; no schema, or a recorded context that is not a mapping, is passed as it is.
    """
    if plain is None:
        return None
    fields = {k: v for k, v in plain.items() if k != _TYPE_KEY} if isinstance(plain, Mapping) else None
    schema = getattr(graph, "context_schema", None)
    if fields is None or not isinstance(schema, type):
        return fields if fields is not None else plain
    if not (dataclasses.is_dataclass(schema) or hasattr(schema, "model_validate")):
        return fields  # a TypedDict or another mapping schema
    try:
        if hasattr(schema, "model_validate"):
            return schema.model_validate(fields)
        return schema(**fields)
    except Exception as exc:  # noqa: BLE001 - today's schema no longer fits the recording
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise GraphtapeError(f"the recorded run context does not fit the graph's context_schema {schema.__name__}: {first}") from None


def with_runtime(config: dict[str, Any], context: Any, graph: Any) -> dict[str, Any]:
    """``config`` carrying the run's context for LangGraph's ``update_state``.

    ``update_state`` runs the edited node's writers, routers among them, but builds no
    ``Runtime``: a router that takes ``runtime`` fails there ("Missing required config
    key"). A run builds its Runtime into the config under this key; the same is done here.
    """
    if context is None:
        return config
    try:
        from langgraph._internal._constants import CONFIG_KEY_RUNTIME
        from langgraph.runtime import Runtime
    except ImportError:  # another LangGraph layout: update_state goes on without a context
        return config
    runtime = Runtime(context=context, store=getattr(graph, "store", None))
    return {**config, "configurable": {**(config.get("configurable") or {}), CONFIG_KEY_RUNTIME: runtime}}
