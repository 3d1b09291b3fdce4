"""Where a store's database is and how it is reached: URLs, the engine, and reads.

A path or URL becomes a SQLAlchemy URL (``GRAPHTAPE_DB``, else
``./graphtape.db``). A SQLite file is created 0600 and opened in WAL mode
with a busy timeout, or read-only when it cannot be written (``read_only``);
PostgreSQL goes through psycopg with a small pool.
Every failure to open or to read is one ``StoreError`` line, passwords masked.
"""

from __future__ import annotations


import importlib.util
import os
import shlex
import sqlite3
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from graphtape.recorder.errors import StoreError
from graphtape.recorder.store.compiled_cache import SQLITE_COMPILED
from graphtape.recorder.store.sqlite_files import TEXT_FACTORY, read_only_uri, sqlite_cannot_write
from graphtape.recorder.store.urls import shown_url
from graphtape.recorder.store.open_hints import open_hint
from graphtape.recorder.windows_paths import WINDOWS_HINT, windows_path

DEFAULT_DB = "graphtape.db"
ENV_DB = "GRAPHTAPE_DB"


def resolve_url(db: str | os.PathLike | None = None) -> str:
    """A SQLAlchemy URL from a URL, a file path, ``GRAPHTAPE_DB`` or the default."""
    if db is None:
        db = os.environ.get(ENV_DB) or DEFAULT_DB
    db = os.fspath(db)
    if isinstance(db, str) and not db.strip():
        raise StoreError("no database given: the path or URL is empty (give a SQLite file path or a SQLAlchemy URL)")
    windows = windows_path(db)
    if windows is not None:
        raise StoreError(f"cannot open database {windows!r}: {WINDOWS_HINT}")
    if "://" in db:
        if db.startswith("postgres://"):
            db = "postgresql+psycopg://" + db[len("postgres://") :]
        elif db.startswith("postgresql://"):
            db = "postgresql+psycopg://" + db[len("postgresql://") :]
        return db
    return "sqlite:///" + str(Path(db).expanduser().resolve())


def _named_by_env(url: str) -> str:
    """``; $GRAPHTAPE_DB names it`` when the store came from there: a variable set long ago (a shell
    profile, a .env) is the one cause a missing store's path alone does not show."""
    env = os.environ.get(ENV_DB)
    try:
        return f"; ${ENV_DB} names it" if env and resolve_url(env) == url else ""
    except StoreError:
        return ""


def _sqlite_path(url: str) -> Path | None:
    try:
        parsed = sa.engine.make_url(url)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy understands, so not a SQLite file either
        return None
    if parsed.get_backend_name() != "sqlite":
        return None
    p = parsed.database
    if not p or p == ":memory:" or p.startswith("file:"):
        return None
    return Path(p)


# SQLite refuses longer paths ("unable to open database file"); file systems refuse longer names.
SQLITE_MAX_PATH = 512
NAME_MAX = 255


def check_url(db: str | os.PathLike | None = None) -> str:
    """The store URL for ``db``, or a one-line ``StoreError`` if it names no store graphtape can use.

    Only what is wrong with the argument itself (not a path or URL, a backend
    graphtape does not write to, its driver not installed): a store that is
    down, missing or unwritable is a passing fault the recorder waits out.
    (The file itself is never opened here: closing any descriptor of a SQLite
    file drops the locks this process's connections hold on it.)
    """
    url = resolve_url(db)
    try:
        backend = sa.engine.make_url(url).get_backend_name()
    except Exception:  # noqa: BLE001 - any parse failure is the same bad argument
        raise StoreError(f"cannot open {shown_url(url)}: not a database path or a SQLAlchemy URL") from None
    if backend not in ("sqlite", "postgresql"):
        raise StoreError(f"cannot open {shown_url(url)}: graphtape stores runs in SQLite (a file path) or PostgreSQL (postgresql+psycopg://...), not {backend}")
    if backend == "postgresql":
        driver = sa.engine.make_url(url).get_driver_name()
        module = "psycopg" if driver == "psycopg_async" else driver
        if importlib.util.find_spec(module) is None:
            raise missing_driver(url, ModuleNotFoundError(name=module))
    problem = sqlite_path_problem(url)
    if problem is not None:
        raise StoreError(problem)
    return url


