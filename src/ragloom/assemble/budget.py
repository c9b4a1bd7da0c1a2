"""Token budget and assembly policy: frozen, validated-on-construction value objects.

``TokenBudget`` follows ploke-rag-plan.md section 2 (``TokenBudget { max_total, per_file_max,
per_part_max, reserves }``); ``AssemblyPolicy`` carries tamma's ``AssemblyConfig`` (format,
``includeScores``, ``deduplicationThreshold`` = 0.85) plus ploke's ordering and kind filter.
An impossible value raises :class:`ragloom.errors.ConfigError` when the object is built.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, get_args

from ragloom.errors import ConfigError

__all__ = [
    "DEDUP_THRESHOLD_DEFAULT",
    "FILL_GAP_LINES_DEFAULT",
    "FORMATS",
    "MAX_TOTAL_DEFAULT",
    "ORDERINGS",
    "PER_FILE_FRACTION",
    "PER_PART_FLOOR",
    "PER_PART_FRACTION",
    "AssemblyPolicy",
    "Format",
    "Ordering",
    "TokenBudget",
]

MAX_TOTAL_DEFAULT = 4000
"""tamma "Default Configuration": ``assembly.max_tokens: 4000``."""

PER_PART_FRACTION = 4
"""ragloom's choice: one part may take at most 1/4 of the budget, so >= 4 parts always fit."""

PER_FILE_FRACTION = 2
"""ragloom's choice: one file may take at most 1/2 of the budget, so >= 2 files are shown."""

PER_PART_FLOOR = 64
"""ragloom's choice: a part cap below 64 tokens leaves room for a header and a signature only,
so for small budgets the per-part (and per-file) cap is raised to min(64, available)."""

DEDUP_THRESHOLD_DEFAULT = 0.85
"""tamma "Default Configuration": ``assembly.deduplication_threshold: 0.85`` (cosine)."""

FILL_GAP_LINES_DEFAULT = 1
"""ragloom's choice: a gap of <= 1 line between two ranges is shown rather than elided, since
the elision marker costs as many tokens as a short line."""

Format = Literal["xml", "markdown", "plain", "json"]
FORMATS: tuple[str, ...] = get_args(Format)
"""Output formats (tamma ``ContextFormat``); xml is the default (tamma: "recommended for Claude")."""

