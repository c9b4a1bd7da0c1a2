"""Retrieval latency at scale, seed targets and concurrency (``ragloom bench-scale``).

Outside the default test run. On an existing index it measures, with the same query set
(:data:`ragloom.bench.indexing.SAMPLE_QUERIES`) and ``top_k`` = 15:

* warm latency p50/p95 of dense-only, sparse-only, hybrid RRF, hybrid RRF + MMR, context
  assembly of the real hits, and the whole hybrid + MMR + assembly path (``get_context``);
* the seed targets as PASS/FAIL lines (:data:`SEED_TARGETS`);
* 100 concurrent queries through :meth:`Retriever.asearch` (p50/p95 and queries/s);
* optionally a synthetic large scale (random unit vectors + replicated real chunk texts),
  search-only, when no real corpus of that size fits the machine.

Peers built on the same chunks and embeddings are in :mod:`ragloom.bench.peers`; the report
(:func:`render_report`) covers both.
"""

from __future__ import annotations

import asyncio
import json
import math
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from ragloom.bench.corpus import EMBED_BATCH, load_corpus
from ragloom.bench.indexing import SAMPLE_QUERIES, STRATEGIES, machine

__all__ = [
    "CONCURRENT_QUERIES",
    "INTERLEAVE_MODES",
    "SEED_TARGETS",
    "STRATEGIES",
    "TOP_K",
    "Target",
    "TargetCheck",
    "assembly_latency",
    "bench_concurrency",
    "bench_latency",
    "bench_synthetic",
    "evaluate_targets",
    "file_quality",
    "latency_ratios",
    "percentile",
    "render_report",
    "summarize",
    "time_call",
]

TOP_K = 15
"""Hits per query: the seed targets are stated "at k=15" (ploke-rag-plan section 6)."""
CONCURRENT_QUERIES = 100
"""Issue 3, section 4: "100 concurrent queries through the async API"."""
QUALITY_K = 10
"""Cut-off of the peer quality metrics: MRR@10 / recall@10 at file level (issue 3, section 1)."""
INTERLEAVE_MODES = ("pass", "query")
"""How peers and ragloom alternate while timed (:func:`bench_peers`)."""
PEER_RATIO_TARGET = 5.0
"""Issue 3 acceptance: ">= 5x lower latency than the LangChain and LlamaIndex peers"."""


