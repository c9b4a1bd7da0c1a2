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
    is dropped.
    """
    parts = [clean_text(query)]
    for splitter in _SPLITTERS:
        parts = [p for part in parts for p in splitter.split(part)]
    out: list[str] = []
    for part in parts:
        p = part.strip(" \t\n?.!,;:")
        if not p:
            continue
        content = [w for w in lex(p) if w.typed or w.text.lower() not in QUERY_STOPWORDS]
        if out and len(content) < _MIN_SUBQUERY_WORDS and not any(w.typed for w in content):
            out[-1] = f"{out[-1]} and {p}"
        else:
            out.append(p)
    return out if len(out) > 1 else []
