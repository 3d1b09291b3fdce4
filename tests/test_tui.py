"""TUI pilot tests: press keys, assert what is selected and shown, on real recorded runs."""

from __future__ import annotations

import sqlalchemy as sa
import pytest
from conftest import load_agent

from graphtape.recorder import Recorder, open_store
from textual.worker import WorkerCancelled

from graphtape.tui.app import build_app
from graphtape.tui.data import count_differences
from graphtape.tui.screens.run import RunScreen
from graphtape.tui.screens.runs import RunsScreen
from graphtape.tui.widgets.diff_view import DiffView
from graphtape.tui.widgets.timeline import Timeline


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory):
    """A store with the bundled demo runs: incident, happy, an error run and an interrupted one."""
    from typing import TypedDict

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, StateGraph
    from langgraph.types import interrupt

    db = str(tmp_path_factory.mktemp("tui") / "demo.db")
    ra = load_agent("reason_act")
    rec = Recorder(db)
    rec.attach(ra.build_graph("happy"), name="demo:happy").invoke(ra.inputs_for("happy"))

    class S(TypedDict):
        n: int

    def fail(state: S):
        raise RuntimeError("payment API returned 500")

    def ask(state: S):
        return {"n": interrupt("approve?")}

    b = StateGraph(S)
    b.add_node("prep", lambda s: {"n": s["n"] + 1})
    b.add_node("fail", fail)
    b.add_edge(START, "prep")
    b.add_edge("prep", "fail")
    with pytest.raises(RuntimeError):
        rec.attach(b.compile(), name="broken").invoke({"n": 0})
    b2 = StateGraph(S)
    b2.add_node("ask", ask)
    b2.add_edge(START, "ask")
    rec.attach(b2.compile(checkpointer=InMemorySaver()), name="needs-approval").invoke({"n": 0}, {"configurable": {"thread_id": "t"}})
    rec.attach(ra.build_graph("incident"), name="demo:incident").invoke(ra.inputs_for("incident"))
    rec.close()
    return db


async def settle(app, pilot):
    for _ in range(3):
        await pilot.pause(0.05)
        try:
            await app.workers.wait_for_complete()
        except WorkerCancelled:
            pass  # an exclusive worker was replaced by a newer one: wait for that one
    for _ in range(40):
        screen = app.screen
        payload = getattr(screen, "payload", None)
        if not any(w.is_running for w in app.workers) and (not hasattr(screen, "payload") or (payload is not None and payload.index == screen.index)):
            break
        await pilot.pause(0.05)
    await pilot.pause(0.05)


async def calls_of_step(app, pilot, step: int):
    """The Calls tab of root step ``step``, opened as a user opens it (the step, then 5)."""
    from graphtape.tui.widgets.panels import CallsPanel

    screen = app.screen
    screen.query_one(Timeline).cursor = next(i for i, s in enumerate(screen.steps) if s.step == step)
    await settle(app, pilot)
    await pilot.press("5")
    await settle(app, pilot)
    return screen.query_one(CallsPanel)


def step_numbers(screen: RunScreen) -> list[int]:
    return [s.step for s in screen.steps]


async def test_runs_screen_lists_filters_and_opens(demo_db):
    app = build_app(demo_db)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        assert [r.name for r in screen.runs][0] == "demo:incident"
        assert {r.name for r in screen.runs} == {"demo:incident", "demo:happy", "broken", "needs-approval"}
        await pilot.press("s")  # status: ok
        await settle(app, pilot)
        assert {r.status for r in screen.runs} == {"ok"}
        await pilot.press("s", "s")  # error... then interrupted
        await settle(app, pilot)
        assert [r.name for r in screen.runs] == ["needs-approval"]
        await pilot.press("s", "s", "s")  # incomplete, running, back to all
        await settle(app, pilot)
        await pilot.press("slash")
        await pilot.press(*"broken", "enter")
        await settle(app, pilot)
        assert [r.name for r in screen.runs] == ["broken"]
        await pilot.press("escape")
        await settle(app, pilot)
        assert len(screen.runs) == 4
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, RunScreen)
        assert app.screen.run.name == "demo:incident"


