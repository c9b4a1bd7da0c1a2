"""Which query-processing steps run (:class:`QueryConfig`), and the confidence an entity needs
before it moves hits.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragloom.errors import ConfigError

__all__ = ["EXACT_MATCH_MIN_CONFIDENCE", "MAX_PROCESSED_CHARS", "QueryConfig"]

EXACT_MATCH_MIN_CONFIDENCE = 0.75
"""Entities below this confidence do not move hits (ragloom's choice, see ENTITY_CONFIDENCE):
names typed as code and known paths (1.0) do; words joined into an identifier (0.7) only
expand the BM25 query. Tuned on the evaluation datasets (docs/ranking.md, Tuning): at 0.5 the
joined names of identifier-style queries ("create future base event loop" -> BaseEventLoop,
create_future) pushed the wrong definitions first, symbol MRR@10 0.656 vs 0.723 at 0.75."""

MAX_PROCESSED_CHARS = 2000
"""Query processing (lexing, expansion, entities, decomposition) reads at most this many
characters of the whitespace-cleaned question, cut at a space; ``dense_text`` keeps the whole
question (the embedding model truncates it itself). Since issue 21 the servers take whole issues
(up to 65,536 characters); processing them whole cost 39 ms for a 25,000-character issue on the
development machine and gave hundreds of BM25 terms of which the engine keeps the first 64 tokens
(``ragloom.index.bm25``). 2,000 characters take about 4 ms there and hold far more than 64
tokens, so BM25 sees the same terms for nearly every question; every question shorter than this
is processed exactly as before. ``None`` reads everything. Issue texts have their own, bounded
reading: :mod:`ragloom.retrieve.query.issue`."""


@dataclass(frozen=True, slots=True)
class QueryConfig:
    """Which query-processing steps run (tamma phase 2), each on by default."""

    expand_identifiers: bool = True
    synonyms: bool = True
    extract_entities: bool = True
    exact_boost: bool = True
    decompose: bool = True
    detect_language: bool = True
    exact_min_confidence: float = EXACT_MATCH_MIN_CONFIDENCE
    max_processed_chars: int | None = MAX_PROCESSED_CHARS
    issue_text: bool = True
    """A question that reads as an issue (``looks_like_issue``) is read by its parts: weighted
    BM25 terms and a chosen embedding text (``ragloom.retrieve.query.issue``), no decomposition."""

    def __post_init__(self) -> None:
        for name in (
            "expand_identifiers",
            "synonyms",
            "extract_entities",
            "exact_boost",
            "decompose",
            "detect_language",
            "issue_text",
        ):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"QueryConfig.{name} must be a bool, got {getattr(self, name)!r}")
        conf = self.exact_min_confidence
        if isinstance(conf, bool) or not isinstance(conf, int | float) or not 0.0 <= conf <= 1.0:
            raise ConfigError(f"QueryConfig.exact_min_confidence must be in [0, 1], got {conf!r}")
        cap = self.max_processed_chars
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise ConfigError(f"QueryConfig.max_processed_chars must be >= 1 or None, got {cap!r}")
