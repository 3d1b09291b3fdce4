"""``Recorder()`` on a store it cannot open goes on (the run must not fail), and its one warning
says what to do about it: the rows wait for the store, or record elsewhere."""

from __future__ import annotations

import logging
import time

from conftest import bump_graph

from graphtape import Recorder
from graphtape.recorder.writer import CLOSE_WAIT_S


def test_a_store_recorder_cannot_open_warns_once_with_how_to_record_elsewhere(tmp_path, caplog):
    (tmp_path / "app.py").write_text("")
    caplog.set_level(logging.WARNING, logger="graphtape")
    rec = Recorder(tmp_path / "app.py" / "graphtape.db")
    rec.close()
    warnings = [r.getMessage() for r in caplog.records if r.name == "graphtape"]
    assert len(warnings) == 1, warnings
    assert "app.py is not a folder" in warnings[0]
    assert "to record elsewhere, pass Recorder(PATH_OR_URL) or set $GRAPHTAPE_DB" in warnings[0]
    assert "\n" not in warnings[0]


def test_a_store_that_cannot_be_made_there_is_rescued_at_close_without_waiting(tmp_path, monkeypatch):
    """A path under a file will not hold a store within the close's 10 s of retries: the run goes
    to the rescue file at once (a close that waits out that window for nothing is a wall)."""
    (tmp_path / "app.py").write_text("")
    monkeypatch.setenv("GRAPHTAPE_RESCUE_DIR", str(tmp_path))
    rec = Recorder(tmp_path / "app.py" / "graphtape.db")
    rec.attach(bump_graph()).invoke({"n": 0})
    started = time.monotonic()
    rec.close()
    waited = time.monotonic() - started
    assert list(tmp_path.glob("graphtape-rescued-*.db")), "the run is rescued"
    assert waited < CLOSE_WAIT_S / 2, f"close waited {waited:.1f} s for a store that cannot be made"
