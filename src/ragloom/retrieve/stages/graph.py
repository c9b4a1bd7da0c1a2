"""Graph evidence: relevance spreads from the first-pass hits along the code graph (issue 24).

The best candidates (seeds) lend a share of their score to the definitions one reference away
(what they call, what calls them, their bases and the types they use), times the reference's
confidence; a definition next to several seeds gathers several shares. Candidates already in
the list rise; a neighbour not retrieved at all joins the list with its share alone (the helper
two calls away whose words match nothing in the question). The graph is the generation's
(:mod:`ragloom.graph`); an index without one (no code) skips the stage.

Off by default (``+graph`` turns it on): docs/graph.md has the held-back figures that decided.
"""

from __future__ import annotations

import logging

from ragloom.errors import RagError
from ragloom.retrieve.stages.base import RankState, StageBase, by_score
from ragloom.retrieve.stages.history import pin_first

__all__ = ["GRAPH_DEFAULT", "GRAPH_MIN_CONFIDENCE", "GRAPH_SEEDS", "GRAPH_WEIGHT", "GraphStage"]

log = logging.getLogger("ragloom.retrieve")

GRAPH_DEFAULT = False
"""Whether hybrid strategies run the stage without ``+graph`` (docs/graph.md)."""

GRAPH_WEIGHT = 0.3
"""Share of a seed's score a neighbour gains per unit of confidence. ragloom's starting
value; 0.03 to 1.0 measured within noise of each other and of the stage off on the
commit-question tune split (docs/graph.md, "Graph evidence in ranking: measured")."""
GRAPH_SEEDS = 5
"""How many of the best candidates spread their score."""
GRAPH_MIN_CONFIDENCE = 0.5
"""Edges resolved with less confidence (a name many definitions share) spread nothing."""
GRAPH_NEW_MAX = 10
"""Most neighbours outside the candidate list that join it."""


class GraphStage(StageBase):
    """Spread the seeds' scores one edge along the code graph, then re-sort."""

    name: str = "graph"
    reads: frozenset[str] = frozenset({"graph"})
    group: str = "priors"

    def __init__(
        self,
        weight: float = GRAPH_WEIGHT,
        seeds: int = GRAPH_SEEDS,
        min_confidence: float = GRAPH_MIN_CONFIDENCE,
        new_max: int = GRAPH_NEW_MAX,
    ) -> None:
        self.weight = weight
        self.seeds = seeds
        self.min_confidence = min_confidence
        self.new_max = new_max

    def applies(self, state: RankState) -> bool:
        return bool(state.ranked) and self.weight > 0

    def apply(self, state: RankState) -> None:
        try:
            graph = state.source.code_graph()
        except RagError as exc:  # no usable graph (records of another version): rank without
            log.warning("graph stage skipped: %s", exc)
            return
        if graph is None:
            return
        # the scores from before a history pin (the pin is applied again at the end)
        ranked = by_score([(r, state.pre_pin.get(r, s)) for r, s in state.ranked])
        top = ranked[0][1]
        if top <= 0:
            return
        score_of = dict(ranked)
        node_of = graph.rowid_node
        gain: dict[int, float] = {}
        seeded: set[int] = set()
        for rowid, score in ranked[: self.seeds]:
            node = node_of.get(rowid)
            if node is None or node in seeded:
                continue
            seeded.add(node)
            share = self.weight * max(score, 0.0)
            for other, conf in graph.neighbours(node, self.min_confidence).items():
                gain[other] = gain.get(other, 0.0) + share * conf
        if not gain:
            return
        present: dict[int, list[int]] = {}
        for rowid, _ in ranked:
            node = node_of.get(rowid)
            if node is not None:
                present.setdefault(node, []).append(rowid)
        out = dict(score_of)
        added = 0
        for node, g in sorted(gain.items(), key=lambda kv: (-kv[1], kv[0])):
            rows = present.get(node)
            if rows:
                for rowid in rows:
                    out[rowid] = score_of[rowid] + g
                    if state.explain:
                        state.note(rowid, "graph", round(g, 6))
            elif added < self.new_max and node in graph.head_rowid:
                rowid = graph.head_rowid[node]
                if rowid in out:
                    continue
                out[rowid] = g
                added += 1
                if state.explain:
                    state.note(rowid, "graph", round(g, 6))
        new = [r for r in out if r not in score_of]
        if new and state.rows is not None:  # rows were loaded before this stage: add theirs
            got = state.source.store.chunks_by_rowids(new)
            state.rows.update(got)
            for r in new:
                if r not in got:
                    del out[r]
        result = by_score(list(out.items()))
        state.ranked = pin_first(result, state.pinned) if state.pinned else result
