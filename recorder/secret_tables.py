"""Secrets in tables written as text: a column named like a secret, a row naming one.

A tool that dumps a table (``psql``'s or a spreadsheet's tab-separated rows, a CSV file, the
Markdown table a model writes) puts a password under a header, not after a key and a
separator: ``user<TAB>password`` then ``bob<TAB>hunter2``. Two shapes are read:

- a header row whose cells are names, one naming a secret: that cell of every row under it
  (rows with the header's number of cells; the first row that has another number ends the
  table; a Markdown table's ``|---|`` rule is skipped);
- a row of two cells whose first names a secret (``| password | hunter2 |``, a settings
  table): its second cell.

Cells are split on tabs (also written ``\\t``, in JSON or a repr), ``|`` (Markdown) or commas
(CSV, only when every header cell is a short name, so prose with commas is not a table).
Lines end at a newline, also written ``\\n``. One pass over the lines: linear in the text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphtape.recorder.linear_regex import compile_linear

Spans = list[tuple[int, int]]

_NAME = compile_linear(rb"[A-Za-z_][A-Za-z_ .\-/()#]*")  # a header cell: a column's name (a value has digits)
_MAX_NAME = 40
_RULE = frozenset(b"-:| \t")  # a Markdown table's rule row: |---|:--:|
_SEPARATORS = ((b"\\t", b"\t"), (b"\t",), (b"|",), (b",",))
_DIGITS_AND_SIGNS = frozenset(b"0123456789!@#$%^&*+=~?")


def may_hold_table(text: str) -> bool:
    """Whether ``text`` may hold a table (a cell separator and a line end): cheap, asked first."""
    return ("\t" in text or "|" in text or "," in text or "\\t" in text) and ("\n" in text or "\\n" in text)


def table_spans(data: bytes, secret_cell: Callable[[str, bytes], bool], hint: Any) -> Spans:
    """Byte spans of the cells of ``data``'s tables that hold a secret: those under a header
    naming one, and the second cell of a two-cell row whose first names one, as
    ``secret_cell(name, value)`` judges them (a key's rules: the name, and a code's digits).

    Only lines where ``hint`` (a pattern finding the fragments of secret names) matches are
    read as a header or a row naming a secret, then the rows under such a header: every line
    is looked at once at most."""
    found: Spans = []
    done = 0
    for m in hint.finditer(data):
        if m.start() < done:
            continue
        start, end, after = _line(data, m.start(), done)
        done = after
        line = data[start:end]
        sep = _separator(line)
        if sep is None or (sep == (b",",) and (b", " in line or b"{" in line or b"=" in line)):
            continue  # (a comma then a space is prose's, and a CSV header holds no braces or =)
        cells = _cells(data, start, end, sep)
        names = [data[s:e].strip().strip(b"\"'`*") for s, e in cells]
        if _header(names, sep, line) and not _under_a_header(data, start, sep, len(cells)):
            columns = [c for c, n in enumerate(names) if secret_cell(n.decode(), b"0")]
            while columns and after < len(data):  # the rows under it, as many cells each
                start, end, nxt = _line(data, after, after)
                line = data[start:end]
                if sep == (b"|",) and _rule(line):
                    after = done = nxt
                    continue
                row = _cells(data, start, end, sep) if any(x in line for x in sep) else []
                if len(row) != len(cells):
                    break
                for c in columns:
                    s, e = _stripped(data, *row[c])
                    if e > s and not data.startswith(b"[REDACTED", s) and secret_cell(names[c].decode(), data[s:e]):
                        found.append((s, e))
                after = done = nxt
        elif len(cells) == 2 and sep != (b",",):
            found += _row_pair(data, cells, secret_cell)
    return found


def _line(data: bytes, at: int, floor: int) -> tuple[int, int, int]:
    """``(start, end, next)`` of the line holding ``at`` (starting at ``floor`` or after; a line
    ends at a newline, also written ``\\n``, its carriage return left out), and where the next starts."""
    a, b = data.rfind(b"\n", floor, at), data.rfind(b"\\n", floor, at)
    start = max(a + 1 if a >= 0 else floor, b + 2 if b >= 0 else floor)
    nl = data.find(b"\n", at)
    limit = nl if nl >= 0 else len(data)
    esc = data.find(b"\\n", at, limit)
    if esc >= 0:
        end, nxt = esc, esc + 2
    elif nl >= 0:
        end, nxt = nl, nl + 1
    else:
        end, nxt = len(data), len(data)
    if data[end - 1 : end] == b"\r":
        end -= 1
    elif data[end - 2 : end] == b"\\r":
        end -= 2
    return start, max(start, end), nxt


def _rule(line: bytes) -> bool:
    """A Markdown table's rule row: |---|:--:|."""
    return bool(line.strip()) and not line.strip().strip(bytes(_RULE))


