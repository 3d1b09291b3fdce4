"""Secrets hidden by an encoding: base64, percent-encoding, a literal written in pieces.

The redactor's patterns read text as it is written. A secret encoded on its way (a Kubernetes
secret's base64, a service account's JSON in base64, ``password%3Dhunter2`` in a form body
or a URL inside a URL, ``"sk-" "proj-..."`` in code a tool writes) reads as none of them.
Each finder here undoes one encoding, asks the redactor's own direct scan (formats, keys,
the user's and the environment's patterns, the values a run learned) about the decoded
text, and gives back where the secret is in the text as written:

- a base64 run that decodes to text holding a secret goes whole (what it encodes cannot be
  cut apart in its letters);
- percent-encoded text loses just the encoded characters of the secret;
- a string literal split in pieces loses the pieces the secret spans.

Every finder runs in time linear in the text (RE2, and one decode per run found), and text
of under ``MIN_TEXT`` characters, or holding none of the encodings, costs one RE2 search.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import string
from collections.abc import Callable
from typing import Any

from graphtape.recorder.linear_regex import compile_linear

Spans = list[tuple[int, int]]
DirectSpans = Callable[[str], Spans]
Quick = Callable[[str], bool]  # whether a text may hold a secret at all (one cheap pass): before each direct scan

MIN_TEXT = 12  # base64 of an 8-character secret (the shortest env_secrets and learned_secrets keep)
_MAX_DECODED = 4 << 20  # a longer base64 run is a file (an image, an archive), not a credential
_PROBE = 48  # characters of a run decoded first: base64 of binary data is refused on them

# Whether any finder has work: a base64 run, a percent escape, two string literals side by
# side (with something between them: "" is an empty string). One search of every text the
# redactor scrubs, apart from its first pass: ids and hashes pass this gate (a finder then
# drops them), and in that pass they would send the text through its substituting passes.
# Base64 of ASCII text starts each group of four with one of A-Z or a-f (a byte's top six bits
# under 0x80): three such groups in a row are asked for, which paths, ids and words seldom make.
_GATE = compile_linear(r"(?:[A-Za-f][A-Za-z0-9+/]{3}){3}|(?:[A-Za-f][A-Za-z0-9_\-]{3}){4}|%[0-9A-Fa-f]{2}|[\"'](?:[ \t]+|[ \t]*\+|[ \t]*(?:\r?\n|\\n))[ \t]*\+?[ \t]*[rbfuRBFU]{0,2}[\"']")
# A run of either base64 alphabet (standard, URL-safe), its padding, and its wrapped lines
# (``base64`` wraps at 76; each line is joined to the next by _runs).
_BASE64_RUN = compile_linear(r"[A-Za-z0-9+/]{12,}={0,2}|[A-Za-z0-9_\-]{16,}={0,2}")
_LINE_BREAKS = ("\n", "\r\n", "\\n", "\\r\\n")
_TAIL = compile_linear(r"[A-Za-z0-9+/_\-]{1,15}={0,2}")  # a wrapped run's last line, too short to be a run
_PERCENT_RUN = compile_linear(r"[^\s\"'<>`]*%[0-9A-Fa-f]{2}[^\s\"'<>`]*")
_PERCENT = compile_linear(r"%[0-9A-Fa-f]{2}")
# Two or more string literals side by side (Python's implicit concatenation, or joined by +).
_LITERAL = r"[rbfuRBFU]{0,2}(?:\"(?:[^\"\\\r\n]|\\.)*\"|'(?:[^'\\\r\n]|\\.)*')"
_JOIN = r"(?:[ \t]+|[ \t]*\+|[ \t]*(?:\r?\n|\\n))[ \t]*\+?[ \t]*(?:(?:\r?\n|\\n)[ \t]*)?"  # ("a""b" is too rare to read)
_LITERAL_CHAIN = compile_linear(rf"{_LITERAL}(?:{_JOIN}{_LITERAL})+")
_ONE_LITERAL = compile_linear(_LITERAL)
_CONTEXT = 80  # characters of the line around a chain read with it (the key it is assigned to)
_CONTROLS = str.maketrans("", "", "\t\n\r")
_ASCII_HEADS = str.maketrans("", "", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef")


def hidden_spans(text: str, direct: DirectSpans, quick: Quick) -> Spans:
    """Where secrets hidden by an encoding are in ``text``, as character spans, sorted (they may
    overlap what ``direct``, the redactor's scan of text as written, finds there itself).
    ``quick`` says whether a decoded text may hold one at all (``direct`` runs only then)."""
    if len(text) < MIN_TEXT:
        return []
    # Base64 of text mixes the cases, so text of one case holds none (a UUID, a hex digest: most
    # of the ids a run records), and the others need their sign: asked first, at C speed.
    mixed = not text.islower() and not text.isupper()  # (no copy, and prose answers at its first capital)
    percent = "%" in text
    quoted = '"' in text or "'" in text
    if not (mixed or percent or quoted):
        return []
    if not (percent or quoted) and _one_token(text):
        # A single token of either alphabet (a call id, a key, base64 alone): its own run.
        decoded = _base64_text(text)
        return [(0, len(text))] if decoded is not None and quick(decoded) and direct(decoded) else []
    if _GATE.search(text) is None:
        return []
    found = _base64_spans(text, direct, quick) if mixed else []
    if percent:
        found += _percent_spans(text, direct, quick)
    if quoted:
        found += _literal_spans(text, direct, quick)
    return sorted(found)


# -- base64 --------------------------------------------------------------------------


def _runs(text: str) -> list[tuple[int, int]]:
    """Base64 runs of ``text``, a run wrapped over lines (each full line a multiple of 4, the
    way ``base64`` and PEM write it, the line breaks escaped too: a repr, JSON text) taken as
    one, with its last line however short."""
    runs: list[tuple[int, int]] = []
    line = 0  # where the last line of the last run starts
    for m in _BASE64_RUN.finditer(text):
        start, end = m.span()
        if runs:
            at = _next_line(text, runs[-1][1], line)
            # (after an escaped break, "\\n", the next line's run starts at its "n")
            if at is not None and (at == start or (at == start + 1 and text[start] == "n")):
                runs[-1] = (runs[-1][0], end)
                line = at
                continue
            runs[-1] = _with_tail(text, runs[-1], line)
        runs.append((start, end))
        line = start
    if runs:
        runs[-1] = _with_tail(text, runs[-1], line)
    return runs


def _next_line(text: str, end: int, line: int) -> int | None:
    """Where the line after a run's last line (``line``..``end``) starts, when that line is one
    of a wrapped run (a multiple of 4, 40 characters or more, no padding); else None."""
    if (end - line) % 4 or end - line < 40 or text[end - 1] == "=":
        return None
    for brk in _LINE_BREAKS:
        if text.startswith(brk, end):
            return end + len(brk)
    return None


def _with_tail(text: str, run: tuple[int, int], line: int) -> tuple[int, int]:
    """``run`` with the short last line of its wrapping, shorter than a run (``eHgifQ==``)."""
    at = _next_line(text, run[1], line)
    tail = _TAIL.match(text, at) if at is not None else None
    if tail is None or (tail.end() - at) % 4:
        return run
    return run[0], tail.end()


def _base64_text(run: str) -> str | None:
    """The text ``run`` encodes, or None when it is not base64 of text (an id, a word, a hash,
    an image)."""
    core = "".join(run.split()).replace("\\r", "").replace("\\n", "").rstrip("=")
    if len(core) < MIN_TEXT - 1 or len(core) % 4 == 1 or core.lower() == core or core.upper() == core:
        return None  # (base64 of text mixes the cases: an id or a word of one case is not)
    if len(core) * 3 // 4 > _MAX_DECODED:
        return None
    heads = core[::4]
    if len(heads.translate(_ASCII_HEADS)) * 4 > len(heads):
        return None  # most groups start outside A-Z a-f: not base64 of text (or not aligned here)
    alt = b"-_" if ("-" in core or "_" in core) else None
    if alt and ("+" in core or "/" in core):
        return None
    probe = core[: _PROBE] if len(core) > _PROBE else core
    if _decode(probe, alt, partial=len(probe) < len(core)) is None:
        return None
    return _decode(core, alt, partial=False) if len(probe) < len(core) else _decode(probe, alt, partial=False)


def _decode(chars: str, alt: bytes | None, *, partial: bool) -> str | None:
    try:
        data = base64.b64decode(chars + "=" * (-len(chars) % 4), altchars=alt, validate=True)
    except (binascii.Error, ValueError):
        return None
    try:
        out = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if not partial or exc.start < len(data) - 3:
            return None  # (a probe may cut a character in two at its end)
        out = data[: exc.start].decode("utf-8")
    return out if out.translate(_CONTROLS).isprintable() else None


_ONE_TOKEN_MAX = 4096  # longer single tokens (a base64 file) take the runs' search
_NOT_STANDARD = str.maketrans("", "", string.ascii_letters + string.digits + "+/")
_NOT_URL_SAFE = str.maketrans("", "", string.ascii_letters + string.digits + "-_")


def _one_token(text: str) -> bool:
    """Whether ``text`` is one run of one base64 alphabet, as long as ``_runs`` asks (a short
    text without spaces or other signs: most ids), so that it needs no search for its runs."""
    if len(text) > _ONE_TOKEN_MAX or " " in text:
        return False  # (asked in C before a copy of a long text is made)
    core = text.rstrip("=")
    if len(text) - len(core) > 2:
        return False
    return (len(core) >= 12 and not core.translate(_NOT_STANDARD)) or (len(core) >= 16 and not core.translate(_NOT_URL_SAFE))


def _base64_spans(text: str, direct: DirectSpans, quick: Quick) -> Spans:
    found = []
    for start, end in _runs(text):
        decoded = _base64_text(text[start:end])
        if decoded is not None and quick(decoded) and direct(decoded):
            found.append((start, end))
    return found


# -- percent-encoding ------------------------------------------------------------------


def _percent_decoded(run: str) -> tuple[str, list[int]]:
    """``run`` percent-decoded (``+`` read as a space, a form's way), one character per byte
    (Latin-1: the patterns read ASCII), and where each decoded character starts in ``run``."""
    out: list[str] = []
    where: list[int] = []
    last = 0
    for m in _PERCENT.finditer(run):
        start = m.start()
        out.append(run[last:start].replace("+", " "))
        where.extend(range(last, start))
        out.append(chr(int(run[start + 1 : start + 3], 16)))
        where.append(start)
        last = m.end()
    out.append(run[last:].replace("+", " "))
    where.extend(range(last, len(run)))
    return "".join(out), where


def _percent_spans(text: str, direct: DirectSpans, quick: Quick) -> Spans:
    found = []
    for m in _PERCENT_RUN.finditer(text):
        at, run = m.start(), m.group(0)
        decoded, where = _percent_decoded(run)
        for _ in range(2):  # encoded twice (a URL in a URL's query, sent in a form): once more
            spans = (direct(decoded) or _field_spans(decoded, direct)) if quick(decoded) else []
            if spans or _PERCENT.search(decoded) is None:
                break
            again, inner = _percent_decoded(decoded)
            decoded, where = again, [where[i] for i in inner]
        for start, end in spans:
            last = where[end - 1]
            last_end = last + (3 if run[last] == "%" else 1)
            found.append((at + where[start], at + last_end))
    return found


def _field_spans(decoded: str, direct: DirectSpans) -> Spans:
    """Secrets in the fields of a decoded query or form (``q=password: hunter2``), each read
    alone: a field's text starts after its ``=``, where no key's delimiter is written."""
    if "=" not in decoded:
        return []
    found: Spans = []
    at = 0
    for field in _FIELDS.split(decoded):
        if field and at:
            found += [(at + s, at + e) for s, e in direct(field)]
        at += len(field) + 1
    return found


_FIELDS = compile_linear(r"[=&]")


# -- a literal in pieces --------------------------------------------------------------


def _literal_spans(text: str, direct: DirectSpans, quick: Quick) -> Spans:
    """Secrets in string literals written side by side (``"sk-" "proj-abc..."``): the pieces
    are read joined, in one literal, with the line around them (the key they are assigned to).
    Chains near each other are read in one window, so each character is read about once."""
    found: Spans = []
    window: list[Any] = []
    for chain in _LITERAL_CHAIN.finditer(text):
        if window and chain.start() - _CONTEXT > window[-1].end() + _CONTEXT:
            found += _window_spans(text, window, direct, quick)
            window = []
        window.append(chain)
    if window:
        found += _window_spans(text, window, direct, quick)
    return found


def _window_spans(text: str, chains: list[Any], direct: DirectSpans, quick: Quick) -> Spans:
    """The secrets that span two pieces or more of the chains of one window (see _literal_spans)."""
    floor = max(0, chains[0].start() - _CONTEXT)
    ceiling = min(len(text), chains[-1].end() + _CONTEXT)
    floor = max(text.rfind("\n", floor, chains[0].start()) + 1, floor)
    after = text.find("\n", chains[-1].end(), ceiling)
    ceiling = ceiling if after < 0 else after
    parts: list[str] = []
    segments: list[tuple[int, int, int]] = []  # (where in the joined text, where in text, piece number) of each piece
    size = 0
    at = floor
    piece = 0
    for chain in chains:
        parts.append(text[at : chain.start()])
        size += chain.start() - at
        base = chain.start()
        quote = None
        for lit in _ONE_LITERAL.finditer(chain.group(0)):  # (the chain alone: RE2 given a str and a position encodes all of it)
            body = lit.group(0).lstrip("rbfuRBFU")
            if quote is None:
                quote = body[0]
                parts.append(quote)
                size += 1
            segments.append((size, base + lit.end() - len(body) + 1, piece))
            parts.append(body[1:-1])
            size += len(body) - 2
            piece += 1
        parts.append(quote or "")
        size += 1 if quote else 0
        segments.append((size, -1, -1))  # (the chain's end: what follows is context)
        at = chain.end()
    parts.append(text[at:ceiling])
    joined = "".join(parts)
    if not quick(joined):
        return []
    found: Spans = []
    starts = [s for s, _, _ in segments]
    for start, end in direct(joined):
        covered = []
        i = max(0, bisect.bisect_right(starts, start) - 1)
        while i < len(segments) - 1 and segments[i][0] < end:
            seg_start, origin, number = segments[i]
            seg_end = segments[i + 1][0]
            if origin >= 0 and start < seg_end and end > seg_start:
                a, b = max(start, seg_start), min(end, seg_end)
                covered.append((origin + a - seg_start, origin + b - seg_start, number))
            i += 1
        if len({n for _, _, n in covered}) >= 2:  # (within one piece, the scan of the text as written finds it)
            found += [(a, b) for a, b, _ in covered if b > a]
    return found
