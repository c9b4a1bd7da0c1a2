"""Decomposition: a compound question ("how is X parsed and where is Y stored?") split into its
parts, each retrieved on its own and fused.
"""

from __future__ import annotations

import re

from ragloom.retrieve.query.lexer import clean_text, lex
from ragloom.retrieve.query.vocabulary import QUERY_STOPWORDS

__all__ = ["decompose_query"]

_QUESTION_WORDS = (
    r"(?:how|where|what|why|when|which|who|does|do|is|are|can|should|could|would|will|"
    r"was|were|did|has|have|show|find|list|explain)"
)
_SPLITTERS = (
    re.compile(r"\s*;\s*"),  # "X; Y"
    re.compile(r"\?\s+(?=\S)"),  # "X? Y?"
    re.compile(r",?\s+(?:and|but)\s+also\s+|,?\s+as\s+well\s+as\s+|,?\s+plus\s+also\s+", re.I),
    re.compile(r",?\s+(?:and|but)\s+(?=" + _QUESTION_WORDS + r"\b)", re.I),  # "... and where is Y"
    re.compile(r"\.\s+(?:also|and)\s*,?\s+", re.I),  # "X. Also, Y"
)
"""Where a compound question splits: ';', a '?' followed by more text, "and also"/"but also"/
"as well as", "and"/"but" followed by a question word, and ". Also" at a sentence start."""
_MIN_SUBQUERY_WORDS = 1
"""A part with fewer content (non-filler) words than this is glued back to the part before it
(ragloom's choice): "how is X parsed and how" has no second question."""


def decompose_query(query: str) -> list[str]:
    """Split a compound question into its parts, or ``[]`` when it is a single question.

    ``"how is X parsed and where is Y stored?"`` -> ``["how is X parsed", "where is Y stored"]``;
    ``"X; Y"`` -> ``["X", "Y"]``; ``"X and also Y"`` -> ``["X", "Y"]``. A plain "and" between two
    words ("parse and serialize") does not split. Parts keep their words; trailing punctuation
    is dropped. Every part is a piece of the question as written (whitespace collapsed): a part
    too short to stand alone is glued back to the one before it with the text between them.
    """
    text = clean_text(query)
    spans = [(0, len(text))]
    for splitter in _SPLITTERS:
        spans = [piece for a, b in spans for piece in _split_span(text, a, b, splitter)]
    if len(spans) < 2:  # one piece: a single question (nothing below could make two)
        return []
    out: list[tuple[int, int]] = []
    for a, b in spans:
        raw = text[a:b]
        lead = len(raw) - len(raw.lstrip(_STRIP))
        core = raw.strip(_STRIP)
        if not core:
            continue
        start, end = a + lead, a + lead + len(core)
        content = [w for w in lex(core) if w.typed or w.text.lower() not in QUERY_STOPWORDS]
        if out and len(content) < _MIN_SUBQUERY_WORDS and not any(w.typed for w in content):
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return [text[a:b] for a, b in out] if len(out) > 1 else []


_STRIP = " \t\n?.!,;:"


def _split_span(text: str, a: int, b: int, splitter: re.Pattern[str]) -> list[tuple[int, int]]:
    """``text[a:b]`` split where ``splitter`` matches, as spans of ``text``."""
    out: list[tuple[int, int]] = []
    pos = a
    for m in splitter.finditer(text, a, b):
        out.append((pos, m.start()))
        pos = m.end()
    out.append((pos, b))
    return out
