"""The replay's answerer: serves tool and model calls from the recording.

It decides per call: an override if the user gave one, the recording if the
mode answers that kind of call, else the live call. A call the recording
cannot answer is recorded as a miss and stops the replay (``ReplayMiss``),
so strict mode never makes a silent live call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from langchain_core.runnables.config import var_child_runnable_config

try:  # the prompt as chat models hand it to callbacks (so the recorder saw it): image blocks as OpenAI's
    from langchain_core.language_models.chat_models import _format_for_tracing as _as_recorded
except ImportError:  # pragma: no cover - a langchain-core without it hands callbacks the prompt as it is

    def _as_recorded(messages: list[Any]) -> list[Any]:
        return messages

from graphtape.recorder import CallInfo
from graphtape.recorder.capture import model_label
from graphtape.recorder.codec import Decoder, Encoder
from graphtape.recorder.prefix_memo import MIN_LENGTH as PREFIX_MIN
from graphtape.recorder.prefix_memo import PrefixMemo
from graphtape.recorder.redaction import Redactor
from graphtape.recorder.session import call_site, task_path

from graphtape.replay.calls import CallBook, LiveCall, Miss, RecordedCall, adopt_live_ids, message_from_plain, normalize_arguments, revive_command, revive_opaque
from graphtape.replay.injected import HandedCheck, given
from graphtape.replay.intercept import Answer, ReplayStop
from graphtape.replay.modes import ReplayMode
from graphtape.replay.normalize import Normalizer, is_message, ns_path
from graphtape.replay.override_names import overridden
from graphtape.replay.state_types import ToolReturns

MAX_DELAY_S = 60.0
MAX_HELD_S = 120.0  # all the holds of one replay together


class ReplayMiss(ReplayStop):
    """A call the recording cannot answer: the replay stops here.

    A ``BaseException`` so that a node's own ``except Exception`` (a tool
    wrapper turning errors into observations) cannot swallow it and carry on
    with a made-up result.
    """

    def __init__(self, miss: Miss) -> None:
        super().__init__(f"no recorded {miss.live.kind} call {miss.live.name!r} at step {miss.live.step} matches")
        self.miss = miss


class RecordingAnswerer:
    """Answers calls for one replay (see module docstring)."""

    def __init__(
        self,
        book: CallBook,
        mode: ReplayMode,
        normalize: Normalizer,
        overrides: Mapping[str, Callable[..., Any]] | None = None,
        *,
        miss_goes_live: bool = False,
        typed_decode: Callable[[Any], Any] | None = None,
        handed: HandedCheck | None = None,
        sent: Iterable[CallInfo] = (),
    ) -> None:
        self.book = book
        # A tool call's own writes to the state (calls of kind "sent" of it), made again when it is answered.
        self.sent: dict[str, list[CallInfo]] = {}
        for c in sent:
            if c.parent_call_id:
                self.sent.setdefault(c.parent_call_id, []).append(c)
        # Where a call may run live (a fork): a tool handed another state than its recording runs live.
        self.handed = handed
        self.typed_decode = typed_decode  # a stored value -> its typed form (the store's decoder)
        self.mode = mode
        self.normalize = normalize
        self.overrides = dict(overrides or {})
        self.misses: list[Miss] = []
        self.miss_goes_live = miss_goes_live  # re-recording: a call the recording cannot answer runs live
        self.served = {"tool": 0, "model": 0}
        self.overridden: dict[str, list[tuple[int | None, str | None]]] = {}  # override -> (step, node) of each call it answered
        self.held_s = 0.0  # how long answers were held so far (recorded timeouts, reproduced)
        self._lock = threading.Lock()
        self._plain_memo: dict[int, tuple[Any, Any]] = {}
        self.returns = ToolReturns()  # a tool's answer as the type its function says it returns
        self._prompts = PrefixMemo(watch_messages=True)
        # A replayed conversation is mostly the recording's own text handed back (answers, tool
        # results, the input): redacted when recorded, so scrubbing it again hides nothing.
        self.recorded_text = frozenset(_recorded_strings(c.call for c in book.recorded))
        self._redactor = Redactor(known_clean=self.recorded_text)

    # -- models ------------------------------------------------------------------
    def answers_model(self, model: Any) -> bool:
        """Whether calls to ``model`` are answered here (the recording or an override), not live."""
        if self.mode.answers("model") or "model" in self.overrides or type(model).__name__ in self.overrides:
            return True
        if not self.overrides:
            return False
        try:
            params = dict(model._get_invocation_params())
        except Exception:  # noqa: BLE001 - a model that cannot say its params is overridden by class only
            return any(name.startswith(type(model).__name__ + ":") for name in self.overrides)
        return self._model_override(model_label(type(model).__name__, params, None), type(model).__name__) is not None

    def _model_override(self, label: str, cls: str) -> Callable[..., Any] | None:
        """The override for a model call named ``label``: by that label, by the model's own name
        (``gpt-4o``, the part after ``Class:``), by its class, or ``"model"`` for every model."""
        bare = label.split(":", 1)[1] if label.startswith(cls + ":") else None
        for key in (label, bare, cls, "model"):
            if key is not None and key in self.overrides:
                return self.overrides[key]
        return None

    def answer_model(self, model: Any, messages: list[Any], stop: Any, run_manager: Any, kwargs: dict) -> Answer | None:
        metadata = {**(getattr(run_manager, "inheritable_metadata", None) or {}), **(getattr(run_manager, "metadata", None) or {})}
        params = dict(model._get_invocation_params(stop=stop, **kwargs))
        name = model_label(type(model).__name__, params, metadata)
        override = self._model_override(name, type(model).__name__)
        if override is not None:
            self._note_override(name, metadata)
            return Answer(value=message_from_plain(self._plain(override(messages))))
        if not self.mode.answers("model"):
            return None
        inputs: dict[str, Any] = {"messages": self._plain_messages(_as_recorded(messages))}
        if params.get("tools"):
            inputs["tools"] = self._plain_once(params["tools"])
        live = LiveCall("model", name, *_who(metadata), arguments=normalize_arguments("model", inputs, self.normalize), task_path=_task_path(metadata), ns=_ns(metadata))
        got = self._take(live)
        if got is None:
            return None
        call = got.call
        if got.interrupt:
            return Answer(interrupt=got.interrupt, delay_s=self._delay(got))
        error = (call.error_type, call.error_message) if call.error_type else None
        return Answer(value=None if error else message_from_plain(call.output), error=error, error_frames=call.traceback, error_fields=call.output if error else None, delay_s=self._delay(got))

    # -- tools -------------------------------------------------------------------
    def answer_tool(self, tool: Any, tool_input: Any, kwargs: dict) -> Answer | None:
        override = self.overrides.get(tool.name)
        if override is not None:
            config = kwargs.get("config") or var_child_runnable_config.get() or {}
            self._note_override(tool.name, {**(config.get("metadata") or {}), **(kwargs.get("metadata") or {})})
            return Answer(call=override)
        if not self.mode.answers("tool"):
            return None
        config = kwargs.get("config") or var_child_runnable_config.get() or {}
        metadata = {**(config.get("metadata") or {}), **(kwargs.get("metadata") or {})}
        if isinstance(tool_input, dict):
            injected = self._injected_args(tool)
            shown = {k: v for k, v in tool_input.items() if k not in injected} if injected else tool_input
        else:
            shown = tool_input
        call_id = kwargs.get("tool_call_id")
        live = LiveCall(
            "tool", tool.name, *_who(metadata), arguments=normalize_arguments("tool", self._plain(shown), self.normalize),
            tool_call_id=call_id if isinstance(call_id, str) else None, task_path=_task_path(metadata), ns=_ns(metadata),
        )
        check = None
        if self.handed is not None:
            handed = given(tool, tool_input, self._injected_args(tool) if isinstance(tool_input, dict) else (), metadata.get("langgraph_path"), self._plain)
            check = partial(self.handed.changed, live=handed)
        got = self._take(live, check)
        if got is None:
            return None
        if self._overrides_inside(got):
            # Its answer depends on a call made inside it that an override answers (a subagent's
            # tool): it runs live, and the calls inside it are answered as any other.
            with self._lock:
                got.live = True
                self.served[live.kind] -= 1
            return None
        call = got.call
        delay = self._delay(got)
        if got.interrupt:
            return Answer(interrupt=got.interrupt, delay_s=delay)
        sends = self._sends(call)
        if sends:
            return replace(self._tool_answer(tool, tool_input, call, delay), sends=sends)
        return self._tool_answer(tool, tool_input, call, delay)

    def _overrides_inside(self, got: RecordedCall) -> bool:
        """Whether an override answers a call recorded inside ``got``."""
        return bool(self.overrides) and any(overridden(self.overrides, r.call.kind, r.call.name) for r in self.book.inner(got))

    def _sends(self, call: Any) -> tuple[tuple[str, Any], ...]:
        """What the recorded tool call wrote to the state itself, typed as it was written."""
        out = []
        for c in sorted(self.sent.get(call.call_id, ()), key=lambda c: c.started_at):
            typed = self._typed(c)
            out.append((c.name, revive_opaque(c.output if typed is _NOT_TYPED else typed)))
        return tuple(out)

    def _tool_answer(self, tool: Any, tool_input: Any, call: Any, delay: float) -> Answer:
        """The recorded call's answer, as the tool returned (or raised) it."""
        if call.error_type:
            return Answer(error=(call.error_type, call.error_message), error_frames=call.traceback, error_fields=call.output, delay_s=delay)
        out = call.output
        if is_message(out) and out.get("type") == "tool":
            if out.get("name") != tool.name and tool.response_format != "content_and_artifact":
                # The tool returned this message itself (LangChain names the ones it makes after
                # the tool): handed back whole, its artifact and fields as they were.
                own = self._typed(call)
                if own is not _NOT_TYPED and type(own).__name__ == "ToolMessage":
                    return Answer(value=own, delay_s=delay)
            content = out.get("content")
            if out.get("status") == "error":
                return Answer(value=content, tool_error=True, delay_s=delay)
            if tool.response_format == "content_and_artifact":
                # The artifact as it was (a retriever's Documents), not its plain form.
                artifact = getattr(self._typed(call), "artifact", _NOT_TYPED)
                artifact = revive_opaque(out.get("artifact") if artifact is _NOT_TYPED else artifact)
                return Answer(value=(content, self.returns.revive(tool, artifact)), delay_s=delay)
            return Answer(value=content, delay_s=delay)
        typed = self._typed(call)
        value = self.returns.revive(tool, revive_command(revive_opaque(out if typed is _NOT_TYPED else typed)))
        if value is not out and isinstance(tool_input, dict):
            value = adopt_live_ids(value, _live_messages(tool_input, self._injected_args(tool)))
        return Answer(value=value, delay_s=delay)

    # -- shared ------------------------------------------------------------------
    def _typed(self, call: Any) -> Any:
        """A recorded call's output decoded with its types (Documents, datetimes, Decimals, tuples,
        a Command and its Send packets), as the live call returned it; ``_NOT_TYPED`` where the
        recording cannot say (no decoder given, a fixture's plain output, a damaged value)."""
        if self.typed_decode is None or call.encoded_output is None:
            return _NOT_TYPED
        try:
            return self.typed_decode(call.encoded_output)
        except Exception:  # noqa: BLE001 - the plain form, as before
            return _NOT_TYPED

    def _injected_args(self, tool: Any) -> frozenset[str]:
        """Arguments LangChain keeps out of a tool's recorded inputs (state, runtime...), per tool, once."""
        hit = self._plain_memo.get(id(tool))
        if hit is not None and hit[0] is tool:
            return hit[1]
        names = frozenset(_fields(tool.get_input_schema())) - frozenset(_fields(tool.tool_call_schema))
        # A ToolRuntime (or InjectedToolArg) parameter of the function a tool wraps, when the tool
        # names an explicit args_schema without it (langchain's TodoListMiddleware's write_todos):
        # in neither schema, and kept from the callbacks, so from the recording, all the same.
        try:
            names |= frozenset(getattr(tool, "_injected_args_keys", None) or ())
        except Exception:  # noqa: BLE001 - a langchain-core without it: the schemas say it all
            pass
        self._plain_memo[id(tool)] = (tool, names)
        return names

    def _plain_messages(self, messages: list[Any]) -> list[Any]:
        """A prompt's messages in plain form: each prompt is the last one and a bit more."""
        if type(messages) is list and len(messages) >= PREFIX_MIN:
            with self._lock:  # parallel nodes call models at once
                return self._prompts.apply(messages, self._plain_once)
        return [self._plain_once(m) for m in messages]

    def _plain_once(self, value: Any) -> Any:
        """``to_plain`` per object, once: a conversation's messages are resent on every model call."""
        hit = self._plain_memo.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        plain = self._plain(value)
        self._plain_memo[id(value)] = (value, plain)
        return plain

    def _plain(self, value: Any) -> Any:
        """A live value in the plain form recordings decode to (and redacted the same way)."""
        return Decoder({}, typed=False).decode(Encoder(self._redactor).encode(value))

    def _take(self, live: LiveCall, handed: Callable[[Any], Any] | None = None) -> RecordedCall | None:
        got = self.book.take(live, handed)
        if isinstance(got, Miss):
            with self._lock:
                self.misses.append(got)
            if self.miss_goes_live:
                return None
            raise ReplayMiss(got)
        with self._lock:
            self.served[live.kind] += 1
        return got

    def _note_override(self, name: str, metadata: Mapping[str, Any]) -> None:
        step, _, node = _who(metadata)
        with self._lock:
            self.overridden.setdefault(name, []).append((step, node))

    def override_notes(self) -> list[str]:
        """Which calls the overrides answered: a divergence they cause reads as the state it
        changed (``messages`` differs at ``tools``), so the report names its cause beside it."""
        notes = []
        for name, sites in self.overridden.items():
            where = ", ".join(dict.fromkeys(f"step {step}" + (f" in {node!r}" if node else "") for step, node in sites))
            notes.append(f"{name!r} was answered by its override ({len(sites)} call{'s' * (len(sites) != 1)}: {where})")
        return notes

    def held_notes(self) -> list[str]:
        """What the report should say when the recording asked for more holding (timeouts to
        reproduce) than a replay gives."""
        if self.held_s < MAX_HELD_S:
            return []
        return [f"answers were held {MAX_HELD_S:.0f} s in all, as long as a replay holds them: later recorded waits were not reproduced"]

    def _delay(self, got: RecordedCall) -> float:
        """How long to hold this answer: as the recording says, at most MAX_DELAY_S, and at most
        what is left of MAX_HELD_S for the whole replay (a damaged or hostile recording's
        latencies cannot make a replay wait for hours)."""
        with self._lock:
            delay = max(0.0, min(got.delay_s, MAX_DELAY_S, MAX_HELD_S - self.held_s))
            self.held_s += delay
        return delay


