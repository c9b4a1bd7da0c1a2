"""Benchmarks, beside the entry points and outside the default test run.

- :mod:`ragloom.bench.indexing`: ``ragloom bench``, cold and incremental indexing, warm query
  latency per strategy, BM25 warm start (Rebuild vs snapshot Load).
- :mod:`ragloom.bench.scale`: ``ragloom bench-scale``, latency per strategy at each index, the
  seed latency targets, concurrency, a synthetic large scale, the Markdown report.
- :mod:`ragloom.bench.peers`: LangChain, LlamaIndex and bm25s built on ragloom's own chunks and
  embeddings (:mod:`ragloom.bench.corpus`), timed alternating with ragloom.
- :mod:`ragloom.bench.assembly`: the context-assembly micro-benchmark.

Nothing in the core imports this package.
"""
