"""Heads first: a split symbol the question names is represented by its first part, the one
holding its definition line (issue 8, symbols over the size cap; docs/chunking.md).

Every part of a split symbol carries its name and signature, so BM25 and the embedder cannot
tell them apart. When a later part ranks above the first, the first part takes the best rank
and score its parts earned (fetched from the store if retrieval missed it); everything else
keeps its order. No constants. Explain record: ``first_part`` (the rank it took).
"""

from __future__ import annotations

from collections.abc import Mapping

from ragloom.index.store import ChunkRow
from ragloom.ingest.chunker import head_id, is_part, part_id
from ragloom.retrieve.stages.base import Ranked, RankState, StageBase

__all__ = ["HeadsStage", "has_part_of", "named_heads"]


def named_heads(state: RankState) -> set[str]:
    """Chunk ids of the symbols the question names."""
    return {i for e in state.pq.entities if e.kind == "symbol" for i in e.ids}


def has_part_of(rows: Mapping[int, ChunkRow], heads: set[str]) -> bool:
    """True when a later part of a split symbol named by the query is among ``rows``."""
    return bool(heads) and any(is_part(r.id) and head_id(r.id) in heads for r in rows.values())


class HeadsStage(StageBase):
    """Move each named split symbol's first part to the best place its parts earned."""

    name: str = "heads"
    reads: frozenset[str] = frozenset({"entities", "rows"})
    needs_rows: bool = True

    def applies(self, state: RankState) -> bool:
        return has_part_of(state.rows or {}, named_heads(state))

    def wants_all_rows(self, state: RankState, rows: Mapping[int, ChunkRow] | None) -> bool:
        # the top rows decide: all of them are needed only when they hold a later part
        return rows is not None and has_part_of(rows, named_heads(state))

    def uses_rows(self, state: RankState) -> bool:
        # It looks for later parts of the named symbols among the candidates' rows. A named
        # symbol that was never split has no second part in the store (parts are numbered
        # from 2), so when none has one no row can matter: one indexed look-up of a few ids
        # instead of the rows of every candidate.
        heads = named_heads(state)
        if not heads:
            return False
        return bool(state.source.store.chunks_by_ids([part_id(h, 2) for h in sorted(heads)]))

    def apply(self, state: RankState) -> None:
        ranked, rows, heads = state.ranked, state.rows or {}, named_heads(state)
        own: dict[str, int] = {}  # head id -> rowid, where ranked
        best: dict[str, int] = {}  # head id -> index of its best-ranked later part
        for i, (r, _) in enumerate(ranked):
            cid = rows[r].id
            if cid in heads:
                own.setdefault(cid, r)
            elif is_part(cid) and head_id(cid) in heads and head_id(cid) not in own:
                best.setdefault(head_id(cid), i)
        if not best:
            return
        missing = [h for h in best if h not in own]
        if missing:
            rows = dict(rows)
            for row in state.source.store.chunks_by_ids(missing).values():
                rows[row.rowid] = row
                own[row.id] = row.rowid
        at = {best[h]: own[h] for h in best if h in own}  # index -> head rowid placed there
        moved = set(at.values())
        out: Ranked = []
        for i, (r, s) in enumerate(ranked):
            if i in at:
                out.append((at[i], s))
                state.note(at[i], "first_part", i + 1)
            if r not in moved:
                out.append((r, s))
        state.ranked, state.rows = out, rows
