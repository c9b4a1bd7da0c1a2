"""Retrieval latency at scale, peer comparison and concurrency (``ragloom bench-scale``).

Outside the default test run. On an existing index it measures, with the same query set
(:data:`ragloom.bench.SAMPLE_QUERIES`) and ``top_k`` = 15:

* warm latency p50/p95 of dense-only, sparse-only, hybrid RRF, hybrid RRF + MMR, context
  assembly of the real hits, and the whole hybrid + MMR + assembly path (``get_context``);
* the seed targets as PASS/FAIL lines (:data:`SEED_TARGETS`);
* 100 concurrent queries through :meth:`Retriever.asearch` (p50/p95 and queries/s);
* optionally peers built on the same chunks and the same embeddings (LangChain
  ``EnsembleRetriever`` of BM25 + FAISS, LlamaIndex ``QueryFusionRetriever`` in
  ``reciprocal_rerank`` mode, ``bm25s``), their latency ratios to ragloom and, given a
  docstring dataset whose gold files live in the corpus, file-level MRR@10 / recall@10;
* optionally a synthetic large scale (random unit vectors + replicated real chunk texts),
  search-only, when no real corpus of that size fits the machine.

Peers are bench-only extras (``pip install ragloom[bench]``), never runtime dependencies.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import math
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import click
import numpy as np

from ragloom.bench import SAMPLE_QUERIES, STRATEGIES, machine
from ragloom.embed.document import embedding_key

__all__ = [
    "CONCURRENT_QUERIES",
    "SEED_TARGETS",
    "STRATEGIES",
    "TOP_K",
    "ChunkCorpus",
    "Target",
    "TargetCheck",
    "assembly_latency",
    "bench_concurrency",
    "bench_latency",
    "bench_peers",
    "bench_scale_cmd",
    "bench_synthetic",
    "evaluate_targets",
    "file_quality",
    "latency_ratios",
    "load_corpus",
    "percentile",
    "render_report",
    "summarize",
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
DB_NAME = "index.sqlite"
"""The store file inside an index folder (ragloom.api.DB_NAME)."""
EMBED_BATCH = 4096
"""Rows per batch when reading stored embeddings or adding synthetic vectors (memory bound)."""


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
    from :func:`ragloom.assemble.bench.bench_assembly`."""
    from ragloom.assemble.bench import bench_assembly

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
def _time_call(fn: Callable[[str], object], arg: str) -> float:
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
            samples = [_time_call(fn, q) for _ in range(runs) for q in queries]
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


# -- the corpus shared with peers -----------------------------------------------------------
@dataclass(slots=True)
class ChunkCorpus:
    """ragloom's chunks as peers see them: text, path, symbol and the stored embedding."""

    rowids: list[int]
    texts: list[str]
    paths: list[str]
    symbols: list[str]
    vectors: np.ndarray
    model_spec: str

    def __len__(self) -> int:
        return len(self.rowids)

    def document(self, i: int) -> str:
        """The text given to peers' BM25: the same fields ragloom's BM25 indexes."""
        return f"{self.symbols[i]} {self.paths[i]}\n{self.texts[i]}"


def load_corpus(
    index_dir: Path, *, limit: int | None = None, with_vectors: bool = True
) -> ChunkCorpus:
    """Read every chunk (text, path, symbol) and its stored embedding from an index (the
    vectors stay zero with ``with_vectors=False``; their shape is still the index's)."""
    from ragloom.index.manifest import read_manifest
    from ragloom.index.store import Store

    manifest = read_manifest(index_dir)
    if manifest is None:
        raise click.ClickException(f"no index at {index_dir}")
    store = Store(index_dir / DB_NAME, readonly=True)
    try:
        rowids: list[int] = []
        texts: list[str] = []
        for batch in store.iter_chunk_texts():
            for rowid, text, _ in batch:
                rowids.append(rowid)
                texts.append(text)
            if limit is not None and len(rowids) >= limit:
                break
        if limit is not None:
            rowids, texts = rowids[:limit], texts[:limit]
        rows = store.chunks_by_rowids(rowids)
        vecs = np.zeros((len(rowids), manifest.embedding_dim), dtype=np.float32)
        for start in range(0, len(rowids) if with_vectors else 0, EMBED_BATCH):
            part = rowids[start : start + EMBED_BATCH]
            vecs[start : start + len(part)] = store.vectors_for_rowids(
                embedding_key(manifest.embedding_model), part, manifest.embedding_dim
            )
        return ChunkCorpus(
            rowids=rowids,
            texts=texts,
            paths=[rows[r].path for r in rowids],
            symbols=[rows[r].symbol for r in rowids],
            vectors=vecs,
            model_spec=manifest.embedding_spec,
        )
    finally:
        store.close()


