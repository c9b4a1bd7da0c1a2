"""Grid-search the hybrid RRF weights and k on evaluation datasets (docs/ranking.md, "Tuning").

Usage (after ``make eval`` or ``ragloom eval-data`` + ``ragloom index``)::

    python scripts/tune_ranking.py --index-dir eval-out/data/corpus/.ragloom \
        --dataset eval-out/data/docstring.jsonl --dataset eval-out/data/identifier.jsonl

Each query's BM25 and dense lists are computed once and cached, so every grid point re-runs
only fusion, boosts and MMR over the same lists. Prints MRR@10 (file and symbol level) per
dataset for the single modalities and every grid point, best average first.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import ragloom
from ragloom.retrieve.config import MmrConfig, RrfConfig
from ragloom.retrieve.query import ProcessedQuery
from ragloom.retrieve.search import Retriever


def _load(path: Path, limit: int | None) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows[:limit] if limit else rows


def _rr(ranked: list[str], gold: set[str]) -> float:
    for i, item in enumerate(ranked[:10], 1):
        if item in gold:
            return 1.0 / i
    return 0.0


def _symbol_match(symbol: str, gold: set[str]) -> bool:
    return any(symbol == g or symbol.endswith("." + g) or g.endswith("." + symbol) for g in gold)


def _score(retriever: Retriever, rows: list[dict[str, Any]], strategy: str) -> tuple[float, float]:
    files_rr: list[float] = []
    sym_rr: list[float] = []
    for row in rows:
        hits = retriever.search(row["query"], top_k=10, strategy=strategy).hits
        files = list(dict.fromkeys(h.path for h in hits))
        files_rr.append(_rr(files, set(row["gold_files"])))
        gold_syms = set(row.get("gold_symbols") or [])
        rank = next(
            (
                i
                for i, h in enumerate(hits, 1)
                if h.path in row["gold_files"] and _symbol_match(h.symbol, gold_syms)
            ),
            0,
        )
        sym_rr.append(1.0 / rank if rank else 0.0)
    return statistics.fmean(files_rr), statistics.fmean(sym_rr)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--index-dir", type=Path, required=True)
    ap.add_argument("--dataset", type=Path, action="append", required=True)
    ap.add_argument("--limit", type=int, default=None, help="queries per dataset")
    args = ap.parse_args()

    idx = ragloom.open(args.index_dir)
    retriever = idx.retriever
    cache: dict[tuple[object, ...], Any] = {}
    original = retriever._retrieve

    def cached(pq: ProcessedQuery, depth: int, sparse: bool, dense: bool) -> Any:
        key = (pq.sparse_text, pq.dense_text, depth, sparse, dense)
        if key not in cache:
            cache[key] = original(pq, depth, sparse, dense)
        return cache[key]

    retriever._retrieve = cached  # type: ignore[method-assign]
    datasets = {p.stem: _load(p, args.limit) for p in args.dataset}
    results: list[tuple[str, dict[str, tuple[float, float]]]] = []

    def run(label: str, strategy: str) -> None:
        per = {name: _score(retriever, rows, strategy) for name, rows in datasets.items()}
        results.append((label, per))
        cells = "  ".join(f"{n}: file {f:.3f} sym {s:.3f}" for n, (f, s) in per.items())
        print(f"{label:<40} {cells}", file=sys.stderr, flush=True)

    for strategy in ("sparse", "dense", "sparse+raw", "dense+raw"):
        run(strategy, strategy)
    grid_w = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0)
    grid_k = (10.0, 30.0, 60.0)
    for wb, k in itertools.product(grid_w, grid_k):
        retriever.rrf = RrfConfig(k=k, weight_bm25=wb, weight_dense=1.0)
        run(f"hybrid k={k:g} w_bm25={wb:g} w_dense=1", "hybrid")
    best = max(
        (r for r in results if r[0].startswith("hybrid")),
        key=lambda r: statistics.fmean(s for _, s in r[1].values()),
    )
    retriever.rrf = RrfConfig()
    for lam in (0.5, 0.7, 0.85):
        retriever.mmr = MmrConfig(lambda_=lam)
        run(f"hybrid-mmr (seed rrf) lambda={lam:g}", "hybrid-mmr")
    print(json.dumps({"best_hybrid": best[0], "scores": best[1]}, indent=2))


if __name__ == "__main__":
    main()
