"""A PostgreSQL server that neither answers nor refuses does not hold the program's start.

The store is reached through a real TCP proxy in front of the test server that holds every
connection until it is released: a hung host, then the same host back. ``Recorder(...)`` returns
with the open still waiting, the graph runs, and the run is written once the server answers.
"""

from __future__ import annotations

import socket
import threading
from typing import TypedDict

import sqlalchemy as sa
from langgraph.graph import END, START, StateGraph

from graphtape import Recorder, open_store
from graphtape.recorder.errors import StoreError
from graphtape.recorder.store_opening import StillOpening


class HeldProxy:
    """Accepts connections at once and pipes them to ``target`` only after ``release()``."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.released = threading.Event()
        self.accepted = 0
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self._server.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        self.released.wait()
        upstream = socket.create_connection(self.target)
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class S(TypedDict):
    n: int


def _graph():
    b = StateGraph(S)
    b.add_node("a", lambda s: {"n": s["n"] + 1})
    b.add_node("b", lambda s: {"n": s["n"] * 10})
    b.add_edge(START, "a")
    b.add_edge("a", "b")
    b.add_edge("b", END)
    return b.compile()


def test_a_server_that_does_not_answer_yet_holds_neither_start_nor_run(pg_url):
    url = sa.engine.make_url(pg_url)
    proxy = HeldProxy((url.host, url.port or 5432))
    try:
        rec = Recorder(url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False))
        # Back before the open finished: it is still waiting on the held connection.
        assert proxy.accepted >= 1 and not proxy.released.is_set()
        assert rec.writer.store is None and rec.fault_count == 1
        assert isinstance(rec.writer.open_error, StillOpening)
        graph = rec.attach(_graph(), name="held")
        assert graph.invoke({"n": 1}) == {"n": 20}
        run_id = rec.last_run_id
        proxy.release()  # the server answers now: the open goes through, the kept rows are written
        rec.close()
        assert rec.writer.kept_rows == 0
    finally:
        proxy.close()
    store = open_store(pg_url)
    try:
        run = store.get_run(run_id)
        steps = [s.step for s in store.list_steps(run_id)]
        assert (run.name, run.status, steps) == ("held", "ok", [-1, 0, 1, 2])
        assert store.state_at(run_id, steps[-1]) == {"n": 20}
    finally:
        store.close()


def test_strict_mode_says_the_server_did_not_answer(pg_url):
    url = sa.engine.make_url(pg_url)
    proxy = HeldProxy((url.host, url.port or 5432))
    try:
        try:
            Recorder(url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False), strict=True)
        except StoreError as exc:
            message = str(exc)
        else:
            raise AssertionError("strict mode started with no store")
    finally:
        proxy.release()
        proxy.close()
    assert "no answer from the server yet" in message and f":{proxy.port}/" in message


def test_exit_says_why_it_waits_for_a_store_that_is_down(tmp_path):
    """The program looks finished while its last rows wait for the store: one line says so."""
    import subprocess
    import sys
    import textwrap

    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]  # nothing listens there once closed: refused at once
    script = tmp_path / "agent.py"
    script.write_text(
        textwrap.dedent(
            f"""
            from typing import TypedDict
            from langgraph.graph import END, START, StateGraph
            from graphtape import Recorder

            class S(TypedDict):
                n: int

            b = StateGraph(S)
            b.add_node("a", lambda s: {{"n": s["n"] + 1}})
            b.add_edge(START, "a")
            b.add_edge("a", END)
            rec = Recorder("postgresql+psycopg://postgres@127.0.0.1:{port}/test")
            print(rec.attach(b.compile()).invoke({{"n": 1}}))
            """
        )
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, "{'n': 2}\n")
    waiting = [line for line in done.stderr.splitlines() if line.startswith("graphtape: the store has not taken")]
    assert len(waiting) == 1 and "rows (" in waiting[0] and "before exit (Ctrl-C stops)" in waiting[0], done.stderr
    assert "Traceback" not in done.stderr
