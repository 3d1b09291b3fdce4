"""Redaction time on adversarial text: every pattern family at 1 MB, against plain prose.

A pattern that backtracks turns a crafted string into minutes of CPU under the GIL (the old
private-key pattern took 16 s on 280 KB of BEGIN headers with no END, 282 s on 1.1 MB). Under
RE2 every input costs time linear in its length: this prints, per family, the median time to
scrub 1 MB of text built to hurt that family, and its ratio to 1 MB of ordinary prose.

Usage::

    .venv/bin/python benchmarks/bench_redaction.py            # 1 MB per case, 5 reps
    .venv/bin/python benchmarks/bench_redaction.py --quick    # 100 KB, 3 reps

Always exits 0: a report, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import time

from graphtape.recorder.redaction import Redactor

PROSE = "The order A-1042 shipped on Monday and the carrier expects delivery within two days. "


def cases(size: int) -> dict[str, str]:
    """Texts of ``size`` characters built to make each family of patterns work hardest."""

    def fill(unit: str) -> str:
        return (unit * (size // len(unit) + 1))[:size]

    return {
        "prose (baseline)": fill(PROSE),
        "private key: BEGIN headers, no END": fill("-----BEGIN RSA PRIVATE KEY-----\n"),
        "private key: one BEGIN, body, no END": "-----BEGIN PRIVATE KEY-----\n" + fill("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"),
        "sk- prefixes never long enough": fill("sk-abc sk-proj- "),
        "bearer without a token": fill("Bearer Bearer bearer "),
        "URL credentials never closed": fill("postgresql://user:pass"),
        "quoted keys never closed": fill('"password": "'),
        "escaped JSON keys never closed": fill('\\"api_key\\": \\"x'),
        "key=value runs": fill("password=" + "a" * 20 + " "),
        "JWT-like dots": fill("eyJhbGciOi.eyJzdWIi."),
        "long alphanumeric run": fill("A1b2C3d4"),
        "many secrets": fill("token sk-proj-AbCdEf0123456789AbCdEf0123456789 and AKIAIOSFODNN7EXAMPLE; "),
    }


def median_seconds(text: str, reps: int) -> float:
    times = []
    for _ in range(reps):
        r = Redactor()
        start = time.perf_counter()
        r.scrub(text)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 KB per case, 3 repetitions")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    size = 100_000 if args.quick else 1_000_000
    reps = 3 if args.quick else args.reps
    Redactor().scrub("warm up " * 10)  # the catalogue loads with the first redactor
    results = {name: median_seconds(text, reps) for name, text in cases(size).items()}
    base = results["prose (baseline)"]
    print(f"redaction of {size:,} characters, median of {reps} (seconds; ratio to prose)")
    print(f"{'case':45} {'median s':>9} {'per MB s':>9} {'ratio':>7}")
    for name, seconds in results.items():
        print(f"{name:45} {seconds:9.4f} {seconds * 1_000_000 / size:9.4f} {seconds / base:7.2f}")
    worst = max(results, key=results.get)
    print(f"\nworst case: {worst}: {results[worst] * 1_000_000 / size:.3f} s per MB ({results[worst] / base:.1f}x prose)")


if __name__ == "__main__":
    main()
