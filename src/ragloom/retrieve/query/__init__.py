"""Query processing for code search (tamma phase 2): expansion, entities, decomposition,
language detection, and the exact-match boost applied to hits afterwards.

Everything here is pure and deterministic. :func:`process_query` turns one question into

* ``sparse_text``: the words to send to BM25 (filler words dropped, identifiers split, adjacent
  words joined into candidate identifiers, code-vocabulary synonyms added);
* ``dense_text``: the original question, whitespace-cleaned, for the embedding model (dense
  models understand prose; expansion would only blur the vector);
* ``sub_queries``: a compound question split into parts, each processed the same way; the
  caller retrieves each part and fuses the lists with :func:`ragloom.retrieve.fusion.rrf_fuse`;
* ``entities``: file paths and known symbol names named in the question, each with a confidence;
* ``language``: a language named in the question ("in rust", "python function", ".ts file").

A whole GitHub issue as the question has its own functions (:mod:`~ragloom.retrieve.query.issue`):
:func:`looks_like_issue`, :func:`parse_issue` (:class:`IssueText`), :func:`issue_signals`
(:class:`IssueSignals`), and :func:`dense_text` / :func:`bm25_text` / :func:`bm25_terms`, what the
two retrievers should see of it.

Each step can be switched off in :class:`QueryConfig`. ``docs/ranking.md`` describes the rules.

The steps live one per module: :mod:`~ragloom.retrieve.query.vocabulary` (word lists),
:mod:`~ragloom.retrieve.query.lexer`, :mod:`~ragloom.retrieve.query.language`,
:mod:`~ragloom.retrieve.query.expansion`, :mod:`~ragloom.retrieve.query.entities`,
:mod:`~ragloom.retrieve.query.decomposition`, :mod:`~ragloom.retrieve.query.style`,
:mod:`~ragloom.retrieve.query.exact` (the boost) and :mod:`~ragloom.retrieve.query.pipeline`
(:func:`process_query`), with :class:`QueryConfig` in :mod:`~ragloom.retrieve.query.config`.
Everything public is re-exported here.
"""

from __future__ import annotations

from ragloom.retrieve.query.config import (
    EXACT_MATCH_MIN_CONFIDENCE,
    MAX_PROCESSED_CHARS,
    QueryConfig,
)
from ragloom.retrieve.query.decomposition import decompose_query
from ragloom.retrieve.query.entities import (
    ENTITY_CONFIDENCE,
    Entity,
    EntityKind,
    InMemorySymbolTable,
    SymbolTable,
    extract_entities,
)
from ragloom.retrieve.query.exact import EXACT_MATCH_BONUS, exact_match_boost
from ragloom.retrieve.query.expansion import (
    MAX_JOINED_PHRASES,
    expand_query,
    identifier_candidates,
)
from ragloom.retrieve.query.issue import (
    Frame,
    IssueSignals,
    IssueText,
    Signal,
    Traceback,
    bm25_terms,
    bm25_text,
    dense_text,
    issue_signals,
    looks_like_issue,
    parse_issue,
)
from ragloom.retrieve.query.language import detect_language
from ragloom.retrieve.query.pipeline import IssueQuery, ProcessedQuery, process_query
from ragloom.retrieve.query.style import KEYWORD_QUERY_MAX_WORDS, QueryStyle, query_style
from ragloom.retrieve.query.vocabulary import (
    CODE_SYNONYMS,
    EXTENSION_LANGUAGES,
    LANGUAGE_ALIASES,
    QUERY_STOPWORDS,
)

__all__ = [
    "CODE_SYNONYMS",
    "ENTITY_CONFIDENCE",
    "EXACT_MATCH_BONUS",
    "EXACT_MATCH_MIN_CONFIDENCE",
    "EXTENSION_LANGUAGES",
    "KEYWORD_QUERY_MAX_WORDS",
    "LANGUAGE_ALIASES",
    "MAX_JOINED_PHRASES",
    "MAX_PROCESSED_CHARS",
    "QUERY_STOPWORDS",
    "Entity",
    "EntityKind",
    "Frame",
    "InMemorySymbolTable",
    "IssueQuery",
    "IssueSignals",
    "IssueText",
    "ProcessedQuery",
    "QueryConfig",
    "QueryStyle",
    "Signal",
    "SymbolTable",
    "Traceback",
    "bm25_terms",
    "bm25_text",
    "decompose_query",
    "dense_text",
    "detect_language",
    "exact_match_boost",
    "expand_query",
    "extract_entities",
    "identifier_candidates",
    "issue_signals",
    "looks_like_issue",
    "parse_issue",
    "process_query",
    "query_style",
]
