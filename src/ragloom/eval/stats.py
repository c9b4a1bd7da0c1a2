"""How sure a difference between two rankings is: a paired bootstrap over questions.

The evaluations compare two strategies on the same questions (the default against the hand-set
order, most often). The mean difference of a per-question metric says how far apart they are;
how much it would move with another draw of questions of the same kind is what a threshold such
as issue 22's "+0.03 MRR@10" needs beside it. :func:`paired_bootstrap` resamples the questions
with replacement (the pairs stay together) and reports the percentile interval of the mean
difference. Pure and seeded: the same inputs give the same interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

__all__ = [
    "BOOTSTRAP_ROUNDS",
    "BOOTSTRAP_SEED",
    "PairedDifference",
    "format_difference",
    "paired_bootstrap",
    "paired_by_id",
]

BOOTSTRAP_ROUNDS = 10_000
"""Resamples of the questions; the interval's ends move by about 0.001 between seeds at 700
questions."""
BOOTSTRAP_SEED = 20261127
_MAX_CELLS = 4_000_000
"""Question draws made at once (resamples x questions): bounds the index matrix at about 32 MB
whatever the number of questions."""


@dataclass(frozen=True, slots=True)
class PairedDifference:
    """The mean of ``a - b`` over the questions, its percentile bootstrap interval, and how
    many questions ``a`` scores above and below ``b``."""

    n: int
    mean: float
    low: float
    high: float
    level: float
    better: int
    worse: int

    def as_dict(self) -> dict[str, float | int]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    *,
    rounds: int = BOOTSTRAP_ROUNDS,
    level: float = 0.95,
    seed: int = BOOTSTRAP_SEED,
) -> PairedDifference:
    """The difference ``a - b`` of two per-question scores of the same questions (same order),
    with its ``level`` percentile interval from ``rounds`` resamples of the questions. The
    interval always holds the mean (with very few questions a skewed resample distribution
    could leave it just outside)."""
    if len(a) != len(b):
        raise ValueError(f"paired scores need the same questions: {len(a)} against {len(b)}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie between 0 and 1, got {level}")
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    n = len(d)
    if n == 0:
        return PairedDifference(0, 0.0, 0.0, 0.0, level, 0, 0)
    rng = np.random.default_rng(seed)
    means = np.empty(rounds, dtype=np.float64)
    step = max(1, _MAX_CELLS // n)
    for start in range(0, rounds, step):
        k = min(step, rounds - start)
        means[start : start + k] = d[rng.integers(0, n, size=(k, n))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    mean = float(d.mean())
    return PairedDifference(
        n=n,
        mean=mean,
        low=min(float(low), mean),
        high=max(float(high), mean),
        level=level,
        better=int((d > 0).sum()),
        worse=int((d < 0).sum()),
    )


def paired_by_id(
    a: Mapping[str, float | None], b: Mapping[str, float | None]
) -> PairedDifference | None:
    """:func:`paired_bootstrap` of two methods' scores by question id, over the questions both
    have a value for (a ``None`` is left out, as the means leave it); None when there is none."""
    pairs = sorted((i, x, y) for i, x in a.items() if x is not None and (y := b.get(i)) is not None)
    if not pairs:
        return None
    return paired_bootstrap([x for _, x, _ in pairs], [y for _, _, y in pairs])


def format_difference(
    d: Mapping[str, float | int], *, scale: float = 1.0, digits: int = 4, sep: str = " "
) -> str:
    """``+0.0242 [+0.0136, +0.0353]``: a difference (:meth:`PairedDifference.as_dict`) and its
    interval, times ``scale`` (100 for points), the interval after ``sep``."""
    f = f"{{:+.{digits}f}}"
    mean, low, high = (f.format(scale * float(d[k])) for k in ("mean", "low", "high"))
    return f"{mean}{sep}[{low}, {high}]"
