"""Regression fixtures: a recorded run as one self-contained, reviewable JSON file, and back.

One module per concern; this one keeps their names importable from
``graphtape.replay.fixture`` as before:

- ``fixture_export``: ``export_fixture`` turns a run in the store into a
  fixture (what a replay resumes from, checks and answers from), through the
  store's API, redacted again, deterministic.
- ``fixture_format``: the file: format version, limits, bytes
  (``dumps_fixture``, ``write_fixture``, ``read_fixture``,
  ``parse_fixture``) and the shape checks a file from someone else passes.
- ``fixture_import``: ``import_fixture`` writes a checked fixture into a
  store as a run that ``replay()`` resumes and the TUI opens.
"""

from __future__ import annotations

# Every name below stays importable from here: the CLI, the TUI, the pytest plugin and tests import them.
from graphtape.replay.fixture_export import StepRange, export_fixture, is_machine_path, portable_graph_ref  # noqa: F401
from graphtape.replay.fixture_format import ABOUT, FORMAT_KEY, FORMAT_VERSION, MAX_CALLS, MAX_FILE_BYTES, MAX_HOLD_MS, MAX_STEP_NUMBER, MAX_STEPS, SLICE_TAG, FixtureError, dumps_fixture, parse_fixture, read_fixture, write_fixture  # noqa: F401
from graphtape.replay.fixture_import import KEYFRAME_EVERY, START_CHECKPOINT_ID, ImportedFixture, fixture_run_id, import_fixture  # noqa: F401

__all__ = [
    "FORMAT_KEY",
    "FORMAT_VERSION",
    "FixtureError",
    "ImportedFixture",
    "StepRange",
    "dumps_fixture",
    "export_fixture",
    "fixture_run_id",
    "import_fixture",
    "parse_fixture",
    "portable_graph_ref",
    "read_fixture",
    "write_fixture",
]

