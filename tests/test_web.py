"""``graphtape tui --web`` as an attacker and as its user meet it: a real server on localhost.

A page on another site, a DNS-rebound host name, a request without this launch's token and one
connection too many are all refused; the right URL gets an offline page and a TUI session, which
is read-only unless the server was started with --web-allow-writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from graphtape.recorder import open_store
from graphtape.tui.app import build_app
from graphtape.tui.demo import record_demo
from graphtape.tui.screens.prompts import PathPrompt, ReplayPrompt
from graphtape.tui.screens.run import RunScreen

GRAPHTAPE = Path(sys.executable).with_name("graphtape")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _web_server(tmp_path: Path, *flags: str) -> Iterator[tuple[subprocess.Popen, int, str, str]]:
    """A --web server on a free port over an empty store: yields (process, port, token, the line
    it printed); stopped after, with what it wrote to stderr in ``process.err``."""
    db = tmp_path / "g.db"
    open_store(db, create=True).close()
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "GRAPHTAPE_DB"}
    proc = subprocess.Popen(
        [str(GRAPHTAPE), "--db", str(db), "tui", "--web", "--port", str(port), *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        line = proc.stdout.readline()
        match = re.search(rf"http://localhost:{port}/\?token=([\w-]+)", line)
        assert match, line + proc.stderr.read() if proc.poll() is not None else line
        yield proc, port, match.group(1), line
    finally:
        proc.terminate()
        _, proc.err = proc.communicate(timeout=15)


@pytest.fixture
def server(tmp_path):
    """A --web server on a free port with at most two sessions; yields (port, token, line)."""
    with _web_server(tmp_path, "--web-sessions", "2") as (_, port, token, line):
        yield port, token, line


async def _get(url: str, **headers: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session:
        async with session.get(url, headers=headers, allow_redirects=False) as resp:
            return resp.status, (await resp.read()).decode("utf-8", "replace")  # a font is bytes


async def _headers(url: str) -> dict[str, str]:
    async with aiohttp.ClientSession() as session:
        async with session.get(url, allow_redirects=False) as resp:
            return dict(resp.headers)


async def _ws_status(url: str, origin: str) -> int | str:
    async with aiohttp.ClientSession() as session:
        try:
            ws = await session.ws_connect(url, headers={"Origin": origin}, timeout=aiohttp.ClientWSTimeout(ws_close=5))
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status
        await ws.close()
        return "open"


def test_the_printed_url_carries_a_token_and_says_read_only(server):
    port, token, line = server
    assert len(token) >= 24 and "read-only" in line and "at most 2 sessions" in line
    base = f"http://localhost:{port}"
    assert asyncio.run(_get(f"{base}/"))[0] == 403  # no token: no page
    assert asyncio.run(_get(f"{base}/?token=wrong"))[0] == 403
    status, html = asyncio.run(_get(f"{base}/?token={token}"))
    assert status == 200 and f"/ws/{token}" in html
    # Works offline: everything the page loads (scripts, styles, the font) comes from this server.
    assert not re.search(r"(src|href)=\"https?://", html) and "googleapis" not in html and "@import" not in html
    loaded = re.findall(r"(?:src|href)=\"([^\"]+)\"", html) + re.findall(r"url\(\"?([^\")]+)\"?\)", html)
    assert any(u.endswith(".ttf") for u in loaded) and any(u.endswith(".js") for u in loaded)
    for url in loaded:
        assert url.startswith("/"), url
        assert asyncio.run(_get(f"{base}{url}"))[0] == 200, url
    # No other site may frame it (clickjacking), and the token in the URL is never sent on as a referrer.
    headers = asyncio.run(_headers(f"{base}/?token={token}"))
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"] and headers["Referrer-Policy"] == "no-referrer"


def test_other_hosts_and_origins_are_refused(server):
    port, token, _ = server
    base = f"http://localhost:{port}"
    # DNS rebinding: the page is asked for under another name that resolves here.
    assert asyncio.run(_get(f"{base}/?token={token}", Host=f"attacker.example:{port}"))[0] == 421
    # A page on another site cannot read ours or open the websocket, even with the token.
    assert asyncio.run(_get(f"{base}/?token={token}", Origin="http://attacker.example"))[0] == 403
    ws = f"ws://localhost:{port}/ws/{token}"
    assert asyncio.run(_ws_status(ws, "http://attacker.example")) == 403
    assert asyncio.run(_ws_status(f"ws://localhost:{port}/ws/not-the-token", f"http://localhost:{port}")) == 403


def test_sessions_are_capped(server):
    port, token, _ = server
    ws_url = f"ws://localhost:{port}/ws/{token}?width=80&height=24"
    origin = f"http://localhost:{port}"

    async def three() -> list[int | str]:
        async with aiohttp.ClientSession() as session:
            opened = [await session.ws_connect(ws_url, headers={"Origin": origin}) for _ in range(2)]
            try:
                await session.ws_connect(ws_url, headers={"Origin": origin})
                third: int | str = "open"
            except aiohttp.WSServerHandshakeError as exc:
                third = exc.status
            for ws in opened:
                await ws.close()
            return ["open", "open", third]

    assert asyncio.run(three()) == ["open", "open", 503]


def test_a_busy_port_is_one_line_and_never_says_serving(tmp_path):
    db = tmp_path / "g.db"
    open_store(db, create=True).close()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run([str(GRAPHTAPE), "--db", str(db), "tui", "--web", "--port", str(port)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "serving" not in proc.stdout
    assert proc.stderr.count("\n") == 1 and f"cannot serve on port {port}" in proc.stderr


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("web") / "demo.db")
    record_demo(db, "incident")
    return db


async def test_a_read_only_session_refuses_replay_fork_export_and_save(demo_db, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = build_app(demo_db, "last", read_only=True)
    async with app.run_test(size=(120, 34)) as pilot:
        for _ in range(40):
            await pilot.pause(0.05)
            if isinstance(app.screen, RunScreen) and app.screen.payload is not None:
                break
        screen = app.screen
        for key in ("r", "f", "x", "s"):
            await pilot.press(key)
            await pilot.pause(0.1)
            assert app.screen is screen, key  # no prompt opened
            assert not isinstance(app.screen, (ReplayPrompt, PathPrompt))
        messages = [n.message for n in app._notifications]
        assert sum("read-only web session" in m for m in messages) == 4
    assert not list(tmp_path.iterdir())  # nothing written



def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (read from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry.name))
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="counts processes through /proc")
def test_twenty_concurrent_connections_start_no_more_processes_than_the_cap(tmp_path):
    """The issue's attack: 20 websockets at once used to start 40 processes. With a cap of 2,
    two sessions open, eighteen are refused with 503, and the server runs at most two apps."""
    with _web_server(tmp_path, "--web-sessions", "2") as (proc, port, token, _):
        ws_url = f"ws://localhost:{port}/ws/{token}?width=80&height=24"
        origin = f"http://localhost:{port}"

        async def twenty() -> tuple[list[int | str], int]:
            async with aiohttp.ClientSession() as session:

                async def one() -> Any:
                    try:
                        return await session.ws_connect(ws_url, headers={"Origin": origin})
                    except aiohttp.WSServerHandshakeError as exc:
                        return exc.status

                results = await asyncio.gather(*(one() for _ in range(20)))
                await asyncio.sleep(2)  # let the admitted sessions start their apps
                running = len(_children(proc.pid))
                for r in results:
                    if not isinstance(r, int):
                        await r.close()
                return ["open" if not isinstance(r, int) else r for r in results], running

        results, running = asyncio.run(twenty())
        assert results.count("open") == 2 and results.count(503) == 18, results
        assert 1 <= running <= 2, running  # the admitted sessions run their apps, no more


def test_a_token_no_ascii_comparison_takes_is_refused_like_any_wrong_token(tmp_path):
    """Any page can make the browser ask for ``/?token=é`` (an image needs no Origin): it was a
    500 and a traceback on the user's terminal per request; it is a 403 like any wrong token."""
    with _web_server(tmp_path) as (proc, port, token, _):
        base = f"http://localhost:{port}"
        assert asyncio.run(_get(f"{base}/?token=%C3%A9"))[0] == 403
        assert asyncio.run(_get(f"{base}/?token={token}%C3%A9"))[0] == 403
        assert asyncio.run(_ws_status(f"ws://localhost:{port}/ws/%C3%A9", base)) == 403
        assert asyncio.run(_get(f"{base}/?token={token}"))[0] == 200
    assert "Traceback" not in proc.err, proc.err


