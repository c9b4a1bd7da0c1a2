"""Peers built on ragloom's chunks and embeddings, timed against it (``ragloom bench-scale``).

LangChain ``EnsembleRetriever`` of BM25 + FAISS, LlamaIndex ``QueryFusionRetriever`` in
``reciprocal_rerank`` mode, and ``bm25s``: their latency ratios to ragloom and, given a
docstring dataset whose gold files live in the corpus, file-level MRR@10 / recall@10.

Peers are bench-only extras (``pip install ragloom[bench]``), never runtime dependencies.
"""

from __future__ import annotations

import gc
import importlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragloom.bench.corpus import ChunkCorpus, load_corpus
from ragloom.bench.indexing import SAMPLE_QUERIES, STRATEGIES
from ragloom.bench.scale import (
    INTERLEAVE_MODES,
    TOP_K,
    file_quality,
    latency_ratios,
    summarize,
    time_call,
)

__all__ = ["PEERS", "PeerSearch", "bench_peers"]

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
                            samples[op].append(time_call(fn, q))
                else:
                    for op, fn in ops.items():
                        samples[op] += [time_call(fn, q) for q in queries]
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
