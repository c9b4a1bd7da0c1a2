"""Role and declaration priors: tests, docs, examples, build and generated files, and
signatures without a body, are demoted unless the question asks for them (issue 11;
docs/ranking.md "Real agent questions (issue 11): file roles, declarations, file evidence").

A hit's fused score is multiplied by ``ROLE_PRIOR[role]`` (``+no-roles`` turns it off) and by
``DECLARATION_PRIOR`` when the chunk is a declaration (``+no-decl``), unless
:func:`~ragloom.retrieve.roles.query_intent` says the question asks for that role. The product
of the two is applied once (its explain record: ``prior``). ``+no-priors`` drops the stage.
"""

from __future__ import annotations

from ragloom.retrieve.roles import FileRole, query_intent
from ragloom.retrieve.stages.base import RankState, StageBase, by_score, issue_reading

__all__ = ["DECLARATION_PRIOR", "ROLE_PRIOR", "PriorsStage"]

ROLE_PRIOR: dict[FileRole, float] = {
    "implementation": 1.0,
    "test": 0.3,
    "documentation": 0.3,
    "changelog": 0.3,
    "example": 0.3,
    "build": 0.3,
    "generated": 0.3,
    "declaration": 0.3,
}
"""Multiplier of a hit's fused score by its file's role (``ragloom.retrieve.roles``) unless the
question asks for that role (``query_intent``). Issue-11 tune split (starlette, chi, axios,
hybrid file MRR@10): no prior 0.634, 0.7 -> 0.608 (chi+axios), 0.5 -> 0.646, 0.3 -> 0.653
(0.700 on three repositories), 0.2 -> 0.702, 0.1 -> 0.702: 0.3, where the gain flattens."""
DECLARATION_PRIOR = 0.7
"""Multiplier of a chunk that is a signature without a body (``is_declaration``) unless the
question asks for declarations. Neutral on the issue-11 git questions (file level: a
declaration and its definition usually share a file; chi+axios 0.646 either way); 0.7 is
ragloom's choice, mild enough that a question about an interface still finds it."""


class PriorsStage(StageBase):
    """Multiply each candidate's score by its role and declaration priors, then sort."""

    name: str = "priors"
    reads: frozenset[str] = frozenset({"query", "role", "declaration"})
    group: str = "priors"

    def __init__(self, *, roles: bool = True, decl: bool = True) -> None:
        self.roles = roles
        self.decl = decl

    def __repr__(self) -> str:
        return f"PriorsStage(roles={self.roles}, decl={self.decl})"

    def apply(self, state: RankState) -> None:
        info = state.source.chunk_info([r for r, _ in state.ranked])
        intent = query_intent(issue_reading(state)[1])
        factors: dict[tuple[FileRole, bool], float] = {}  # a few (role, decl) pairs per query
        out = []
        for r, s in state.ranked:
            meta = info.get(r)
            if meta is None:
                out.append((r, s))
                continue
            key = (meta[1], meta[2])
            f = factors.get(key)
            if f is None:
                f = factors[key] = self.factor(meta[1], meta[2], intent)
            if f != 1.0:
                state.note(r, "prior", f)
                s = s * f
            out.append((r, s))
        state.ranked = by_score(out)

    def factor(self, role: FileRole, decl: bool, intent: frozenset[FileRole]) -> float:
        """The product of the priors a candidate of ``role`` (a declaration or not) gets."""
        f = 1.0
        if self.roles and role not in intent:
            f *= ROLE_PRIOR[role]
        if self.decl and decl and "declaration" not in intent and role != "declaration":
            f *= DECLARATION_PRIOR
        return f


def role_prior(role: FileRole, intent: frozenset[FileRole]) -> float:
    """The role prior of a file of ``role`` for a question asking for ``intent``."""
    return ROLE_PRIOR[role] if role not in intent else 1.0
