"""Redaction on export: a fixture carries no planted secret, even from a store recorded without the rule.

Reuses the secret-planting agent of ``test_redaction_e2e``: secrets of every
form in inputs, config, state, tool arguments and results, model messages and
errors. The fixture is written to a file and searched byte for byte.
"""

from __future__ import annotations

from pathlib import Path

from test_redaction_e2e import USER_KEY, USER_PATTERN, Planted, build, config, inputs, leaks

from graphtape.recorder import Recorder, open_store
from graphtape.replay import export_fixture, write_fixture


def test_exported_fixture_holds_no_planted_secret(tmp_path: Path) -> None:
    db = tmp_path / "secrets.db"
    p = Planted()
    with Recorder(db, redact_patterns=[USER_PATTERN], redact_keys=[USER_KEY]) as rec:
        rec.attach(build(p), name="secret-agent").invoke(inputs(p), config(p, "invoked"))
        rec.flush()
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        path = tmp_path / "fixture.json"
        write_fixture(path, export_fixture(store, run_id, redact_patterns=[USER_PATTERN], redact_keys=[USER_KEY]))
    finally:
        store.close()
    assert p.bodies and leaks(p, path.read_bytes()) == []


def test_export_redacts_what_the_recording_kept(tmp_path: Path) -> None:
    """Recorded without the user's rules, the store holds those secrets; the export still drops them."""
    db = tmp_path / "secrets.db"
    p = Planted()
    with Recorder(db) as rec:  # no user pattern or key: the built-in rules only
        rec.attach(build(p), name="secret-agent").invoke(inputs(p), config(p, "invoked"))
        rec.flush()
        run_id = rec.last_run_id
    user_secrets = {name for name in p.bodies if name.startswith("user-pattern@") or name.startswith(f"value@{USER_KEY}@")}
    store = open_store(db)
    try:
        stored = str(store.run_detail(run_id).inputs) + str(store.state_at(run_id, store.list_steps(run_id)[-1].step))
        kept = [n for n in user_secrets if p.bodies[n] in stored]
        assert kept, "the store should still hold the secrets only the user's rules catch"
        path = tmp_path / "fixture.json"
        write_fixture(path, export_fixture(store, run_id, redact_patterns=[USER_PATTERN], redact_keys=[USER_KEY]))
    finally:
        store.close()
    assert leaks(p, path.read_bytes()) == []
