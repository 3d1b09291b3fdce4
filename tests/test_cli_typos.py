"""A mistyped command, flag or choice: one line that names the closest valid word and the help
that lists it (the command's own --help for its flags), exit 2, never a usage dump."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from graphtape.tui.cli import main

GRAPHTAPE = Path(sys.executable).with_name("graphtape")


@pytest.mark.parametrize(
    "argv, says",
    [
        (["shwo", "last"], "invalid choice: 'shwo'"),
        (["shwo", "last"], "did you mean 'show'?"),
        (["runs", "--serch", "timeout"], "graphtape runs: error: unrecognized arguments: --serch timeout; did you mean --search?"),
        (["show", "last", "--stpe", "2"], "graphtape show: error: unrecognized arguments: --stpe 2; did you mean --step?"),
        (["replay", "last", "--mode", "strit"], "did you mean 'strict'?"),
        (["runs", "--status", "eror"], "did you mean 'error'?"),
        (["export", "last", "-o", "x.json", "--forse"], "did you mean --force?"),
    ],
)
def test_a_typo_names_the_closest_valid_word(tmp_path, capsys, argv, says):
    code = main(["--db", str(tmp_path / "none.db"), *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert says in err
    assert err.count("\n") == 1 and "usage:" not in err and "Traceback" not in err


def test_an_unknown_flag_points_at_the_help_of_its_command(tmp_path, capsys):
    code = main(["runs", "--since", "yesterday"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == "graphtape runs: error: unrecognized arguments: --since yesterday (see graphtape runs --help)\n"


def test_a_command_nothing_resembles_gets_no_guess(capsys):
    assert main(["xyzzy"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'xyzzy'" in err and "did you mean" not in err


def test_the_installed_command_says_the_typo_and_exits_2(tmp_path):
    done = subprocess.run([str(GRAPHTAPE), "show", "last", "--stpe", "2"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == "graphtape show: error: unrecognized arguments: --stpe 2; did you mean --step? (see graphtape show --help)\n"


@pytest.mark.parametrize(
    "argv, says",
    [
        (["show", "last", "4"], "graphtape show: error: unrecognized arguments: 4; did you mean --step 4? (see graphtape show --help)\n"),
        (["replay", "last", "-1"], "graphtape replay: error: unrecognized arguments: -1; did you mean --from -1? (see graphtape replay --help)\n"),
        (["show", "last", "--step", "1", "5"], "graphtape show: error: unrecognized arguments: 5 (see graphtape show --help)\n"),
        (["runs", "last"], "graphtape runs: error: unrecognized arguments: last; runs lists every run and takes no run: to see one, graphtape show last (see graphtape runs --help)\n"),
    ],
)
def test_a_word_where_a_flag_belongs_names_the_flag_or_the_command_meant(tmp_path, capsys, argv, says):
    assert main(["--db", str(tmp_path / "none.db"), *argv]) == 2
    assert capsys.readouterr().err == says


def test_help_and_version_as_words_do_what_git_and_pip_do(capsys):
    assert main(["help"]) == 0
    assert capsys.readouterr().out.startswith("usage: graphtape [-h]")
    assert main(["help", "show"]) == 0
    assert capsys.readouterr().out.startswith("usage: graphtape show [-h]")
    assert main(["version"]) == 0
    assert capsys.readouterr().out.startswith("graphtape ")
    assert main(["help", "shw"]) == 2 and "did you mean 'show'?" in capsys.readouterr().err
