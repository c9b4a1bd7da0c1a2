"""How a question that reads as an issue is read by the ranking stages (issue 21): the
:class:`IssueWeights` of the issue stage, and :func:`issue_reading`, which the priors and the
history use to read an issue's title rather than its body."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ragloom.retrieve.query.pipeline import IssueQuery
    from ragloom.retrieve.stages.base import RankState

__all__ = ["ISSUE_WEIGHTS", "IssueWeights", "issue_reading"]


@dataclass(frozen=True, slots=True)
class IssueWeights:
    """How an issue's names and parts weigh in ranking."""

    path: float = 1.0
    """Bonus weight of a file the issue names (paths, modules, traceback frames)."""
    symbol: float = 1.0
    """Bonus weight of a chunk whose symbol the issue names (symbols, traceback functions)."""
    k: float = 10.0
    """RRF k of the names' ranks (the fusion's k: a first-named file weighs like a top hit)."""
    max_names: int = 8
    """Names of each kind that count, strongest first."""
    history: str = "changes"
    """History weights for an issue: a profile (``changes``, ``lookup``), ``auto`` (the title
    decides, as for any question) or ``off``."""
    title_intent: bool = True
    """Roles asked for and change requests are read from the title alone."""


ISSUE_WEIGHTS = IssueWeights()
"""The default (docs/ranking.md, "Issue texts": chosen on the SWE-bench tune half)."""


def issue_reading(state: RankState) -> tuple[IssueQuery | None, str]:
    """The question's issue reading (None for a plain question) and the text that says which
    roles it asks for and whether it is a change request (the title of an issue)."""
    issue = state.pq.issue
    weights = state.issue_weights
    if issue is None or weights is None:
        return None, state.query
    return issue, issue.text.title if weights.title_intent else state.query
