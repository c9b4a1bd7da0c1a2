"""The index generation a query answers from (docs/consistency.md), and the deeper re-fetch
that keeps a modality's list full while rows of another generation crowd it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["MAX_GENERATION_ATTEMPTS", "GenerationView", "visible_top"]


@dataclass(frozen=True, slots=True)
class GenerationView:
    """The index generation a query answers from (docs/consistency.md): the rows it shows are
    those at or below ``watermark`` that are not ``hidden`` (replaced rows not yet deleted)."""

    generation: int
    watermark: int
    hidden: frozenset[int] = frozenset()

    def visible(self, rowid: int) -> bool:
        return rowid <= self.watermark and rowid not in self.hidden


MAX_GENERATION_ATTEMPTS = 5
"""A query that saw the published generation change while it ran is answered again (at most
this many times; publishing takes one index run, a query a few ms)."""
_MAX_REFETCH = 6
"""Times a modality's list is re-fetched, twice as deep, while rows of another generation
crowd it (only during an update)."""


def visible_top(
    search: Callable[[int], list[tuple[int, float]]], k: int, view: GenerationView
) -> list[tuple[int, float]]:
    """The best ``k`` hits ``view`` shows: ``search(n)`` is asked again, deeper, while rows of
    another generation (held by BM25 and HNSW during an update) take places."""
    if k <= 0:
        return []
    fetch = k
    out: list[tuple[int, float]] = []
    for _ in range(_MAX_REFETCH):
        raw = search(fetch)
        if view.hidden:
            out = [(r, s) for r, s in raw if view.visible(r)]
        else:  # no replaced rows waiting for deletion: the watermark alone decides
            wm = view.watermark
            out = [(r, s) for r, s in raw if r <= wm]
        if len(out) >= k or len(raw) < fetch:
            break
        fetch = 2 * fetch + len(raw) - len(out)
    return out[:k]