async def test_stepping_shows_state_routes_and_calls(demo_db):
    app = build_app(demo_db, "last")
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("G")  # these checks start at the last step (a run opens at its first problem)
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen) and screen.run.name == "demo:incident"
        last = len(screen.steps) - 1
        assert screen.index == last and screen.payload.step.nodes == ["reason"]
        assert screen.payload.state["agent_outcome"]["type"] == "finish"
        await pilot.press("left")
        await settle(app, pilot)
        assert screen.index == last - 1 and screen.payload.step.nodes == ["act"]
        routes = screen.payload.detail.routes
        assert [(r.kind, r.router, r.returned, r.destinations) for r in routes] == [("conditional", "check_iteration_limit", "reason", ["reason"])]
        await pilot.press("h", "h")
        await settle(app, pilot)
        assert screen.index == last - 3
        await pilot.press("home")
        await settle(app, pilot)
        assert screen.index == 0 and screen.payload.step.step == -1
        await pilot.press("end")
        await settle(app, pilot)
        assert screen.index == last
        model_calls = [c for c in screen.payload.calls if c.kind == "model"]
        assert len(model_calls) == 1 and model_calls[0].inputs["messages"]
        await pilot.press("colon")
        await pilot.press("2", "enter")
        await settle(app, pilot)
        assert screen.payload.step.step == 2
        tool_calls = [c.name for c in screen.payload.calls]
        assert tool_calls == ["lookup_order_status"]


async def test_diff_default_and_marked(demo_db):
    app = build_app(demo_db, "last")
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("G")  # these checks start at the last step (a run opens at its first problem)
        await settle(app, pilot)
        screen = app.screen
        # Default: this step against the previous one; the message list grew by appends.
        kinds = {(e.kind, e.path.split("[")[0]) for e in screen.payload.diff}
        assert ("appended", "messages") in kinds
        assert ("changed", "agent_outcome.type") in kinds or any(e.path.startswith("agent_outcome") for e in screen.payload.diff)
        await pilot.press("home")
        await settle(app, pilot)
        await pilot.press("m", "end", "d")
        await settle(app, pilot)
        assert screen.diff_title == f"marked step -1 → step {screen.steps[-1].step}"
        assert any(e.kind == "added" and e.path == "agent_outcome" for e in screen.diff_entries)
        view = screen.query_one(DiffView)
        assert view.title == screen.diff_title and view.total == count_differences(screen.diff_entries)


async def test_jump_to_error_and_interrupt(demo_db):
    app = build_app(demo_db, "last~2")  # the broken run
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert screen.run.name == "broken"
        # An error run opens on its failing step.
        assert screen.payload.step.has_error
        (task,) = [t for t in screen.payload.detail.tasks if t.error_type]
        assert (task.node, task.error_type, task.error_message) == ("fail", "RuntimeError", "payment API returned 500")
        await pilot.press("home", "e")
        await settle(app, pilot)
        assert screen.payload.step.has_error
    app = build_app(demo_db, "last~1")  # interrupted run
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        await pilot.press("home", "e")
        await settle(app, pilot)
        assert screen.payload.step.has_interrupt
        assert [(e.kind, e.value) for e in screen.payload.detail.events] == [("interrupt", "approve?")]


async def test_reverse_watch_jumps_to_the_step_that_changed_a_key(demo_db):
    app = build_app(demo_db, "last")
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("G")  # these checks start at the last step (a run opens at its first problem)
        await settle(app, pilot)
        screen = app.screen
        screen.watch_key = "retries"
        await pilot.press("left_square_bracket")
        await settle(app, pilot)
        at = screen.payload.step
        assert at.nodes == ["act"] and "retries" in screen.payload.changed
        before = screen.payload.state["retries"]
        await pilot.press("left_square_bracket")
        await settle(app, pilot)
        assert screen.payload.step.step < at.step and screen.payload.state["retries"] < before


async def test_subgraph_tab_opens_the_child_namespace(tmp_path):
    from typing import TypedDict

    from langgraph.graph import START, StateGraph

    class S(TypedDict):
        n: int

    inner = StateGraph(S)
    inner.add_node("double", lambda s: {"n": s["n"] * 2})
    inner.add_edge(START, "double")
    outer = StateGraph(S)
    outer.add_node("child", inner.compile())
    outer.add_edge(START, "child")
    db = str(tmp_path / "sub.db")
    rec = Recorder(db)
    rec.attach(outer.compile(), name="nested").invoke({"n": 3})
    rec.close()
    app = build_app(db, "last")
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("G")  # these checks start at the last step (a run opens at its first problem)
        await settle(app, pilot)
        screen = app.screen
        assert screen.payload.step.nodes == ["child"] and screen.payload.subgraphs
        await pilot.press("6")
        await settle(app, pilot)
        screen.query_one("#subgraph-list").focus()
        await pilot.press("enter")
        await settle(app, pilot)
        child = app.screen
        assert isinstance(child, RunScreen) and child.ns.startswith("child:")
        await pilot.press("G")
        await settle(app, pilot)
        assert child.payload.state == {"n": 6}
        await pilot.press("u")
        await settle(app, pilot)
        assert app.screen is screen


