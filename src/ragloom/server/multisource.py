"""Questions to several sources at once from :class:`~ragloom.server.engine.ServingEngine`
(``sources=[...]`` of ``search`` and ``context``; docs/sources.md).

The synced sources of the index (code, docs, commits, issues, prs) are asked in parallel and
fused; these answers are not cached, and each carries every source's status.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from ragloom.assemble.budget import Format
from ragloom.errors import InputError, RagError
from ragloom.server.answers import _AnswersMixin, _parts_json, hit_json
from ragloom.server.readers import _Reader


class _SourcesMixin(_AnswersMixin):
    """Several-source search and context (part of ``ServingEngine``)."""

    @staticmethod
    def _check_sources(sources: Sequence[str] | None) -> list[str] | None:
        """Source names asked for, or None for the code index alone (the cached path)."""
        if sources is None:
            return None
        if isinstance(sources, str) or not all(isinstance(n, str) for n in sources):
            raise InputError("sources must be a list of source names, e.g. ['code', 'docs']")
        from ragloom.sources.registry import parse_source_list, source_factories

        try:
            names = parse_source_list(list(sources))
        except RagError as exc:
            raise InputError(str(exc)) from exc
        known = source_factories()
        unknown = [n for n in names if n not in known]
        if unknown:
            raise InputError(
                f"unknown source {unknown[0]!r}; known sources: {', '.join(sorted(known))}"
            )
        return None if names == ["code"] else names

    def _multi_search(
        self, r: _Reader, query: str, names: list[str], k: int, strat: str, explain: bool
    ) -> Any:
        from ragloom.sources.multi import SourceSet

        options = {"code": {"strategy": strat, "explain": explain}}
        ss = SourceSet(self.root, self.index_dir, names, options=options, index=r.index)
        try:
            return ss.search(query, top_k=k, total_ms=self._settings.timeouts.query_ms)
        finally:
            ss.close(wait=False)  # a plug-in's slow dispose does not delay the answer

    def _search_sources(
        self, query: str, names: list[str], k: int, strat: str, explain: bool, t0: float
    ) -> dict[str, Any]:
        with self._use_reader() as r:
            res = self._multi_search(r, query, names, k, strat, explain)
            gen = r.retriever.store.generation()
        hits: list[dict[str, Any]] = []
        for h in res.hits:
            if h.source == "code" and h.payload is not None:
                hits.append(
                    {**hit_json(h.payload, explain, gen), "source": "code", "score": h.score}
                )
            else:
                d = h.to_dict()
                if explain:
                    d["explain"] = h.explain
                else:
                    d.pop("text", None)
                hits.append(d)
        qid = uuid.uuid4().hex
        out = {
            "query_id": qid,
            "latency_ms": 0.0,
            "cache_hit": False,
            "generation": gen,
            "query": query,
            "strategy": strat,
            "top_k": k,
            "hits": hits,
            "notes": list(res.notes),
            "sources": res.sources_json(),
            "timings_ms": dict(res.timings_ms),
        }
        return self._finish(out, "search", strat, gen, [str(h["id"]) for h in hits], False, t0)

    def _context_sources(
        self,
        query: str,
        names: list[str],
        k: int,
        strat: str,
        budget: int,
        fmt: Format,
        counter: str,
        t0: float,
    ) -> dict[str, Any]:
        from ragloom.sources.context import assemble_sources

        with self._use_reader() as r:
            res = self._multi_search(r, query, names, k, strat, False)
            gen = r.retriever.store.generation()
            ctx = assemble_sources(
                r.index, query, res.hits, budget=budget, format=fmt, counter=counter
            )
        parts = _parts_json(ctx.parts)
        hit_ids = [h.id for h in res.hits]
        qid = uuid.uuid4().hex
        out = {
            "query_id": qid,
            "latency_ms": 0.0,
            "cache_hit": False,
            "generation": gen,
            "query": query,
            "format": fmt,
            "strategy": strat,
            "top_k": k,
            "budget": budget,
            "context": ctx.text,
            "parts": parts,
            "stats": ctx.stats.to_dict(),
            "notes": list(res.notes),
            "hit_ids": hit_ids,
            "sources": res.sources_json(),
        }
        return self._finish(out, "context", strat, gen, hit_ids, False, t0)
