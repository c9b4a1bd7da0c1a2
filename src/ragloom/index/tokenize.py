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
from itertools import chain

__all__ = ["BM25_FIELDS", "TOKENIZER_VERSION", "code_tokens", "split_identifier"]

BM25_FIELDS = True
"""Field-aware BM25 (:mod:`ragloom.index.bm25`): documents carry path, symbol, signature and doc
fields beside the body, scored with per-field boosts. ``False`` indexes the body field only (the
``code-v1`` layout). Part of :data:`TOKENIZER_VERSION`, so switching it rebuilds BM25."""

TOKENIZER_VERSION = "code-v2+fields1" if BM25_FIELDS else "code-v2"
"""Bumped whenever tokenisation or the BM25 document layout changes; stored in the index so a
change forces a rebuild. ``code-v2`` (2026-11-28): words of any script (``расчёт_налога``,
``größe``, ``税額計算``), where ``code-v1`` kept ASCII letters only; ASCII text gives the same
tokens as before."""

# A "word" is a run of identifier characters (letters of any script, digits, "_"), starting
# with a letter or "_", optionally joined by dots (qualified names); or a run of ASCII digits.
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*|[0-9]+")
_SCRIPT_WORD = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*|[0-9]+")
"""The word pattern for a text with characters outside ASCII (on ASCII text both find the same
words; the ASCII one is 1.6 times as fast, and most code is ASCII)."""
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")
"""Runs of Chinese, Japanese or Korean characters: written without spaces between words, so
such a run is indexed as its overlapping character pairs (as Lucene's CJK analyzer does)."""
# camelCase / PascalCase / acronym boundaries: HTTPHeader -> HTTP Header, parseJSON2 -> parse JSON2
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# split_identifier's parts of a name of identifier characters in one pass: a run of digits
# stays with the letters before it, and no match spans an underscore
_PARTS = re.compile(r"(?:[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+)[0-9]*|[0-9]+")

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
        if not piece.isascii():  # letters of other scripts: split where the case turns
            parts.extend(p.lower() for p in _camel_parts(piece))
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


def _camel_parts(name: str) -> list[str]:
    """``name`` split where a lowercase letter of any script is followed by an uppercase one
    (``maxGröße`` -> ``max``, ``Größe``)."""
    parts: list[str] = []
    start = 0
    for i in range(1, len(name)):
        if name[i - 1].islower() and name[i].isupper():
            parts.append(name[start:i])
            start = i
    parts.append(name[start:])
    return parts


def _script_tokens(word: str) -> tuple[str, ...]:
    """The tokens of a word with letters outside ASCII: the whole, each dotted component and
    its ``_`` and camel-case parts, lowercased; a run of CJK characters inside a longer word,
    or longer than two, also as its overlapping pairs (a lone CJK character is a token)."""
    tokens: list[str] = [word.lower()] if "." in word else []
    for comp in word.split("."):
        tokens.append(comp.lower())
        parts = [c for p in comp.split("_") if p for c in _camel_parts(p)]
        if len(parts) > 1:
            tokens.extend(p.lower() for p in parts)
        for run in _CJK.findall(comp):
            if len(run) <= 2 and (run == comp or (len(parts) > 1 and run in parts)):
                continue  # a token already: the component, or one of its parts
            if len(run) == 1:
                tokens.append(run)
            else:
                tokens.extend(run[i : i + 2] for i in range(len(run) - 1))
    return tuple(
        t for t in tokens if (len(t) >= _MIN_LEN or _CJK.fullmatch(t)) and len(t) <= _MAX_TOKEN_LEN
    )


def _word_tokens(word: str) -> tuple[str, ...]:
    """The tokens of one word (a match of the word pattern): for a dotted name the whole, then
    each component and, when it has several, its parts; short tokens and long numbers
    dropped. A word with letters outside ASCII: :func:`_script_tokens`."""
    if not word.isascii():
        return _script_tokens(word)
    tokens: list[str] = []
    if "." in word:
        tokens.append(word.lower())
        components = word.split(".")
    else:
        components = [word]
    for comp in components:
        tokens.append(comp.lower())
        parts = _PARTS.findall(comp)
        if len(parts) > 1:
            tokens.extend(p.lower() for p in parts)
    return tuple(
        t
        for t in tokens
        if _MIN_LEN <= len(t) <= _MAX_TOKEN_LEN and not (len(t) > _MAX_NUMBER_LEN and t.isdigit())
    )


_MEMO_WORDS = 1 << 15
"""Words the memo holds at most (:class:`_WordMemo`). Four times as many (42 MB) saved 0.1 s of
2.3 s tokenising the chunks of the standard library."""
_MEMO_MAX_WORD = 128
"""Longer words are split each time: a pasted blob does not fill the memo."""


class _WordMemo(dict[str, tuple[str, ...]]):
    """word -> :func:`_word_tokens`, filled on lookup. Code repeats its words: the 63k chunks
    of the standard library hold 4.0 million words, 268k of them distinct, and splitting
    each again was most of a cold BM25 build (docs/index-choices.md, "Tokenising once per
    word"). Bounded: emptied when it holds :data:`_MEMO_WORDS` words (10.5 MB), and a word
    longer than :data:`_MEMO_MAX_WORD` characters is not kept. Safe across threads: each
    lookup, store and clear is one dict operation and the values are immutable tuples (two
    threads may split the same word twice, to the same tokens)."""

    def __missing__(self, word: str) -> tuple[str, ...]:
        tokens = _word_tokens(word)
        if len(word) <= _MEMO_MAX_WORD:
            if len(self) >= _MEMO_WORDS:
                self.clear()
            self[word] = tokens
        return tokens


_MEMO = _WordMemo()


def code_tokens(text: str) -> list[str]:
    """Tokenise code or natural language for BM25 (order kept, duplicates kept for tf)."""
    # a lookup per word, all in C while the words are known (_WordMemo)
    words = (_WORD if text.isascii() else _SCRIPT_WORD).findall(text)
    return list(chain.from_iterable(map(_MEMO.__getitem__, words)))