async def test_empty_store_and_bad_inputs_show_messages(tmp_path):
    empty = str(tmp_path / "empty.db")
    Recorder(empty).close()
    app = build_app(empty)
    async with app.run_test(size=(100, 24)) as pilot:
        await settle(app, pilot)
        text = str(app.screen.query_one("#runs-empty").render())
        assert "no runs yet" in text
    app = build_app(empty, "nosuchrun")
    async with app.run_test(size=(100, 24)) as pilot:
        await settle(app, pilot)
        assert "no run matches 'nosuchrun'" in str(app.screen.query_one("#loading").render())
    engine = sa.create_engine(f"sqlite:///{empty}")
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE graphtape_meta SET value='999' WHERE key='schema_version'"))
    engine.dispose()
    app = build_app(empty)
    async with app.run_test(size=(100, 24)) as pilot:
        await settle(app, pilot)
        assert "newer graphtape" in str(app.screen.query_one("#loading").render())


async def test_small_terminal_stacks_the_layout(demo_db):
    app = build_app(demo_db, "last")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("G")  # these checks start at the last step (a run opens at its first problem)
        await settle(app, pilot)
        screen = app.screen
        assert screen.has_class("narrow")
        timeline = screen.query_one(Timeline)
        assert timeline.region.width == 80
        await pilot.press("right")
        await settle(app, pilot)
        assert screen.index == len(screen.steps) - 1


async def test_help_and_palette_list_the_actions(demo_db):
    app = build_app(demo_db, "last")
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for action in ("Prev", "Next", "Jump", "Mark", "Diff", "Watch", "Copy", "Next problem"):
            assert any(t.startswith(action) for t in titles), action
        await pilot.press("question_mark")
        await settle(app, pilot)
        assert type(app.screen).__name__ == "HelpScreen"
        await pilot.press("escape")
        assert isinstance(app.screen, RunScreen)


async def test_ctrl_c_says_how_to_quit_and_q_quits_from_a_run(demo_db):
    """Ctrl+C tells the keys that quit, as plain words (not Textual's markup shown as text), and
    ``q`` on a run's screen quits as it does on the runs list."""
    app = build_app(demo_db, "last")
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        assert isinstance(app.screen, RunScreen)
        await pilot.press("ctrl+c")
        await pilot.pause(0.05)
        told = [str(n.message) for n in app._notifications]
        assert any("to quit" in m and "q" in m.split("to quit")[0] for m in told), told
        assert not any("[b]" in m for m in told), told
        await pilot.press("q")
        await pilot.pause(0.05)
    assert app.return_code == 0 and not app.is_running


async def test_timeline_keys_and_clicks_select_steps(demo_db):
    app = build_app(demo_db, "last")
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("G")  # these checks start at the last step (a run opens at its first problem)
        await settle(app, pilot)
        screen = app.screen
        timeline = screen.query_one(Timeline)
        last = len(screen.steps) - 1
        assert timeline.has_focus and timeline.cursor == screen.index == last
        await pilot.press("up", "up")
        await settle(app, pilot)
        assert timeline.cursor == screen.index == last - 2
        await pilot.click(Timeline, offset=(3, 2))  # line 0 is the header: line 2 is the second step
        await settle(app, pilot)
        assert screen.index == 1 and screen.payload.step.step == screen.steps[1].step
        await pilot.click(Timeline, offset=(3, 0))  # the header selects nothing
        await settle(app, pilot)
        assert screen.index == 1


def test_long_runs_of_appends_fold_to_their_ends():
    from graphtape.tui.data import count_differences, diff_states, fold_appends

    old = {"messages": [{"type": "human", "content": "hi"}], "n": 1}
    new = {"messages": old["messages"] + [{"type": "ai", "content": f"m{i}"} for i in range(100)], "n": 2}
    entries = diff_states(old, new)
    assert [(e.kind, e.path) for e in entries] == [
        ("appended", "messages[1]"),
        ("appended", "messages[2]"),
        ("skipped", "messages[3]…[98]"),
        ("appended", "messages[99]"),
        ("appended", "messages[100]"),
        ("changed", "n"),
    ]
    assert entries[2].new == 96 and count_differences(entries) == 101
    assert [e.new["content"] for e in entries if e.kind == "appended"] == ["m0", "m1", "m98", "m99"]
    # A short run stays whole; folding what is folded changes nothing.
    assert [e.kind for e in diff_states(old, {**old, "messages": new["messages"][:6]})] == ["appended"] * 5
    assert fold_appends(entries) == entries
    # Appends found by deepdiff (the lists differ before they grow) fold the same way.
    changed = {"messages": [{"type": "human", "content": "edited"}] + new["messages"][1:], "n": 2}
    kinds = [e.kind for e in diff_states(old, changed)]
    assert kinds.count("skipped") == 1 and kinds.count("appended") == 4 and kinds[0] == "changed"


