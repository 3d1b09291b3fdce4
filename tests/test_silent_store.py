"""A PostgreSQL server that goes silent mid-run (no answer, no refusal): the agent still ends (in
``sync`` mode after ``lock_wait`` per commit), and closing says that what was being written may be
lost instead of exiting without a word or hanging on the silent connection."""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import TypedDict

import pytest
import sqlalchemy as sa
from langgraph.graph import END, START, StateGraph

from graphtape.recorder import Recorder


class _PausableProxy:
    """Forwards TCP to the server until ``silence`` is set; then holds every byte, both ways."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.flowing = threading.Event()
        self.flowing.set()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                self.flowing.wait()
                b.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        self.flowing.set()
        self.listener.close()


class S(TypedDict):
    i: int


@pytest.mark.parametrize("durability", ["async", "sync"])
def test_a_server_gone_silent_mid_run_neither_holds_the_run_nor_goes_unsaid(pg_url, durability, caplog):
    url = sa.engine.make_url(pg_url)
    proxy = _PausableProxy(url.host or "127.0.0.1", url.port or 5432)
    via_proxy = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)

    def step(s):
        if s["i"] == 3:
            proxy.flowing.clear()  # the server goes silent from here on
        time.sleep(0.01)
        return {"i": s["i"] + 1}

    b = StateGraph(S)
    b.add_node("step", step)
    b.add_edge(START, "step")
    b.add_conditional_edges("step", lambda s: "step" if s["i"] < 8 else END)
    try:
        with caplog.at_level(logging.WARNING, logger="graphtape"):
            rec = Recorder(via_proxy, durability=durability, lock_wait=0.5)
            assert rec.attach(b.compile()).invoke({"i": 0}) == {"i": 8}  # the agent is not held
            rec.close(timeout=1.0)
        said = [r.getMessage() for r in caplog.records if r.name == "graphtape"]
        assert any("did not answer a write" in line and "may be lost" in line for line in said), said
    finally:
        proxy.close()