# -- statistics and targets ----------------------------------------------------------------
def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile: the smallest sample with at least ``q`` % of the samples at or
    below it (rank ``ceil(q * n / 100)``, at least 1), for ``q`` in [0, 100]."""
    if not values:
        raise ValueError("percentile of an empty sample")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be in [0, 100], got {q}")
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered) / 100.0))
    return ordered[rank - 1]


def summarize(samples_ms: Sequence[float]) -> dict[str, float]:
    """p50 (median), p95 (nearest rank), mean and count of latency samples in milliseconds."""
    if not samples_ms:
        raise ValueError("no latency samples")
    return {
        "p50_ms": round(statistics.median(samples_ms), 2),
        "p95_ms": round(percentile(samples_ms, 95), 2),
        "mean_ms": round(statistics.fmean(samples_ms), 2),
        "n": float(len(samples_ms)),
    }


@dataclass(frozen=True, slots=True)
class Target:
    """A latency target on one measured operation (a key of the latency table)."""

    name: str
    metric: str
    p50_ms: float
    p95_ms: float
    source: str


SEED_TARGETS: tuple[Target, ...] = (
    Target("dense retrieval at k=15", "dense", 40.0, 150.0, "ploke section 6"),
    Target("hybrid retrieval + RRF fusion", "hybrid", 70.0, 250.0, "ploke section 6"),
    Target("assembly, 15 parts from 4 files", "assembly", 30.0, 120.0, "ploke section 6"),
    Target("ragloom: hybrid + MMR + assembly", "context", 15.0, 40.0, "issue 3 acceptance"),
)
"""The issue 3 acceptance latency targets (p50, p95 in ms), checked at every scale; the last one
is stated for 100k chunks."""


@dataclass(frozen=True, slots=True)
class TargetCheck:
    """The outcome of one target: ``passed`` is None when the metric was not measured."""

    target: Target
    p50_ms: float | None
    p95_ms: float | None
    passed: bool | None

    def line(self) -> str:
        """``PASS name: p50 x ms <= y ms, p95 ...`` (or FAIL / SKIP)."""
        t = self.target
        if self.passed is None or self.p50_ms is None or self.p95_ms is None:
            return f"SKIP {t.name}: `{t.metric}` not measured"
        word = "PASS" if self.passed else "FAIL"
        op50 = "<=" if self.p50_ms <= t.p50_ms else ">"
        op95 = "<=" if self.p95_ms <= t.p95_ms else ">"
        return (
            f"{word} {t.name}: p50 {self.p50_ms:g} ms {op50} {t.p50_ms:g} ms, "
            f"p95 {self.p95_ms:g} ms {op95} {t.p95_ms:g} ms ({t.source})"
        )


def evaluate_targets(
    latency: dict[str, dict[str, float]], targets: Sequence[Target] = SEED_TARGETS
) -> list[TargetCheck]:
    """Check each target against the latency table (both p50 and p95 must be within bounds)."""
    out: list[TargetCheck] = []
    for t in targets:
        row = latency.get(t.metric)
        if row is None or "p50_ms" not in row or "p95_ms" not in row:
            out.append(TargetCheck(t, None, None, None))
            continue
        p50, p95 = float(row["p50_ms"]), float(row["p95_ms"])
        out.append(TargetCheck(t, p50, p95, p50 <= t.p50_ms and p95 <= t.p95_ms))
    return out


def latency_ratios(
    ragloom_ms: dict[str, dict[str, float]],
    peers_ms: dict[str, dict[str, float]],
    pairs: Iterable[tuple[str, str]],
) -> dict[str, dict[str, float]]:
    """``peer p50 / ragloom p50`` (and p95) for each (peer, ragloom operation) pair:
    a value of 5 means ragloom answers 5x faster."""
    out: dict[str, dict[str, float]] = {}
    for peer, mine in pairs:
        if peer not in peers_ms or mine not in ragloom_ms:
            continue
        p, r = peers_ms[peer], ragloom_ms[mine]
        out[f"{peer} / ragloom {mine}"] = {
            "p50_ratio": round(p["p50_ms"] / max(r["p50_ms"], 1e-6), 1),
            "p95_ratio": round(p["p95_ms"] / max(r["p95_ms"], 1e-6), 1),
            "meets_5x": float(p["p50_ms"] / max(r["p50_ms"], 1e-6) >= PEER_RATIO_TARGET),
        }
    return out


def file_quality(
    ranked: Sequence[Sequence[str]], gold: Sequence[Sequence[str]], k: int = QUALITY_K
) -> dict[str, float]:
    """Mean MRR@k and recall@k over queries, on each query's ranked unique file list."""
    from ragloom.eval.metrics import mrr_at_k, recall_at_k, unique_files

    if len(ranked) != len(gold):
        raise ValueError("one ranked list per query is needed")
    if not ranked:
        return {f"mrr@{k}": 0.0, f"recall@{k}": 0.0, "queries": 0.0}
    mrr = [mrr_at_k(unique_files(r), g, k) for r, g in zip(ranked, gold, strict=True)]
    rec = [recall_at_k(unique_files(r), g, k) for r, g in zip(ranked, gold, strict=True)]
    return {
        f"mrr@{k}": round(statistics.fmean(mrr), 4),
        f"recall@{k}": round(statistics.fmean(rec), 4),
        "queries": float(len(ranked)),
    }


def assembly_latency(runs: int = 200) -> dict[str, dict[str, float]]:
    """The seed's assembly case (15 parts from 4 files) as a latency table row ``assembly``,
    from :func:`ragloom.bench.assembly.bench_assembly`."""
    from ragloom.bench.assembly import bench_assembly

    r = bench_assembly(n_parts=15, n_files=4, runs=runs)
    return {
        "assembly": {
            "p50_ms": float(r["p50_ms"]),
            "p95_ms": float(r["p95_ms"]),
            "mean_ms": float(r["mean_ms"]),
            "n": float(r["runs"]),
            "parts": float(r["parts"]),
        }
    }