def test_a_large_mapping_diffs_to_exactly_its_changed_keys():
    """Only the keys that differ are handed to deepdiff: what it reports, nested paths included, is the same."""
    from graphtape.tui.data import diff_states

    table = {f"k{i}": {"v": i} for i in range(20_000)}
    new_table = {**table, "k5": {"v": -5}, "added": {"v": 1}}
    del new_table["k7"]
    entries = diff_states({"table": table, "n": 1}, {"table": new_table, "n": 1})
    assert sorted((e.kind, e.path, e.old, e.new) for e in entries) == [
        ("added", "table.added", None, {"v": 1}),
        ("changed", "table.k5.v", 5, -5),
        ("removed", "table.k7", {"v": 7}, None),
    ]


def test_deferred_lists_diff_and_show_decoding_only_what_is_shown(tmp_path):
    """A long history read deferred: the step diff decodes the new message, a far diff its ends."""
    from graphtape.recorder.deferred import DeferredList
    from graphtape.tui.data import count_differences, diff_states, message_lists, short

    decoded: list[int] = []

    def decode(items: list) -> list:
        decoded.extend(i["n"] for i in items)
        return [{"type": "ai", "content": f"m{i['n']}"} for i in items]

    encoded = [{"n": i} for i in range(1_000)]
    before, after = DeferredList(encoded[:999], decode), DeferredList(list(encoded), decode)
    entries = diff_states({"messages": before}, {"messages": after})
    assert [(e.kind, e.path, e.new["content"]) for e in entries] == [("appended", "messages[999]", "m999")]
    assert decoded == [999]
    far = diff_states({"messages": DeferredList(encoded[:10], decode)}, {"messages": after})
    assert count_differences(far) == 990 and [e.kind for e in far] == ["appended", "appended", "skipped", "appended", "appended"]
    assert sorted(decoded) == [10, 11, 998, 999]  # 999 was decoded by the first diff and kept
    assert diff_states({"messages": after}, {"messages": DeferredList(list(encoded), decode)}) == []
    assert short(after) == "[1000 items]" and after.loaded(998, 1000) and not after.loaded(0, 2)
    assert list(message_lists({"messages": after, "n": 3})) == ["messages"]
    # A plain list against a deferred one (a history that crossed the deferral length) still diffs.
    mixed = diff_states({"messages": [decode([e])[0] for e in encoded[:999]]}, {"messages": DeferredList(list(encoded), decode)})
    assert [(e.kind, e.path) for e in mixed] == [("appended", "messages[999]")]


async def test_transcript_shows_the_selected_step_when_its_tab_opens(demo_db):
    app = build_app(demo_db, "last")
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("G")  # these checks start at the last step (a run opens at its first problem)
        await settle(app, pilot)
        screen = app.screen
        await pilot.press("left", "left")  # stepped while the Messages tab is hidden
        await settle(app, pilot)
        await pilot.press("2")
        await settle(app, pilot)
        head = screen.query_one("#transcript-body").content.renderables[0]
        assert str(head).startswith(f"messages: {len(screen.payload.state['messages'])} messages")


def _record_long_history(db: str, prefill: int = 300, steps: int = 4) -> str:
    """A real graph whose state holds a history longer than the deferral length; returns the run id."""
    from typing import Annotated, TypedDict

    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
    from langgraph.graph import START, StateGraph
    from langgraph.graph.message import add_messages

    # The functional form: this module's `from __future__ import annotations` would leave strings.
    S = TypedDict("S", {"n": int, "messages": Annotated[list[AnyMessage], add_messages]})

    def speak(state: dict):
        return {"n": state["n"] + 1, "messages": [AIMessage(content=f"reply {state['n']}")]}

    b = StateGraph(S)
    b.add_node("speak", speak)
    b.add_edge(START, "speak")
    b.add_conditional_edges("speak", lambda s: "speak" if s["n"] < steps else "__end__")
    rec = Recorder(db)
    history = [HumanMessage(content=f"question {i}", id=f"q{i}") for i in range(prefill)]
    rec.attach(b.compile(), name="long-history").invoke({"n": 0, "messages": history})
    rec.close()
    return rec.last_run_id