def missing_driver(url: str, exc: ModuleNotFoundError) -> StoreError:
    """The one line for a URL whose driver is not installed (``postgresql+asyncpg://``, or no psycopg)."""
    hint = "pip install 'graphtape[postgres]'" if exc.name == "psycopg" else "graphtape's PostgreSQL driver is psycopg: use postgresql+psycopg://... after pip install 'graphtape[postgres]'"
    return StoreError(f"cannot open {shown_url(url)}: driver {exc.name!r} is not installed ({hint})")


def sqlite_path_problem(url: str) -> str | None:
    """Why a SQLite URL can never name a store (in memory, a directory, a path too long), or None.

    Only what waiting cannot fix: a missing folder or a locked file may come right.
    """
    try:
        parsed = sa.engine.make_url(url)
    except Exception:  # noqa: BLE001 - not a URL: check_url says so
        return None
    if parsed.get_backend_name() != "sqlite":
        return None
    if not parsed.database or parsed.database == ":memory:":
        return f"cannot use {url}: an in-memory SQLite database is gone when its connection closes (give a file path)"
    path = _sqlite_path(url)
    if path is None:
        return None
    if any(len(os.fsencode(part)) > NAME_MAX for part in path.parts):
        return f"cannot open database {str(path)[:60]}...: a name in the path is longer than {NAME_MAX} bytes"
    if len(os.fsencode(path.absolute())) >= SQLITE_MAX_PATH:
        return f"cannot open database {str(path)[:60]}...: the path is longer than SQLite opens ({SQLITE_MAX_PATH} bytes)"
    try:
        if path.is_dir():
            return f"cannot open database {path}: it is a directory{_file_in(path)}"
    except OSError:
        return None  # cannot tell: opening it says what is wrong
    return None


# A server that neither answers nor refuses (a dropped route, a hung host) must not hold a
# recorder's start or a flush for the operating system's TCP timeout (minutes).
PG_CONNECT_TIMEOUT_S = 10


def _pg_connect_args(url: str) -> dict[str, Any]:
    """psycopg's connect arguments: a connect timeout unless the URL sets its own."""
    return {} if "connect_timeout" in sa.engine.make_url(url).query else {"connect_timeout": PG_CONNECT_TIMEOUT_S}


def _on_sqlite_open(dbapi_conn: Any, _record: Any) -> None:
    # A store opened, not created: WAL is already the file's own mode (kept in the file since
    # its creation), and a file that is not a store (empty, another app's) is left as it is.
    dbapi_conn.text_factory = TEXT_FACTORY
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=10000")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def _on_sqlite_connect(dbapi_conn: Any, record: Any) -> None:
    cur = dbapi_conn.cursor()
    if cur.execute("PRAGMA journal_mode").fetchone()[0] != "wal" and _new_or_ours(cur):
        # A new file, or a store made before in another mode: WAL. Another program's file keeps
        # its mode: opening it for recording is refused (schema_version), and leaves it as it was.
        cur.execute("PRAGMA journal_mode=WAL")
    cur.close()
    _on_sqlite_open(dbapi_conn, record)