_NOT_TYPED = object()


def _who(metadata: Mapping[str, Any]) -> tuple[int | None, str, str | None]:
    ns, node, _task, step = call_site(metadata)  # placed as the recorder placed the recorded calls
    return step, ns_path(ns), node


def _ns(metadata: Mapping[str, Any]) -> str:
    return call_site(metadata)[0]


def _task_path(metadata: Mapping[str, Any]) -> str | None:
    path = metadata.get("langgraph_path")
    return task_path(path) if isinstance(path, tuple) else None


def _recorded_strings(calls: Any) -> set[str]:
    """Every string in the recorded calls' inputs and outputs (decoded values, shared ones walked once)."""
    out: set[str] = set()
    seen: set[int] = set()
    stack: list[Any] = []
    for c in calls:
        stack.append(c.inputs)
        stack.append(c.output)
    while stack:
        v = stack.pop()
        if type(v) is str:
            out.add(v)
        elif isinstance(v, (dict, list, tuple)):
            if id(v) in seen:
                continue
            seen.add(id(v))
            stack.extend(v.values() if isinstance(v, dict) else v)
            if isinstance(v, dict):
                out.update(k for k in v if type(k) is str)
    return out


def _fields(schema: Any) -> list[str]:
    """The argument names of a tool schema: a pydantic model, or a JSON schema dict."""
    if isinstance(schema, dict):
        return list(schema.get("properties") or {})
    fields = getattr(schema, "model_fields", None)
    if isinstance(fields, dict):
        return list(fields)
    try:
        return list((schema.model_json_schema() or {}).get("properties") or {})
    except Exception:  # noqa: BLE001 - an unusual schema: nothing is stripped from its calls
        return []


def _live_messages(tool_input: dict, injected: frozenset[str]) -> Any:
    """The live state's messages, when the tool was handed the state (``InjectedState``)."""
    for name in injected:
        state = tool_input.get(name)
        messages = state.get("messages") if isinstance(state, dict) else getattr(state, "messages", None)
        if isinstance(messages, list):
            return messages
    return None

