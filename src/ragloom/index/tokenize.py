"""Code-aware tokenizer for BM25.

Identifiers are kept whole *and* split into their parts: ``parseHTTPHeader`` gives
``parsehttpheader parse http header``; ``json.decoder.JSONDecoder`` gives the dotted whole,
each dotted component and the camel-case parts; ``snake_case_name`` gives the whole and the
words; paths are split on ``/``. Everything is lowercased. Tokens shorter than two characters
and pure numbers longer than a few digits are dropped as noise. The same function tokenises
documents and queries, so a query that tokenises to nothing simply has no hits.
"""

from __future__ import annotations

import re

__all__ = ["BM25_FIELDS", "TOKENIZER_VERSION", "code_tokens", "split_identifier"]

BM25_FIELDS = True
"""Field-aware BM25 (:mod:`ragloom.index.bm25`): documents carry path, symbol, signature and doc
fields beside the body, scored with per-field boosts. ``False`` indexes the body field only (the
``code-v1`` layout). Part of :data:`TOKENIZER_VERSION`, so switching it rebuilds BM25."""

TOKENIZER_VERSION = "code-v1+fields1" if BM25_FIELDS else "code-v1"
"""Bumped whenever tokenisation or the BM25 document layout changes; stored in the index so a
change forces a rebuild."""

# A "word" is a run of identifier characters, optionally joined by dots (qualified names).
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*|[0-9]+")
# camelCase / PascalCase / acronym boundaries: HTTPHeader -> HTTP Header, parseJSON2 -> parse JSON2
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")

_MIN_LEN = 2
_MAX_NUMBER_LEN = 4
_MAX_TOKEN_LEN = 64


def split_identifier(identifier: str) -> list[str]:
    """Split one identifier (no dots) into lowercase parts: ``getHTTPResponse_v2`` ->
    ``["get", "http", "response", "v2"]`` (digits stay attached to the preceding part)."""
    parts: list[str] = []
    for piece in identifier.split("_"):
        if not piece:
            continue
        sub = _CAMEL.findall(piece)
        merged: list[str] = []
        for s in sub:
            if s.isdigit() and merged:
                merged[-1] += s
            else:
                merged.append(s)
        parts.extend(m.lower() for m in merged)
    return parts


def _keep(token: str) -> bool:
    if len(token) < _MIN_LEN or len(token) > _MAX_TOKEN_LEN:
        return False
    return not (token.isdigit() and len(token) > _MAX_NUMBER_LEN)


def code_tokens(text: str) -> list[str]:
    """Tokenise code or natural language for BM25 (order kept, duplicates kept for tf)."""
    out: list[str] = []
    append = out.append
    for match in _WORD.finditer(text):
        word = match.group(0)
        lowered = word.lower()
        if "." in word:
            if _keep(lowered):
                append(lowered)
            components = word.split(".")
        else:
            components = [word]
        for comp in components:
            low = comp.lower()
            if _keep(low):
                append(low)
            parts = split_identifier(comp)
            if len(parts) > 1:
                for p in parts:
                    if _keep(p):
                        append(p)
    return out
