"""Two identical runs store the same thing.

What must differ between them is named: the run's own id, the checkpoint and
task ids LangGraph draws afresh (time-based), and times and durations. All
the rest (every blob, every state frame, route, write and event, the row
counts) is the same bytes, so a recording is a function of the run.
"""

from __future__ import annotations

import sqlite3
import zlib
from pathlib import Path
from typing import Annotated, TypedDict

import orjson
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from graphtape.recorder import Recorder

# Per task: its id (LangGraph's), its start offset and duration (times).
_TASK_VARIES = {"id", "dt", "ms"}
_STEP_VARIES = {"id", "run_id", "checkpoint_id", "parent_checkpoint_id", "created_at", "duration_ms", "payload"}
_RUN_VARIES = {"id", "started_at", "ended_at", "heartbeat_at", "owner_pid"}


class S(TypedDict):
    n: int
    messages: Annotated[list[AnyMessage], add_messages]


def _graph(fixed_ids: bool):
    def talk(state: S) -> dict:
        n = state["n"]
        msg = (AIMessage if n % 2 else HumanMessage)(content=f"turn {n}: " + "lorem ipsum " * 20)
        if fixed_ids:
            msg.id = f"m-{n}"
        return {"n": n + 1, "messages": [msg]}

    g = StateGraph(S)
    g.add_node("talk", talk)
    g.add_edge(START, "talk")
    g.add_conditional_edges("talk", lambda s: "again" if s["n"] < 12 else "done", {"again": "talk", "done": END})
    return g.compile()


def _record(path: Path, fixed_ids: bool) -> None:
    with Recorder(path) as rec:
        g = rec.attach(_graph(fixed_ids), name="same")
        g.invoke({"n": 0, "messages": [HumanMessage(content="hello", id="in-0")]})


def _payload(data: bytes) -> dict:
    return orjson.loads(zlib.decompress(data[1:]) if data[:1] == b"z" else data[1:])


def _contents(path: Path) -> tuple[dict, list, list]:
    conn = sqlite3.connect(path)
    try:
        blobs = dict(conn.execute("SELECT hash, data FROM blobs"))
        conn.row_factory = sqlite3.Row
        steps = []
        for row in conn.execute("SELECT * FROM steps ORDER BY seq"):
            payload = _payload(row["payload"])
            for task in payload["t"]:
                for key in _TASK_VARIES:
                    task.pop(key, None)
            steps.append(({k: row[k] for k in row.keys() if k not in _STEP_VARIES}, payload))
        # The thread graphtape makes up for a run given none is named after the run.
        runs = [{k: r[k].replace(r["id"], "<run>") if isinstance(r[k], str) else r[k] for k in r.keys() if k not in _RUN_VARIES} for r in conn.execute("SELECT * FROM runs")]
        return blobs, steps, runs
    finally:
        conn.close()


def test_two_identical_runs_store_the_same_blobs_frames_and_rows(tmp_path: Path) -> None:
    _record(tmp_path / "a.db", fixed_ids=True)
    _record(tmp_path / "b.db", fixed_ids=True)
    blobs_a, steps_a, runs_a = _contents(tmp_path / "a.db")
    blobs_b, steps_b, runs_b = _contents(tmp_path / "b.db")
    assert len(steps_a) == 14  # the input, START's step, then twelve of talk
    assert blobs_a == blobs_b
    assert steps_a == steps_b
    assert runs_a == runs_b


def test_message_ids_drawn_by_langgraph_are_the_only_other_difference(tmp_path: Path) -> None:
    # add_messages gives a message without an id a random one: the same run then stores
    # other blobs, because the id is part of the message.
    _record(tmp_path / "a.db", fixed_ids=False)
    _record(tmp_path / "b.db", fixed_ids=False)
    blobs_a, steps_a, _ = _contents(tmp_path / "a.db")
    blobs_b, steps_b, _ = _contents(tmp_path / "b.db")
    assert len(blobs_a) == len(blobs_b)
    assert blobs_a != blobs_b
    assert [s[0] for s in steps_a] == [s[0] for s in steps_b]  # the same steps, nodes, writes and summaries