# -- peers ----------------------------------------------------------------------------------
PeerSearch = Callable[[str], list[str]]
"""A built peer: query -> ranked chunk paths (one per hit)."""


def _attr(module: str, name: str) -> Any:
    """``module.name`` of an optional bench-only extra, typed Any (peers ship no stubs)."""
    return getattr(importlib.import_module(module), name)


def _langchain_peer(corpus: ChunkCorpus, embedder: Any, top_k: int) -> PeerSearch:
    BM25Retriever = _attr("langchain_community.retrievers", "BM25Retriever")
    FAISS = _attr("langchain_community.vectorstores", "FAISS")
    Embeddings = _attr("langchain_core.embeddings", "Embeddings")
    try:
        EnsembleRetriever = _attr("langchain_classic.retrievers", "EnsembleRetriever")
    except ImportError:  # langchain < 1.0 kept it in langchain.retrievers
        EnsembleRetriever = _attr("langchain.retrievers", "EnsembleRetriever")

    class RagloomEmbeddings(Embeddings):  # type: ignore[misc,valid-type]
        """ragloom's embedder as a LangChain ``Embeddings``."""

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [list(map(float, v)) for v in embedder.embed_documents(texts)]

        def embed_query(self, text: str) -> list[float]:
            return list(map(float, embedder.embed_query(text)))

    docs = [corpus.document(i) for i in range(len(corpus))]
    metas = [{"path": p} for p in corpus.paths]
    bm25 = BM25Retriever.from_texts(docs, metadatas=metas, k=top_k)
    store = FAISS.from_embeddings(
        list(zip(docs, corpus.vectors.tolist(), strict=True)),
        embedding=RagloomEmbeddings(),
        metadatas=metas,
    )
    ensemble = EnsembleRetriever(
        retrievers=[bm25, store.as_retriever(search_kwargs={"k": top_k})], weights=[0.5, 0.5]
    )
    return lambda q: [d.metadata["path"] for d in ensemble.invoke(q)[:top_k]]


def _llamaindex_peer(corpus: ChunkCorpus, embedder: Any, top_k: int) -> PeerSearch:
    VectorStoreIndex = _attr("llama_index.core", "VectorStoreIndex")
    BaseEmbedding = _attr("llama_index.core.embeddings", "BaseEmbedding")
    MockLLM = _attr("llama_index.core.llms", "MockLLM")
    QueryFusionRetriever = _attr("llama_index.core.retrievers", "QueryFusionRetriever")
    TextNode = _attr("llama_index.core.schema", "TextNode")
    BM25Retriever = _attr("llama_index.retrievers.bm25", "BM25Retriever")
    PrivateAttr = _attr("pydantic", "PrivateAttr")

    class RagloomEmbedding(BaseEmbedding):  # type: ignore[misc,valid-type]
        """ragloom's embedder as a LlamaIndex ``BaseEmbedding``."""

        _emb: Any = PrivateAttr()

        def __init__(self, emb: Any) -> None:
            super().__init__(model_name=str(emb.model_id))
            self._emb = emb

        def _get_query_embedding(self, query: str) -> list[float]:
            return list(map(float, self._emb.embed_query(query)))

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return list(map(float, self._emb.embed_documents([text])[0]))

    nodes = [
        TextNode(
            text=corpus.document(i),
            id_=str(corpus.rowids[i]),
            metadata={"path": corpus.paths[i]},
            embedding=corpus.vectors[i].tolist(),
        )
        for i in range(len(corpus))
    ]
    index = VectorStoreIndex(nodes, embed_model=RagloomEmbedding(embedder))
    fusion = QueryFusionRetriever(
        [
            index.as_retriever(similarity_top_k=top_k),
            BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=top_k),
        ],
        llm=MockLLM(),
        mode="reciprocal_rerank",
        similarity_top_k=top_k,
        num_queries=1,  # no LLM query rewriting: retrieval + fusion only, like ragloom's
        use_async=False,
    )
    return lambda q: [n.node.metadata["path"] for n in fusion.retrieve(q)[:top_k]]


def _bm25s_peer(corpus: ChunkCorpus, embedder: Any, top_k: int) -> PeerSearch:
    bm25s = importlib.import_module("bm25s")
    docs = [corpus.document(i) for i in range(len(corpus))]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(docs, stopwords="en", show_progress=False), show_progress=False)
    paths = corpus.paths

    def search(q: str) -> list[str]:
        res, _ = retriever.retrieve(
            bm25s.tokenize([q], stopwords="en", show_progress=False),
            k=min(top_k, len(docs)),
            show_progress=False,
        )
        return [paths[int(i)] for i in res[0]]

    return search


