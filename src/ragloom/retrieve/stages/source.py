"""The evidence stages read from an index, cached per index generation: each candidate's path,
file role and declaration flag, and the change history's query-independent tables (churn and
recency ranks, co-change). The :class:`~ragloom.retrieve.search.Retriever` holds one
:class:`EvidenceCache` and serves :class:`~ragloom.retrieve.stages.base.RankingSource` from it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ragloom.index.backend import ReadStore
from ragloom.index.store import ChunkRow
from ragloom.retrieve.history import (
    RECENT_COMMITS,
    SIMILAR_COMMITS,
    ChangeHistory,
    CoChange,
    HistoryEvidence,
    churn_ranks,
    history_evidence,
    recent_ranks,
)
from ragloom.retrieve.roles import FileRole, file_role, is_declaration

if TYPE_CHECKING:
    from ragloom.graph import CodeGraph

__all__ = ["EvidenceCache"]

log = logging.getLogger("ragloom")


class EvidenceCache:
    """Per-generation caches of candidate facts and history tables over one store."""

    def __init__(self) -> None:
        self._graph: CodeGraph | None = None
        self._graph_lock = threading.Lock()
        self._info: tuple[int, dict[int, tuple[str, FileRole, bool]]] | None = None
        self._churn: (
            tuple[tuple[int, str], frozenset[str], dict[str, int], CoChange, dict[str, int]] | None
        ) = None
        """((generation, history version), indexed paths, churn ranks, co-change tables, recency
        ranks)."""

    def chunk_info(
        self, store: ReadStore, rowids: Sequence[int], generation: int | None = None
    ) -> dict[int, tuple[str, FileRole, bool]]:
        """(path, file role, is a declaration) of each rowid, cached per index generation:
        only rows not seen since the generation changed are read (their rows, and the texts of
        the few whose kind needs one), so the cost is O(candidates) and ~0 once warm.
        ``generation``: the one the caller's query answers from (default: the store's)."""
        gen = store.generation() if generation is None else generation
        if self._info is None or self._info[0] != gen:
            self._info = (gen, {})
        cache = self._info[1]
        missing = [r for r in rowids if r not in cache]
        if missing:
            rows = store.chunks_by_rowids(missing)
            need_text = [r for r, row in rows.items() if _needs_text(row)]
            texts = store.texts_by_rowids(need_text) if need_text else {}
            for r, row in rows.items():
                decl = is_declaration(row.path, row.kind, texts.get(r))
                cache[r] = (row.path, file_role(row.path), decl)
        return {r: cache[r] for r in rowids if r in cache}

    @property
    def cached_graph(self) -> CodeGraph | None:
        return self._graph

    def code_graph(self, store: ReadStore, generation: int | None = None) -> CodeGraph | None:
        """The code graph of ``store``'s published generation, built once per generation
        (None for a store that keeps no graph records, one without ``graph_snapshot``);
        ``generation`` as for :meth:`chunk_info`."""
        from ragloom.graph import GraphSource, load_graph

        if not isinstance(store, GraphSource):
            return None
        gen = store.generation() if generation is None else generation
        cached = self._graph
        if cached is not None and cached.generation == gen:
            return cached
        with self._graph_lock:
            cached = self._graph
            if cached is None or cached.generation != gen:
                cached = load_graph(store)
                self._graph = cached
            return cached

    def history_evidence(
        self,
        store: ReadStore,
        hist: ChangeHistory | None,
        query: str,
        recent: bool = False,
        generation: int | None = None,
    ) -> tuple[HistoryEvidence, CoChange] | None:
        """The history's file rankings for ``query`` (with the recency ranking when ``recent``)
        and its co-change tables (None without a history or when it fails: ranking goes on
        without it). The churn ranks, the co-change tables, the recency ranks and the indexed
        paths are computed once per index generation and history version (``generation`` as
        for :meth:`chunk_info`)."""
        if hist is None:
            return None
        try:
            key = (store.generation() if generation is None else generation, hist.version())
            cached = self._churn
            if cached is None or cached[0] != key:
                live = frozenset(store.files())
                table = CoChange.of(hist.changes(), live)
                # a ChangeHistory written before ``recent`` joined the protocol ranks without it
                newest = getattr(hist, "recent", None)
                rec = recent_ranks(newest(RECENT_COMMITS), live) if callable(newest) else {}
                cached = (key, live, churn_ranks(table), table, rec)
                self._churn = cached
            similar = hist.similar(query, SIMILAR_COMMITS)
            evidence = history_evidence(
                similar, cached[1], cached[2], cached[4] if recent else None
            )
            return evidence, cached[3]
        except Exception as exc:  # evidence, never a reason to fail a search
            log.warning("change history unavailable for this query: %s", exc)
            return None


def _needs_text(row: ChunkRow) -> bool:
    """Whether :func:`is_declaration` needs the chunk's text (Python classes, abstract methods
    and TypeScript ``declare``); the others are decided by path and kind."""
    if row.language == "python":
        return row.kind == "class" or row.kind == "method"
    return row.language in ("typescript", "tsx") and row.kind in ("class", "method", "module")
