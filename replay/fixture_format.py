"""What a regression fixture file is: its format version, its limits, its bytes, and the checks of its shape.

A fixture is one JSON file (``fixture_export`` writes it, ``fixture_import``
loads it into a store). The bytes are deterministic: one value per line, keys
in recorded order, so the same fixture is always the same file and diffs
cleanly in review. Fixtures come from other people: a file is read only if it
is a regular file under the size limit, and every part is checked for shape
and bounded in depth before anything uses it; a newer format is refused with
what to do.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from graphtape.recorder.codec import MAX_DEPTH, MAX_VALUES, collect_refs
from graphtape.recorder.errors import GraphtapeError
from graphtape.recorder.private_files import write_private
from graphtape.recorder.tracebacks import MAX_FRAMES, valid_frames

FORMAT_KEY = "graphtape_fixture"
# v1: the first format.
# v2: calls may be HTTP requests (kind "http"); one made inside a model or tool call names it ("part_of").
# v3: calls may be a store's reads and writes (kind "store"), all of them when config says "store": true.
# v4: calls may be a tool call's own writes to the state (kind "sent", "part_of" the tool call).
#     A tool or model call made inside another (a subagent run by a tool) names it too ("part_of"):
#     a reader that does not know it replays as before, so the version stays.
FORMAT_VERSION = 4
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_STEPS = 100_000
MAX_CALLS = 1_000_000
MAX_HOLD_MS = 600_000
MAX_STEP_NUMBER = 2**31 - 1  # step numbers (and counts) go into integer columns
# Values a fixture may hold, counted before it is parsed (a store read's budget): parsed, a
# compact `[[],[],...]` of 64 MB is 21 million lists, gigabytes of memory before any check.
# An exported fixture (one value per line) holds one value in about 27 bytes: 64 MB is 2.5 million.
MAX_FILE_VALUES = MAX_VALUES

ABOUT = (
    "graphtape regression fixture: a recorded LangGraph run that a test replays against today's code "
    "(@pytest.mark.graphtape); `graphtape import FILE` opens it in the TUI. Values are graphtape's typed "
    'envelopes ({"$t": kind, ...}); {"$b": key} refers to an entry of "messages". Steps list what each '
    "superstep did and the state keys it changed."
)
_STATUSES = ("ok", "error", "interrupted")
FIXTURE_TAG = "fixture"  # on every run imported from a fixture
SLICE_TAG = "slice-of:"  # on a run imported from a fixture cut short: the step the recording went to


class FixtureError(GraphtapeError):
    """A fixture cannot be written or read: the message says which file, where, and what to do."""


# -- bytes and files --------------------------------------------------------------


def dumps_fixture(fixture: Mapping[str, Any]) -> bytes:
    """The fixture's bytes: UTF-8 JSON, one value per line, the same for the same fixture."""
    return (json.dumps(fixture, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def write_fixture(path: str | os.PathLike, fixture: Mapping[str, Any], *, overwrite: bool = False) -> int:
    """Write the fixture to ``path`` (atomically, creating folders, mode 0600); returns the size in bytes.

    An existing file is replaced only with ``overwrite=True``: a fixture is
    usually a committed test expectation, and losing one silently breaks a test.
    """
    target = Path(path)
    data = dumps_fixture(fixture)
    if len(data) > MAX_FILE_BYTES:  # a test could not read it back: say so now, not in CI
        raise FixtureError(
            f"the fixture would be {len(data) / (1024 * 1024):.0f} MB, over the {MAX_FILE_BYTES // (1024 * 1024)} MB a fixture may be: "
            "check fewer steps with --steps A:B"
        )
    if _value_bound(data) > MAX_FILE_VALUES:  # as above: refused by every read, so said now
        raise FixtureError(f"the fixture would hold more than {MAX_FILE_VALUES:,} values, more than a test may read: check fewer steps with --steps A:B")
    if target.is_dir():
        raise FixtureError(f"{target} is a folder: give the fixture's file path (-o {target / 'NAME.json'})")
    try:
        write_private(target, data, overwrite=overwrite)
    except FileExistsError:
        raise FixtureError(f"{target} exists: pass --force to replace it, or -o to write another file") from None
    except OSError as exc:
        raise FixtureError(f"cannot write {target}: {exc.strerror or exc}") from None
    return len(data)


def read_fixture(path: str | os.PathLike) -> dict[str, Any]:
    """Read and check a fixture file; any problem is a one-line ``FixtureError``.

    Only a regular file is read, and never more than the size limit: ``stat``
    says nothing true of ``/dev/zero`` or a FIFO, so the read itself is capped.
    """
    p = Path(path)
    too_big = f"{p} is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB: fixtures are limited to that (export fewer steps with --steps)"
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise FixtureError(f"no fixture at {p}") from None
    except IsADirectoryError:
        raise FixtureError(f"cannot read fixture {p}: it is a directory") from None
    except OSError as exc:
        raise FixtureError(f"cannot read fixture {p}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise FixtureError(f"cannot read fixture {p}: it is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise FixtureError(f"cannot read fixture {p}: not a regular file (a device, a pipe or a socket)")
        if info.st_size > MAX_FILE_BYTES:
            raise FixtureError(too_big)
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise FixtureError(f"cannot read fixture {p}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise FixtureError(too_big)
    return parse_fixture(data, str(p))


def parse_fixture(data: bytes | str, label: str = "fixture") -> dict[str, Any]:
    """Parse and check fixture bytes: JSON, a known format version, the right shape, bounded."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if len(data) > MAX_FILE_BYTES:
        raise FixtureError(f"{label} is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB: refusing to read it")
    _check_density(data, label)
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise FixtureError(f"{label} is not valid JSON ({str(exc).splitlines()[0]}): a damaged or hand-edited fixture? re-export it") from None
    if not isinstance(doc, dict) or FORMAT_KEY not in doc:
        raise FixtureError(f"{label} is not a graphtape fixture (no {FORMAT_KEY!r} version at the top): export one with `graphtape export RUN -o FILE`")
    version = doc[FORMAT_KEY]
    if type(version) is not int:
        raise FixtureError(f"{label} has an unreadable fixture format version {version!r:.40} (a whole number, like {FORMAT_VERSION}): a damaged or hand-edited fixture? re-export it")
    if version > FORMAT_VERSION:
        raise FixtureError(
            f"{label} was written by a newer graphtape (fixture format v{version}; this one reads v{FORMAT_VERSION}): upgrade graphtape to use it"
        )
    if version < 1:
        raise FixtureError(f"{label} uses fixture format v{version}, which this graphtape cannot read: re-export it from its run")
    try:
        orjson.dumps(doc)  # what the import writes back must be writable: orjson stops at 255 levels
    except TypeError:
        raise FixtureError(f"{label} is nested deeper than 255 levels, more than a store can keep: a damaged or hand-edited fixture? re-export it") from None
    _check(doc, label)
    return doc


def _value_bound(data: bytes) -> int:
    """At least the number of values ``data`` parses to, counted in C at memory speed.

    Every value after a container's first follows a comma, and every container opens with a
    bracket, so commas and brackets bound the values from above (those inside strings count
    too: an overestimate only for text with millions of commas).
    """
    return data.count(b",") + data.count(b"[") + data.count(b"{")


def _check_density(data: bytes, label: str) -> None:
    """Refuse, before parsing, a file that would parse to more values than a fixture may hold."""
    if _value_bound(data) > MAX_FILE_VALUES:
        raise FixtureError(
            f"{label} holds more than {MAX_FILE_VALUES:,} values (counted as its commas and brackets), more than a fixture may: "
            "refused before it is parsed (a hand-made or damaged file?); for a long run, export fewer steps with --steps A:B"
        )


# -- shape checks -----------------------------------------------------------------


class _Shape:
    def __init__(self, label: str) -> None:
        self.label = label

    def fail(self, where: str, what: str) -> None:
        raise FixtureError(f"{self.label}: {where}: {what} (a damaged or hand-edited fixture? re-export it)")

    def get(self, d: dict, key: str, types: tuple[type, ...], where: str, *, required: bool = True) -> Any:
        if key not in d:
            if required:
                self.fail(where, f"missing {key!r}")
            return None
        v = d[key]
        if v is None and type(None) in types:
            return v
        if type(v) is bool and bool not in types:
            self.fail(f"{where}.{key}", f"expected {_names(types)}, got {_kind(v)}")
        if not isinstance(v, types):
            self.fail(f"{where}.{key}", f"expected {_names(types)}, got {_kind(v)}")
        return v

    def value(self, v: Any, where: str) -> None:
        """An encoded value: bounded depth (the codec checks envelopes when it decodes).

        Walked a level at a time, so each value costs a C-level ``extend`` rather than a tuple:
        a long run's fixture holds thousands of them, read again by every test that replays it.
        """
        level = [v] if type(v) is dict or type(v) is list else []
        depth = 0
        while level:
            inside: list[Any] = []
            for x in level:
                inside.extend(x.values() if type(x) is dict else x)
            if not inside:
                return
            depth += 1
            if depth > MAX_DEPTH:
                self.fail(where, f"a value is nested deeper than {MAX_DEPTH} levels")
            level = [x for x in inside if type(x) is dict or type(x) is list]


def _names(types: tuple[type, ...]) -> str:
    names = {dict: "an object", list: "a list", str: "a string", int: "a whole number", float: "a number", bool: "true or false", type(None): "null"}
    return " or ".join(dict.fromkeys(names.get(t, t.__name__) for t in types))


def _kind(v: Any) -> str:
    return _names((type(v),))


def _check(doc: dict, label: str) -> None:
    sh = _Shape(label)
    sh.get(doc, "name", (str,), "top")
    sh.get(doc, "graph", (str, type(None)), "top", required=False)
    sh.get(doc, "graph_name", (str, type(None)), "top", required=False)
    outcome = sh.get(doc, "outcome", (dict,), "top")
    status = sh.get(outcome, "status", (str,), "outcome")
    if status not in _STATUSES:
        sh.fail("outcome.status", f"{status!r:.40} is not one of {', '.join(_STATUSES)}")
    sh.get(outcome, "reason", (str, type(None)), "outcome", required=False)
    err = sh.get(outcome, "error", (dict,), "outcome", required=False)
    if err is not None:
        sh.get(err, "type", (str, type(None)), "outcome.error")
        sh.get(err, "message", (str, type(None)), "outcome.error", required=False)
    sh.value(doc.get("inputs"), "inputs")
    config = sh.get(doc, "config", (dict,), "top")
    sh.value(config, "config")
    for key, kinds in (("configurable", (dict,)), ("metadata", (dict,)), ("tags", (list,)), ("stream", (dict,))):
        sh.get(config, key, kinds, "config", required=False)  # what a replay reads as such
    sl = sh.get(doc, "slice", (dict,), "top", required=False)
    if sl is not None:
        sh.get(sl, "to", (int,), "slice")
        sh.get(sl, "of", (int,), "slice")
    start = sh.get(doc, "start", (dict,), "top")
    after = sh.get(start, "after_step", (int,), "start")
    if not -1 <= after <= MAX_STEP_NUMBER:
        sh.fail("start.after_step", f"{after} is not a step number (-1 to {MAX_STEP_NUMBER})")
    sh.value(sh.get(start, "values", (dict,), "start"), "start.values")
    _check_versions(sh, start, "start", required=True)
    steps = sh.get(doc, "steps", (list,), "top")
    if not steps:
        sh.fail("steps", "no steps: a fixture checks at least one step")
    task_ids: set[str] = set()
    n_calls = _check_steps(sh, steps, "steps", after, task_ids)
    subs = sh.get(doc, "subgraphs", (list,), "top", required=False) or []
    for i, sub in enumerate(subs):
        where = f"subgraphs[{i}]"
        if type(sub) is not dict:
            sh.fail(where, f"expected an object, got {_kind(sub)}")
        ns = sh.get(sub, "ns", (str,), where)
        if not ns:
            sh.fail(f"{where}.ns", "a subgraph namespace cannot be empty")
        n_calls += _check_steps(sh, sh.get(sub, "steps", (list,), where), f"{where}.steps", None, task_ids)
    if len(steps) + sum(len(s.get("steps", [])) for s in subs) > MAX_STEPS:
        sh.fail("steps", f"more than {MAX_STEPS} steps")
    if n_calls > MAX_CALLS:
        sh.fail("steps", f"more than {MAX_CALLS} calls")
    sh.value(doc.get("final_state"), "final_state")
    table = sh.get(doc, "messages", (dict,), "top", required=False) or {}
    for key, v in table.items():
        sh.value(v, f"messages.{key}")
        if collect_refs(v):
            sh.fail(f"messages.{key}", "a message cannot refer to other entries")


def _check_versions(sh: _Shape, holder: dict, where: str, *, required: bool) -> None:
    """A checkpoint's channel versions and versions seen: the start's, an edited step's."""
    versions = sh.get(holder, "versions", (dict,), where, required=required)
    for c, v in (versions or {}).items():
        if type(v) not in (int, float, str):
            sh.fail(f"{where}.versions.{c}", f"a channel version must be a number or a string, got {_kind(v)}")
    seen = sh.get(holder, "versions_seen", (dict,), where, required=required or versions is not None)
    for n, s in (seen or {}).items():
        if type(s) is not dict:
            sh.fail(f"{where}.versions_seen.{n}", f"expected an object, got {_kind(s)}")
    if seen is not None and versions is None:
        sh.fail(f"{where}.versions", "versions_seen without versions")


def _check_steps(sh: _Shape, steps: list, where: str, after: int | None, task_ids: set[str]) -> int:
    last = after
    n_calls = 0
    for i, s in enumerate(steps):
        w = f"{where}[{i}]"
        if type(s) is not dict:
            sh.fail(w, f"expected an object, got {_kind(s)}")
        n = sh.get(s, "step", (int,), w)
        if last is not None and n <= last:
            sh.fail(f"{w}.step", f"step {n} does not come after step {last}" + (" (where the fixture starts)" if last == after and i == 0 else ""))
        if not -1 <= n <= MAX_STEP_NUMBER:
            sh.fail(f"{w}.step", f"{n} is not a step number (-1 to {MAX_STEP_NUMBER})")
        last = n
        sh.get(s, "source", (str,), w, required=False)
        sh.get(s, "completed", (bool,), w, required=False)
        _check_versions(sh, s, w, required=False)  # a step edited with update_state keeps its checkpoint's
        sh.value(sh.get(s, "channels", (dict,), w, required=False), f"{w}.channels")
        ids = set()
        for j, t in enumerate(sh.get(s, "tasks", (list,), w)):
            tw = f"{w}.tasks[{j}]"
            if type(t) is not dict:
                sh.fail(tw, f"expected an object, got {_kind(t)}")
            tid = sh.get(t, "id", (str,), tw)
            if not tid or "|" in tid or ":" in tid:
                sh.fail(f"{tw}.id", f"{tid!r:.40} is not a task id (non-empty, without '|' or ':')")
            if tid in task_ids:
                sh.fail(f"{tw}.id", f"task id {tid!r:.40} is used twice")
            task_ids.add(tid)
            ids.add(tid)
            sh.get(t, "node", (str,), tw)
            sh.value(sh.get(t, "writes", (dict,), tw, required=False), f"{tw}.writes")
            err = sh.get(t, "error", (dict,), tw, required=False)
            if err is not None:
                sh.get(err, "type", (str, type(None)), f"{tw}.error")
                sh.get(err, "message", (str, type(None)), f"{tw}.error", required=False)
                _check_frames(sh, err, f"{tw}.error")
            sh.value(sh.get(t, "interrupts", (list,), tw, required=False), f"{tw}.interrupts")
            for k, attempt in enumerate(sh.get(t, "attempts", (list,), tw, required=False) or []):
                aw = f"{tw}.attempts[{k}]"
                if not isinstance(attempt, dict):
                    sh.fail(aw, "expected an object")
                sh.get(attempt, "n", (int,), aw)
                err = sh.get(attempt, "error", (dict, type(None)), aw, required=False)
                if err is not None:
                    sh.get(err, "type", (str, type(None)), f"{aw}.error")
                    sh.get(err, "message", (str, type(None)), f"{aw}.error", required=False)
            sh.get(t, "cached", (bool,), tw, required=False)
            sh.get(t, "cache_key", (str,), tw, required=False)
            sh.get(t, "cache_warm", (bool,), tw, required=False)
            sh.get(t, "path", (str,), tw, required=False)
            for k, w in enumerate(sh.get(t, "carried", (list,), tw, required=False) or []):
                if type(w) is not list or len(w) not in (2, 3) or type(w[0]) is not str:
                    sh.fail(f"{tw}.carried[{k}]", "expected [channel, value] or [channel, node, argument]")
                sh.value(w[1:], f"{tw}.carried[{k}]")
            for k, sub in enumerate(sh.get(t, "subgraphs", (list,), tw, required=False) or []):
                if type(sub) is not str or not sub:
                    sh.fail(f"{tw}.subgraphs[{k}]", "expected a namespace string")
        for j, r in enumerate(sh.get(s, "routes", (list,), w, required=False) or []):
            rw = f"{w}.routes[{j}]"
            if type(r) is not dict:
                sh.fail(rw, f"expected an object, got {_kind(r)}")
            sh.get(r, "from", (str,), rw)
            sh.get(r, "kind", (str,), rw)
            for k, d in enumerate(sh.get(r, "to", (list,), rw)):
                if type(d) is not str:
                    sh.fail(f"{rw}.to[{k}]", f"expected a node name, got {_kind(d)}")
            sh.get(r, "router", (str, type(None)), rw, required=False)
            sh.value(r.get("returned"), f"{rw}.returned")
            sh.value(sh.get(r, "sends", (list,), rw, required=False), f"{rw}.sends")
            _task_ref(sh, r, ids, rw)
        for j, e in enumerate(sh.get(s, "events", (list,), w, required=False) or []):
            ew = f"{w}.events[{j}]"
            if type(e) is not dict:
                sh.fail(ew, f"expected an object, got {_kind(e)}")
            kind = sh.get(e, "kind", (str,), ew)
            if kind not in ("interrupt", "resume", "update"):
                sh.fail(f"{ew}.kind", f"{kind!r:.40} is not interrupt, resume or update")
            sh.value(e.get("value"), f"{ew}.value")
            sh.get(e, "node", (str, type(None)), ew, required=False)
            _task_ref(sh, e, ids, ew)
        for j, c in enumerate(sh.get(s, "calls", (list,), w, required=False) or []):
            cw = f"{w}.calls[{j}]"
            if type(c) is not dict:
                sh.fail(cw, f"expected an object, got {_kind(c)}")
            sh.get(c, "id", (str,), cw)
            if sh.get(c, "kind", (str,), cw) not in ("tool", "model", "http", "store", "sent"):
                sh.fail(f"{cw}.kind", "expected tool, model, http, store or sent")
            sh.get(c, "name", (str,), cw)
            sh.get(c, "part_of", (str,), cw, required=False)
            sh.get(c, "node", (str, type(None)), cw, required=False)
            sh.get(c, "task", (str, type(None)), cw, required=False)
            sh.value(c.get("inputs"), f"{cw}.inputs")
            sh.value(c.get("output"), f"{cw}.output")
            err = sh.get(c, "error", (dict,), cw, required=False)
            if err is not None:
                sh.get(err, "type", (str,), f"{cw}.error")
                sh.get(err, "message", (str, type(None)), f"{cw}.error", required=False)
                _check_frames(sh, err, f"{cw}.error")
                sh.value(sh.get(err, "fields", (dict,), f"{cw}.error", required=False), f"{cw}.error.fields")
            hold = sh.get(c, "hold_ms", (int, float), cw, required=False)
            if hold is not None and not (0 <= hold <= MAX_HOLD_MS):
                sh.fail(f"{cw}.hold_ms", f"must be between 0 and {MAX_HOLD_MS}")
            n_calls += 1
        state = sh.get(s, "state", (dict,), w, required=False)
        if state is not None:
            sh.value(sh.get(state, "set", (dict,), f"{w}.state", required=False), f"{w}.state.set")
            for k, items in (sh.get(state, "append", (dict,), f"{w}.state", required=False) or {}).items():
                if type(items) is not list:
                    sh.fail(f"{w}.state.append.{k}", f"expected a list of items, got {_kind(items)}")
                sh.value(items, f"{w}.state.append.{k}")
            for k, key in enumerate(sh.get(state, "drop", (list,), f"{w}.state", required=False) or []):
                if type(key) is not str:
                    sh.fail(f"{w}.state.drop[{k}]", "expected a state key")
            if s.get("completed") is False:
                sh.fail(f"{w}.state", "a step that did not complete has no state")
    return n_calls


def _check_frames(sh: _Shape, err: dict, where: str) -> None:
    """An error's traceback, if any: a list of ``[file, line, function, source]`` frames."""
    frames = sh.get(err, "traceback", (list,), where, required=False)
    if frames is not None and valid_frames(frames) != frames:
        sh.fail(f"{where}.traceback", f"expected at most {MAX_FRAMES + 1} frames of [file, line, function, source]")


def _task_ref(sh: _Shape, d: dict, ids: set[str], where: str) -> None:
    tid = sh.get(d, "task", (str, type(None)), where, required=False)
    if tid is not None and tid not in ids:
        sh.fail(f"{where}.task", f"{tid!r:.40} is not a task of this step")