def _new_or_ours(cur: Any) -> bool:
    """Whether a SQLite file holds no other program's tables or marks (a new file, or graphtape's)."""
    tables = {r[0] for r in cur.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").fetchall()}
    if tables:
        return "graphtape_meta" in tables
    return not (cur.execute("PRAGMA application_id").fetchone()[0] or cur.execute("PRAGMA user_version").fetchone()[0])


def _on_read_only_connect(dbapi_conn: Any, _record: Any) -> None:
    # No journal_mode here: setting it is a write. The file's own mode (WAL) is read as it is.
    dbapi_conn.text_factory = TEXT_FACTORY
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=10000")
    cur.execute("PRAGMA query_only=1")
    cur.close()


def _one_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# How long opening a SQLite store tries again when SQLite answers "locked" at once.
OPEN_LOCKED_WAIT_S = 10.0


def _file_in(folder: Path) -> str:
    """`` (name the store file in it, like runs/graphtape.db)``: a store is a file, and a folder
    given for one is most often the folder the file was meant to go in."""
    return f" (name the store file in it, like {shlex.quote(str(folder / 'graphtape.db'))})"


def _first_connect(engine: Engine, *, sqlite: bool) -> None:
    """Open a first connection. SQLite answers "database is locked" at once, without waiting
    out its busy timeout, while another process closes the file's last connection (and removes
    its write-ahead log) or switches a new file to WAL: many processes starting on one new store
    meet that. It passes, so opening tries again for a while."""
    deadline = time.monotonic() + OPEN_LOCKED_WAIT_S
    delay = 0.005
    while True:
        try:
            with engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
            return
        except OperationalError as exc:
            if not sqlite or "locked" not in str(exc.orig) or time.monotonic() + delay > deadline:
                raise
            engine.dispose()
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


class Connection:
    """Opens the engine and runs reads; every part of ``SqlStore`` reads through ``_read``."""

    url: str
    engine: Engine
    _owns_engine = True  # False for a store opened beside another (``SqlStore.beside``): the engine is the other's

    def _connect(self, create: bool, read_only: bool = False) -> Engine:
        """The engine; a SQLite file that cannot be written (or ``read_only``) opens read-only."""
        path = _sqlite_path(self.url)
        if path is None:
            self._read_only = True if read_only else None  # PostgreSQL: asked when it matters
        problem = sqlite_path_problem(self.url)
        if problem is not None:
            raise StoreError(problem)
        if path is not None:
            if not path.parent.is_dir():
                if path.parent.exists():
                    raise StoreError(f"cannot open database {path}: {path.parent} is not a folder")
                if not create:
                    raise StoreError(f"cannot open database {path}: directory {path.parent} does not exist{_named_by_env(self.url)}")
                try:
                    path.parent.mkdir(parents=True)  # a store to record into: its folder is made, as the file is
                except FileExistsError:
                    pass
                except OSError as exc:
                    raise StoreError(f"cannot create the folder of database {path}: {exc.strerror}") from None
            if path.is_dir():
                raise StoreError(f"cannot open database {path}: it is a directory{_file_in(path)}")
            if not path.exists():
                if not create:
                    raise StoreError(f"no database at {path} (record a run first, or pass --db, db= in Python){_named_by_env(self.url)}")
                try:
                    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
                    os.close(fd)
                except OSError as exc:
                    raise StoreError(f"cannot create database {path}: {exc.strerror}") from None
        try:
            backend = sa.engine.make_url(self.url).get_backend_name()
        except (SQLAlchemyError, ValueError):
            raise StoreError(f"cannot open {self._safe_url()}: not a database path or a SQLAlchemy URL") from None
        if backend not in ("sqlite", "postgresql"):
            raise StoreError(f"cannot open {self._safe_url()}: graphtape stores runs in SQLite (a file path) or PostgreSQL (postgresql+psycopg://...), not {backend}")
        try:
            if path is not None and (read_only or sqlite_cannot_write(path)):
                self._read_only = True
                uri = read_only_uri(path)
                engine = sa.create_engine(
                    "sqlite://",
                    creator=lambda: sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=10),
                    poolclass=sa.pool.QueuePool,
                    execution_options={"compiled_cache": SQLITE_COMPILED},
                )
                event.listen(engine, "connect", _on_read_only_connect)
            elif path is not None or self.url.startswith("sqlite"):
                self._read_only = False
                engine = sa.create_engine(self.url, connect_args={"check_same_thread": False, "timeout": 10}, execution_options={"compiled_cache": SQLITE_COMPILED})
                event.listen(engine, "connect", _on_sqlite_connect if create else _on_sqlite_open)
            else:
                # Asked to read only: every transaction is READ ONLY, so the server refuses a write.
                options = {"postgresql_readonly": True} if read_only else {}
                engine = sa.create_engine(self.url, pool_pre_ping=True, pool_size=5, max_overflow=10, execution_options=options, connect_args=_pg_connect_args(self.url))
            _first_connect(engine, sqlite=path is not None)
        except StoreError:
            raise
        except ModuleNotFoundError as exc:
            raise missing_driver(self.url, exc) from None
        except (SQLAlchemyError, OSError, ValueError) as exc:
            said = _one_line(exc)
            raise StoreError(f"cannot open {self._safe_url()}: {said}{open_hint(said) if path is None else ''}") from None
        return engine

    def _safe_url(self) -> str:
        return shown_url(self.url)

    def _read(self, stmt: Any, params: dict[str, Any] | None = None) -> list[Any]:
        """Rows of ``stmt``, given its values as ``params`` when it was built once at import.

        The reads every replay, fixture test and TUI step makes are built once: building a
        SQLAlchemy statement (about 60 µs) costs more than running it on a small store.
        """
        try:
            with self.engine.connect() as conn:
                return conn.execute(stmt, params).all()
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot read {self._safe_url()}: {_one_line(exc)}") from None

    def reset_connections(self) -> None:
        """Drop every open connection (say after os.fork); new ones open on demand."""
        self._close_writer()
        if self._owns_engine:
            self.engine.dispose()

    def close(self) -> None:
        self.reset_connections()
