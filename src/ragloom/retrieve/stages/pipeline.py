"""Strategy names and the stage list each one runs (issue 21).

A strategy name is a base (``hybrid``, ``hybrid-mmr``, ``dense``, ``sparse``) and modifiers:
``+raw`` (every query step off), ``+seed`` (the seed's RRF and none of the tuned ranking steps),
``+changes`` / ``+lookup`` (history weights), ``+learned`` / ``+handset`` (the learned
ranking stage on or off, issue 22), ``+graph`` / ``+no-graph`` (graph evidence on or off,
issue 24), ``+agree`` / ``+agree=C`` (the chunk both modalities rank first stays first), and
``+no-NAME`` for one query step
(:data:`QUERY_STEP_FLAGS`), one tuned ranking step (:data:`RANKING_STEPS`) or one other stage
(:data:`STAGE_STEPS`). :func:`build_stages` turns the parsed name into the stage list, in this
order:

==========  ==========================================  =====================================
stage       runs for                                    droppable by
==========  ==========================================  =====================================
fusion      every strategy                              (never: it makes the candidate list)
priors      hybrid, tuned                               ``+no-priors`` (parts: roles, decl)
issue       hybrid, tuned, a question read as an issue  ``+no-issue`` (the query step)
history     hybrid, tuned                               ``+no-history``
filerank    hybrid, tuned                               ``+no-filerank``
graph       hybrid, with ``+graph`` (GRAPH_DEFAULT)      ``+no-graph``
language    hybrid, when the question names a language  ``+no-language`` (the query step)
exact       every strategy, when an entity is sure      ``+no-exact`` (the query step)
learned     hybrid, every question (LEARNED_DEFAULT)    ``+handset``
agree       hybrid, with ``+agree`` (AGREE_DEFAULT)     ``+no-agree``
name        after learned, a question that is one name  ``+no-name``
recency     a retriever given a RecencyConfig           ``+no-recency``
rerank      a retriever given a Reranker                ``+no-rerank``
heads       every strategy, when a split symbol shows   ``+no-heads``
mmr         hybrid-mmr                                  ``+no-mmr``
==========  ==========================================  =====================================

A new stage: a class with ``name``, ``reads`` and ``apply(state)`` (see
:class:`~ragloom.retrieve.stages.base.StageBase`), a line in :data:`STAGE_STEPS` (its
``+no-NAME`` switch), and its place in :func:`build_stages`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ragloom.errors import ConfigError
from ragloom.retrieve.config import (
    Hybrid,
    RecencyConfig,
    RetrievalStrategy,
    parse_strategy,
    strategy_name,
)
from ragloom.retrieve.history import HISTORY_PROFILES, HistoryWeights
from ragloom.retrieve.query import QueryConfig
from ragloom.retrieve.ranker import Scorer
from ragloom.retrieve.stages.agree import AgreeStage
from ragloom.retrieve.stages.base import ISSUE_WEIGHTS, IssueWeights, Stage
from ragloom.retrieve.stages.exact import ExactStage
from ragloom.retrieve.stages.features import TapStage, tap_features
from ragloom.retrieve.stages.filerank import FileRankStage
from ragloom.retrieve.stages.fusion import FusionStage
from ragloom.retrieve.stages.graph import GRAPH_DEFAULT, GraphStage
from ragloom.retrieve.stages.heads import HeadsStage
from ragloom.retrieve.stages.history import HistoryStage
from ragloom.retrieve.stages.issue import IssueStage
from ragloom.retrieve.stages.language import LanguageStage
from ragloom.retrieve.stages.learned import LEARNED_DEFAULT, LEARNED_QUESTIONS, LearnedStage
from ragloom.retrieve.stages.mmr import MmrStage
from ragloom.retrieve.stages.name import NameStage
from ragloom.retrieve.stages.priors import PriorsStage
from ragloom.retrieve.stages.recency import RecencyStage
from ragloom.retrieve.stages.rerank import RerankStage

if TYPE_CHECKING:
    from ragloom.retrieve.rerank import Reranker

__all__ = [
    "DEFAULT_STRATEGY",
    "QUERY_STEP_FLAGS",
    "RANKING_STEPS",
    "STAGE_STEPS",
    "STRATEGIES",
    "SearchSpec",
    "build_stages",
    "parse_search_spec",
    "tuned_steps",
]

STRATEGIES = ("hybrid", "hybrid-mmr", "dense", "sparse")
"""Base strategy names accepted by :meth:`Retriever.search` (see the module docstring)."""
AGREE_DEFAULT = False
"""Whether hybrid strategies run the agreement stage without ``+agree`` (docs/ranking.md,
"Documentation questions")."""
DEFAULT_STRATEGY = "hybrid"
"""What ``ragloom search`` uses when the user says nothing (docs/ranking.md: evaluation)."""

QUERY_STEP_FLAGS: dict[str, str] = {
    "expand": "expand_identifiers",
    "synonyms": "synonyms",
    "entities": "extract_entities",
    "exact": "exact_boost",
    "decompose": "decompose",
    "language": "detect_language",
    "issue": "issue_text",
}
"""``+no-NAME`` suffix -> the :class:`QueryConfig` switch it turns off."""
RANKING_STEPS: dict[str, str] = {
    "roles": "demote tests, docs, examples, build and generated files (ROLE_PRIOR)",
    "decl": "demote declarations without a body (DECLARATION_PRIOR)",
    "filerank": "file evidence: chunks of files with several strong hits rise (FILE_EVIDENCE)",
    "history": "files that similar past commits changed, and files that change often, rise "
    "(ragloom.retrieve.history; needs the commits source)",
}
"""``+no-NAME`` suffix -> the ranking step of the tuned default it turns off (``+seed`` turns
all of them off, with the seed's RRF)."""
STAGE_STEPS: dict[str, str] = {
    "priors": "the role and declaration priors together (roles and decl)",
    "heads": "a named split symbol's first part takes its parts' best place",
    "name": "a question that is one symbol name puts its definitions (at most 3) first after "
    "the learned stage",
    "rerank": "the retriever's reranker, if it has one",
    "recency": "the retriever's recency boost, if it has one",
    "mmr": "MMR diversity (hybrid-mmr)",
}
"""``+no-NAME`` suffix -> the other stage it drops (not turned off by ``+seed``). ``language``
and ``exact`` are dropped by their query steps of the same name, ``fusion`` never."""
REQUIRED_STAGES = ("fusion",)


@dataclass(frozen=True, slots=True)
class SearchSpec:
    """What a strategy name asks for: the strategy, the query steps, and whether ragloom's tuned
    fusion defaults apply (``+seed`` uses the seed's RrfConfig defaults for every query)."""

    strategy: RetrievalStrategy
    query_config: QueryConfig
    name: str
    tuned: bool = True
    ranking_off: frozenset[str] = frozenset()
    """Ranking steps (:data:`RANKING_STEPS`) and stages (:data:`STAGE_STEPS`) turned off by
    ``+no-NAME``."""
    history: HistoryWeights | None = None
    """Weights of the history step: None picks them per question (``CHANGE_WEIGHTS`` for a
    change request, ``DEFAULT_WEIGHTS`` otherwise); ``+changes`` and ``+lookup`` force one."""
    learned: bool | None = None
    """``+learned`` (True) or ``+handset`` (False); None: :data:`LEARNED_DEFAULT`."""
    graph: bool | None = None
    """``+graph`` (True) or ``+no-graph`` (False); None: :data:`GRAPH_DEFAULT`."""
    graph_weight: float | None = None
    """``+graph=W``: the stage's weight (None: :data:`ragloom.retrieve.stages.graph.GRAPH_WEIGHT`)."""
    agree: bool | None = None
    """``+agree`` (True) or ``+no-agree`` (False); None: :data:`AGREE_DEFAULT`."""
    agree_cosine: float | None = None
    """``+agree=C``: the least dense score of the agreed chunk (None:
    :data:`ragloom.retrieve.stages.agree.AGREE_MIN_DENSE`)."""

    def runs_agree(self) -> bool:
        """True when the agreement stage runs (hybrid strategies, tuned)."""
        on = AGREE_DEFAULT if self.agree is None else self.agree
        return on and self.tuned and isinstance(self.strategy, Hybrid)

    def runs_graph(self) -> bool:
        """True when the graph-evidence stage runs (hybrid strategies, tuned)."""
        on = GRAPH_DEFAULT if self.graph is None else self.graph
        return on and self.tuned and isinstance(self.strategy, Hybrid)

    def learned_questions(self) -> str:
        """Which questions the learned stage re-orders (``off``: it does not run)."""
        if self.learned is None:
            return LEARNED_DEFAULT
        return LEARNED_QUESTIONS if self.learned else "off"

    def runs_learned(self) -> bool:
        """True when the learned ranking stage runs (hybrid strategies, tuned)."""
        on = self.learned_questions() != "off"
        return on and self.tuned and isinstance(self.strategy, Hybrid)

    def ranking(self, step: str) -> bool:
        """True when the tuned ranking step ``step`` runs."""
        return self.tuned and step not in self.ranking_off

    def runs(self, stage: str) -> bool:
        """True unless ``+no-STAGE`` dropped the stage."""
        return stage not in self.ranking_off


def _steps_hint() -> str:
    return ", ".join([*QUERY_STEP_FLAGS, *RANKING_STEPS, *STAGE_STEPS])


def parse_search_spec(spec: str | RetrievalStrategy) -> SearchSpec:
    """``"hybrid-mmr+no-synonyms"`` -> :class:`SearchSpec`."""
    if not isinstance(spec, str):
        return SearchSpec(spec, QueryConfig(), strategy_name(spec))
    parts = [p.strip() for p in spec.strip().lower().split("+")]
    base = parts[0]
    if base not in STRATEGIES:
        raise ConfigError(
            f"unknown strategy {spec!r}; choose from {', '.join(STRATEGIES)} "
            f"(optionally +raw, +seed, +changes, +lookup, +learned, +handset, +graph, +agree or "
            f"+no-STEP, "
            f"STEP in {_steps_hint()})"
        )
    strategy = parse_strategy(base)
    qc = QueryConfig()
    tuned = True
    off: set[str] = set()
    history: HistoryWeights | None = None
    learned: bool | None = None
    graph: bool | None = None
    graph_weight: float | None = None
    agree: bool | None = None
    agree_cosine: float | None = None
    for mod in parts[1:]:
        if mod in ("agree", "no-agree"):
            agree = mod == "agree"
        elif mod.startswith("agree="):
            agree_cosine = _number(mod, spec, "+agree=C takes a score", -1.0, 1.0)
            agree = True
        elif mod in ("graph", "no-graph"):
            graph = mod == "graph"
        elif mod.startswith("graph="):
            graph_weight = _number(mod, spec, "+graph=W takes a weight", 0.0, 10.0)
            graph = True
        elif mod in HISTORY_PROFILES:
            history = HISTORY_PROFILES[mod]
        elif mod in ("learned", "handset"):
            learned = mod == "learned"
        elif mod == "raw":
            qc = QueryConfig(**{v: False for v in QUERY_STEP_FLAGS.values()})
        elif mod == "seed":
            tuned = False
        elif mod.startswith("no-") and mod[3:] in QUERY_STEP_FLAGS:
            qc = replace(qc, **{QUERY_STEP_FLAGS[mod[3:]]: False})
        elif mod.startswith("no-") and (mod[3:] in RANKING_STEPS or mod[3:] in STAGE_STEPS):
            off.add(mod[3:])
        elif mod.startswith("no-") and mod[3:] in REQUIRED_STAGES:
            raise ConfigError(
                f"the {mod[3:]} stage cannot be turned off ({spec!r}); +no-STEP takes STEP in "
                f"{_steps_hint()}"
            )
        else:
            raise ConfigError(
                f"unknown strategy modifier {mod!r} in {spec!r}; use +raw, +seed, +changes, "
                f"+lookup, +learned, +handset, +graph, +agree or +no-STEP with STEP in "
                f"{_steps_hint()}"
            )
    return SearchSpec(
        strategy,
        qc,
        "+".join(parts),
        tuned,
        frozenset(off),
        history,
        learned,
        graph,
        graph_weight,
        agree,
        agree_cosine,
    )


def _number(mod: str, spec: str, what: str, lo: float, hi: float) -> float:
    """The number of a ``NAME=X`` modifier, within ``[lo, hi]`` (else a ConfigError)."""
    try:
        value = float(mod.partition("=")[2])
    except ValueError:
        value = float("nan")
    if not lo <= value <= hi:
        raise ConfigError(f"{what} from {lo:g} to {hi:g}, got {mod!r} in {spec!r}")
    return value


def tuned_steps(spec: SearchSpec, strategy: RetrievalStrategy) -> frozenset[str]:
    """The tuned ranking steps (:data:`RANKING_STEPS`) on for ``spec``: hybrid strategies
    only, none with ``+seed``."""
    hybrid = isinstance(strategy, Hybrid)
    return frozenset(st for st in RANKING_STEPS if hybrid and spec.ranking(st))


def build_stages(
    spec: SearchSpec,
    strategy: RetrievalStrategy,
    *,
    reranker: Reranker | None = None,
    recency: RecencyConfig | None = None,
    issue: IssueWeights = ISSUE_WEIGHTS,
    ranker: Scorer | None = None,
) -> list[Stage]:
    """The stages ``spec`` runs, in order (the table of the module docstring); ``strategy`` is
    the resolved one (its MMR setting decides the mmr stage); ``ranker`` the learned stage's
    model (None: the shipped global one)."""
    steps = tuned_steps(spec, strategy)
    hybrid = isinstance(strategy, Hybrid)
    stages: list[Stage] = [FusionStage()]
    if ("roles" in steps or "decl" in steps) and spec.runs("priors"):
        stages.append(PriorsStage(roles="roles" in steps, decl="decl" in steps))
    if hybrid and spec.tuned and spec.query_config.issue_text:
        stages.append(IssueStage(issue))
    if "history" in steps:
        stages.append(HistoryStage())
    if "filerank" in steps:
        stages.append(FileRankStage())
    if spec.runs_graph():
        stages.append(GraphStage() if spec.graph_weight is None else GraphStage(spec.graph_weight))
    if hybrid:
        stages.append(LanguageStage())
    stages.append(ExactStage())
    tap = tap_features()
    if tap is not None and hybrid:
        stages.append(TapStage(tap))
    if spec.runs_learned():
        stages.append(LearnedStage(ranker, spec.learned_questions()))
    if spec.runs_agree():
        stages.append(AgreeStage() if spec.agree_cosine is None else AgreeStage(spec.agree_cosine))
    if spec.runs_learned() and spec.runs("name"):
        stages.append(NameStage())
    if recency is not None and spec.runs("recency"):
        stages.append(RecencyStage(recency))
    if reranker is not None and spec.runs("rerank"):
        stages.append(RerankStage(reranker))
    if spec.runs("heads"):
        stages.append(HeadsStage())
    if isinstance(strategy, Hybrid) and strategy.mmr is not None and spec.runs("mmr"):
        stages.append(MmrStage())
    return stages
