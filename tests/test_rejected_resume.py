"""A resume the graph rejects (its node raises on the answer) replays as the recorded error.

Such a run resumes no pause the store recorded: the pause was recorded elsewhere (another
process, before graphtape was attached) or its run already ended in the same error. It goes on
from its thread's checkpoint, which is its first step, as a run given no input does.
"""

from __future__ import annotations

import operator
from typing import Annotated

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from graphtape import Recorder, replay


class Asked(TypedDict, total=False):
    n: int
    log: Annotated[list[str], operator.add]


def _asking(strict_int: bool = True):
    """``ask`` pauses for a number and raises on anything else (``strict_int=False``: takes it as is)."""

    def ask(s: Asked) -> dict:
        answer = interrupt("a number?")
        if strict_int and not isinstance(answer, int):
            raise ValueError(f"not a number: {answer!r}")
        return {"n": len(str(answer)), "log": ["asked"]}

    b = StateGraph(Asked)
    b.add_node("pre", lambda s: {"log": ["pre"]})
    b.add_node("ask", ask)
    b.add_edge(START, "pre")
    b.add_edge("pre", "ask")
    return b.compile(checkpointer=InMemorySaver())


def _record_rejected(db: str, graph, *, pause_recorded: bool) -> str:
    config = {"configurable": {"thread_id": "asked"}}
    with Recorder(db) as rec:
        app = rec.attach(graph)
        (app if pause_recorded else graph).invoke({"n": 0}, config)  # pauses at ask
        with pytest.raises(ValueError):
            app.invoke(Command(resume="nope"), config)
        if pause_recorded:
            with pytest.raises(ValueError):  # LangGraph answers the retried node with the stored "nope"
                app.invoke(Command(resume=5), config)
        rec.flush()
        return rec.last_run_id


@pytest.mark.parametrize("pause_recorded", [False, True], ids=["pause-recorded-elsewhere", "retried-after-the-error"])
def test_a_rejected_resume_replays_as_its_recorded_error(tmp_path, pause_recorded):
    db = str(tmp_path / "rejected.db")
    graph = _asking()
    run_id = _record_rejected(db, graph, pause_recorded=pause_recorded)
    result = replay(run_id, _asking(), db=db, mode="strict")
    assert result.status == "error" and not result.diverged, result.report()
    assert "not a number: 'nope'" in (result.error or "")
    changed = replay(run_id, _asking(strict_int=False), db=db, mode="strict")
    assert changed.first_divergence is not None and changed.first_divergence.node == "ask", changed.report()
