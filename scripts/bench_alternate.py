"""One question alone, two versions of ragloom alternated in one run (issue 25).

Runs ``ragloom bench-scale INDEX --runs 3`` with a baseline source tree (for instance a
``git archive`` of an older commit's ``src/``) and with this checkout's ``src/`` in turn,
``--rounds`` times, each in a fresh process, and prints the dense, hybrid and context p50 of
every round, the hybrid ratio per round, and the medians. On a 2-core machine a single pass is
too noisy to compare (per-round ratios of the same two versions spread from 0.8 to 1.7 here),
so the figures worth reporting are the medians over many alternated rounds.

    python scripts/bench_alternate.py --base-src /tmp/w/old/src --base-index /tmp/w/c10k-old \\
        --index /tmp/c10k --rounds 16

Each version needs its own index of the same corpus (an index is read by the code that wrote
it). Nothing is written outside ``--work`` (a temporary folder by default).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

OPS = ("dense", "hybrid", "context")
ROOT = Path(__file__).resolve().parent.parent


def bench(src: Path, index: Path, out: Path, runs: int) -> dict[str, float]:
    """p50 ms of each of :data:`OPS` from one ``bench-scale`` run with ``src`` first on the path."""
    env = dict(os.environ, PYTHONPATH=str(src))
    cmd = [sys.executable, "-m", "ragloom.cli", "bench-scale", str(index), "--runs", str(runs)]
    subprocess.run([*cmd, "--json-out", str(out)], env=env, check=True, capture_output=True)
    scales = json.loads(out.read_text())["scales"]
    latency = next(iter(scales.values()))["latency"]
    return {op: float(latency[op]["p50_ms"]) for op in OPS}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-src", type=Path, required=True, help="the baseline's src/ folder")
    ap.add_argument("--base-index", type=Path, required=True, help="the baseline's index")
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="this version's src/")
    ap.add_argument("--index", type=Path, required=True, help="this version's index")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--runs", type=int, default=3, help="bench-scale --runs")
    ap.add_argument("--work", type=Path, default=None)
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="ragloom-alternate-"))
    work.mkdir(parents=True, exist_ok=True)
    base: list[dict[str, float]] = []
    now: list[dict[str, float]] = []
    print(
        "| round | base dense | now dense | base hybrid | now hybrid | ratio | base context "
        "| now context |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for i in range(1, args.rounds + 1):
        b = bench(args.base_src, args.base_index, work / f"base-{i}.json", args.runs)
        n = bench(args.src, args.index, work / f"now-{i}.json", args.runs)
        base.append(b)
        now.append(n)
        print(
            f"| {i} | {b['dense']:.2f} | {n['dense']:.2f} | {b['hybrid']:.2f} | "
            f"{n['hybrid']:.2f} | {n['hybrid'] / b['hybrid']:.3f} | {b['context']:.2f} | "
            f"{n['context']:.2f} |",
            flush=True,
        )
    ratios = [n["hybrid"] / b["hybrid"] for b, n in zip(base, now, strict=True)]

    def med(rows: list[dict[str, float]], op: str) -> float:
        return statistics.median(r[op] for r in rows)

    print(
        f"\nmedians over {args.rounds} rounds: "
        + ", ".join(f"{op} {med(base, op):.2f} -> {med(now, op):.2f} ms" for op in OPS)
    )
    print(
        f"hybrid: median of the per-round ratios {statistics.median(ratios):.3f}, ratio of the "
        f"medians {med(now, 'hybrid') / med(base, 'hybrid'):.3f}, "
        f"rounds at or below 1.2x: {sum(r <= 1.2 for r in ratios)} of {len(ratios)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
