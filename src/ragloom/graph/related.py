"""The definitions related to selected code: what it calls and what calls it, by relevance.

Each selected chunk (a seed, weighted by its place in the context) lends its weight to its
callees and callers, times the confidence of the reference; a definition related to several
seeds sums their shares. Structural context (:mod:`ragloom.assemble.structure`) shows the best
of them within the budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragloom.graph.code_graph import DEFAULT_MIN_CONFIDENCE, CodeGraph
from ragloom.graph.model import Definition

__all__ = ["CALLEE_WEIGHT", "CALLER_WEIGHT", "MAX_PER_SEED", "RelatedDef", "related_definitions"]

CALLEE_WEIGHT = 1.0
"""Weight of a callee: to change or call the selected code right, what it calls matters most."""
CALLER_WEIGHT = 0.8
"""Weight of a caller: what a change to the selected code must keep working."""
MAX_PER_SEED = 8
"""Most callees and most callers one seed contributes (the most certain first): a function
called from two hundred places should not fill the budget with its callers."""
_SKIP_KINDS = frozenset({"module"})


@dataclass(frozen=True, slots=True)
class RelatedDef:
    definition: Definition
    relation: str
    """``callee`` or ``caller``."""
    score: float
    of: str
    """The symbol of the seed that contributed most."""


def related_definitions(
    graph: CodeGraph,
    seeds: Sequence[tuple[str, float]],
    *,
    min_confidence: float = DEFAULT_MIN_CONFIDENCE,
    per_seed: int = MAX_PER_SEED,
) -> list[RelatedDef]:
    """Callees and callers of the ``seeds`` ((chunk id, weight), best first), best first;
    the seeds themselves are left out."""
    seed_nodes = {n for cid, _ in seeds if (n := graph.node(cid)) is not None}
    score: dict[tuple[int, str], float] = {}
    best_of: dict[tuple[int, str], tuple[float, str]] = {}
    for cid, weight in seeds:
        d = graph.get(cid)
        if d is None:
            continue
        for relation, pick, w in (
            ("callee", graph.callees, CALLEE_WEIGHT),
            ("caller", graph.callers, CALLER_WEIGHT),
        ):
            got = [
                (o, c)
                for o, c in pick(d.id, min_confidence=min_confidence)
                if o.kind not in _SKIP_KINDS
            ]
            for other, conf in got[:per_seed]:
                n = graph.node(other.id)
                if n is None or n in seed_nodes:
                    continue
                share = weight * conf * w
                key = (n, relation)
                score[key] = score.get(key, 0.0) + share
                if share > best_of.get(key, (0.0, ""))[0]:
                    best_of[key] = (share, d.symbol)
    out: list[RelatedDef] = []
    taken: set[int] = set()
    for (n, relation), s in sorted(
        score.items(), key=lambda kv: (-kv[1], graph.defs[kv[0][0]].path, kv[0][0])
    ):
        if n in taken:  # both a callee and a caller: shown once, as the stronger
            continue
        taken.add(n)
        out.append(RelatedDef(graph.defs[n], relation, s, best_of[(n, relation)][1]))
    return out
