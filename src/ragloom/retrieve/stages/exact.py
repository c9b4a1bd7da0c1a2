"""Exact match: a symbol or file the question names comes first (tamma phase 2 "entity
extraction"; docs/ranking.md "Query processing", exact-match boost; the boost itself is
:func:`ragloom.retrieve.query.exact_match_boost` with ``EXACT_MATCH_BONUS``).

Runs when an entity is at least ``QueryConfig.exact_min_confidence`` sure and the ``exact``
query step is on (``+no-exact`` turns both off). A named symbol that retrieval missed is
fetched from the store when the name has at most :data:`MAX_MISSING_ENTITY_IDS` definitions.
A split symbol is boosted once, as its first part. Explain record: ``exact_match``.
"""

from __future__ import annotations

from ragloom.ingest.chunker import is_part
from ragloom.retrieve.query import exact_match_boost
from ragloom.retrieve.stages.base import RankState, StageBase

__all__ = ["MAX_MISSING_ENTITY_IDS", "ExactStage"]

MAX_MISSING_ENTITY_IDS = 3
"""A named symbol that retrieval missed is fetched from the store when it names at most this
many chunks (more is an ambiguous name like ``run``: better left to retrieval)."""


class ExactStage(StageBase):
    """Boost the hits the question names above all others (fetching missed ones)."""

    name: str = "exact"
    reads: frozenset[str] = frozenset({"entities", "rows"})
    needs_rows: bool = True

    def applies(self, state: RankState) -> bool:
        qc = state.qc
        return qc.exact_boost and any(
            e.confidence >= qc.exact_min_confidence for e in state.pq.entities
        )

    def apply(self, state: RankState) -> None:
        ranked, rows, pq, qc = state.ranked, dict(state.rows or {}), state.pq, state.qc
        present = {rows[r].id for r, _ in ranked}
        wanted: list[str] = []
        for e in pq.entities:
            strong = e.kind == "symbol" and e.confidence >= qc.exact_min_confidence
            if strong and 0 < len(e.ids) <= MAX_MISSING_ENTITY_IDS:
                wanted.extend(i for i in e.ids if i not in present)
        if wanted:
            for row in state.source.store.chunks_by_ids(wanted).values():
                rows[row.rowid] = row
                ranked.append((row.rowid, 0.0))
        by_id = {rows[r].id: r for r, _ in ranked}
        boosted = exact_match_boost(
            [(rows[r].id, s) for r, s in ranked],
            pq.entities,
            qc,
            id_paths={rows[r].id: rows[r].path for r, _ in ranked},
            # a split symbol is boosted once, as its first part (the others keep their rank)
            id_symbols={rows[r].id: rows[r].symbol for r, _ in ranked if not is_part(rows[r].id)},
        )
        out = [(by_id[cid], s) for cid, s in boosted]
        before = dict(ranked)
        for r, s in out:
            if s != before.get(r):
                state.note(r, "exact_match", s)
        state.ranked, state.rows = out, rows
