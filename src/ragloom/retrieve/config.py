"""Ranking configuration: frozen, validated-on-construction value objects.

Every default below is copied from a seed design and says which one:

* ``ploke`` = ``shared/seeds/ploke-rag-plan.md``, section 1 "Fusion and score handling" and
  section 4 "Public APIs and configurable strategies";
* ``tamma`` = ``shared/seeds/tamma-rag-pipeline-plan.md``, phase 5 "Result Ranking" and its
  "Default Configuration" (``rag.ranking``).

Values the seeds leave open (the normalisation epsilon, the logistic centre and scale) are
ragloom's choices and are marked so. An invalid value raises :class:`ragloom.errors.ConfigError`
when the object is built, so a config object that exists is always usable.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, get_args

from ragloom.errors import ConfigError

__all__ = [
    "LOGISTIC_CENTER_DEFAULT",
    "LOGISTIC_SCALE_DEFAULT",
    "MMR_CANDIDATE_POOL_DEFAULT",
    "MMR_LAMBDA_DEFAULT",
    "MMR_SIM_METRIC_DEFAULT",
    "NORM_DEGENERATE_DEFAULT",
    "NORM_EPSILON_DEFAULT",
    "NORM_METHOD_DEFAULT",
    "RECENCY_BOOST_DEFAULT",
    "RECENCY_DECAY_DAYS_DEFAULT",
    "RRF_K_DEFAULT",
    "RRF_WEIGHT_BM25_DEFAULT",
    "RRF_WEIGHT_DENSE_DEFAULT",
    "SCORE_NORM_METHODS",
    "SIM_METRICS",
    "STRATEGY_NAMES",
    "STRATEGY_REGISTRY",
    "Dense",
    "Hybrid",
    "MmrConfig",
    "RecencyConfig",
    "RetrievalStrategy",
    "RrfConfig",
    "ScoreNorm",
    "ScoreNormMethod",
    "SimMetric",
    "Sparse",
    "parse_strategy",
    "strategy_name",
]

# --- RRF (ploke section 1: "RrfConfig { k, weight_bm25, weight_dense } with defaults k=60.0,
# weight_bm25=1.0, weight_dense=1.0"; tamma phase 5 also uses k = 60) ---------------------------
RRF_K_DEFAULT = 60.0
"""RRF constant k (ploke section 1 RrfConfig default; tamma phase 5 ``rrfK`` default 60)."""
RRF_WEIGHT_BM25_DEFAULT = 1.0
"""Weight of the BM25 list in weighted RRF (ploke section 1 RrfConfig default)."""
RRF_WEIGHT_DENSE_DEFAULT = 1.0
"""Weight of the dense list in weighted RRF (ploke section 1 RrfConfig default)."""
BM25_SOURCE = "bm25"
"""Name of the sparse list in named fusion (ragloom's ``Modality`` literal, ``ragloom.types``)."""
DENSE_SOURCE = "dense"
"""Name of the dense list in named fusion (ragloom's ``Modality`` literal, ``ragloom.types``)."""

# --- MMR (ploke section 1: "MmrConfig { lambda, sim_metric, candidate_pool } with defaults
# lambda=0.7, sim_metric=Cosine, candidate_pool=50"; tamma phase 5 ``mmrLambda`` default 0.7) --
MMR_LAMBDA_DEFAULT = 0.7
"""MMR relevance/diversity trade-off (ploke section 1 MmrConfig default; tamma ``mmr_lambda``)."""
SimMetric = Literal["cosine", "dot"]
"""Similarity used by MMR: cosine on L2-normalised vectors (ploke section 1), or the raw dot
product for callers whose vectors are already normalised (ragloom addition)."""
SIM_METRICS: tuple[str, ...] = get_args(SimMetric)
"""Accepted ``MmrConfig.sim_metric`` values, derived from :data:`SimMetric`."""
MMR_SIM_METRIC_DEFAULT: SimMetric = "cosine"
"""MMR similarity default (ploke section 1 MmrConfig default ``Cosine``)."""
MMR_CANDIDATE_POOL_DEFAULT = 50
"""How many top-relevance candidates MMR considers (ploke section 1 MmrConfig default)."""

# --- Score normalisation (ploke section 1: "min-max per modality, z-score, or calibrated
# logistic transform. Start with min-max with clamping and configurable epsilon") ------------
ScoreNormMethod = Literal["minmax", "zscore", "logistic"]
"""The three normalisations named by ploke section 1."""
SCORE_NORM_METHODS: tuple[str, ...] = get_args(ScoreNormMethod)
"""Accepted ``ScoreNorm.method`` values, derived from :data:`ScoreNormMethod`."""
NORM_METHOD_DEFAULT: ScoreNormMethod = "minmax"
"""Default normalisation (ploke section 1: "Start with min-max with clamping")."""
NORM_EPSILON_DEFAULT = 1e-9
"""Spread (max - min, or standard deviation) at or below which a score list is treated as
constant. ploke section 1 asks for a configurable epsilon without a value; 1e-9 is ragloom's
choice (well below any meaningful BM25 or cosine difference, well above float64 rounding)."""
NORM_DEGENERATE_DEFAULT = 1.0
"""Min-max value given to every score of a constant (or single-element) list: each is as good
as the best. ragloom's choice; the seeds only require a defined value."""
LOGISTIC_CENTER_DEFAULT = 0.0
"""Logistic centre c in sigmoid((x - c) / s). ploke section 1 names a "calibrated logistic
transform" without parameters; c = 0, s = 1 is the plain sigmoid (ragloom's choice). Calibrate
per modality, e.g. c = median BM25 score, s = its inter-quartile range / 4."""
LOGISTIC_SCALE_DEFAULT = 1.0
"""Logistic scale s in sigmoid((x - c) / s); see :data:`LOGISTIC_CENTER_DEFAULT`."""

# --- Recency (tamma phase 5 RankingConfig and Default Configuration: recency_boost: 0.1,
# recency_decay_days: 30) ---------------------------------------------------------------------
RECENCY_BOOST_DEFAULT = 0.1
"""Maximum additive recency boost (tamma phase 5 ``recencyBoost`` default 0.1)."""
RECENCY_DECAY_DAYS_DEFAULT = 30.0
"""e-folding time of the recency boost in days (tamma phase 5 ``recencyDecayDays`` default 30)."""


def _finite(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ConfigError(f"{name} must be finite, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class RrfConfig:
    """Weighted reciprocal rank fusion (ploke section 1).

    ``fused(u) = sum_m w_m / (k + rank_m(u))`` with 1-based ranks; a list that does not
    contain ``u`` contributes 0. ``extra_weights`` names further sources (tamma phase 5 fuses
    any number of sources, each with its own weight), for example ``{"docs": 0.3}``.
    """

    k: float = RRF_K_DEFAULT
    weight_bm25: float = RRF_WEIGHT_BM25_DEFAULT
    weight_dense: float = RRF_WEIGHT_DENSE_DEFAULT
    extra_weights: Mapping[str, float] = field(
        default_factory=lambda: MappingProxyType({}), hash=False
    )

    def __post_init__(self) -> None:
        k = _finite("RrfConfig.k", self.k)
        if k <= 0:
            raise ConfigError(f"RrfConfig.k must be > 0, got {self.k!r}")
        object.__setattr__(self, "k", k)
        for attr in ("weight_bm25", "weight_dense"):
            w = _finite(f"RrfConfig.{attr}", getattr(self, attr))
            if w < 0:
                raise ConfigError(f"RrfConfig.{attr} must be >= 0, got {w!r}")
            object.__setattr__(self, attr, w)
        extras: dict[str, float] = {}
        for name, weight in dict(self.extra_weights).items():
            if not isinstance(name, str) or not name:
                raise ConfigError(
                    f"RrfConfig.extra_weights keys must be non-empty strings: {name!r}"
                )
            if name in (BM25_SOURCE, DENSE_SOURCE):
                raise ConfigError(
                    f"RrfConfig.extra_weights cannot name {name!r}; use weight_{name} instead"
                )
            w = _finite(f"RrfConfig.extra_weights[{name!r}]", weight)
            if w < 0:
                raise ConfigError(f"RrfConfig.extra_weights[{name!r}] must be >= 0, got {w!r}")
            extras[name] = w
        object.__setattr__(self, "extra_weights", MappingProxyType(extras))

    @property
    def weights(self) -> dict[str, float]:
        """All source weights by name: ``bm25``, ``dense`` and every extra source."""
        return {
            BM25_SOURCE: self.weight_bm25,
            DENSE_SOURCE: self.weight_dense,
            **self.extra_weights,
        }

    def weights_for(self, names: Iterable[str]) -> dict[str, float]:
        """The weight of each named list; a name with no configured weight is a ConfigError."""
        known = self.weights
        out: dict[str, float] = {}
        for name in names:
            if name not in known:
                raise ConfigError(
                    f"no RRF weight for source {name!r}; configured: {', '.join(sorted(known))}"
                )
            out[name] = known[name]
        return out


@dataclass(frozen=True, slots=True)
class MmrConfig:
    """Maximal marginal relevance (ploke section 1).

    ``score(x) = lambda * rel(x) - (1 - lambda) * max_{y in S} sim(x, y)``, greedy over the
    top ``candidate_pool`` candidates by relevance. ``lambda_`` has a trailing underscore
    because ``lambda`` is a Python keyword.
    """

    lambda_: float = MMR_LAMBDA_DEFAULT
    sim_metric: SimMetric = MMR_SIM_METRIC_DEFAULT
    candidate_pool: int = MMR_CANDIDATE_POOL_DEFAULT

    def __post_init__(self) -> None:
        lam = _finite("MmrConfig.lambda_", self.lambda_)
        if not 0.0 <= lam <= 1.0:
            raise ConfigError(f"MmrConfig.lambda_ must be in [0, 1], got {self.lambda_!r}")
        object.__setattr__(self, "lambda_", lam)
        if self.sim_metric not in SIM_METRICS:
            raise ConfigError(
                f"MmrConfig.sim_metric must be one of {', '.join(SIM_METRICS)}, "
                f"got {self.sim_metric!r}"
            )
        pool = self.candidate_pool
        if isinstance(pool, bool) or not isinstance(pool, int):
            raise ConfigError(f"MmrConfig.candidate_pool must be an int, got {pool!r}")
        if pool < 1:
            raise ConfigError(f"MmrConfig.candidate_pool must be >= 1, got {pool!r}")


@dataclass(frozen=True, slots=True)
class ScoreNorm:
    """How :func:`ragloom.retrieve.fusion.normalize_scores` maps raw scores (ploke section 1).

    * ``minmax``: ``(x - lo) / (hi - lo)`` with ``lo, hi`` the list's min and max, or the fixed
      ``bounds`` when given (e.g. ``(-1.0, 1.0)`` for cosine similarity); clamped to [0, 1] when
      ``clamp``. A spread ``hi - lo <= epsilon`` (one score, or all equal) maps every score to
      ``degenerate``.
    * ``zscore``: ``(x - mean) / std`` (population std); a std ``<= epsilon`` maps every score
      to 0.0. Unbounded: ``clamp`` does not apply.
    * ``logistic``: ``1 / (1 + exp(-(x - logistic_center) / logistic_scale))``, in (0, 1).
    """

    method: ScoreNormMethod = NORM_METHOD_DEFAULT
    epsilon: float = NORM_EPSILON_DEFAULT
    clamp: bool = True
    degenerate: float = NORM_DEGENERATE_DEFAULT
    bounds: tuple[float, float] | None = None
    logistic_center: float = LOGISTIC_CENTER_DEFAULT
    logistic_scale: float = LOGISTIC_SCALE_DEFAULT

    def __post_init__(self) -> None:
        if self.method not in SCORE_NORM_METHODS:
            raise ConfigError(
                f"ScoreNorm.method must be one of {', '.join(SCORE_NORM_METHODS)}, "
                f"got {self.method!r}"
            )
        eps = _finite("ScoreNorm.epsilon", self.epsilon)
        if eps < 0:
            raise ConfigError(f"ScoreNorm.epsilon must be >= 0, got {self.epsilon!r}")
        object.__setattr__(self, "epsilon", eps)
        deg = _finite("ScoreNorm.degenerate", self.degenerate)
        if not 0.0 <= deg <= 1.0:
            raise ConfigError(f"ScoreNorm.degenerate must be in [0, 1], got {self.degenerate!r}")
        object.__setattr__(self, "degenerate", deg)
        if self.bounds is not None:
            if len(self.bounds) != 2:
                raise ConfigError(f"ScoreNorm.bounds must be (lo, hi), got {self.bounds!r}")
            lo = _finite("ScoreNorm.bounds[0]", self.bounds[0])
            hi = _finite("ScoreNorm.bounds[1]", self.bounds[1])
            if not hi > lo:
                raise ConfigError(f"ScoreNorm.bounds must have hi > lo, got {self.bounds!r}")
            object.__setattr__(self, "bounds", (lo, hi))
        object.__setattr__(
            self, "logistic_center", _finite("ScoreNorm.logistic_center", self.logistic_center)
        )
        scale = _finite("ScoreNorm.logistic_scale", self.logistic_scale)
        if scale <= 0:
            raise ConfigError(f"ScoreNorm.logistic_scale must be > 0, got {self.logistic_scale!r}")
        object.__setattr__(self, "logistic_scale", scale)


@dataclass(frozen=True, slots=True)
class RecencyConfig:
    """Additive recency boost ``boost * exp(-age / decay)`` (tamma phase 5 defaults)."""

    boost: float = RECENCY_BOOST_DEFAULT
    decay_days: float = RECENCY_DECAY_DAYS_DEFAULT

    def __post_init__(self) -> None:
        boost = _finite("RecencyConfig.boost", self.boost)
        if boost < 0:
            raise ConfigError(f"RecencyConfig.boost must be >= 0, got {self.boost!r}")
        decay = _finite("RecencyConfig.decay_days", self.decay_days)
        if decay <= 0:
            raise ConfigError(f"RecencyConfig.decay_days must be > 0, got {self.decay_days!r}")
        object.__setattr__(self, "boost", boost)
        object.__setattr__(self, "decay_days", decay)


# --- Retrieval strategies (ploke section 4: "RetrievalStrategy: Dense, Sparse,
# Hybrid { rrf: RrfConfig, mmr: Option<MmrConfig> }") ------------------------------------------


@dataclass(frozen=True, slots=True)
class Dense:
    """Dense (embedding) retrieval only."""


@dataclass(frozen=True, slots=True)
class Sparse:
    """Sparse (BM25) retrieval only."""


@dataclass(frozen=True, slots=True)
class Hybrid:
    """BM25 + dense fused with weighted RRF, optionally diversified with MMR."""

    rrf: RrfConfig = field(default_factory=RrfConfig)
    mmr: MmrConfig | None = None


RetrievalStrategy = Dense | Sparse | Hybrid
"""The strategy sum type of ploke section 4."""


def _hybrid(rrf: RrfConfig | None, mmr: MmrConfig | None) -> Hybrid:
    return Hybrid(rrf=rrf if rrf is not None else RrfConfig(), mmr=None)


def _hybrid_mmr(rrf: RrfConfig | None, mmr: MmrConfig | None) -> Hybrid:
    return Hybrid(
        rrf=rrf if rrf is not None else RrfConfig(),
        mmr=mmr if mmr is not None else MmrConfig(),
    )


STRATEGY_REGISTRY: Mapping[
    str, Callable[[RrfConfig | None, MmrConfig | None], RetrievalStrategy]
] = MappingProxyType(
    {
        "dense": lambda rrf, mmr: Dense(),
        "sparse": lambda rrf, mmr: Sparse(),
        "hybrid": _hybrid,
        "hybrid-mmr": _hybrid_mmr,
    }
)
"""CLI strategy name -> factory taking optional RRF / MMR overrides. The single source of the
accepted names: error messages and ``--help`` choices are built from it."""
STRATEGY_NAMES: tuple[str, ...] = tuple(STRATEGY_REGISTRY)
"""Accepted strategy names, in registry order."""


def parse_strategy(
    name: str, *, rrf: RrfConfig | None = None, mmr: MmrConfig | None = None
) -> RetrievalStrategy:
    """Build the strategy a CLI name stands for (case and surrounding space ignored).

    ``rrf`` / ``mmr`` override the defaults for the hybrid strategies (``mmr`` is only used by
    ``hybrid-mmr``). An unknown name raises ConfigError listing the registry's names.
    """
    key = name.strip().lower() if isinstance(name, str) else ""
    factory = STRATEGY_REGISTRY.get(key)
    if factory is None:
        raise ConfigError(f"unknown strategy {name!r}; choose from: {', '.join(STRATEGY_NAMES)}")
    return factory(rrf, mmr)


def strategy_name(strategy: RetrievalStrategy) -> str:
    """The CLI name of a strategy object (inverse of :func:`parse_strategy`)."""
    if isinstance(strategy, Dense):
        return "dense"
    if isinstance(strategy, Sparse):
        return "sparse"
    return "hybrid" if strategy.mmr is None else "hybrid-mmr"
