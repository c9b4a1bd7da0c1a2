"""The ``code`` source: the existing symbol index (``ragloom.api.Index``), unchanged.

Its list is ragloom's own hybrid search (BM25 and dense already fused with the tuned weights),
so it enters the cross-source fusion as one list with the code weight (1.0). Each hit keeps the
original :class:`ragloom.types.Hit` as its payload, so context assembly reads code from disk
with its freshness checks exactly as ``ragloom context`` does. ``sync`` is ``Index.index``.

The module does not import :mod:`ragloom.api` at its top: the API imports ``ragloom.sources``
(the commits source, the change history), so the sources sit below it. What the code source
needs of an index is the :class:`CodeIndex` protocol; the one place that makes an ``Index``
(:func:`_open_index`, when no caller lent one through :meth:`CodeSource.use_index`) imports
the API when it runs.
"""

from __future__ import annotations

import asyncio
import fnmatch
from pathlib import Path
from typing import Protocol

from ragloom.index.indexer import IndexStats
from ragloom.retrieve.search import Retriever, SearchResult
from ragloom.sources.base import (
    RetrieveOptions,
    SourceContext,
    SourceHit,
    SourceQuery,
    SourceSettings,
    SyncReport,
)
from ragloom.types import Hit

__all__ = ["CodeIndex", "CodeSource", "filtered_depth"]

FILTER_OVERFETCH = 4
"""With a path or language filter, hits asked per hit answered ..."""
FILTER_MIN = 50
"""... and at least this many (a scoped question in a monorepo: the first few hits of the
whole index rarely lie in the scope) ..."""
FILTER_MAX = 200
"""... and at most this many."""


def filtered_depth(top_k: int) -> int:
    """How many code hits to rank when ``top_k`` must pass a path or language filter (the
    code source and ``ragloom search --path`` ask the same, so they answer the same)."""
    return max(top_k, min(max(top_k * FILTER_OVERFETCH, FILTER_MIN), FILTER_MAX))


class _Counts(Protocol):
    @property
    def chunks(self) -> int: ...
    @property
    def files(self) -> int: ...
    @property
    def generation(self) -> int: ...


class CodeIndex(Protocol):
    """What the code source uses of :class:`ragloom.api.Index`."""

    @property
    def exists(self) -> bool: ...
    @property
    def retriever(self) -> Retriever: ...
    def index(self, *, embed: bool = ...) -> IndexStats: ...
    def search(
        self, query: str, *, top_k: int = ..., strategy: str = ..., explain: bool = ...
    ) -> SearchResult: ...
    def status(self, *, freshness: bool = ...) -> _Counts: ...
    def close(self) -> None: ...


def _open_index(root: Path, index_dir: Path, embedder: str | None = None) -> CodeIndex:
    """A new ``Index`` of ``root``. Imported here, when a source opens its own index, not at
    the module's top: ``ragloom.api`` imports ``ragloom.sources`` (see the module docstring)."""
    from ragloom.api import Index

    return Index(root, index_dir, embedder=embedder)


class CodeSource:
    """Symbol-level hybrid search over the repository's index."""

    name = "code"

    def __init__(self, context: SourceContext) -> None:
        self.context = context
        self.settings = SourceSettings(top_k=10)
        self._index: CodeIndex | None = None
        self._borrowed = False
        self.strategy = "hybrid"
        self.explain = False

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    @property
    def index(self) -> CodeIndex:
        if self._index is None:
            self._index = _open_index(self.context.root, self.context.index_dir)
        return self._index

    def initialize(self, settings: SourceSettings) -> None:
        self.settings = settings
        self.strategy = str(settings.options.get("strategy", "hybrid"))
        self.explain = bool(settings.options.get("explain", False))
        embed = settings.options.get("embedder")
        if embed is not None and self._index is None:
            self._index = _open_index(self.context.root, self.context.index_dir, str(embed))

    def use_index(self, index: CodeIndex) -> None:
        """Search through an Index the caller already has open (one retriever, one model)."""
        self._index = index
        self._borrowed = True

    def warm(self) -> None:
        """Open the retriever and load the query embedder: start-up work that should not count
        against the per-source timeout of the first query (the ONNX model takes ~0.7 s)."""
        if self.index.exists:
            _ = self.index.retriever.embedder

    def sync(self) -> SyncReport:
        embed = bool(self.settings.options.get("embed", True))
        stats = self.index.index(embed=embed)
        return SyncReport(
            self.name,
            added=stats.chunks_added + stats.chunks_updated,
            removed=stats.chunks_removed,
            total=stats.chunks_total,
            seconds=stats.seconds,
        )

    def _search(self, query: SourceQuery, options: RetrieveOptions) -> list[SourceHit]:
        flt = options.filter
        k = options.top_k if flt.empty else filtered_depth(options.top_k)
        result = self.index.search(
            query.text, top_k=k, strategy=self.strategy, explain=self.explain
        )
        out: list[SourceHit] = []
        for h in result.hits:
            if not flt.empty and not (
                (not flt.paths or any(fnmatch.fnmatchcase(h.path, g) for g in flt.paths))
                and (not flt.languages or h.language in flt.languages)
            ):
                continue
            out.append(_code_hit(h))
        return out[: options.top_k]

    async def retrieve(self, query: SourceQuery, options: RetrieveOptions) -> list[SourceHit]:
        return await asyncio.to_thread(self._search, query, options)

    async def health_check(self) -> bool:
        return self.index.exists

    async def dispose(self) -> None:
        if self._index is not None and not self._borrowed:  # a borrowed index is the caller's
            self._index.close()
        self._index = None
        self._borrowed = False

    def freshness(self) -> dict[str, object]:
        if not self.index.exists:
            return {"items": 0}
        st = self.index.status(freshness=False)
        return {"items": st.chunks, "files": st.files, "generation": st.generation}


def _code_hit(h: Hit) -> SourceHit:
    return SourceHit(
        source="code",
        id=h.id,
        title=h.symbol or h.path,
        text=h.text,
        score=h.score,
        date=None,
        url=None,
        attribution={"path": h.path, "start_line": h.start_line, "end_line": h.end_line},
        kind=h.kind,
        paths=(h.path,),
        payload=h,
    )
