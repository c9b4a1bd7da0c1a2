"""Ranking as a pipeline of stages (issue 21; docs/ranking.md "Stages").

:mod:`~ragloom.retrieve.stages.base` defines a stage (:class:`Stage`) and what it works on
(:class:`RankState`); one module per stage holds its constants and logic;
:mod:`~ragloom.retrieve.stages.pipeline` turns a strategy name into the stage list, and
:mod:`~ragloom.retrieve.stages.runner` runs it.
"""

from __future__ import annotations

from ragloom.retrieve.stages.base import (
    CandidateEvidence,
    Ranked,
    RankingSource,
    RankState,
    Stage,
    StageBase,
)
from ragloom.retrieve.stages.pipeline import (
    STAGE_STEPS,
    SearchSpec,
    build_stages,
    parse_search_spec,
)
from ragloom.retrieve.stages.runner import run_stages

__all__ = [
    "STAGE_STEPS",
    "CandidateEvidence",
    "RankState",
    "Ranked",
    "RankingSource",
    "SearchSpec",
    "Stage",
    "StageBase",
    "build_stages",
    "parse_search_spec",
    "run_stages",
]
