"""``SourceSet``: the sources of one index, synced and queried together.

This is what ``ragloom index --sources``, ``ragloom search --sources`` and ``ragloom status`` use
(and what a server would): it builds the named sources from the registry with their settings,
saves the options they were synced with in ``<index>/sources/config.json``, and runs
multi-source searches through :mod:`ragloom.sources.orchestrate`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragloom.errors import ConfigError, RagError
from ragloom.index.lock import WriteLock
from ragloom.retrieve.config import RecencyConfig
from ragloom.sources.base import (
    RetrieveOptions,
    Source,
    SourceContext,
    SourceFilter,
    SourceHit,
    SourceQuery,
    SourceSettings,
    SyncReport,
)
from ragloom.sources.history import HISTORY_DEPTH_DEFAULT, history_rerank
from ragloom.sources.orchestrate import (
    DEFAULT_PER_SOURCE_MS,
    DEFAULT_TOTAL_MS,
    MultiSearchResult,
    cut_fused,
    fuse_sources,
    retrieve_all,
    run_sync,
)
from ragloom.sources.registry import (
    create_source,
    default_settings,
    load_source_config,
    save_source_config,
    source_factories,
)

if TYPE_CHECKING:
    from ragloom.api import Index
    from ragloom.sources.base import ItemStorage

__all__ = ["SourceSet", "configured_freshness"]

log = logging.getLogger("ragloom")


class SourceSet:
    """Named sources of the index at ``index_dir`` for the repository at ``root``.

    A source named here is enabled even when it is off by default (``prs``, ``commits``):
    naming it is asking for it. ``options`` adds per-source options to those saved by the last
    sync (``{"issues": {"github": "owner/name"}}``); ``weights`` overrides RRF weights.
    """

    def __init__(
        self,
        root: Path,
        index_dir: Path,
        names: Sequence[str],
        *,
        options: Mapping[str, Mapping[str, Any]] | None = None,
        weights: Mapping[str, float] | None = None,
        index: Index | None = None,
        storage: ItemStorage | None = None,
        tolerant: bool = False,
    ) -> None:
        """``tolerant``: a source that cannot be created (a plug-in that fails to load or to
        construct) is left out and reported by :meth:`sync` and :meth:`freshness` instead of
        raising (the saved sources of a plain ``ragloom index`` or ``status``)."""
        if storage is None and index is not None:
            storage = index.source_storage()
        self.context = SourceContext(root.resolve(), index_dir.resolve(), storage)
        self.saved = load_source_config(self.context)
        factories = source_factories()
        self.sources: dict[str, Source] = {}
        self._failed: set[str] = set()
        self.broken: dict[str, str] = {}
        """Sources that could not be created, with why (``tolerant`` only)."""
        """Sources whose last sync failed (their options are not saved)."""
        self._history: Source | None = None
        self.settings: dict[str, SourceSettings] = {}
        for name in names:
            base = default_settings(name)
            opts = {**self.saved.get(name, {}), **dict((options or {}).get(name, {}))}
            st = replace(base, enabled=True, options=opts)
            if weights and name in weights:
                st = replace(st, weight=float(weights[name]))
            self.settings[name] = st
            try:
                self.sources[name] = create_source(name, self.context, st, factories)
            except ConfigError as exc:
                if not tolerant:
                    raise
                self.broken[name] = str(exc)
                del self.settings[name]
                continue
            use = getattr(self.sources[name], "use_index", None)
            if index is not None and callable(use):
                use(index)  # the caller's open index: one retriever and one model, not two

    @classmethod
    def configured(cls, root: Path, index_dir: Path, *, index: Index | None = None) -> SourceSet:
        """The sources the last ``ragloom index --sources`` synced (none: an empty set); with
        ``index``, where that index keeps them (a PostgreSQL index: the database)."""
        storage = index.source_storage() if index is not None else None
        ctx = SourceContext(root.resolve(), index_dir.resolve(), storage)
        names = list(load_source_config(ctx))
        return cls(root, index_dir, names, index=index, storage=storage, tolerant=True)

    # -- indexing -----------------------------------------------------------------------
    def sync(self, *, skip: Sequence[str] = ()) -> list[SyncReport]:
        """Sync every source but those in ``skip`` (the code source first) and save the
        configuration (skipped sources included: the CLI indexes the code itself)."""
        reports: list[SyncReport] = []
        order = [n for n in sorted(self.sources, key=lambda n: n != "code") if n not in skip]
        if "code" in order:  # Index.index takes the index's own write lock
            reports.append(self._sync_one("code"))
        # the other sources under their own lock (<index>/sources/write.lock, or the
        # storage's: an advisory lock in PostgreSQL): two syncs at once would interleave
        # cursors; a second one gets IndexLockedError (exit 22)
        lock: AbstractContextManager[object]
        if self.context.storage is not None:
            lock = self.context.storage.write_lock()
        else:
            self.context.data_dir.mkdir(parents=True, exist_ok=True)
            lock = WriteLock(self.context.data_dir)
        with lock:
            reports.extend(self._sync_one(n) for n in order if n != "code")
            self._save_config()
        reports.extend(SyncReport(n, status="error", error=why) for n, why in self.broken.items())
        return reports

    def _sync_one(self, name: str) -> SyncReport:
        src = self.sources[name]
        t0 = time.perf_counter()
        try:
            rep = src.sync()
        except Exception as exc:  # one source's failure (not a git repository, a bad export,
            # a plug-in's bug) is reported; the others still sync. What the source held is
            # kept: the report counts it, and the options that failed are not saved
            error = str(exc) if isinstance(exc, RagError) else f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, RagError):
                log.warning("source %s failed to sync", name, exc_info=True)
            rep = SyncReport(name, status="error", error=error, total=self._held(src))
            self._failed.add(name)
        rep.seconds = rep.seconds or time.perf_counter() - t0
        return rep

    @staticmethod
    def _held(src: Source) -> int:
        """How many items the source holds now (0 when that cannot be read either)."""
        try:
            items = src.freshness().get("items")
        except Exception:  # what it holds cannot be read either: counted as none
            return 0
        return items if isinstance(items, int) else 0

    def _save_config(self) -> None:
        config = dict(self.saved)
        for name in self.sources:
            if name in self._failed:  # a bad export path is not remembered for next time
                continue
            config[name] = {
                k: v
                for k, v in self.settings[name].options.items()
                if isinstance(v, str | int | float | bool)
            }
        save_source_config(self.context, config)

    # -- querying -----------------------------------------------------------------------
    async def asearch(
        self,
        query: str,
        *,
        top_k: int | None = None,
        filter: SourceFilter | None = None,
        per_source_ms: float = DEFAULT_PER_SOURCE_MS,
        total_ms: float = DEFAULT_TOTAL_MS,
        strict: bool = False,
        recency: RecencyConfig | None = None,
        now: float | None = None,
        history_weight: float = 0.0,
        history_depth: int = HISTORY_DEPTH_DEFAULT,
    ) -> MultiSearchResult:
        """Query every source in parallel and fuse (``top_k`` caps each source's list; the code
        source gets ``top_k`` itself, the others their own ``top_k`` setting up to it) and keep
        ``top_k`` of the fused list with a place for each source
        (:func:`~ragloom.sources.orchestrate.cut_fused`: ``-k 5`` answers five hits, not five
        per source, and not five of the code alone).

        ``history_weight`` > 0 turns on history-aware code ranking (:mod:`.history`, off by
        default: docs/sources.md has its time-split evaluation)."""
        await asyncio.to_thread(self.warm)
        t0 = time.perf_counter()
        flt = filter or SourceFilter()
        opts: dict[str, RetrieveOptions] = {}
        for name, st in self.settings.items():
            k = st.top_k if top_k is None else (top_k if name == "code" else min(st.top_k, top_k))
            opts[name] = RetrieveOptions(top_k=k, filter=flt, timeout_ms=per_source_ms)
        results, statuses = await retrieve_all(
            list(self.sources.values()),
            SourceQuery(query),
            opts,
            per_source_ms=per_source_ms,
            total_ms=total_ms,
            strict=strict,
        )
        t_retrieve = (time.perf_counter() - t0) * 1000
        notes: list[str] = []
        docs = self.sources.get("docs")
        if "code" in results and "docs" in results and docs is not None:
            held = getattr(docs, "document_paths", None)
            doc_paths: set[str] = held() if callable(held) else set()
            before = len(results["code"])
            results["code"] = [
                h for h in results["code"] if (h.paths[0] if h.paths else "") not in doc_paths
            ]
            dropped = before - len(results["code"])
            if dropped:
                notes.append(f"{dropped} code hits in documentation files left to the docs source")
        if history_weight > 0 and "code" in results:
            hist = await self._history_commits(query, flt, history_depth, per_source_ms, notes)
            results["code"] = history_rerank(
                results["code"], hist, self.context.root, history_weight, history_depth
            )
        weights = {n: st.weight for n, st in self.settings.items()}
        hits = fuse_sources(results, weights, recency=recency, now=now)
        if top_k is not None:
            hits = cut_fused(hits, top_k)
        return MultiSearchResult(
            hits=hits,
            statuses=statuses,
            timings_ms={
                "retrieve": round(t_retrieve, 2),
                "total": round((time.perf_counter() - t0) * 1000, 2),
            },
            notes=notes,
        )

    async def _history_commits(
        self, query: str, flt: SourceFilter, depth: int, per_source_ms: float, notes: list[str]
    ) -> list[SourceHit]:
        """The commits that vote, from the commits source (synced or not), under its timeout."""
        src = self.sources.get("commits")
        if src is None:
            if self._history is None:
                self._history = create_source("commits", self.context, default_settings("commits"))
            src = self._history
        try:
            return await asyncio.wait_for(
                src.retrieve(SourceQuery(query), RetrieveOptions(top_k=depth, filter=flt)),
                per_source_ms / 1000,
            )
        except Exception as exc:  # history is a refinement: without it the code list stands
            notes.append(f"history-aware ranking skipped: {type(exc).__name__}: {exc}")
            return []

    def warm(self) -> None:
        """Start-up work of the sources that have some (a ``warm()`` method: the code source
        loads its model), done before the timed retrieval; a failure is left to ``retrieve``."""
        for src in self.sources.values():
            warm = getattr(src, "warm", None)
            if callable(warm) and src.enabled:
                try:
                    warm()
                except Exception as exc:  # reported by the source's own retrieve
                    log.debug("warming source %s failed: %s", src.name, exc)

    def search(self, query: str, **kwargs: Any) -> MultiSearchResult:
        """:meth:`asearch` from synchronous code (returns at the total timeout at the latest)."""
        return run_sync(lambda: self.asearch(query, **kwargs))

    # -- status -------------------------------------------------------------------------
    def freshness(self) -> list[dict[str, object]]:
        """Each source's freshness: items, last synced commit, last issue update, ..."""
        out: list[dict[str, object]] = []
        for name, src in self.sources.items():
            try:
                info = src.freshness()
            except Exception as exc:  # status reports a broken source, it does not fail
                info = {"error": f"{type(exc).__name__}: {exc}"}
            out.append({"source": name, **info})
        out.extend({"source": name, "error": why} for name, why in self.broken.items())
        return out

    def close(self, *, wait: bool = True) -> None:
        """Dispose of every source. ``wait`` false (a server closing the sources of one
        answer): a plug-in's ``dispose`` is started and not waited for."""
        from ragloom.sources.isolate import IsolatedSource

        async def _all() -> None:
            for src in [*self.sources.values(), *([self._history] if self._history else [])]:
                if not wait and isinstance(src, IsolatedSource):
                    src.dispose_later()
                else:
                    await src.dispose()

        run_sync(_all)


def configured_freshness(index: Index, *, wait: bool = True) -> list[dict[str, object]] | None:
    """Freshness of the sources the last ``index --sources`` synced into ``index`` (each
    source's items, last synced commit or update, ...; a source that cannot be created or read
    reports its error), or None when none were: ``status`` of the CLI and of a server.
    ``wait`` false (a server): a plug-in's ``dispose`` is not waited for."""
    context = SourceContext(index.root.resolve(), index.index_dir.resolve(), index.source_storage())
    if not load_source_config(context):  # none: the plug-ins are not even looked for
        return None
    ss = SourceSet.configured(index.root, index.index_dir, index=index)
    try:
        return list(ss.freshness())
    finally:
        ss.close(wait=wait)
