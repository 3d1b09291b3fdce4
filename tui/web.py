"""``graphtape tui --web``: the TUI in a browser, for this user only.

textual-serve runs one TUI process per browser connection. On its own it
answers any page that can reach the port; here every request must come from
the address served (``Host`` checked, so a DNS-rebound name is refused), a
browser connection must come from that origin (``Origin`` checked, so
another site cannot open the websocket), the page and the websocket need the
token printed at launch, and at most ``max_sessions`` TUI processes run at
once. The app itself starts read-only unless writes were asked for: no
replay, fork, export or save from a browser by default.

The page is graphtape's own, with textual-serve's terminal script and the
font it ships: nothing is loaded from the internet.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import secrets
import shlex
import signal
import sys
from pathlib import Path
from typing import Any

from aiohttp import WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.server import Server

from graphtape.tui.web_messages import MAX_MESSAGE_BYTES, query_size, read_message

PAGE = Path(__file__).with_name("web_page.html")
COOKIE = "graphtape_token"


class GuardedServer(Server):
    """A textual-serve ``Server`` that checks host, origin and token, and caps its sessions."""

    def __init__(self, command: str, *, host: str, port: int, max_sessions: int, token: str | None = None) -> None:
        super().__init__(command, host=host, port=port, title="graphtape")
        self.token = token or secrets.token_urlsafe(24)
        self.max_sessions = max_sessions
        self.sessions = 0
        names = {host, "localhost", "127.0.0.1", "[::1]"} if host in ("localhost", "127.0.0.1", "::1") else {host}
        self.allowed_hosts = {f"{n}:{port}" for n in names} | ({*names} if port == 80 else set())
        self.allowed_origins = {f"http://{h}" for h in self.allowed_hosts}

    @property
    def url(self) -> str:
        """What to open: the page, with this launch's token."""
        return f"{self.public_url}/?token={self.token}"

    # -- requests ------------------------------------------------------------------
    async def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard])
        app.add_routes(
            [
                web.get("/", self._index),
                web.get("/ws/{token}", self._websocket),
                web.get("/download/{key}", self.handle_download),
                web.static("/static", self.statics_path, show_index=False, name="static"),
            ]
        )
        return app

    def _token_ok(self, given: str | None) -> bool:
        # As bytes: compare_digest raises on a str with non-ASCII in it, and any page may send one.
        return bool(given) and hmac.compare_digest(str(given).encode("utf-8", "surrogatepass"), self.token.encode())

    @web.middleware
    async def _guard(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if request.headers.get("Host", "") not in self.allowed_hosts:
            return web.Response(status=421, text="graphtape: wrong Host for this server")
        origin = request.headers.get("Origin")
        if origin is not None and origin not in self.allowed_origins:
            return web.Response(status=403, text="graphtape: requests from other sites are refused")
        path = request.path
        if path.startswith("/static/"):
            return await handler(request)
        token = request.match_info.get("token") if path.startswith("/ws/") else request.query.get("token") or request.cookies.get(COOKIE)
        if not self._token_ok(token):
            return web.Response(status=403, text="graphtape: open the URL printed by `graphtape tui --web` (it carries this launch's token)")
        return await handler(request)

    async def _index(self, request: web.Request) -> web.Response:
        ws = f"ws://{request.headers['Host']}/ws/{self.token}"
        page = PAGE.read_text(encoding="utf-8").replace("{{WEBSOCKET_URL}}", ws).replace("{{STATIC}}", "/static/")
        response = web.Response(text=page, content_type="text/html")
        response.set_cookie(COOKIE, self.token, httponly=True, samesite="Strict")
        response.headers["Content-Security-Policy"] = "default-src 'self'; connect-src 'self' ws: ; style-src 'self' 'unsafe-inline'; font-src 'self'; img-src 'self' data:; frame-ancestors 'none'"
        response.headers["Referrer-Policy"] = "no-referrer"  # the token is in the URL
        return response

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        if self.sessions >= self.max_sessions:
            return web.Response(status=503, text=f"graphtape: {self.max_sessions} sessions are open already; close one first")
        self.sessions += 1
        try:
            return await self.handle_websocket(request)
        finally:
            self.sessions -= 1

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """One TUI session: textual-serve's app process, started at a clamped size and told only
        the messages ``web_messages`` lets through; a frame over its limit closes the socket."""
        websocket = web.WebSocketResponse(heartbeat=15, max_msg_size=MAX_MESSAGE_BYTES)
        width, height = query_size(request.query)
        app_service: AppService | None = None
        try:
            await websocket.prepare(request)
            app_service = AppService(
                self.command,
                write_bytes=websocket.send_bytes,
                write_str=websocket.send_str,
                close=websocket.close,
                download_manager=self.download_manager,
                debug=self.debug,
            )
            await app_service.start(width, height)
            await self._relay(websocket, app_service)
        except asyncio.CancelledError:
            await websocket.close()
        except (ConnectionError, OSError):
            pass  # the browser or the app went away: the session is over, nothing to report
        finally:
            if app_service is not None:
                with contextlib.suppress(ConnectionError, OSError):  # an app that died has nothing to stop
                    await app_service.stop()
        return websocket

    @staticmethod
    async def _relay(websocket: web.WebSocketResponse, app_service: AppService) -> None:
        """Pass the browser's messages to the app, each read (and a size clamped) first."""
        async for message in websocket:
            read = read_message(message.data) if message.type == WSMsgType.TEXT else None
            if read is None:
                continue
            kind, data = read
            if kind == "stdin":
                await app_service.send_bytes(data.encode("utf-8", "replace"))  # a lone surrogate is not UTF-8
            elif kind == "resize":
                await app_service.set_terminal_size(*data)
            elif kind == "ping":
                await websocket.send_json(["pong", data])
            elif kind == "blur":
                await app_service.blur()
            else:
                await app_service.focus()

    # -- running -----------------------------------------------------------------
    def serve(self, debug: bool = False, on_ready: Any = None) -> None:  # type: ignore[override]
        """Bind first (a busy port fails before anything is printed), then say where, then serve."""
        self.debug = debug
        asyncio.run(self._serve(on_ready))

    async def _serve(self, on_ready: Any) -> None:
        runner = web.AppRunner(await self._make_app(), handle_signals=False)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port).start()
        except OSError:
            await runner.cleanup()
            raise
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):
                pass
        if on_ready is not None:
            on_ready(self)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()


def app_command(run: str | None, *, read_only: bool) -> str:
    """The command each browser session runs: the same app, read-only unless writes were asked for."""
    code = "import sys; from graphtape.tui.app import run_app; sys.exit(run_app(None, sys.argv[1] or None, read_only=sys.argv[2] == 'read-only'))"
    return shlex.join([sys.executable, "-c", code, run or "", "read-only" if read_only else "writes"])