def test_deferred_state_reads_the_same_values_as_a_full_read(store_url):
    """On SQLite and PostgreSQL: long lists come back deferred, and read back exactly what a full read gives."""
    from graphtape.recorder import open_store
    from graphtape.recorder.deferred import DEFER_AT, DeferredList

    run_id = _record_long_history(store_url, prefill=DEFER_AT + 20)
    store = open_store(store_url)
    try:
        steps = store.list_steps(run_id)
        for info in (steps[1], steps[-1]):
            full = store.state_at(run_id, info.step)
            lazy = store.state_at(run_id, info.step, deferred=True)
            assert isinstance(lazy["messages"], DeferredList) and not isinstance(lazy["n"], DeferredList)
            assert lazy["n"] == full["n"] and len(lazy["messages"]) == len(full["messages"])
            assert not lazy["messages"].loaded(0, 1)  # nothing decoded until read
            assert lazy["messages"][-1] == full["messages"][-1] and lazy["messages"].loaded(len(full["messages"]) - 1, len(full["messages"]))
            assert lazy["messages"][5:8] == full["messages"][5:8]
            assert lazy["messages"].materialize() == full["messages"] and lazy["messages"] == full["messages"]
        first, last = (store.state_at(run_id, s.step, deferred=True)["messages"] for s in (steps[1], steps[-1]))
        assert first.shared_prefix(last) == len(first) and first != last
    finally:
        store.close()


def test_a_deferred_list_whose_blobs_are_damaged_fails_in_one_line(tmp_path):
    from graphtape.recorder import open_store
    from graphtape.recorder.errors import StoreError

    db = str(tmp_path / "damaged.db")
    run_id = _record_long_history(db)
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE blobs SET data = X'00ff00', zipped = 1"))
    engine.dispose()
    store = open_store(db)
    try:
        messages = store.state_at(run_id, store.list_steps(run_id)[-1].step, deferred=True)["messages"]
        with pytest.raises(StoreError) as caught:
            messages[0]
        assert "\n" not in str(caught.value)
    finally:
        store.close()


async def test_a_long_history_opens_decoding_only_what_is_shown(tmp_path):
    """The run screen reads the history deferred: the transcript's tail, then tree items, copy and save on demand."""
    import json

    from graphtape.recorder.deferred import DeferredList
    from graphtape.tui.step_reader import TRANSCRIPT_TAIL
    from graphtape.tui.widgets.state_tree import StateTree

    db = str(tmp_path / "long.db")
    run_id = _record_long_history(db)
    app = build_app(db, run_id)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("G")  # these checks start at the last step (a run opens at its first problem)
        await settle(app, pilot)
        screen = app.screen
        messages = screen.payload.state["messages"]
        total = 300 + 4
        assert isinstance(messages, DeferredList) and len(messages) == total
        assert len(messages._items) <= TRANSCRIPT_TAIL + 2  # the transcript's tail and the diff's new message
        assert [(e.kind, e.path) for e in screen.payload.diff if e.path.startswith("messages")] == [("appended", f"messages[{total - 1}]")]
        await pilot.press("2")
        await settle(app, pilot)
        head = str(screen.query_one("#transcript-body").content.renderables[0])
        assert head == f"messages: {total} messages (showing the last {TRANSCRIPT_TAIL})"

        # Expanding the messages node in the state tree decodes its first items in a worker.
        await pilot.press("1")
        tree = screen.query_one(StateTree)
        tree.focus()
        node = next(n for n in tree.root.children if n.data[0] == ["messages"])
        tree.move_cursor(node)
        await pilot.press("space")
        await settle(app, pilot)
        labels = [str(c.label) for c in node.children]
        assert labels[0] == "[0] human: question 0" and labels[-1] == f"[{total - 1}] ai: reply 3" and len(labels) == total
        assert messages.loaded(0, total)

        # Copy the selected value (the whole history) and save the step's state: both in full.
        await pilot.press("c")
        await settle(app, pilot)
        copied = json.loads(app.clipboard)
        assert len(copied) == total and copied[0]["content"] == "question 0" and copied[-1]["content"] == "reply 3"
        # s asks where (the default is in the current directory); the file is private (0600).
        target = tmp_path / "out" / "state.json"
        await pilot.press("s")
        await settle(app, pilot)
        field = app.screen.query_one("#export-path")
        assert field.value.startswith("graphtape-") and field.value.endswith(".json")
        field.value = str(target)
        await pilot.press("enter")
        await settle(app, pilot)
        saved = json.loads(target.read_text())
        assert len(saved["messages"]) == total and saved["n"] == 4
        assert target.stat().st_mode & 0o777 == 0o600
        # An existing file is replaced only after a second Enter.
        target.write_text("{}")
        await pilot.press("s")
        await settle(app, pilot)
        app.screen.query_one("#export-path").value = str(target)
        await pilot.press("enter")
        await settle(app, pilot)
        assert target.read_text() == "{}" and "exists" in str(app.screen.query_one("#export-error").render())
        await pilot.press("enter")
        await settle(app, pilot)
        assert json.loads(target.read_text())["n"] == 4


