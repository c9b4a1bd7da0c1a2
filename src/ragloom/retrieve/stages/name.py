"""A bare name: a question that is one symbol name puts that symbol's definitions first
(docs/ranking.md, "A question that is one name").

The learned stage orders files by what commit messages taught it, and a look-up of a name
(``parseArgsOrExit``, ``$ZodISOTime``, ``unescape``) is not a commit message: on 60 such
questions of a TypeScript repository the default put the one definition of the name first 40
times, the hand-set order 58 times. When the whole question is one identifier (dotted allowed,
optionally ``name()`` or in backticks) and it names at most :data:`MAX_DEFINITIONS` chunks
exactly, those chunks are put first again after the learned stage, in the order it gave them.
Hybrid strategies only. Explain record: ``name``.
"""

from __future__ import annotations

import re

from ragloom.ingest.chunker import is_part
from ragloom.retrieve.stages.base import RankState, StageBase
from ragloom.retrieve.stages.history import pin_first

__all__ = ["MAX_DEFINITIONS", "NameStage", "bare_name"]

MAX_DEFINITIONS = 3
"""A name with more definitions (``run``, ``__init__``) is left to the ranking: which of them
is meant is not in the question."""
_MAX_LOOKED_UP = 64
"""Chunks a name may name before the stage gives up without reading their rows."""
_NOT_DEFINITIONS = frozenset({"section", "window", "module"})
"""Chunk kinds that are not a definition of a name (documentation sections, text windows, a
module's remainder)."""
_IDENT = r"\$*[^\W\d][\w$]*"
_BARE_RE = re.compile(r"\s*(`?)(" + _IDENT + r"(?:\." + _IDENT + r")*)(?:\(\))?\1\s*\??\s*")


def bare_name(query: str) -> str | None:
    """The identifier ``query`` consists of (dotted allowed), else None."""
    m = _BARE_RE.fullmatch(query)
    return m.group(2) if m else None


class NameStage(StageBase):
    """Put first the definitions of the one name the question is."""

    name: str = "name"
    reads: frozenset[str] = frozenset({"entities", "rows", "strategy"})
    needs_rows: bool = True

    def applies(self, state: RankState) -> bool:
        return state.hybrid and bare_name(state.query) is not None

    def apply(self, state: RankState) -> None:
        name = bare_name(state.query)
        rows = state.rows or {}
        named: set[str] = set()
        for e in state.pq.entities:
            if e.kind == "symbol" and e.value == name:
                named.update(i for i in e.ids if not is_part(i))
        if not named or len(named) > _MAX_LOOKED_UP:
            return
        # definitions are code: a Markdown section titled "... Your cobra.Command" is not one
        # (eight such headings put cobra's `Command` over the limit)
        wanted = {
            cid
            for cid, row in state.source.store.chunks_by_ids(sorted(named)).items()
            if row.kind not in _NOT_DEFINITIONS
        }
        if not wanted or len(wanted) > MAX_DEFINITIONS:
            return
        first = [r for r, _ in state.ranked if r in rows and rows[r].id in wanted]
        if first and [r for r, _ in state.ranked[: len(first)]] != first:
            state.ranked = _strictly_first(pin_first(state.ranked, first), len(first))
            for r in first:
                state.note(r, "name", True)


def _strictly_first(ranked: list[tuple[int, float]], n: int) -> list[tuple[int, float]]:
    """``ranked`` with each of its first ``n`` scores strictly above the next one (the pin
    leaves ties, and context assembly, which breaks ties by path, then took another hit for the
    best one)."""
    out = list(ranked)
    for i in range(min(n, len(out) - 1) - 1, -1, -1):
        r, score = out[i]
        below = out[i + 1][1]
        if score <= below:
            out[i] = (r, below + max(abs(below), 1.0) * 1e-6)
    return out
