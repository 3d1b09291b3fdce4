"""``Recorder()`` on a store it cannot open goes on (the run must not fail), and its one warning
says what to do about it: the rows wait for the store, or record elsewhere."""

from __future__ import annotations

import logging

from graphtape import Recorder


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
