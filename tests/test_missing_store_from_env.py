"""A missing store named by ``$GRAPHTAPE_DB`` (set long ago in a shell profile) says so: its path
alone does not tell a newcomer why `graphtape runs` looks there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GRAPHTAPE = Path(sys.executable).with_name("graphtape")


def _runs(cwd: Path, env_db: str | None, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GRAPHTAPE_DB"}
    if env_db is not None:
        env["GRAPHTAPE_DB"] = env_db
    return subprocess.run([str(GRAPHTAPE), *argv, "runs"], cwd=cwd, capture_output=True, text=True, timeout=60, env=env)


def test_a_missing_store_named_by_the_environment_says_so(tmp_path):
    done = _runs(tmp_path, "graphtape-prod.db")
    assert done.returncode == 2
    assert done.stderr == f"graphtape: error: no database at {tmp_path / 'graphtape-prod.db'} (record a run first, or pass --db, db= in Python); $GRAPHTAPE_DB names it\n"
    folder = _runs(tmp_path, "prod/graphtape.db")
    assert folder.returncode == 2
    assert folder.stderr.endswith(f"directory {tmp_path / 'prod'} does not exist; $GRAPHTAPE_DB names it\n"), folder.stderr
    assert not (tmp_path / "prod").exists() and not (tmp_path / "graphtape-prod.db").exists()


def test_a_missing_store_given_with_db_or_by_default_does_not_blame_the_environment(tmp_path):
    given = _runs(tmp_path, "prod/graphtape.db", "--db", "here.db")
    default = _runs(tmp_path, None)
    for done in (given, default):
        assert done.returncode == 2 and "no database at" in done.stderr and "GRAPHTAPE_DB" not in done.stderr, done.stderr