PEERS: dict[str, tuple[Callable[[ChunkCorpus, Any, int], PeerSearch], str]] = {
    "langchain-ensemble": (_langchain_peer, "hybrid"),
    "llamaindex-fusion": (_llamaindex_peer, "hybrid"),
    "bm25s": (_bm25s_peer, "sparse"),
}
"""Peer name -> (builder, the ragloom strategy it is compared with)."""


def bench_peers(
    index_dir: Path,
    ragloom_latency: dict[str, dict[str, float]],
    *,
    peers: Sequence[str] = tuple(PEERS),
    queries: Sequence[str] = SAMPLE_QUERIES,
    runs: int = 3,
    top_k: int = TOP_K,
    dataset: Path | None = None,
    quality_queries: int | None = None,
    interleave: str = "pass",
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, object]:
    """Build each peer on the index's chunks and stored embeddings, time it and, given a
    dataset, score it and ragloom at file level.

    Each peer is timed alternating with the ragloom strategies it is compared with, so drift
    of the machine falls on both sides alike. ``interleave="pass"`` (the default) alternates
    whole passes: all queries on the peer, then all on each ragloom strategy, ``runs`` times;
    each system answers back to back, as a deployed one does. ``interleave="query"``
    alternates every single query: each call then starts with the CPU caches full of the other
    system's data, which slows both (ragloom's query embedding by about a quarter after a
    LangChain call), a cold-cache figure. ``ratios`` divides the peer's latency by those
    alternated ragloom samples (``ragloom_interleaved``); ``ratios_separate`` divides it by
    ``ragloom_latency``, measured apart (earlier in the run), for comparison.
    """
    if interleave not in INTERLEAVE_MODES:
        raise ValueError(f"interleave must be one of {INTERLEAVE_MODES}, got {interleave!r}")
    import ragloom
    from ragloom.embed.registry import load_embedder
    from ragloom.eval.dataset import load_dataset

    corpus = load_corpus(index_dir)
    idx = ragloom.open(index_dir)
    # The very embedder object ragloom searches with: one ONNX session, one copy of the weights
    # in the CPU caches. A second instance would make each side evict the other's weights on
    # every interleaved call, a cost that no deployment of either pays.
    embedder = idx.retriever.embedder or load_embedder(corpus.model_spec)
    evalq = load_dataset(dataset) if dataset is not None else []
    if quality_queries is not None and len(evalq) > quality_queries:
        step = len(evalq) / quality_queries  # deterministic spread over the whole dataset
        evalq = [evalq[int(i * step)] for i in range(quality_queries)]
    gold = [list(q.gold_files) for q in evalq]
    latency: dict[str, dict[str, float]] = {}
    interleaved: dict[str, dict[str, dict[str, float]]] = {}
    ratios: dict[str, dict[str, float]] = {}
    build: dict[str, float] = {}
    quality: dict[str, dict[str, float]] = {}
    pairs: list[tuple[str, str]] = []
    try:
        for name in peers:
            builder, strategy = PEERS[name]
            compared = [strategy] + (["hybrid-mmr"] if strategy == "hybrid" else [])
            pairs += [(name, c) for c in compared]
            log(f"building {name} on {len(corpus)} chunks")
            t = time.perf_counter()
            search = builder(corpus, embedder, top_k)
            build[name] = round(time.perf_counter() - t, 2)
            ops: dict[str, Callable[[str], object]] = {name: search}
            for c in compared:
                ops[c] = lambda q, c=c: idx.search(q, top_k=top_k, strategy=c)  # type: ignore[misc]
            for fn in ops.values():
                for q in queries[:3]:
                    fn(q)
            samples: dict[str, list[float]] = {op: [] for op in ops}
            for _ in range(runs):
                if interleave == "query":
                    for q in queries:
                        for op, fn in ops.items():
                            samples[op].append(_time_call(fn, q))
                else:
                    for op, fn in ops.items():
                        samples[op] += [_time_call(fn, q) for q in queries]
            latency[name] = summarize(samples[name])
            interleaved[name] = {c: summarize(samples[c]) for c in compared}
            ratios.update(latency_ratios(interleaved[name], latency, [(name, c) for c in compared]))
            if evalq:
                log(f"scoring {name} on {len(evalq)} queries")
                quality[name] = file_quality([search(q.query) for q in evalq], gold)
            del search, ops
            gc.collect()
        for strat in STRATEGIES if evalq else ():
            log(f"scoring ragloom {strat} on {len(evalq)} queries")
            ranked = [
                [h.path for h in idx.search(q.query, top_k=top_k, strategy=strat).hits]
                for q in evalq
            ]
            quality[f"ragloom {strat}"] = file_quality(ranked, gold)
    finally:
        idx.close()
    return {
        "chunks": len(corpus),
        "build_s": build,
        "latency": latency,
        "ratios": ratios,
        "ragloom_interleaved": interleaved,
        "interleave": interleave,
        "ratios_separate": latency_ratios(ragloom_latency, latency, pairs),
        "quality": quality,
    }


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
        latency[name] = summarize([_time_call(fn, q) for _ in range(runs) for q in queries])
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