# -- what a token holder may send over the websocket ------------------------------------------


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ('["stdin", "q"]', ("stdin", "q")),
        ('["resize", {"width": 120, "height": 40}]', ("resize", (120, 40))),
        ('["resize", {"width": 1000000000, "height": 1000000000}]', ("resize", (1000, 500))),
        ('["resize", {"width": -5, "height": 0}]', ("resize", (1, 1))),
        ('["ping", "1700000000000"]', ("ping", "1700000000000")),
        ('["focus"]', ("focus", None)),
        ('["blur"]', ("blur", None)),
        # Dropped: not JSON, other shapes, other kinds, wrong types, too big.
        ("not json", None),
        ("{}", None),
        ("[]", None),
        ('"stdin"', None),
        ("[5]", None),
        ('["stdin", 5]', None),
        ('["resize", 7]', None),
        ('["resize", {"width": "x", "height": 24}]', None),
        ('["resize", {"width": true, "height": 24}]', None),
        ('["resize", {"width": 1e300, "height": 24}]', None),
        ('["exec", "rm -rf ~"]', None),
        ('["ping", {"a": 1}]', None),
        ('["ping", "' + "x" * 1000 + '"]', None),
        ('["stdin", "' + "x" * 70_000 + '"]', ("stdin", "x" * 70_000)),  # a paste
        ('["stdin", "' + "x" * 300_000 + '"]', None),  # over the frame limit
        ("[" * 100_000 + "]" * 100_000, None),
    ],
)
def test_a_websocket_message_is_read_or_dropped(text, read):
    from graphtape.tui.web_messages import read_message

    assert read_message(text) == read


