"""Redaction time on adversarial text: every pattern family at 1 MB, against plain scans.

A pattern that backtracks turns a crafted string into minutes of CPU under the GIL (the old
private-key pattern took 16 s on 280 KB of BEGIN headers with no END, 282 s on 1.1 MB). Under
RE2 every input costs time linear in its length: this prints, per family (graphtape's formats,
detect-secrets' catalogue, keys in text at every escaping depth, and user patterns that would
backtrack in Python's ``re``), the median time to scrub 1 MB of text built to hurt that family,
its ratio to two baselines measured in the same run, and how its time grows from 1 MB to 4 MB
(1.0 is linear).

Baselines: ``plain scan`` is one RE2 pass over the text that finds nothing (the cost of reading
1 MB through the engine at all); ``prose`` is scrubbing 1 MB of ordinary text.

Usage::

    .venv/bin/python benchmarks/bench_redaction.py            # 1 MB per case, 5 reps
    .venv/bin/python benchmarks/bench_redaction.py --quick    # 100 KB, 3 reps, no growth column

Always exits 0: a report, not a test.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import string
import time
import uuid
from collections.abc import Callable

from graphtape.recorder.linear_regex import compile_linear
from graphtape.recorder.redaction import Redactor

PROSE = "The order A-1042 shipped on Monday and the carrier expects delivery within two days. "
# What an agent's recording mostly holds, none of it secret: a markdown answer (bullets, "is"),
# a tool's JSON result, a shell command and its output, a traceback line. Every net of keys in
# text is asked about it (separators, flags, prose about passwords and tokens, command names).
AGENT_TEXT = (
    "Here is what I found:\n- The token is valid until Friday and the password is not set.\n"
    "- Run `mysql -u app -p shop` and enter it when asked; `curl -s https://api.example.com/v1/orders?page=2`.\n"
    '{"order_id": "A-1042", "status": "shipped", "url": "https://shop.example/o/1042", "max_tokens": 1024, '
    '"items": [{"sku": "SKU-00042", "qty": 2}], "note": "typing indicator on, mapping loaded"}\n'
    "$ docker run -p 8080:80 --name web nginx && ls -la /srv --color=auto\n"
    'File "agent/tools.py", line 42, in lookup: raise KeyError("session expired, login again")\n'
)
# User patterns that take exponential time in Python's re on a near miss; RE2 runs them linearly.
USER_PATTERNS = [r"(a+)+b", r"(x|x)*y", r"(\w+\s?)*ACME-\d{4}"]


def cases(size: int) -> dict[str, tuple[str, bool]]:
    """``name: (text of size characters, uses the user patterns)``, each built to make one family work hardest."""

    def fill(unit: str) -> str:
        return (unit * (size // len(unit) + 1))[:size]

    return {
        "prose": (fill(PROSE), False),
        "agent text: markdown, JSON, commands": (fill(AGENT_TEXT), False),
        "private key: BEGIN headers, no END": (fill("-----BEGIN RSA PRIVATE KEY-----\n"), False),
        "private key: one BEGIN, body, no END": ("-----BEGIN PRIVATE KEY-----\n" + fill("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"), False),
        "sk- prefixes never long enough": (fill("sk-abc sk-proj- "), False),
        "bearer without a token": (fill("Bearer Bearer bearer "), False),
        "URL credentials never closed": (fill("postgresql://user:pass"), False),
        "quoted keys never closed": (fill('"password": "'), False),
        "escaped JSON keys never closed": (fill('\\"api_key\\": \\"x'), False),
        "JSON in JSON, 3 deep, never closed": (fill('\\\\\\"token\\\\\\": \\\\\\"x\\\\'), False),
        "key=value runs": (fill("password=" + "a" * 20 + " "), False),
        "JWT-like dots": (fill("eyJhbGciOi.eyJzdWIi."), False),
        "form-data secret fields, no value": (fill('Content-Disposition: form-data; name="password"\r\nX: y\r\n'), False),
        "escaped key names never closed": (fill('"pass\\u0077ord": "'), False),
        "secret flags without values": (fill(" --password --api-key -token"), False),
        "commands without a password": (fill("mysql -u root -p db; sshpass -f f ssh -p 22 h; curl -u user "), False),
        "prose about passwords": (fill("the password is incorrect and the token was 2048 bits; my PIN is 4 digits. "), False),
        "catalogue: aws ... key ... quote": (fill("aws key aws_secret 'abc "), False),
        "catalogue: ://user:pass, no @": (fill("://a:b"), False),
        "catalogue: digits and colons": (fill("123456789:"), False),
        "long alphanumeric run": (fill("A1b2C3d4"), False),
        "URL-safe base64": (fill("Q2hlY2tpbmcgd2l0aCBzay1wcm9q-_x"), False),
        "many secrets": (fill("token sk-proj-AbCdEf0123456789AbCdEf0123456789 and AKIAIOSFODNN7EXAMPLE; "), False),
        "user patterns: near misses": (fill("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa! xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx! word word word ACME-12 "), True),
    }


def median_seconds(run: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def scrub_time(text: str, user: bool, reps: int) -> float:
    patterns = USER_PATTERNS if user else []
    return median_seconds(lambda: Redactor(patterns=patterns).scrub(text), reps)


def agent_lines(n: int) -> list[str]:
    """``n`` distinct short values (the lines of ``AGENT_TEXT``, numbered): what a run records
    most is many short strings, each scanned once."""
    lines = [line for line in AGENT_TEXT.splitlines() if line]
    return [f"{lines[i % len(lines)]} #{i}" for i in range(n)]


def ids(n: int) -> list[str]:
    """``n`` distinct ids as a run records them beside every message and call: UUIDs, hex
    digests and tool-call ids. Many look like base64 to a first glance, none holds a secret."""
    rng = random.Random(7)
    makers = (
        lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        lambda: hashlib.sha256(rng.randbytes(16)).hexdigest(),
        lambda: "call_" + "".join(rng.choices(string.ascii_letters + string.digits, k=24)),
    )
    return [makers[i % len(makers)]() for i in range(n)]


def values_time(values: list[str], reps: int) -> float:
    """Median seconds to scrub ``values`` with one redactor."""

    def run() -> None:
        r = Redactor()
        for v in values:
            r.scrub(v)

    return median_seconds(run, reps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 KB per case, 3 repetitions, no growth column")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    size = 100_000 if args.quick else 1_000_000
    reps = 3 if args.quick else args.reps
    Redactor(patterns=USER_PATTERNS).scrub("warm up " * 10)  # the catalogue loads with the first redactor

    texts = cases(size)
    nothing = compile_linear("(?:QZJX){3}")
    plain = median_seconds(lambda: nothing.search(texts["prose"][0]), reps)
    results = {name: scrub_time(text, user, reps) for name, (text, user) in texts.items()}
    growth: dict[str, float] = {}
    if not args.quick:
        big = cases(4 * size)
        growth = {name: scrub_time(text, user, max(1, reps // 2)) / (4 * results[name]) for name, (text, user) in big.items()}
    prose = results["prose"]

    print(f"redaction of {size:,} characters, median of {reps}; baselines in this run: plain scan {plain * 1e3:.2f} ms, prose {prose * 1e3:.2f} ms")
    print(f"{'case':40} {'median s':>9} {'s per MB':>9} {'x plain':>8} {'x prose':>8} {'4 MB/1 MB':>10}")
    for name, seconds in results.items():
        grows = f"{growth[name]:10.2f}" if name in growth else f"{'':>10}"
        print(f"{name:40} {seconds:9.4f} {seconds * 1_000_000 / size:9.4f} {seconds / plain:8.0f} {seconds / prose:8.1f} {grows}")
    n = 20_000 if not args.quick else 5_000
    for label, values in (("short values (agent text lines)", agent_lines(n)), ("ids (UUIDs, hex digests, call ids)", ids(n))):
        print(f"{label:40} {values_time(values, reps) * 1e6 / n:9.2f} µs per value, {n:,} distinct values")
    worst = max(results, key=results.get)
    print(f"\nworst case: {worst}: {results[worst] * 1_000_000 / size:.3f} s per MB ({results[worst] / plain:.0f}x a plain scan, {results[worst] / prose:.0f}x prose)")
    if growth:
        print(f"time per MB at 4 MB against 1 MB: {min(growth.values()):.2f} to {max(growth.values()):.2f} (1.0 is linear; a quadratic pattern would show 4)")


if __name__ == "__main__":
    main()