Ordering = Literal["definitions_first", "score", "source"]
ORDERINGS: tuple[str, ...] = get_args(Ordering)
"""``definitions_first``: by fused score, then a definition before the code that references it
(ploke section 2); ``score``: by fused score only; ``source``: by path then line."""


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class TokenBudget:
    """Token limits for one assembled context.

    ``max_total`` is the whole window given to context; ``reserves`` are named amounts
    (system prompt, answer, ...) subtracted up front, leaving :attr:`available` for the
    rendered context. ``per_part_max`` caps each part, ``per_file_max`` the parts of one file.
    ``caps_flexible``: when no part fits those caps, the parts may take the whole of
    :attr:`available` rather than give an empty context (:meth:`for_total`'s derived caps; caps
    set by hand hold).
    """

    max_total: int
    per_file_max: int
    per_part_max: int
    reserves: Mapping[str, int] = field(default_factory=dict)
    caps_flexible: bool = False

    def __post_init__(self) -> None:
        _positive_int("max_total", self.max_total)
        _positive_int("per_file_max", self.per_file_max)
        _positive_int("per_part_max", self.per_part_max)
        if not isinstance(self.reserves, Mapping):
            raise ConfigError(f"reserves must be a mapping, got {type(self.reserves).__name__}")
        for key, amount in self.reserves.items():
            if not isinstance(key, str) or not key:
                raise ConfigError(f"reserve names must be non-empty strings, got {key!r}")
            if isinstance(amount, bool) or not isinstance(amount, int) or amount < 0:
                raise ConfigError(f"reserve {key!r} must be a non-negative integer, got {amount!r}")
        object.__setattr__(self, "reserves", MappingProxyType(dict(sorted(self.reserves.items()))))
        if self.available <= 0:
            raise ConfigError(
                f"impossible budget: reserves ({sum(self.reserves.values())}) leave nothing of "
                f"max_total={self.max_total}"
            )

    @property
    def available(self) -> int:
        """Tokens left for the rendered context: ``max_total - sum(reserves)``."""
        return self.max_total - sum(self.reserves.values())

    @property
    def part_cap(self) -> int:
        """Effective cap of one part: ``min(per_part_max, per_file_max, available)``."""
        return min(self.per_part_max, self.per_file_max, self.available)

    @property
    def file_cap(self) -> int:
        """Effective cap of one file: ``min(per_file_max, available)``."""
        return min(self.per_file_max, self.available)

    @classmethod
    def for_total(cls, total: int, reserves: Mapping[str, int] | None = None) -> TokenBudget:
        """Budget of ``total`` tokens with ragloom's default caps.

        Per part: ``available // 4``; per file: ``available // 2``; both at least
        ``min(64, available)`` (see the constants' comments); flexible (``caps_flexible``): a
        context of one part larger than them comes back rather than none.
        """
        _positive_int("total", total)
        res = dict(reserves or {})
        available = total - sum(v for v in res.values() if isinstance(v, int))
        if available <= 0:
            raise ConfigError(f"impossible budget: reserves leave nothing of total={total}")
        floor = min(PER_PART_FLOOR, available)
        per_part = max(floor, available // PER_PART_FRACTION)
        per_file = max(per_part, available // PER_FILE_FRACTION)
        return cls(
            max_total=total,
            per_file_max=per_file,
            per_part_max=per_part,
            reserves=res,
            caps_flexible=True,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "max_total": self.max_total,
            "per_file_max": self.per_file_max,
            "per_part_max": self.per_part_max,
            "reserves": dict(self.reserves),
            "available": self.available,
            "caps_flexible": self.caps_flexible,
        }


@dataclass(frozen=True, slots=True)
class AssemblyPolicy:
    """How to assemble: output format, scores, dedup threshold, kinds, ordering, gap filling."""

    format: Format = "xml"
    include_scores: bool = False
    dedup_threshold: float = DEDUP_THRESHOLD_DEFAULT
    kinds: frozenset[str] | None = None
    ordering: Ordering = "definitions_first"
    fill_gap_lines: int = FILL_GAP_LINES_DEFAULT

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ConfigError(f"unknown format {self.format!r}; expected one of {FORMATS}")
        if self.ordering not in ORDERINGS:
            raise ConfigError(f"unknown ordering {self.ordering!r}; expected one of {ORDERINGS}")
        if not isinstance(self.include_scores, bool):
            raise ConfigError("include_scores must be a bool")
        thr = self.dedup_threshold
        if isinstance(thr, bool) or not isinstance(thr, int | float) or not math.isfinite(thr):
            raise ConfigError(f"dedup_threshold must be a number, got {thr!r}")
        if not -1.0 <= float(thr) <= 1.0:
            raise ConfigError(f"dedup_threshold must be a cosine in [-1, 1], got {thr!r}")
        if self.kinds is not None:
            kinds = frozenset(self.kinds)
            if not kinds or not all(isinstance(k, str) and k for k in kinds):
                raise ConfigError("kinds must be a non-empty set of kind names, or None for all")
            object.__setattr__(self, "kinds", kinds)
        fill = self.fill_gap_lines
        if isinstance(fill, bool) or not isinstance(fill, int) or fill < 0:
            raise ConfigError(f"fill_gap_lines must be a non-negative integer, got {fill!r}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "format": self.format,
            "include_scores": self.include_scores,
            "dedup_threshold": self.dedup_threshold,
            "kinds": sorted(self.kinds) if self.kinds is not None else None,
            "ordering": self.ordering,
            "fill_gap_lines": self.fill_gap_lines,
        }
