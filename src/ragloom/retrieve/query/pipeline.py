"""The whole of query processing (tamma phase 2): :func:`process_query` runs the enabled steps
of :class:`~ragloom.retrieve.query.config.QueryConfig` and returns a :class:`ProcessedQuery`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragloom.retrieve.query.config import QueryConfig
from ragloom.retrieve.query.decomposition import decompose_query
from ragloom.retrieve.query.entities import Entity, SymbolTable, entities_from_words
from ragloom.retrieve.query.expansion import candidates_from_words, expand_words
from ragloom.retrieve.query.issue import (
    IssueSignals,
    IssueText,
    bm25_terms,
    dense_text,
    issue_signals,
    looks_like_issue,
    parse_issue,
)
from ragloom.retrieve.query.language import detect_language, path_language
from ragloom.retrieve.query.lexer import clean_text, lex

__all__ = ["IssueQuery", "ProcessedQuery", "process_query"]


@dataclass(frozen=True, slots=True)
class IssueQuery:
    """How an issue-like question was read: its parts, the names pointing at code, and the
    weighted BM25 terms (strongest first) that replace the plain terms."""

    text: IssueText
    signals: IssueSignals
    terms: tuple[tuple[str, float], ...]


@dataclass(frozen=True, slots=True)
class ProcessedQuery:
    """What :func:`process_query` made of a question."""

    original: str
    dense_text: str
    sparse_text: str
    terms: tuple[str, ...] = ()
    identifier_candidates: tuple[str, ...] = ()
    synonyms_added: tuple[str, ...] = ()
    sub_queries: tuple[ProcessedQuery, ...] = ()
    entities: tuple[Entity, ...] = ()
    language: str | None = None
    steps: tuple[str, ...] = ()
    exact_boost: bool = True
    issue: IssueQuery | None = None
    """Set when the question reads as an issue (``QueryConfig.issue_text``)."""

    @property
    def is_empty(self) -> bool:
        """True when the question had no searchable words."""
        return not self.sparse_text and not self.dense_text


def process_query(
    query: str, cfg: QueryConfig | None = None, symbols: SymbolTable | None = None
) -> ProcessedQuery:
    """Run the enabled steps of :class:`QueryConfig` on a question (tamma phase 2).

    ``steps`` lists the steps that ran, in order. A question with no searchable text gives an
    empty ProcessedQuery (``is_empty``) rather than an error: the caller decides.
    """
    c = cfg if cfg is not None else QueryConfig()
    return _process(query, c, symbols, top_level=True)


def _process(
    query: str, cfg: QueryConfig, symbols: SymbolTable | None, *, top_level: bool
) -> ProcessedQuery:
    dense = clean_text(query)
    if not dense:
        return ProcessedQuery(
            original=query, dense_text="", sparse_text="", exact_boost=cfg.exact_boost
        )
    steps: list[str] = []
    issue: IssueQuery | None = None
    if cfg.issue_text and top_level and looks_like_issue(query):
        steps.append("issue")
        read = parse_issue(query)
        signals = issue_signals(read)
        issue = IssueQuery(read, signals, tuple(bm25_terms(read, signals=signals)))
        dense = dense_text(read, signals=signals) or dense
    head = dense
    cap = cfg.max_processed_chars
    if cap is not None and len(dense) > cap:
        # A pasted issue or log: read its start only (QueryConfig.max_processed_chars).
        steps.append("truncate")
        cut = dense.rfind(" ", 0, cap + 1)
        head = dense[: cut if cut > 0 else cap]
    language: str | None = None
    lang_spans: list[tuple[int, int]] = []
    if cfg.detect_language:
        steps.append("detect_language")
        language, lang_spans = detect_language(head)
    words = [w for w in lex(head) if not any(s <= w.start and w.end <= e for s, e in lang_spans)]
    # Blank out language mentions so "in rust" does not become a BM25 term.
    text = head
    for s, e in sorted(lang_spans, reverse=True):
        text = text[:s] + " " * (e - s) + text[e:]
    entities: list[Entity] = []
    # the joined-identifier candidates, read by both entity extraction and expansion
    cands0 = (
        candidates_from_words(words, text)
        if (cfg.extract_entities and symbols is not None) or cfg.expand_identifiers
        else None
    )
    if cfg.extract_entities:
        steps.append("extract_entities")
        entities = entities_from_words(text, words, symbols, cands0)
        if language is None and cfg.detect_language:
            language = path_language(e.value for e in entities if e.kind == "file")
    if cfg.expand_identifiers:
        steps.append("expand_identifiers")
    if cfg.synonyms:
        steps.append("synonyms")
    terms, cands, added = expand_words(
        words, text, identifiers=cfg.expand_identifiers, synonyms=cfg.synonyms, candidates=cands0
    )
    if not terms:  # only filler words: keep them (once each) rather than search for nothing
        firsts: dict[str, str] = {}
        for w in words:
            firsts.setdefault(w.text.lower(), w.text)
        terms = list(firsts.values())
    subs: tuple[ProcessedQuery, ...] = ()
    if cfg.decompose and top_level and issue is None:
        steps.append("decompose")
        parts = decompose_query(head)
        if parts:
            sub_cfg = QueryConfig(
                expand_identifiers=cfg.expand_identifiers,
                synonyms=cfg.synonyms,
                extract_entities=cfg.extract_entities,
                exact_boost=cfg.exact_boost,
                decompose=False,
                detect_language=cfg.detect_language,
                exact_min_confidence=cfg.exact_min_confidence,
                max_processed_chars=cfg.max_processed_chars,
            )
            subs = tuple(_process(p, sub_cfg, symbols, top_level=False) for p in parts)
    return ProcessedQuery(
        original=query,
        dense_text=dense,
        sparse_text=" ".join(terms),
        terms=tuple(terms),
        identifier_candidates=tuple(cands),
        synonyms_added=tuple(added),
        sub_queries=subs,
        entities=tuple(entities),
        language=language,
        steps=tuple(steps),
        exact_boost=cfg.exact_boost,
        issue=issue,
    )
