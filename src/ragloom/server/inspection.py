"""What :class:`~ragloom.server.engine.ServingEngine` tells about the index it serves besides
search and context: the code graph (definitions, references, callers, callees), the
repository map (docs/graph.md), the status (``IndexStatus`` plus the engine's generation,
caches, batcher, jobs, fallbacks and watcher) and the snapshot of that state the Prometheus
collector reads at scrape time (``ragloom.server.metrics``).
"""

from __future__ import annotations

import os
import time
from typing import Any

from ragloom.errors import InputError
from ragloom.server.answers import _AnswersMixin
from ragloom.server.cache import EmbeddingCache
from ragloom.server.embedding import BatchingEmbedder
from ragloom.server.jobs import _JobsMixin

_STATUS_TTL_S = 2.0
"""BM25 state read for ``/metrics`` is reused this long (it opens the engine folder)."""


class _InspectionMixin(_JobsMixin, _AnswersMixin):
    """``graph``, ``repo_map``, ``status``, the metrics snapshot (part of ``ServingEngine``)."""

    _embedding_cache: EmbeddingCache
    _batcher: BatchingEmbedder | None
    _bm25_state: tuple[float, str]
    worker_index: int
    worker_count: int

    def graph(
        self,
        query: str,
        symbol: str,
        *,
        path: str | None = None,
        min_confidence: float | None = None,
        limit: int = 200,
    ) -> dict[str, Any]:
        """One code-graph answer (``defs``, ``refs``, ``callers``, ``callees``; the shape of
        :func:`ragloom.graph.views.graph_answer`), from the served generation's graph."""
        from ragloom.graph import DEFAULT_MIN_CONFIDENCE
        from ragloom.graph.views import graph_answer

        if query not in ("defs", "refs", "callers", "callees"):
            raise InputError(
                f"unknown graph query {query!r}; choose from defs, refs, callers, callees"
            )
        if not isinstance(symbol, str):
            raise InputError(f"symbol must be a string, got {type(symbol).__name__}")
        limit = self._check_int("limit", limit, 1, 10_000)
        conf = DEFAULT_MIN_CONFIDENCE if min_confidence is None else float(min_confidence)
        with self._use_reader() as r:
            return self._bounded(
                lambda: graph_answer(
                    r.index.graph(),
                    query,  # type: ignore[arg-type]
                    symbol,
                    path=path,
                    min_confidence=conf,
                    limit=limit,
                )
            )

    def repo_map(
        self, query: str | None = None, *, budget: int | None = None, format: str = "text"
    ) -> dict[str, Any]:
        """A repository map within ``budget`` tokens (``Index.repo_map``; default: a quarter
        of ``assembly.budget``), from the served generation's graph."""
        s = self._settings
        if query is not None:
            query = self._check_query(query)
        tokens = self._check_int(
            "budget", max(1, s.assembly.budget // 4) if budget is None else budget, 1, 10**6
        )
        counter = s.assembly.counter
        with self._use_reader() as r:
            return self._bounded(
                lambda: r.index.repo_map(query, budget=tokens, format=format, counter=counter)
            )

    def stale_files(self) -> dict[str, list[str]] | None:
        """The files of the source tree that differ from the index (changed, added, removed),
        from the index being served (a folder or the database); None on a machine without a
        checkout of the repository (nothing to compare)."""
        with self._use_reader() as r:
            return r.index.stale_files() if r.index.has_checkout() else None

    def status(self, *, freshness: bool = False) -> dict[str, Any]:
        """``IndexStatus.to_dict()`` plus the engine's generation, caches, batcher and jobs.
        Without ``freshness`` the files on disk are not compared with the index (``stale_files``
        null, ``stale`` empty); with it, they are (a walk of the tree: a second or so on a
        large repository), as ``ragloom status`` does."""
        out = self._status()
        if freshness:
            # the index being served: a PostgreSQL engine has no folder index to open
            stale = self.stale_files()
            out["stale"] = stale or {}
            out["stale_files"] = None if stale is None else sum(len(v) for v in stale.values())
        return out

    def _status(self) -> dict[str, Any]:
        from ragloom.sources.multi import configured_freshness

        with self._use_reader() as r:
            st = r.index.status(freshness=False).to_dict()
            gen = r.retriever.store.generation()
            epoch = r.epoch
            fresh = configured_freshness(r.index, wait=False)  # a slow dispose: not waited
        if fresh is not None:  # as `ragloom status --json`: only when `index --sources` ran
            st["sources"] = fresh
        with self._lock:
            self._bm25_state = (time.monotonic(), str(st.get("bm25_status", "uninitialized")))
            running = sum(1 for j in self._jobs.values() if j.state in ("queued", "running"))
        st.update(
            {
                "generation": gen,
                "epoch": epoch,
                "cache": self._results.to_dict(),
                "embedding_cache": self._embedding_cache.to_dict(),
                "batching": self._batcher.stats.to_dict() if self._batcher else None,
                "jobs": running,
                "fallbacks": dict(self._fallbacks),
                "watch": self.watch_state(),
                "model_switch": self.switch_state(),
                "worker": {"index": self.worker_index, "pid": os.getpid()},
                "workers": self.worker_count,
            }
        )
        return st

    def _metrics_snapshot(self) -> dict[str, Any]:
        r = self._reader
        now = time.monotonic()
        with self._lock:
            stamp, bm25_status = self._bm25_state
        if now - stamp > _STATUS_TTL_S:
            bm25_status = self.target.bm25_status()
            with self._lock:
                self._bm25_state = (now, bm25_status)
        with self._lock:
            jobs: dict[str, int] = {"queued": 0, "running": 0, "succeeded": 0, "failed": 0}
            for j in self._jobs.values():
                jobs[j.state] = jobs.get(j.state, 0) + 1
            fallbacks = dict(self._fallbacks)
        try:
            generation = r.retriever.store.generation()
        except Exception:  # a reader closed under us: report the last epoch's view as 0
            generation = 0
        return {
            "caches": {
                "result": self._results.to_dict(),
                "embedding": self._embedding_cache.to_dict(),
            },
            "batching": self._batcher.stats.to_dict() if self._batcher else {},
            "bm25_up": 1 if r.retriever.bm25 is not None else 0,
            "bm25_status": bm25_status,
            "fallbacks": fallbacks,
            "generation": generation,
            "epoch": r.epoch,
            "jobs": jobs,
            "worker": {"index": self.worker_index, "pid": os.getpid()},
            "workers": self.worker_count,
        }
