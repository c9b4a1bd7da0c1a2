"""What the learned ranking stage costs at 100k chunks (issue 22; docs/benchmarks.md "Learned
ranking (issue 22)"). Bench-only, not part of the test suite.

    .venv/bin/python scripts/bench_learned.py [--index PATH] [--work DIR] [--rounds 20]

The c100k corpus and index of scripts/bench_issue.py (built with the hashing embedder unless
``--index`` names one), and its questions: the 16 plain control questions and the 40 synthetic
issues. Per round the questions are shuffled and each runs ``Retriever.search(q, top_k=10,
strategy=...)`` with ``hybrid+learned`` and ``hybrid+handset`` back to back, the order flipping
every question, after two warm-up passes; the query embedding is memoised (a dict look-up in
both arms). Prints p50 / p95 per arm, the p50 difference and ratio, the median of the
per-question paired differences, and the learned stage's own time (``timings_ms["priors"]``
holds it with the other prior stages: the difference of the two arms' priors time).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import ragloom
from ragloom.embed.base import HashingEmbedder

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_issue import (
    CONTROL,
    IssueWriter,
    MemoEmbedder,
    build_index,
    interleaved,
    load,
    summary,
    table,
)

ARMS = ("hybrid+learned", "hybrid+handset")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, help="an indexed root (or .ragloom folder) to reuse")
    ap.add_argument("--work", type=Path, default=Path("bench-out/issue"))
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    root = args.index if args.index is not None else build_index(args.work)
    corpus = root.parent if root.name == ".ragloom" else root
    index = ragloom.open(corpus, embedder=HashingEmbedder(384))
    retriever = index.retriever
    retriever._embedder = MemoEmbedder(retriever.embedder)  # bench only: memoised queries
    issues = IssueWriter(corpus).issues()
    print(f"index {corpus}: {index.status(freshness=False).chunks} chunks; {load()}", flush=True)

    def searcher(arm: str) -> Any:
        return lambda q: retriever.search(q, top_k=10, strategy=arm)

    rows = []
    priors: dict[str, float] = {}
    for label, qs in (("plain questions", list(CONTROL)), ("issues", issues)):
        s, per_q, last = interleaved(qs, {a: searcher(a) for a in ARMS}, args.rounds)
        rows.append(summary(f"search, embedding excluded ({label})", s, per_q))
        for a in ARMS:
            priors[f"{label}, {a}"] = statistics.median(
                r.timings_ms.get("priors", 0.0) for r in last[a]
            )
    print(f"\n{load()}\n")
    print(table(rows))
    print("\np50 of timings_ms['priors'] (ms), last round:")
    for k, v in priors.items():
        print(f"  {k}: {v:.3f}")
    index.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
