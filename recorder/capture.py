"""LangChain callback handler: nodes, routers, tool calls and model calls.

Every LangChain runnable reports through callbacks, so this captures any
provider's chat model and any LangChain tool (plain functions become tools
when a ToolNode or ``@tool`` wraps them). LangGraph tags each run with
``langgraph_checkpoint_ns`` (``...|node:task_id``) and ``langgraph_step``,
which attributes a call to its task even across parallel branches.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import time
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langgraph.errors import GraphInterrupt

from graphtape.recorder.call_scope import current_call, enclosing_calls, enter_call, leave_call
from graphtape.recorder.error_fields import error_fields
from graphtape.recorder.graph_info import START
from graphtape.recorder.records import SENT
from graphtape.recorder.session import RunSession, call_site, push_depth
from graphtape.recorder.tool_sends import SendWatch, task_writes
from graphtape.recorder.tracebacks import frames_of

_HIDDEN = "langsmith:hidden"
_SENT_IDS = (f"sent-{secrets.token_hex(6)}-{n:012d}" for n in itertools.count(1))  # random per process, counted within it
ABANDONED = "Unfinished"  # a call its node stopped waiting for (as a call still running when its run ended is kept)
CANCELLED = "the call was cancelled: its caller stopped waiting for it"


class CaptureHandler(BaseCallbackHandler):
    """Feeds one run's callbacks into its :class:`RunSession`; never raises (unless strict)."""

    run_inline = True
    raise_error = False

    def __init__(self, session: RunSession) -> None:
        self.session = session
        self.raise_error = session.strict
        # run id (its integer) -> (ns, task_id) for node runs; router runs -> (ns, task_id, name)
        self._nodes: dict[int, tuple[str, str]] = {}
        self._routers: dict[int, tuple[str, str, str]] = {}
        self._sends = SendWatch()  # what each tool call writes to the state itself

    # -- helpers ---------------------------------------------------------------
    def _guard(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001 - recording must not break the graph
            self.session.fault(f"capture: {type(exc).__name__}: {exc}")
            if self.session.strict:
                raise

    # -- chains: nodes and routers -------------------------------------------
    # Runs are kept by their id's integer: a UUID hashes through Python code, and these
    # maps are asked on every chain run's start and end (several per superstep).
    def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, tags: list[str] | None = None, metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not metadata or "langgraph_checkpoint_ns" not in metadata:
            return
        try:
            self._chain_start(run_id, parent_run_id, tags or (), metadata, kwargs.get("name"))
        except Exception as exc:  # noqa: BLE001 - recording must not break the graph
            self.session.fault(f"capture: {type(exc).__name__}: {exc}")
            if self.session.strict:
                raise

    def _chain_start(self, run_id: UUID, parent_run_id: UUID | None, tags: Any, metadata: dict, name: str | None) -> None:
        hidden = _HIDDEN in tags
        if hidden and metadata.get("langgraph_node", START) != START:
            return  # LangGraph's own runnables (channel writes) in a node: nothing to keep, and most chain runs
        ns, node, task_id, step = call_site(metadata)
        if task_id is None or node is None:
            return
        if hidden:
            # START's task is hidden, but a router on START (a conditional entry point, as a
            # swarm's active-agent router) decides the run's first route: keep that one.
            router = self.session.graph.for_ns(ns).router_for_run(START, name) if node == START else None
            if router is not None:
                self._routers[run_id.int] = (ns, task_id, router)
            return
        parent_node = self._nodes.get(parent_run_id.int) if parent_run_id else None
        pushed = push_depth(metadata.get("langgraph_path")) > 0
        if (parent_node is None or pushed) and name == node and (pushed or any(t.startswith("graph:step:") for t in tags)):
            self._nodes[run_id.int] = (ns, task_id)
            self.session.on_node_start(ns, task_id, node, step)
        elif parent_node is not None and parent_node == (ns, task_id):
            router = self.session.graph.for_ns(ns).router_for_run(node, name)
            if router is not None:
                self._routers[run_id.int] = (ns, task_id, router)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if not (self._nodes or self._routers):
            return
        key = run_id.int
        node = self._nodes.pop(key, None)
        if node is not None:
            self._sends.task_ended(node[1])
            self._guard(self.session.on_node_end, node[0], node[1], outputs, None)
            return
        router = self._routers.pop(key, None)
        if router is not None:
            self._guard(self.session.on_router_end, router[0], router[1], router[2], outputs)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        key = run_id.int
        node = self._nodes.pop(key, None)
        if node is not None:
            self._sends.task_ended(node[1])
            self._guard(self.session.on_node_end, node[0], node[1], None, error)
        else:
            self._routers.pop(key, None)

    # -- tools -----------------------------------------------------------------
    def on_tool_start(self, serialized: dict[str, Any] | None, input_str: str, *, run_id: UUID, parent_run_id: UUID | None = None, tags: list[str] | None = None, metadata: dict[str, Any] | None = None, inputs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        name = kwargs.get("name") or (serialized or {}).get("name") or "tool"
        self._guard(self._begin, run_id, parent_run_id, metadata, "tool", name, inputs if inputs is not None else input_str)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._guard(self._sent, run_id)
        self._guard(self._end, run_id, _answer(output))

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._guard(self.session.learn_from_error, error)
        if isinstance(error, GraphInterrupt):  # LangGraph drops what the task wrote before it asked
            self._guard(self._sent, run_id, False)
        else:
            self._guard(self._sent, run_id)
        self._guard(self._end, run_id, _failure(error))

    def _sent(self, run_id: UUID, keep: bool = True) -> None:
        """Record what the tool call wrote to the state itself (``recorder.tool_sends``), as calls of it."""
        rec = self.session.call_record(str(run_id))
        writes = rec.pop("writes", None) if rec is not None else None
        if writes is None:
            return
        made = self._sends.end(str(run_id), writes)
        if not keep:
            return
        for channel, value in made:
            child = next(_SENT_IDS)
            started = time.time()
            self.session.begin_call(child, {"kind": SENT, "name": channel, "ns": rec["ns"], "node": rec["node"], "task_id": rec["task_id"], "step": rec["step"], "inputs": {}, "started_at": started, "perf0": 0.0, "parent_call_id": str(run_id)})
            self.session.end_call(child, output=_as_sent(value), latency_ms=0.0)

    # -- models ----------------------------------------------------------------
    def on_chat_model_start(self, serialized: dict[str, Any] | None, messages: list[list[Any]], *, run_id: UUID, parent_run_id: UUID | None = None, tags: list[str] | None = None, metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        params = dict(kwargs.get("invocation_params") or {})
        inputs = {"messages": messages[0] if len(messages) == 1 else messages}
        tools = params.pop("tools", None)
        if tools:
            inputs["tools"] = tools
        params.pop("_type", None)
        if params:
            inputs["params"] = params
        self._guard(self._begin, run_id, parent_run_id, metadata, "model", _model_name(serialized, kwargs, metadata), inputs)

    def on_llm_start(self, serialized: dict[str, Any] | None, prompts: list[str], *, run_id: UUID, parent_run_id: UUID | None = None, tags: list[str] | None = None, metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._guard(self._begin, run_id, parent_run_id, metadata, "model", _model_name(serialized, kwargs, metadata), {"prompts": prompts})

    def on_llm_new_token(self, token: str, *, run_id: UUID, **kwargs: Any) -> None:
        self.session.mark_streamed(str(run_id))

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._guard(self._llm_end, run_id, response)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._guard(self.session.learn_from_error, error)
        self._guard(self._end, run_id, _failure(error))

    def _llm_end(self, run_id: UUID, response: Any) -> None:
        gens = getattr(response, "generations", None) or [[]]
        first = gens[0][0] if gens and gens[0] else None
        output = getattr(first, "message", None) if first is not None else None
        if output is None and first is not None:
            output = getattr(first, "text", None)
        fields = _answer(output)
        usage = getattr(output, "usage_metadata", None) or {}
        if not usage:
            llm_out = getattr(response, "llm_output", None) or {}
            tu = llm_out.get("token_usage") or llm_out.get("usage") or {}
            usage = {
                "input_tokens": tu.get("prompt_tokens", tu.get("input_tokens")),
                "output_tokens": tu.get("completion_tokens", tu.get("output_tokens")),
                "total_tokens": tu.get("total_tokens"),
            }
        for k in ("input_tokens", "output_tokens", "total_tokens"):
            if usage.get(k) is not None:
                fields[k] = int(usage[k])
        self._end(run_id, fields)

    # -- shared call bookkeeping --------------------------------------------------
    def _begin(self, run_id: UUID, parent_run_id: UUID | None, metadata: dict | None, kind: str, name: str, inputs: Any) -> None:
        ns, node, task_id, step = call_site(metadata)
        parent = str(parent_run_id) if parent_run_id and self.session.is_call(str(parent_run_id)) else None
        if parent is None:
            # Made inside a recorded call with runs in between (a subagent graph a tool invokes:
            # its model calls have the graph's chain runs as parents): part of that call, so a
            # replay that answers the outer call knows these were never to be made.
            around = current_call()
            parent = around if around is not None and self.session.is_call(around) else None
        self.session.begin_call(
            str(run_id),
            {
                "kind": kind,
                "name": name,
                "ns": ns,
                "node": node,
                "task_id": task_id,
                "step": step,
                "inputs": inputs,
                "started_at": time.time(),
                "perf0": time.perf_counter(),
                "parent_call_id": parent,
            },
        )
        if kind == "tool" and (writes := task_writes()) is not None:
            self._sends.start(str(run_id), writes, enclosing_calls(), task_id)
            rec = self.session.call_record(str(run_id))
            if rec is not None:
                rec["writes"] = writes
        enter_call(str(run_id))  # an HTTP request made from here on is part of this call

    def _end(self, run_id: UUID, fields: dict) -> None:
        leave_call(str(run_id))
        rec = self.session.call_record(str(run_id))
        if rec is None:
            return
        fields["latency_ms"] = round((time.perf_counter() - rec["perf0"]) * 1000, 3)
        self.session.end_call(str(run_id), **fields)


def _answer(output: Any) -> dict[str, Any]:
    """A call's ``output`` field as returned (``_as_returned``), and the object it was copied from
    (``returned``): the state holds that one, which then need not be encoded again."""
    kept = _as_returned(output)
    return {"output": kept, "returned": output} if kept is not output else {"output": kept}


def _as_sent(value: Any) -> Any:
    """A value a tool wrote, as written: LangGraph's reducers may change it in place before it is
    encoded (a message gets its id), so messages and the containers holding them are copied."""
    if isinstance(value, list):
        return [_as_returned(v) for v in value]
    if isinstance(value, dict):
        return dict(value)
    return _as_returned(value)


def _as_returned(output: Any) -> Any:
    """A message as the call returned it: values are encoded later, on the writer thread, and by
    then LangGraph may have changed the message in place (``add_messages`` gives it an id, a
    prebuilt agent sets its ``name``). A shallow copy keeps the call's own answer."""
    copy = getattr(output, "model_copy", None)
    if copy is not None and hasattr(output, "content"):
        try:
            return copy()
        except Exception:  # noqa: BLE001 - an odd message type: record it as it is
            return output
    return output


def _model_name(serialized: dict | None, kwargs: dict, metadata: dict | None) -> str:
    cls = kwargs.get("name") or ((serialized or {}).get("id") or ["model"])[-1]
    return model_label(str(cls), kwargs.get("invocation_params") or {}, metadata)


def model_label(cls: str, params: dict, metadata: dict | None) -> str:
    """How a model call is named: its class, and the model when the class does not say it."""
    model = params.get("model") or params.get("model_name") or (metadata or {}).get("ls_model_name")
    return f"{cls}:{model}" if model and model not in cls else cls


def _failure(error: BaseException) -> dict[str, Any]:
    """A failed call's fields: its error's type, message and traceback.

    A call that stopped at an ``interrupt()`` (a tool asking a person) is no failure: it
    keeps the values it interrupted with as its output, so a replay interrupts the same way.
    """
    if isinstance(error, asyncio.CancelledError):
        # Cancelled by whoever awaited it (``asyncio.wait_for`` timing out, a task group whose
        # other task failed, the run cancelled): the call did not fail, it was abandoned. Kept
        # as a call its node stopped waiting for, with how long it was waited on, so a replay
        # holds it that long and the node gives up again (a CancelledError raised back into
        # the graph would cancel the node instead). Its message is often a sentinel's repr.
        return {"error_type": ABANDONED, "error_message": CANCELLED}
    fields: dict[str, Any] = {"error_type": type(error).__name__, "error_message": str(error)}
    if isinstance(error, GraphInterrupt):
        fields["output"] = [getattr(i, "value", i) for i in (error.args[0] if error.args and isinstance(error.args[0], (list, tuple)) else ())]
        return fields
    fields["traceback"] = frames_of(error)
    carried = error_fields(error)  # an SDK error's status code and response: a replay hands them back
    if carried is not None:
        fields["output"] = carried
    return fields

