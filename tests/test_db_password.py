"""The database password never leaves the process: every command, the TUI header (and so the
web page), JSON output and errors show the store URL with its password masked, whether it is
in the user info (``postgresql://app:PW@db``) or the query (``?password=PW``)."""

from __future__ import annotations

import json

import pytest

from graphtape.recorder.store import shown_url
from graphtape.tui.cli import main

PW, PW2, PW3 = "Sekr3t-userinfo-7f3a", "Sekr3t-query-9c2e", "Sekr3t-ssl-1b5d"
ROOT_FIXTURE = "fixtures/runs/demo-react.json"


def with_passwords(url: str) -> str:
    """``url`` with a password in its user info and two in its query (trust auth ignores them)."""
    scheme, rest = url.split("://", 1)
    userinfo, host = rest.split("@", 1)
    user = userinfo.split(":", 1)[0]
    sep = "&" if "?" in host else "?"
    return f"{scheme}://{user}:{PW}@{host}{sep}password={PW2}&sslpassword={PW3}"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql+psycopg://app:pw@db:5432/prod", "postgresql+psycopg://app:***@db:5432/prod"),
        ("postgresql+psycopg://app@db/prod?password=pw&sslmode=require", "postgresql+psycopg://app@db/prod?password=***&sslmode=require"),
        ("postgresql://app:p@ss@db/prod", "postgresql://***@db/prod"),  # an unescaped @
        ("postgresql://app:pw@db:notaport/prod", "postgresql://***@db:notaport/prod"),  # unparseable
        ("sqlite:////tmp/runs.db", "/tmp/runs.db"),
    ],
)
def test_shown_url_masks_every_password(url: str, shown: str) -> None:
    assert shown_url(url) == shown


def leaked(text: str) -> list[str]:
    return [p for p in (PW, PW2, PW3) if p in text]


async def test_no_command_screen_or_error_shows_the_password(pg_url, tmp_path, capsys, monkeypatch):
    from pathlib import Path

    from graphtape.tui.app import build_app

    monkeypatch.chdir(tmp_path)  # commands without --db (import-langgraph) make ./graphtape.db here, not in the checkout
    url = with_passwords(pg_url)
    root = Path(__file__).resolve().parents[1]
    outputs = []
    for argv in (
        ["import", str(root / ROOT_FIXTURE), "--json"],
        ["import", str(root / ROOT_FIXTURE)],
        ["runs"],
        ["runs", "--json"],
        ["show", "last", "--json"],
        ["stats"],
        ["stats", "--json"],
        ["gc", "--older-than", "1d", "--dry-run", "--json"],
        ["migrate"],
        ["runs", "--status", "error"],
    ):
        code = main(["--db", url, *argv])
        out = capsys.readouterr()
        outputs.append(out.out + out.err)
        assert code == 0, (argv, out.err)
    assert json.loads(outputs[0])["db"].count("***") == 3
    # Errors: a server that is not there, a database that does not exist, a wrong driver.
    host_port = url.split("@", 1)[1].split("/", 1)[0]
    for bad in (url.replace(host_port, "127.0.0.1:1"), url.replace("/test?", "/no_such_db_here?"), url.replace("postgresql+psycopg", "mysql")):
        assert main(["--db", bad, "runs"]) == 2
        err = capsys.readouterr().err
        outputs.append(err)
        assert err.count("\n") == 1 and "***" in err
    for source in (url, url.replace("postgresql+psycopg", "mysql"), url.replace(host_port, "127.0.0.1:notaport")):
        main(["import-langgraph", source])
        outputs.append("".join(capsys.readouterr()))
    assert all(not leaked(o) for o in outputs), [o for o in outputs if leaked(o)]

    # The TUI's runs header (the web page shows the same screen).
    app = build_app(url)
    async with app.run_test(size=(140, 30)) as pilot:
        for _ in range(60):
            await pilot.pause(0.05)
            if getattr(app.screen, "runs", None):
                break
        shown = "\n".join("".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips())
    assert "***" in app.store_label and not leaked(app.store_label) and not leaked(shown)
