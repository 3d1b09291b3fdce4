"""``graphtape diff`` names a functional-API ``@task`` whose result changed between two runs, as
a replay does: a task writes no state key, so without it the change reads as the entrypoint's."""

from __future__ import annotations

from typing import Any

from langgraph.func import entrypoint, task

from graphtape.replay.run_diff import diff_runs


def pricing(rate: float) -> Any:
    """An entrypoint whose two tasks run in one step; ``rate`` changes what ``tax`` returns."""

    @task
    def tax(amount: int) -> float:
        return round(amount * rate, 2)

    @task
    def shipping(amount: int) -> int:
        return 5 if amount < 100 else 0

    @entrypoint()
    def quote(amount: int) -> dict[str, Any]:
        taxed, shipped = tax(amount), shipping(amount)
        return {"total": amount + taxed.result() + shipped.result()}

    return quote


def test_diff_names_the_task_whose_result_changed(recorder_factory):
    rec = recorder_factory()
    runs = []
    for rate in (0.2, 0.25):
        rec.attach(pricing(rate), name="quote").invoke(80)
        rec.flush()
        runs.append(rec.last_run_id)
    diff = diff_runs(*runs, store=rec.store)
    told = [(d.node, d.what) for d in diff.differences if d.node == "tax"]
    assert told == [("tax", "task 'tax' returned something else")], diff.report()
    assert [d.node for d in diff.differences if d.node == "shipping"] == [], diff.report()
    first = diff.first_difference if hasattr(diff, "first_difference") else diff.differences[0]
    assert first.node == "tax", diff.report()