# -- ragloom latency ------------------------------------------------------------------------
def time_call(fn: Callable[[str], object], arg: str) -> float:
    """Wall time of ``fn(arg)`` in milliseconds."""
    t = time.perf_counter()
    fn(arg)
    return (time.perf_counter() - t) * 1000.0


def bench_latency(
    index_dir: Path,
    *,
    queries: Sequence[str] = SAMPLE_QUERIES,
    runs: int = 3,
    top_k: int = TOP_K,
) -> dict[str, dict[str, float]]:
    """Warm latency of each retrieval strategy, of assembly and of the full context path.

    ``assembly-real`` times :func:`assemble_context` alone on the real ``hybrid-mmr`` hits of
    each query (their embeddings fetched beforehand); ``context`` is ``get_context`` end to end
    with ``hybrid-mmr`` (retrieval + fusion + MMR + embedding fetch + assembly). The seed's
    "15 parts from 4 files" assembly target is checked on :func:`bench_assembly` instead (see
    :func:`assembly_latency`). Three warm-up queries per operation are not counted.
    """
    import ragloom
    from ragloom.assemble import AssemblyPolicy, TokenBudget, assemble_context, get_counter

    idx = ragloom.open(index_dir)
    try:
        counter = get_counter("cl100k")
        budget = TokenBudget.for_total(8000)
        policy = AssemblyPolicy()
        ops: dict[str, Callable[[str], object]] = {
            s: (lambda q, s=s: idx.search(q, top_k=top_k, strategy=s))  # type: ignore[misc]
            for s in STRATEGIES
        }
        ops["context"] = lambda q: idx.get_context(q, top_k=top_k, strategy="hybrid-mmr")
        hits = {q: idx.search(q, top_k=top_k, strategy="hybrid-mmr").hits for q in queries}
        embs = {q: idx.retriever.embeddings_for_hits(hits[q]) for q in queries}

        def assemble(q: str) -> Any:
            return assemble_context(
                q,
                hits[q],
                root=idx.root,
                budget=budget,
                policy=policy,
                counter=counter,
                embeddings=embs[q],
            )

        ops["assembly-real"] = assemble
        for fn in ops.values():  # warm-up: model load, page cache, symbol table
            for q in queries[:3]:
                fn(q)
        out: dict[str, dict[str, float]] = {}
        for name, fn in ops.items():
            samples = [time_call(fn, q) for _ in range(runs) for q in queries]
            out[name] = summarize(samples)
        out["assembly-real"]["parts_mean"] = round(
            statistics.fmean(len(assemble(q).parts) for q in queries), 1
        )
        out["assembly-real"]["files_mean"] = round(
            statistics.fmean(len({h.path for h in hits[q]}) for q in queries), 1
        )
        return out
    finally:
        idx.close()


def bench_concurrency(
    index_dir: Path,
    *,
    n: int = CONCURRENT_QUERIES,
    strategy: str = "hybrid",
    top_k: int = TOP_K,
    queries: Sequence[str] = SAMPLE_QUERIES,
) -> dict[str, float]:
    """``n`` queries at once through ``asyncio.gather`` over :meth:`Retriever.asearch`:
    per-query latency (submit to result) p50/p95 and throughput in queries/s."""
    import ragloom

    idx = ragloom.open(index_dir)
    try:
        retriever = idx.retriever
        for q in queries[:3]:
            retriever.search(q, top_k=top_k, strategy=strategy)

        async def one(q: str) -> float:
            t = time.perf_counter()
            await retriever.asearch(q, top_k=top_k, strategy=strategy)
            return (time.perf_counter() - t) * 1000.0

        async def run() -> tuple[list[float], float]:
            t = time.perf_counter()
            lat = await asyncio.gather(*(one(queries[i % len(queries)]) for i in range(n)))
            return list(lat), time.perf_counter() - t

        lat, wall = asyncio.run(run())
        return {
            **summarize(lat),
            "wall_s": round(wall, 3),
            "queries_per_s": round(n / wall, 1),
        }
    finally:
        idx.close()