@pytest.mark.parametrize(("width", "height", "size"), [("80", "24", (80, 24)), ("1000000000", "99999999999", (1000, 500)), ("-3", "x", (80, 24)), ("1e9", "24", (80, 24))])
def test_the_size_a_websocket_asks_for_is_clamped(width, height, size):
    from graphtape.tui.web_messages import query_size

    assert query_size({"width": width, "height": height}) == size


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        kids = _children(todo.pop())
        found += kids
        todo += kids
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the app's environment through /proc")
def test_malformed_messages_and_a_huge_size_neither_end_the_session_nor_reach_the_app(tmp_path):
    """A token holder opens the websocket at width 10^9 and sends garbage and a resize to 10^9:
    the app starts at a clamped size, the session answers on, and no traceback is printed."""
    with _web_server(tmp_path) as (proc, port, token, _):
        origin = f"http://localhost:{port}"

        async def attack() -> tuple[list[str], dict[str, str]]:
            async with aiohttp.ClientSession() as session:
                ws = await session.ws_connect(f"ws://localhost:{port}/ws/{token}?width=1000000000&height=1000000000", headers={"Origin": origin})
                sizes: dict[str, str] = {}
                for _ in range(100):  # the app process starts: read the size it was given
                    for pid in _descendants(proc.pid):
                        try:
                            environ = dict(item.split("=", 1) for item in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in item)
                        except OSError:
                            continue
                        if "ROWS" in environ:
                            sizes = {"COLUMNS": environ["COLUMNS"], "ROWS": environ["ROWS"]}
                    if sizes:
                        break
                    await asyncio.sleep(0.05)
                for garbage in ("not json", "{}", "[]", '["stdin", 5]', '["resize", {"width": "x"}]', '["resize", 7]', "[" * 50_000,
                                '["resize", {"width": 1000000000, "height": 1000000000}]', '["stdin", "\\ud800"]'):
                    await ws.send_str(garbage)
                await ws.send_bytes(b"\x00" * 1000)
                pongs = []
                for n in range(3):
                    await ws.send_str(f'["ping", "{n}"]')
                    while True:
                        msg = await ws.receive(timeout=20)
                        assert msg.type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY), msg  # never closed
                        if msg.type == aiohttp.WSMsgType.TEXT and msg.data.startswith('["pong"'):
                            pongs.append(msg.data)
                            break
                await asyncio.sleep(1)  # the app has had the huge resize: it must still be running
                alive = bool(_descendants(proc.pid))
                await ws.close()
                return pongs + [f"alive={alive}"], sizes

        pongs, sizes = asyncio.run(attack())
        assert pongs == ['["pong", "0"]', '["pong", "1"]', '["pong", "2"]', "alive=True"]
        assert sizes == {"COLUMNS": "1000", "ROWS": "500"}
    assert "Traceback" not in proc.err, proc.err