async def test_a_run_screen_keeps_what_it_loaded_out_of_full_collections_while_open(demo_db):
    """Loaded steps are frozen for the garbage collector while the run is open, and released with the screen."""
    import gc

    app = build_app(demo_db, "last")
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(app, pilot)
        assert isinstance(app.screen, RunScreen) and gc.get_freeze_count() > 0
        await pilot.press("escape")
        await settle(app, pilot)
        assert isinstance(app.screen, RunsScreen) and gc.get_freeze_count() == 0


async def test_an_unreadable_step_says_so_instead_of_showing_the_last_one(tmp_path):
    """A damaged step shows its error in place of the views; readable steps around it still open."""
    db = str(tmp_path / "damaged.db")
    ra = load_agent("reason_act")
    rec = Recorder(db)
    rec.attach(ra.build_graph("incident"), name="demo:incident").invoke(ra.inputs_for("incident"))
    rec.close()
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE steps SET payload = X'7a00ff00ff' WHERE step = 3"))
    engine.dispose()
    app = build_app(db, "last")
    async with app.run_test(size=(120, 34)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        screen.query_one(Timeline).cursor = next(i for i, s in enumerate(screen.steps) if s.step == 3)
        await settle(app, pilot)
        await pilot.pause(0.4)  # past the "still loading" timer, which must not cover the error
        assert screen.payload is None and screen.has_class("step-failed")
        error = str(screen.query_one("#step-error").render())
        assert error.startswith("Cannot read step 3: damaged payload in the database")
        assert "cannot read it" in str(screen.query_one("#run-status").render())
        await pilot.press("home")
        await settle(app, pilot)
        assert screen.payload.step.step == -1 and not screen.has_class("step-failed")


async def test_keys_pressed_faster_than_steps_load_all_count(demo_db):
    app = build_app(demo_db, "last")
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        await pilot.press("home")
        await settle(app, pilot)
        for _ in range(3):  # three key presses handled before any step finished loading
            screen.action_step(1)
        await settle(app, pilot)
        assert screen.index == 3 and screen.payload.index == 3
        screen.action_step(-1)
        screen.action_step(-1)
        await settle(app, pilot)
        assert screen.index == 1


async def test_small_terminal_help_scrolls_and_keys_read_as_typed(demo_db):
    from graphtape.tui.screens.prompts import HelpScreen

    app = build_app(demo_db, "last")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("question_mark")
        await settle(app, pilot)
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        keys = dict(help_screen.rows)
        assert keys["←/h"].startswith("Prev: ") and keys["["].startswith("Last change") and "ctrl+q" in keys and "tab" in keys
        body = help_screen.query_one("#help-keys")
        assert body.max_scroll_y > 0  # more keys than fit: the list scrolls instead of being cut
        await pilot.press("pagedown")
        await pilot.pause(0.1)
        assert body.scroll_y > 0
        await pilot.press("escape")
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert len(titles) == len(set(titles)), "a command is listed twice"
        helps = [c.help for c in app.get_system_commands(app.screen)]
        assert not any(h.startswith("run the ") for h in helps)


async def test_watch_prompt_names_its_keys(demo_db):
    app = build_app(demo_db, "last")
    async with app.run_test(size=(120, 34)) as pilot:
        await settle(app, pilot)
        await pilot.press("w")
        await settle(app, pilot)
        texts = [str(w.render()) for w in app.screen.query("Static")]
        assert any("[ and ]" in t for t in texts), texts


async def test_step_minus_one_shows_the_input_and_says_what_it_is(demo_db):
    app = build_app(demo_db, "last")
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        await pilot.press("home")
        await settle(app, pilot)
        assert screen.payload.step.step == -1 and screen.payload.graph_input["input"] == "Has my order A-1042 arrived yet?"
        from graphtape.tui.widgets.state_tree import StateTree

        labels = [str(n.label) for n in screen.query_one(StateTree).root.children]
        assert labels[0].startswith("no state yet: step -1 holds the graph's input") and labels[1].startswith("input:")
        routes = str(screen.query_one("#routes-panel .panel-body").render())
        assert routes.startswith("Step -1 holds the graph's input")
        assert "(the input)" in str(screen.query_one("#run-status").render())


async def test_values_the_views_fold_open_in_full(demo_db):
    """v (or Enter on a leaf) shows a state value whole; on the Diff tab, every entry's values whole."""
    from graphtape.tui.screens.prompts import ValueScreen
    from graphtape.tui.widgets.state_tree import StateTree

    app = build_app(demo_db, "last")
    async with app.run_test(size=(120, 34)) as pilot:
        await settle(app, pilot)
        await pilot.press("G")  # these checks start at the last step (a run opens at its first problem)
        await settle(app, pilot)
        screen = app.screen
        answer = screen.payload.state["agent_outcome"]["answer"]
        tree = screen.query_one(StateTree)
        tree.focus()
        node = next(n for n in tree.root.children if n.data[0] == ["agent_outcome"])
        node.expand()
        await settle(app, pilot)
        leaf = next(c for c in node.children if c.data[0] == ["agent_outcome", "answer"])
        tree.move_cursor(leaf)
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, ValueScreen) and app.screen.text == f'"{answer}"'
        await pilot.press("escape")
        await pilot.press("3", "v")
        await settle(app, pilot)
        assert isinstance(app.screen, ValueScreen) and answer in app.screen.text and app.screen.title_text.startswith("diff: step")


