"""Running a strategy's stages over one query's :class:`~ragloom.retrieve.stages.base.RankState`:
the candidates' rows are loaded before the first stage that reads them (only the hits'
rows when nothing later re-orders by rows), a stage that does not apply is skipped, each
stage's time adds to its group's timing, and with ``explain`` each one's before and after is
traced."""

from __future__ import annotations

import time
from collections.abc import Sequence

from ragloom.retrieve.stages.base import RankState, Stage

__all__ = ["complete_rows", "load_rows", "run_stages"]


def load_rows(state: RankState, later: Sequence[Stage], keep: bool = False) -> None:
    """Load the candidates' rows and drop candidates whose row is gone. When no stage still to
    run reorders (and nothing is explained) only the hits returned need their rows (50 rows
    cost ~0.2 ms, 15 ~0.07 ms); a row gone since indexing means loading the rest.

    ``keep``: a stage still to run re-orders every candidate without reading their rows (the
    learned stage). The list is then kept whole with only the top rows loaded (100 rows cost
    ~0.5 ms, 300 with a history ~1.5); a candidate stays when ``chunk_info`` knows its row,
    which is read the same way, so the same candidates stay as when every row is loaded."""
    ranked, src, k = state.ranked, state.source, state.top_k
    if state.explain or any(s.wants_all_rows(state, None) for s in later):
        rows = src.store.chunks_by_rowids([r for r, _ in ranked])
    else:
        rows = src.store.chunks_by_rowids([r for r, _ in ranked[:k]])
        if len(rows) < min(k, len(ranked)) or any(s.wants_all_rows(state, rows) for s in later):
            rows = src.store.chunks_by_rowids([r for r, _ in ranked])
        elif keep and len(ranked) > k:
            known = src.chunk_info([r for r, _ in ranked])
            state.rows, state.rows_partial = rows, True
            state.ranked = [(r, s) for r, s in ranked if r in known]
            return
    state.rows = rows
    state.ranked = [(r, s) for r, s in ranked if r in rows]


def complete_rows(state: RankState, upto: int | None = None) -> None:
    """Load the rows a list kept whole still lacks (of its first ``upto`` candidates; None:
    all) and drop candidates whose row is gone; the list stays partial while ``upto`` leaves
    candidates without rows."""
    rows = dict(state.rows or {})
    head = state.ranked if upto is None else state.ranked[:upto]
    missing = [r for r, _ in head if r not in rows]
    while missing:
        got = state.source.store.chunks_by_rowids(missing)
        rows.update(got)
        gone = {r for r in missing if r not in got}
        if not gone:
            break
        state.ranked = [(r, s) for r, s in state.ranked if r not in gone]
        head = state.ranked if upto is None else state.ranked[:upto]
        missing = [r for r, _ in head if r not in rows]
    state.rows = rows
    state.rows_partial = upto is not None and any(r not in rows for r, _ in state.ranked)


def run_stages(stages: Sequence[Stage], state: RankState) -> RankState:
    """Run ``stages`` in order on ``state``: rows are loaded before the first stage that reads
    them (or at the end), a stage whose ``applies`` is False is skipped, each one's time adds
    to its group's timing, and with ``explain`` each one's before and after is traced."""
    for i, stage in enumerate(stages):
        if stage.needs_rows and state.rows is None:
            t = time.perf_counter()
            rest = stages[i:]
            keep = any(s.keeps_list(state) for s in rest)
            load_rows(state, [s for s in rest if s.needs_rows], keep)
            _add_time(state, "boosts", t)
        elif stage.needs_rows and state.rows_partial and stage.uses_rows(state):
            t = time.perf_counter()
            complete_rows(state)
            _add_time(state, "boosts", t)
        if not stage.applies(state):
            continue
        before = list(state.ranked) if state.explain else []
        t = time.perf_counter()
        stage.apply(state)
        _add_time(state, stage.group, t)
        if state.explain:
            state.trace.append((stage.name, before, list(state.ranked)))
    if state.rows is None:
        t = time.perf_counter()
        load_rows(state, [])
        _add_time(state, "boosts", t)
    elif state.rows_partial:  # the hits returned need their rows
        t = time.perf_counter()
        complete_rows(state, state.top_k)
        _add_time(state, "boosts", t)
    return state


def _add_time(state: RankState, group: str, since: float) -> None:
    ms = (time.perf_counter() - since) * 1000
    state.timings_ms[group] = state.timings_ms.get(group, 0.0) + ms
