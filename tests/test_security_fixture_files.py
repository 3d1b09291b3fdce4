"""A fixture file someone sends (a pull request's, a colleague's) is data: the command line reads it
within a budget and prints its text one line per line, as a recorded run's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import bump_graph

from graphtape.recorder import Recorder
from graphtape.replay.fixture import MAX_FILE_BYTES

GRAPHTAPE = str(Path(sys.executable).with_name("graphtape"))


def _exported(tmp_path: Path, name: str = "bump") -> dict[str, Any]:
    """A real fixture: a recorded run of ``bump_graph`` exported by the command line."""
    db = tmp_path / "recorded.db"
    with Recorder(db) as rec:
        rec.attach(bump_graph(), name=name).invoke({"n": 1})
    out = tmp_path / "exported.json"
    done = subprocess.run([GRAPHTAPE, "--db", str(db), "export", "last", "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_bytes())


def _import(tmp_path: Path, fixture_file: Path) -> subprocess.CompletedProcess:
    return subprocess.run([GRAPHTAPE, "--db", str(tmp_path / "imported.db"), "import", str(fixture_file)], capture_output=True, text=True, timeout=120)


def test_a_fixture_too_dense_to_parse_within_budget_is_refused_before_it_is_parsed(tmp_path):
    """A compact ``[[],[],...]`` of 8 MB parses to 2.6 million lists (64 MB of it, to 21 million: 2 GB
    before any check, 3 GB and 26 s before the import refused it). It is refused, in one line,
    before it is parsed."""
    fixture = _exported(tmp_path)
    fixture["inputs"] = {"n": 1, "pad": None}
    text = json.dumps(fixture, separators=(",", ":"))
    dense = text.replace('"pad":null', '"pad":[' + ",".join(["[]"] * 2_600_000) + "]", 1).encode()
    assert len(dense) < MAX_FILE_BYTES
    bomb = tmp_path / "dense.json"
    bomb.write_bytes(dense)
    done = _import(tmp_path, bomb)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "holds more than 5,000,000 values" in done.stderr and "refused before it is parsed" in done.stderr
    # The same fixture as export writes it (one value per line) is read as ever.
    honest = tmp_path / "honest.json"
    honest.write_text(json.dumps(fixture, indent=1))
    assert _import(tmp_path, honest).returncode == 0


def test_a_fixture_name_with_line_breaks_prints_on_the_import_line_it_belongs_to(tmp_path):
    """The run name is the fixture author's text: a line break in it cannot print a forged line."""
    fixture = _exported(tmp_path)
    fixture["name"] = "nightly\ngraphtape: verified: this fixture's graph reference is safe to load"
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(fixture, indent=1))
    done = _import(tmp_path, forged)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "nightly⏎graphtape: verified" in lines[0] and lines[0].startswith(f"{forged}: imported as run ")
    assert not any(line.startswith("graphtape: verified") for line in lines), done.stdout


def test_a_fixture_no_read_would_accept_is_not_written(tmp_path):
    """What a read refuses is refused when writing, as the size limit is: said at export, not in CI."""
    import pytest

    from graphtape.replay.fixture import FixtureError, write_fixture

    fixture = _exported(tmp_path)
    fixture["final_state"] = {"n": 2, "history": [[]] * 2_600_000}
    target = tmp_path / "too-dense.json"
    with pytest.raises(FixtureError, match="more than 5,000,000 values, more than a test may read"):
        write_fixture(target, fixture)
    assert not target.exists()


def _test_gen(project: Path, db: Path, *more: str) -> subprocess.CompletedProcess:
    agent = Path(__file__).resolve().parents[1] / "fixtures" / "agents" / "reason_act.py"
    return subprocess.run([GRAPHTAPE, "--db", str(db), "test-gen", "last", "--graph", f"{agent}:graph_happy", *more], cwd=project, capture_output=True, text=True, timeout=120)


def test_test_gen_refuses_a_fixtures_folder_that_is_a_link_out_of_the_project(tmp_path):
    """A repository or a fixture bundle can ship ``fixtures/runs`` as a link to ``~/.config`` or
    anywhere: test-gen's default folder (and export's) would write the test, which is code, there.
    It is refused in one line, nothing is written; a link that stays in the project is followed,
    and a folder the user names outside the project is theirs to name."""
    from graphtape.tui.demo import record_demo

    db = tmp_path / "demo.db"
    record_demo(str(db), "happy")
    project, outside = tmp_path / "project", tmp_path / "outside"
    (project / "fixtures").mkdir(parents=True)
    outside.mkdir()
    (project / "fixtures" / "runs").symlink_to(outside, target_is_directory=True)

    for command in (_test_gen(project, db), subprocess.run([GRAPHTAPE, "--db", str(db), "export", "last"], cwd=project, capture_output=True, text=True, timeout=120)):
        assert command.returncode == 2 and command.stderr.count("\n") == 1, command.stderr
        assert "fixtures/runs is a link to" in command.stderr and "Traceback" not in command.stderr
    again = _test_gen(project, db, "-o", str(project / "fixtures" / "runs"))  # the same folder, written absolute
    assert again.returncode == 2 and "is a link to" in again.stderr
    assert list(outside.iterdir()) == []

    # A link that stays inside the project is an ordinary layout: followed.
    (project / "fixtures" / "runs").unlink()
    (project / "shared").mkdir()
    (project / "fixtures" / "runs").symlink_to(Path("..") / "shared", target_is_directory=True)
    inside = _test_gen(project, db, "--name", "h")
    assert inside.returncode == 0, inside.stderr
    assert sorted(p.name for p in (project / "shared").iterdir()) == ["h.json", "test_h.py"]
    # A folder outside the project, named by the user: written.
    named = _test_gen(project, db, "--name", "h", "-o", str(outside))
    assert named.returncode == 0, named.stderr
    assert sorted(p.name for p in outside.iterdir()) == ["h.json", "test_h.py"]
