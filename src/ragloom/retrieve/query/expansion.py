"""Expansion of the BM25 query: filler words dropped, snake_case / camelCase / dotted names split
into their parts, runs of adjacent words joined into candidate identifiers, code-vocabulary
synonyms added.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragloom.index.tokenize import split_identifier
from ragloom.retrieve.query.lexer import MIN_WORD_LEN, PATH_RE, Word, lex
from ragloom.retrieve.query.vocabulary import CODE_SYNONYMS, QUERY_STOPWORDS

__all__ = [
    "MAX_JOINED_PHRASES",
    "candidates_from_words",
    "expand_query",
    "expand_words",
    "identifier_candidates",
    "split_parts",
]

MAX_JOINED_PHRASES = 8
"""At most this many runs of adjacent words are joined into identifier candidates (each gives
three spellings), so a long question cannot crowd the BM25 query (the engine keeps the first
64 distinct terms, ``ragloom.index.bm25``). ragloom's choice."""
_MAX_JOIN_WORDS = 3
"""Adjacent words joined: pairs and triples ("get user name" -> get_user_name)."""


def _join_forms(words: Sequence[str]) -> list[str]:
    lower = [w.lower() for w in words]
    snake = "_".join(lower)
    camel = lower[0] + "".join(w.capitalize() for w in lower[1:])
    pascal = "".join(w.capitalize() for w in lower)
    return [snake, camel, pascal]


def identifier_candidates(query: str) -> list[str]:
    """Identifiers a question may be spelling out in words: each run of 2-3 adjacent plain
    words (filler words break a run) joined as snake_case, camelCase and PascalCase:
    ``parse header`` -> ``parse_header``, ``parseHeader``, ``ParseHeader``.

    At most :data:`MAX_JOINED_PHRASES` runs, pairs before triples, in question order.
    """
    return candidates_from_words(lex(query), query)


def candidates_from_words(words: Sequence[Word], text: str) -> list[str]:
    """:func:`identifier_candidates` on an already lexed question (``words`` of ``text``)."""
    runs: list[list[str]] = [[]]
    prev_end = -1
    for w in words:
        plain = (
            not w.typed
            and w.text.isalpha()
            and w.text.isascii()
            and len(w.text) >= MIN_WORD_LEN
            and w.text.lower() not in QUERY_STOPWORDS
        )
        # A run continues only across whitespace: "parse, header" is two runs.
        adjacent = prev_end >= 0 and not text[prev_end : w.start].strip()
        if not plain:
            runs.append([])
        else:
            if runs[-1] and not adjacent:
                runs.append([])
            runs[-1].append(w.text)
        prev_end = w.end
    phrases: list[tuple[str, ...]] = []
    for size in range(2, _MAX_JOIN_WORDS + 1):
        for run in runs:
            for i in range(len(run) - size + 1):
                phrases.append(tuple(run[i : i + size]))
    out: list[str] = []
    for phrase in phrases[:MAX_JOINED_PHRASES]:
        for form in _join_forms(phrase):
            if form not in out:
                out.append(form)
    return out


def split_parts(word: str) -> list[str]:
    """The parts of a snake_case / camelCase / dotted name, lower-cased, without repeats."""
    parts: list[str] = []
    for comp in word.split("."):
        for p in split_identifier(comp):
            if p not in parts:
                parts.append(p)
    return parts


def expand_query(
    query: str, *, identifiers: bool = True, synonyms: bool = True
) -> tuple[list[str], list[str], list[str]]:
    """BM25 terms for a question: ``(terms, identifier candidates, synonyms added)``.

    ``terms`` is, in order and without case-insensitive repeats: every non-filler word as
    written; with ``identifiers``, the parts of each snake_case / camelCase / dotted name and the
    joined candidates of :func:`identifier_candidates`; with ``synonyms``, the
    :data:`CODE_SYNONYMS` of every word and part. Original words come first because the BM25
    engine keeps only the first 64 distinct terms.
    """
    return expand_words(lex(query), query, identifiers=identifiers, synonyms=synonyms)


def expand_words(
    words: Sequence[Word],
    text: str,
    *,
    identifiers: bool,
    synonyms: bool,
    candidates: Sequence[str] | None = None,
) -> tuple[list[str], list[str], list[str]]:
    """:func:`expand_query` on an already lexed question (``words`` of ``text``);
    ``candidates`` is ``candidates_from_words(words, text)`` when the caller has it already."""
    seen: set[str] = set()
    terms: list[str] = []

    def add(term: str) -> bool:
        key = term.lower()
        if not term or key in seen:
            return False
        seen.add(key)
        terms.append(term)
        return True

    paths = [m.group(0) for m in PATH_RE.finditer(text)]
    path_spans = [(m.start(), m.end()) for m in PATH_RE.finditer(text)]
    kept: list[Word] = []
    for w in words:
        inside_path = any(s <= w.start and w.end <= e for s, e in path_spans)
        if inside_path:
            continue
        if not w.typed and w.text.lower() in QUERY_STOPWORDS:
            continue
        kept.append(w)
    for p in paths:
        add(p)
    for w in kept:
        add(w.text)
    cands: list[str] = []
    if identifiers:
        for w in kept:
            if w.typed:
                for part in split_parts(w.text):
                    add(part)
        cands = list(candidates) if candidates is not None else candidates_from_words(words, text)
        for c in cands:
            add(c)
    added: list[str] = []
    if synonyms:
        bases: list[str] = []
        for w in kept:
            bases.append(w.text.lower())
            if w.typed:
                bases.extend(split_parts(w.text))
        for base in bases:
            for syn in CODE_SYNONYMS.get(base, ()):
                if add(syn):
                    added.append(syn)
    return terms, cands, added