async def test_model_calls_show_their_tokens(tmp_path):
    from graphtape.tui.widgets.panels import CallsPanel

    db = str(tmp_path / "react.db")
    react = load_agent("react_agent")
    rec = Recorder(db)
    rec.attach(react.build_graph(), name="demo:react").invoke(react.inputs_for())
    rec.close()
    app = build_app(db, "last")
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        model_step = next(i for i, s in enumerate(screen.steps) if "agent" in s.nodes)
        screen.query_one(Timeline).cursor = model_step
        await settle(app, pilot)
        call = next(c for c in screen.payload.calls if c.kind == "model")
        assert call.input_tokens and call.output_tokens
        await pilot.press("5")
        await settle(app, pilot)
        panel = screen.query_one(CallsPanel)
        detail = panel.query_one("#call-detail").content
        assert f"{call.input_tokens} in / {call.output_tokens} out tokens" in str(detail.renderables[0])
        first = panel.query_one("#call-list").get_option_at_index(0).prompt
        assert f"{call.input_tokens}→{call.output_tokens} tok" in str(first)


async def test_the_demo_says_what_happened_when_it_opens(demo_db):
    from graphtape.tui.cli import demo_welcome

    app = build_app(demo_db, "last", welcome=demo_welcome("The status tool times out twice."))
    async with app.run_test(size=(120, 34)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        # The hint is a line of the header, not a toast over the status line or the state.
        header = str(screen.query_one("#run-header").render())
        assert "The status tool times out twice." in header and "e: next problem" in header
        assert not list(app._notifications)
        # The run opens at its first problem (the first timed-out call), and e finds the next one.
        problems = [s.step for s in screen.steps if screen.call_counts.get(s.step, {}).get("failed")]
        assert screen.steps[screen.index].step == problems[0]
        await pilot.press("e")
        await settle(app, pilot)
        assert screen.steps[screen.index].step == problems[1]


async def test_a_run_without_problems_opens_where_its_story_starts(demo_db):
    store = open_store(demo_db)
    happy = next(r.id for r in store.list_runs() if r.name == "demo:happy")
    store.close()
    app = build_app(demo_db, happy)
    async with app.run_test(size=(120, 34)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert screen.run.name == "demo:happy" and screen.steps[screen.index].step == 0


async def test_the_transcript_opens_at_its_end_and_end_reaches_the_last_message(demo_db):
    for size in ((120, 36), (80, 24)):
        app = build_app(demo_db, "last")
        async with app.run_test(size=size) as pilot:
            await settle(app, pilot)
            await pilot.press("G", "2")
            await settle(app, pilot)
            await pilot.pause(0.2)
            transcript = app.screen.query_one("#transcript")
            assert transcript.max_scroll_y > 0 and transcript.scroll_y == transcript.max_scroll_y, size
            # Home/End on the focused transcript scroll it (they step the timeline elsewhere).
            transcript.focus()
            await pilot.press("home")
            await pilot.pause(0.1)
            assert transcript.scroll_y == 0 and app.screen.index == len(app.screen.steps) - 1
            await pilot.press("end")
            await pilot.pause(0.1)
            assert transcript.scroll_y == transcript.max_scroll_y
            # The last box's last line (the agent's wrong answer) is on screen at the end.
            body = transcript.query_one("#transcript-body")
            lines = body.render_lines(body.region.reset_offset)  # laid out at its own width
            text = "\n".join(strip.text for strip in lines)
            assert "2024-05-03." in text.rsplit("╭", 1)[-1]  # "...delivered on 2024-05-03." (wrapped)
            assert body.region.height == len(lines)


@pytest.mark.parametrize("size", [(120, 36), (80, 24), (160, 40)])
async def test_every_tab_label_shows_in_full_whichever_tab_is_open(demo_db, size):
    from textual.widgets import Tab, Tabs

    app = build_app(demo_db, "last")
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        screen = app.screen
        for key in "1234567":
            await pilot.press(key)
            await pilot.pause(0.1)
            strip = screen.query_one(Tabs)
            room = strip.region
            for tab in strip.query(Tab):
                assert room.x <= tab.region.x and tab.region.right <= room.right, (key, str(tab.label), tab.region, room)


async def test_the_state_tree_says_1_item_not_1_items(demo_db):
    from graphtape.tui.widgets.state_tree import StateTree

    app = build_app(demo_db, "last")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        await pilot.press("G")
        await settle(app, pilot)
        labels = [str(node.label) for node in screen.query_one(StateTree).root.children]
        line = next(label for label in labels if "intermediate_steps" in label)
        assert "[3 items]" in line, labels  # the incident's last step: three tool results (two timed out)
        while screen.steps[screen.index].step > 0 and "[1 item]" not in line:
            await pilot.press("left")
            await settle(app, pilot)
            labels = [str(node.label) for node in screen.query_one(StateTree).root.children]
            line = next(label for label in labels if "intermediate_steps" in label)
        assert "[1 item]" in line and "[1 items]" not in " ".join(labels), labels


def test_counts_read_in_the_right_number():
    from graphtape.tui.data import short
    from graphtape.tui.render import plural

    assert short([1]) == "[1 item]" and short([1, 2]) == "[2 items]" and short([]) == "[0 items]"
    assert plural(1, "step") == "1 step" and plural(3, "more line") == "3 more lines"


@pytest.mark.parametrize("size", [(80, 24), (120, 36)])
async def test_the_fork_and_replay_prompts_fit_the_screen_title_first(demo_db, size):
    from textual.widgets import Input, OptionList, Static

    from graphtape.tui.screens.prompts import ForkPrompt, PromptBody, ReplayPrompt

    app = build_app(demo_db, "last")
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        for key, kind, title in (("f", ForkPrompt, "Fork after step"), ("r", ReplayPrompt, "Replay from step")):
            await pilot.press(key)
            await settle(app, pilot)
            prompt = app.screen
            assert isinstance(prompt, kind)
            body = prompt.query_one(PromptBody)
            heading = prompt.query(Static).first()
            assert title in str(heading.render())
            assert body.max_scroll_y == 0, f"the {kind.__name__} scrolls at {size}"
            assert 0 <= body.region.y and body.region.bottom <= size[1] and body.region.contains_region(heading.region)
            # Borderless fields only where they are needed to fit.
            short = size[1] < 30
            assert all(field.compact == short for field in prompt.query(Input))
            assert prompt.query_one(OptionList).compact == short
            await pilot.press("escape")
            await settle(app, pilot)


def test_a_remove_message_reads_as_what_it_removes(tmp_path, capsys):
    """A node that trims the history writes RemoveMessages: no content, only the ids they take out."""
    from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.graph.message import REMOVE_ALL_MESSAGES

    from graphtape.recorder import Recorder
    from graphtape.tui.cli import main
    from graphtape.tui.render import short

    b = StateGraph(MessagesState)
    b.add_node("talk", lambda s: {"messages": [AIMessage("hi", id="a1")]})
    b.add_node("trim", lambda s: {"messages": [RemoveMessage(id="h1")]})
    b.add_edge(START, "talk")
    b.add_edge("talk", "trim")
    b.add_edge("trim", END)
    db = str(tmp_path / "trim.db")
    with Recorder(db) as rec:
        rec.attach(b.compile()).invoke({"messages": [HumanMessage("yo", id="h1")]})
        rec.flush()
    assert main(["--db", db, "show", "last"]) == 0
    assert "remove message h1" in capsys.readouterr().out
    assert short({"type": "remove", "content": "", "id": REMOVE_ALL_MESSAGES}) == "remove all messages"