# -- synthetic large scale ------------------------------------------------------------------
def bench_synthetic(
    index_dir: Path,
    work_dir: Path,
    *,
    n: int = 500_000,
    queries: Sequence[str] = SAMPLE_QUERIES,
    runs: int = 3,
    top_k: int = TOP_K,
    seed: int = 0,
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, object]:
    """Search-only latency at ``n`` chunks: an HNSW index of ``n`` random unit vectors (the
    index's dimension, ragloom's HNSW settings) and a tantivy BM25 index of the real chunk
    texts of ``index_dir`` replicated to ``n`` documents. Query embedding is real. Measures
    sparse, dense, hybrid (both + RRF) and hybrid + MMR (candidate vectors from memory, not
    from SQLite); no hydration or assembly (there are no stored rows for synthetic labels)."""
    import hnswlib

    from ragloom.embed.registry import load_embedder
    from ragloom.index.bm25 import TantivyBm25, bm25_document
    from ragloom.index.vectors import HNSW_EF_CONSTRUCTION, HNSW_EF_SEARCH_MIN, HNSW_M
    from ragloom.retrieve.config import MmrConfig, RrfConfig
    from ragloom.retrieve.fusion import mmr_select, normalize_scores, rrf_fuse_with
    from ragloom.retrieve.search import HYBRID_CANDIDATES_MIN

    corpus = load_corpus(index_dir, with_vectors=False)
    embedder = load_embedder(corpus.model_spec)
    dim = corpus.vectors.shape[1]
    rng = np.random.default_rng(seed)
    vectors = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, EMBED_BATCH):
        block = rng.standard_normal((min(EMBED_BATCH, n - start), dim)).astype(np.float32)
        vectors[start : start + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    log(f"building HNSW over {n} random {dim}-d vectors")
    t = time.perf_counter()
    hnsw = hnswlib.Index(space="cosine", dim=dim)
    hnsw.init_index(max_elements=n, ef_construction=HNSW_EF_CONSTRUCTION, M=HNSW_M)
    hnsw.add_items(vectors, np.arange(n, dtype=np.int64))
    hnsw_s = time.perf_counter() - t
    log(f"building tantivy BM25 over {n} replicated chunk texts")
    t = time.perf_counter()
    bm25 = TantivyBm25.reset(work_dir / "bm25-synthetic")
    m = len(corpus)
    bm25.apply(
        (
            (i, bm25_document(corpus.texts[i % m], corpus.symbols[i % m], corpus.paths[i % m]))
            for i in range(n)
        ),
        [],
    )
    bm25_s = time.perf_counter() - t
    depth = max(top_k, MmrConfig().candidate_pool, HYBRID_CANDIDATES_MIN)
    rrf, mmr = RrfConfig(), MmrConfig()

    def dense(q: str, k: int) -> list[tuple[int, float]]:
        hnsw.set_ef(max(HNSW_EF_SEARCH_MIN, 2 * k))
        labels, dist = hnsw.knn_query(embedder.embed_query(q).reshape(1, -1), k=k)
        return [(int(a), float(1.0 - d)) for a, d in zip(labels[0], dist[0], strict=True)]

    def hybrid(q: str) -> list[tuple[int, float]]:
        fused = rrf_fuse_with({"bm25": bm25.search(q, depth), "dense": dense(q, depth)}, rrf)
        return [(it.id, it.score) for it in fused]

    def hybrid_mmr(q: str) -> list[tuple[int, float]]:
        pool = hybrid(q)[: mmr.candidate_pool]
        vecs = {r: vectors[r] for r, _ in pool}
        return mmr_select(normalize_scores(pool), top_k, vecs, mmr)

    ops: dict[str, Callable[[str], object]] = {
        "sparse": lambda q: bm25.search(q, top_k),
        "dense": lambda q: dense(q, top_k),
        "hybrid": hybrid,
        "hybrid-mmr": hybrid_mmr,
    }
    latency: dict[str, dict[str, float]] = {}
    for name, fn in ops.items():
        for q in queries[:3]:
            fn(q)
        latency[name] = summarize([time_call(fn, q) for _ in range(runs) for q in queries])
    return {
        "chunks": n,
        "synthetic": "random unit vectors; BM25 over real chunk texts replicated "
        f"{n / max(m, 1):.1f}x from {m} chunks; search only (no hydration/assembly)",
        "build_s": {"hnsw": round(hnsw_s, 1), "bm25": round(bm25_s, 1)},
        "latency": latency,
    }


# -- report ---------------------------------------------------------------------------------
def _table(rows: dict[str, dict[str, float]], keys: Sequence[str]) -> list[str]:
    lines = ["| | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for name, vals in rows.items():
        lines.append(f"| {name} | " + " | ".join(f"{vals.get(k, '')}" for k in keys) + " |")
    return lines


def render_report(results: dict[str, Any], command: str, *, day: str | None = None) -> str:
    """Markdown: per scale a latency table and PASS/FAIL lines, then concurrency and peers."""
    lines = [
        f"### bench-scale run ({day or date.today().isoformat()})",
        "",
        f"Command: `{command}`  ",
        f"Machine: {results.get('machine') or machine()}",
        "",
    ]
    for label, scale in results.get("scales", {}).items():
        lines += [f"#### {label}: {scale.get('chunks', '?')} chunks", ""]
        if scale.get("synthetic"):
            lines += [f"Synthetic: {scale['synthetic']}.", ""]
        lines += _table(scale["latency"], ("p50_ms", "p95_ms", "mean_ms", "n"))
        lines.append("")
        for check in evaluate_targets(scale["latency"]):
            if check.target.metric != "assembly":  # checked on the micro-benchmark below
                lines.append(f"- {check.line()}")
        lines.append("")
        if "concurrency" in scale:
            c = scale["concurrency"]
            lines += [
                f"{CONCURRENT_QUERIES} concurrent `hybrid` queries (asyncio.gather over "
                f"Retriever.asearch): p50 {c['p50_ms']} ms, p95 {c['p95_ms']} ms, "
                f"{c['queries_per_s']} queries/s (wall {c['wall_s']} s).",
                "",
            ]
    micro = results.get("assembly_microbench")
    if micro:
        lines += ["#### Assembly micro-benchmark (15 parts from 4 stdlib files, 8k budget)", ""]
        lines += _table(micro, ("p50_ms", "p95_ms", "mean_ms", "n", "parts"))
        lines.append("")
        lines += [f"- {c.line()}" for c in evaluate_targets(micro) if c.passed is not None]
        lines.append("")
    peers = results.get("peers")
    if peers:
        lines += [f"#### Peers ({peers['chunks']} chunks, same chunks and embeddings)", ""]
        lines += _table(peers["latency"], ("p50_ms", "p95_ms", "mean_ms", "n"))
        lines += ["", "Build time (s): " + json.dumps(peers["build_s"]), ""]
        how = {"pass": "pass by pass", "query": "query by query"}.get(
            str(peers.get("interleave", "query")), "?"
        )
        for peer, mine in peers.get("ragloom_interleaved", {}).items():
            lines += ["", f"ragloom timed alternating with {peer} ({how}):", ""]
            lines += _table(mine, ("p50_ms", "p95_ms", "mean_ms", "n"))
        lines += ["", "Ratios to the alternated ragloom samples (the headline figure):", ""]
        lines += _table(peers["ratios"], ("p50_ratio", "p95_ratio", "meets_5x"))
        if peers.get("ratios_separate"):
            lines += ["", "Ratios to ragloom's latency measured apart, earlier in the run:", ""]
            lines += _table(peers["ratios_separate"], ("p50_ratio", "p95_ratio", "meets_5x"))
        lines.append("")
        if peers.get("quality"):
            keys = sorted({k for v in peers["quality"].values() for k in v})
            lines += _table(peers["quality"], keys)
            lines.append("")
    return "\n".join(lines)