# -- command --------------------------------------------------------------------------------
@click.command("bench-scale")
@click.argument("index_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--runs", type=int, default=3, show_default=True, help="Passes over the queries.")
@click.option("--peers-on", type=click.Path(path_type=Path), help="Index to build peers on.")
@click.option("--peers", "peer_names", default=",".join(PEERS), show_default=True)
@click.option("--dataset", type=click.Path(path_type=Path), help="Docstring dataset (quality).")
@click.option("--quality-queries", type=int, default=None, help="Score this many queries.")
@click.option(
    "--interleave",
    type=click.Choice(INTERLEAVE_MODES),
    default="pass",
    show_default=True,
    help="Alternate peers and ragloom by whole passes or by single queries (cold caches).",
)
@click.option("--synthetic", type=int, default=0, help="Also a synthetic scale of N chunks.")
@click.option("--work-dir", type=click.Path(path_type=Path), default=Path("bench-out"))
@click.option("--out", type=click.Path(path_type=Path), help="Append the Markdown here.")
@click.option("--json-out", type=click.Path(path_type=Path), help="Write the results as JSON.")
def bench_scale_cmd(
    index_dirs: tuple[Path, ...],
    runs: int,
    peers_on: Path | None,
    peer_names: str,
    dataset: Path | None,
    quality_queries: int | None,
    interleave: str,
    synthetic: int,
    work_dir: Path,
    out: Path | None,
    json_out: Path | None,
) -> None:
    """Latency per strategy at each INDEX_DIR, seed targets, concurrency, peers (slow)."""

    def log(msg: str) -> None:
        click.echo(f"[bench-scale {time.strftime('%H:%M:%S')}] {msg}", err=True)

    results: dict[str, Any] = {"machine": machine(), "date": date.today().isoformat()}
    scales: dict[str, Any] = {}
    for d in index_dirs:
        import ragloom

        idx = ragloom.open(d)
        n = idx.status(freshness=False).chunks
        idx.close()
        log(f"latency on {d} ({n} chunks)")
        scale: dict[str, Any] = {"index": str(d), "chunks": n}
        scale["latency"] = bench_latency(idx.index_dir, runs=runs)
        log("concurrency")
        scale["concurrency"] = bench_concurrency(idx.index_dir)
        scales[f"{round(n / 1000)}k real chunks ({d})"] = scale
    results["scales"] = scales
    if peers_on is not None:
        import ragloom

        pdir = ragloom.open(peers_on).index_dir
        mine = next((s["latency"] for s in scales.values() if Path(s["index"]) == peers_on), None)
        if mine is None:
            mine = bench_latency(pdir, runs=runs)
        names = [p for p in peer_names.split(",") if p]
        results["peers"] = bench_peers(
            pdir,
            mine,
            peers=names,
            runs=runs,
            dataset=dataset,
            quality_queries=quality_queries,
            interleave=interleave,
            log=log,
        )
    if synthetic:
        work_dir.mkdir(parents=True, exist_ok=True)
        import ragloom

        src = ragloom.open(index_dirs[-1]).index_dir
        syn = bench_synthetic(src, work_dir, n=synthetic, runs=runs, log=log)
        scales[f"{round(synthetic / 1000)}k synthetic"] = syn
    log("assembly micro-benchmark")
    results["assembly_microbench"] = assembly_latency()
    argv = sys.argv[sys.argv.index("bench-scale") + 1 :] if "bench-scale" in sys.argv else []
    command = "ragloom bench-scale " + " ".join(shlex.quote(a) for a in argv)
    report = render_report(results, command)
    click.echo(report)
    if json_out is not None:
        json_out.write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    if out is not None:
        with out.open("a", encoding="utf-8") as fh:
            fh.write("\n" + report + "\n")
