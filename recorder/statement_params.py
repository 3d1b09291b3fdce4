"""The values a failed SQL statement was bound with, named by the columns they go to.

SQLAlchemy's ``StatementError`` (``IntegrityError``, ``DataError``...) keeps the statement and
its parameters (``statement``, ``params``) and says both in its message: ``[SQL: insert into
users (name, password) values (?, ?)]`` ``[parameters: ('bob', '…')]``. Positional parameters
(SQLite's ``?``, asyncpg's ``$1``, MySQL's ``%s``) carry no name a redactor could read, but the
statement names them: the column list of an ``INSERT``, ``column = ?`` in a ``SET`` or a
``WHERE``. Named so, a value bound to a column named like a secret is learned by the run's
redactor (``learned_secrets``) and hidden from the error's text and fields like any secret.
Named parameters (``%(password)s``, ``:password``) come as a mapping and are read by their keys.
Nothing of the error is called: its attributes are read as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graphtape.recorder.linear_regex import compile_linear

MAX_STATEMENT = 100_000  # characters of a statement read (a bulk insert's values are its rows again)
MAX_ROWS = 32  # rows of an executemany's parameters read

_PLACEHOLDER = r"(?:\?|%s|\$\d+|:\d+)"
_NAME = r"(?:[A-Za-z_][\w$]*\.)*[`\"\[]?([A-Za-z_][\w$]*)[`\"\]]?"  # alias.column, "column", `column`, [column]
# A placeholder, the column it is compared with or set to before it if any; a quoted literal is
# read whole so that a ``?`` inside one is not taken for a placeholder.
_BOUND = compile_linear(rf"'(?:[^']|'')*'|(?:{_NAME}\s*(?:=|<>|!=|<=|>=|<|>|(?i:i?like))\s*)?({_PLACEHOLDER})")
_INSERT = compile_linear(r"(?is)\binsert\b[^(]*?\(([^()]*)\)\s*values\s*")
_ROW = compile_linear(r"\s*\(([^()]*)\)\s*,?")
_ONLY_PLACEHOLDER = compile_linear(rf"\s*{_PLACEHOLDER}\s*")
_COLUMN = compile_linear(rf"\s*{_NAME}\s*")


def bound_by_name(error: BaseException) -> list[Any]:
    """The parameters of ``error``'s statement as ``[column, value]`` pairs (positional ones named
    from the statement; one list per row of an executemany), or as the mapping they came in."""
    statement = getattr(error, "statement", None)
    params = getattr(error, "params", None)
    if not isinstance(statement, str) or not isinstance(params, (list, tuple, Mapping)):
        return []
    rows: Any = params[:MAX_ROWS] if isinstance(params, list) and params and isinstance(params[0], (list, tuple, Mapping)) else [params]
    names: list[tuple[int, str | None]] | None = None
    out: list[Any] = []
    for row in rows:
        if isinstance(row, Mapping):
            out.append(row)
        elif isinstance(row, (list, tuple)):
            if names is None:
                names = placeholder_names(statement[:MAX_STATEMENT])
            out.append([[name, row[i]] for i, name in names if name is not None and i < len(row)])
    return out


def placeholder_names(statement: str) -> list[tuple[int, str | None]]:
    """For each positional placeholder of ``statement``, in order: the index of the parameter it
    takes, and the column it binds to (``None`` where the statement does not say)."""
    found: list[list[Any]] = []  # [start, parameter number or None, column]
    at: dict[int, list[Any]] = {}
    for m in _BOUND.finditer(statement):
        token = m.group(2)
        if token is None:
            continue  # a quoted literal
        start = m.start(2)
        entry = [start, int(token[1:]) if token[0] in "$:" else None, m.group(1)]
        found.append(entry)
        at[start] = entry
    insert = _INSERT.search(statement)
    if insert is not None:
        columns = []
        for column in insert.group(1).split(","):
            c = _COLUMN.fullmatch(column)
            columns.append(c.group(1) if c is not None else None)
        pos = insert.end()
        while (row := _ROW.match(statement, pos)) is not None:
            items = row.group(1).split(",")
            if len(items) == len(columns):
                offset = row.start(1)
                for column, item in zip(columns, items):
                    if _ONLY_PLACEHOLDER.fullmatch(item):
                        entry = at.get(offset + len(item) - len(item.lstrip()))
                        if entry is not None:
                            entry[2] = column
                    offset += len(item) + 1
            pos = row.end()
    out = []
    n = 0
    for _, number, column in found:
        if number is None:
            out.append((n, column))
            n += 1
        else:
            out.append((number - 1, column))
    return out