def _under_a_header(data: bytes, start: int, sep: tuple[bytes, ...], count: int) -> bool:
    """Whether the line before the one at ``start`` is a rule or a row of ``count`` cells split
    by ``sep``: then this line is a row of that table (| password | string | in a schema), not a header."""
    if start == 0:
        return False
    back = 2 if data[start - 2 : start] == b"\\n" else 1
    prev_start, prev_end, _ = _line(data, start - back, max(0, start - back - 4096))
    prev = data[prev_start:prev_end]
    if sep == (b"|",) and _rule(prev):
        return True
    return any(x in prev for x in sep) and len(_cells(data, prev_start, prev_end, sep)) == count


def _separator(line: bytes) -> tuple[bytes, ...] | None:
    for sep in _SEPARATORS:
        if sep[0] in line:
            return sep
    return None


def _cells(data: bytes, start: int, end: int, sep: tuple[bytes, ...]) -> Spans:
    """Byte spans of the cells of the line ``data[start:end]``. A Markdown row's outer pipes
    make no cells; a table inside a quoted string (JSON, a repr) starts after the quote that
    opens it and ends before the one that closes it."""
    line = data[start:end]
    cells = []
    at = 0
    for m in _SPLIT[sep].finditer(line):
        cells.append((start + at, start + m.start()))
        at = m.end()
    cells.append((start + at, end))
    if sep == (b"|",):
        if cells and not data[cells[0][0] : cells[0][1]].strip():
            cells = cells[1:]
        if cells and not data[cells[-1][0] : cells[-1][1]].strip():
            cells = cells[:-1]
    if cells:
        first_start, first_end = cells[0]
        quote = max(data.rfind(b'"', first_start, first_end), data.rfind(b"'", first_start, first_end))
        if quote >= 0:
            cells[0] = (quote + 1, first_end)
        last_start, last_end = cells[-1]
        quote = min((q for q in (data.find(b'"', last_start, last_end), data.find(b"'", last_start, last_end)) if q >= 0), default=-1)
        if quote >= 0:
            cells[-1] = (last_start, quote - (data[quote - 1 : quote] == b"\\"))
    return cells


_SPLIT = {
    (b"\\t", b"\t"): compile_linear(rb"\\t|\t"),
    (b"\t",): compile_linear(rb"\t"),
    (b"|",): compile_linear(rb"\|"),
    (b",",): compile_linear(rb","),
}


def _stripped(data: bytes, start: int, end: int) -> tuple[int, int]:
    while start < end and data[start] in b" \t\"'`":
        start += 1
    while end > start and data[end - 1] in b" \t\"'`":
        end -= 1
    return start, end


def _header(names: list[bytes], sep: tuple[bytes, ...], line: bytes) -> bool:
    """Whether a row's cells all read as column names (no digits: a row of values has some).
    A CSV header has no space after its commas: prose does."""
    if len(names) < 2 or not all(n and len(n) <= _MAX_NAME and _NAME.fullmatch(n) is not None for n in names):
        return False
    return sep != (b",",) or b", " not in line


def _row_pair(data: bytes, cells: Spans, secret_cell: Callable[[str, bytes], bool]) -> Spans:
    """A two-cell row naming a secret in its first cell: its second (``| password | x |``)."""
    name = data[cells[0][0] : cells[0][1]].strip().strip(b"\"'`*")
    if not name or len(name) > _MAX_NAME or _NAME.fullmatch(name) is None:
        return []
    s, e = _stripped(data, *cells[1])
    value = data[s:e]
    if e <= s or value.startswith(b"[REDACTED") or b" " in value or not secret_cell(name.decode(), value):
        return []
    if len(value) < 16 and (len(value) < 6 or not any(c in _DIGITS_AND_SIGNS for c in value)):
        return []  # a word: | password | required |, | token | string |
    return [(s, e)]
