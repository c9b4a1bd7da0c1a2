"""Entities: the file paths and known symbol names a question mentions, each with a confidence,
checked against the index's names through a :class:`SymbolTable`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, Protocol, runtime_checkable

from ragloom.retrieve.query.expansion import candidates_from_words
from ragloom.retrieve.query.lexer import ALL_EXTENSIONS, MIN_WORD_LEN, PATH_RE, Word, lex, norm_path
from ragloom.retrieve.query.vocabulary import QUERY_STOPWORDS

__all__ = [
    "ENTITY_CONFIDENCE",
    "Entity",
    "EntityKind",
    "InMemorySymbolTable",
    "SymbolTable",
    "entities_from_words",
    "extract_entities",
]

ENTITY_CONFIDENCE: Mapping[str, float] = MappingProxyType(
    {
        "path_known": 1.0,  # a path the symbol table knows
        "path_unknown": 0.3,  # path-shaped, but the table does not know it
        "path_shaped": 0.6,  # dir/name.ext with no table to check against
        "path_weak": 0.4,  # name.ext or a/b only, no table to check against
        "symbol_typed": 1.0,  # backticked, name(), snake_case, camelCase or dotted, and known
        "symbol_joined": 0.7,  # adjacent words joined ("parse header" -> parse_header), known
        "symbol_word": 0.45,  # a plain word that happens to be a known symbol name
    }
)
"""Entity confidence heuristic (ragloom's; tamma phase 2 asks for a confidence without one).
How the name was written matters most: a name typed as code is meant as code; a plain English
word that is also a symbol name ("parse", "main") is probably not. ``symbol_word`` sits below
:data:`EXACT_MATCH_MIN_CONFIDENCE` so such words are reported but never force a result to the
top. A symbol matching more than :data:`_AMBIGUOUS_IDS` chunks has its confidence halved."""
_AMBIGUOUS_IDS = 5
"""A name defined this many times or more is ambiguous (``__init__``, ``run``): confidence / 2."""


EntityKind = Literal["file", "symbol"]


@dataclass(frozen=True, slots=True)
class Entity:
    """A file path or symbol named in the question.

    ``ids`` are the chunk ids the symbol table gave for a symbol (empty for files and when no
    table was given); ``confidence`` in [0, 1] follows :data:`ENTITY_CONFIDENCE`.
    """

    kind: EntityKind
    value: str
    confidence: float
    ids: tuple[str, ...] = ()


@runtime_checkable
class SymbolTable(Protocol):
    """What query processing needs to know about the index's names."""

    def lookup(self, name: str) -> list[str]:
        """Chunk ids of symbols called ``name`` (exactly, or as the last dotted component)."""
        ...

    def has_path(self, path: str) -> bool:
        """True when ``path`` is an indexed file path or a ``/``-aligned suffix of one."""
        ...


class InMemorySymbolTable:
    """A :class:`SymbolTable` built from ``(symbol, path, chunk id)`` rows.

    A qualified symbol ``JSONDecoder.decode`` is found as ``JSONDecoder.decode`` and as
    ``decode``; a path ``Lib/json/decoder.py`` as itself, ``json/decoder.py`` and
    ``decoder.py``. Lookups are case-sensitive (identifiers are).
    """

    __slots__ = ("_by_name", "_paths", "_shared")

    def __init__(self, rows: Iterable[tuple[str, str, str]] = ()) -> None:
        self._by_name: dict[str, list[str]] = {}
        self._paths: dict[str, int] = {}
        """Path suffix -> how many indexed rows have it (a suffix stays while any does)."""
        self._shared: set[str] = set()
        """Names whose id list is shared with the table this one was derived from: copied
        before a change (copy on write)."""
        for symbol, path, chunk_id in rows:
            self.add(symbol, path, chunk_id)

    @staticmethod
    def _names(symbol: str) -> list[str]:
        parts = symbol.split(".")
        return sorted({symbol} | {".".join(parts[i:]) for i in range(1, len(parts))})

    @staticmethod
    def _suffixes(path: str) -> list[str]:
        segs = norm_path(path).split("/")
        return ["/".join(segs[i:]) for i in range(len(segs))]

    def _ids(self, name: str) -> list[str]:
        ids = self._by_name.get(name)
        if ids is None:
            ids = self._by_name[name] = []
        elif name in self._shared:
            ids = self._by_name[name] = list(ids)
            self._shared.discard(name)
        return ids

    def add(self, symbol: str, path: str, chunk_id: str) -> None:
        """Index one chunk."""
        if symbol:
            for name in self._names(symbol):
                ids = self._ids(name)
                if chunk_id not in ids:
                    ids.append(chunk_id)
        if path:
            for suffix in self._suffixes(path):
                self._paths[suffix] = self._paths.get(suffix, 0) + 1

    def remove(self, symbol: str, path: str, chunk_id: str) -> None:
        """Forget one chunk added with these values (the inverse of :meth:`add`)."""
        if symbol:
            for name in self._names(symbol):
                if chunk_id in self._by_name.get(name, ()):
                    ids = self._ids(name)
                    ids.remove(chunk_id)
                    if not ids:
                        del self._by_name[name]
        if path:
            for suffix in self._suffixes(path):
                n = self._paths.get(suffix, 0) - 1
                if n > 0:
                    self._paths[suffix] = n
                else:
                    self._paths.pop(suffix, None)

    def derived(
        self,
        removed: Iterable[tuple[str, str, str]],
        added: Iterable[tuple[str, str, str]],
    ) -> InMemorySymbolTable:
        """A new table: this one less ``removed`` plus ``added`` rows. This one is not changed
        (readers of its generation may still use it); the id lists are shared until changed,
        so a one-file update costs its rows, not the table's size."""
        new = InMemorySymbolTable()
        new._by_name = dict(self._by_name)
        new._paths = dict(self._paths)
        new._shared = set(self._by_name)
        for row in removed:
            new.remove(*row)
        for row in added:
            new.add(*row)
        return new

    def lookup(self, name: str) -> list[str]:
        """Chunk ids for ``name`` (a copy, in insertion order)."""
        return list(self._by_name.get(name, ()))

    def has_path(self, path: str) -> bool:
        """True for an indexed path or a ``/``-aligned suffix of one."""
        return norm_path(path) in self._paths


def extract_entities(query: str, symbols: SymbolTable | None = None) -> list[Entity]:
    """File paths and known symbol names in a question, most confident first.

    Paths are found by shape (``dir/name.ext`` with a known extension, ``name.ext``, or
    ``a/b/c``) and checked with ``symbols.has_path`` when a table is given. Symbols are only
    reported when a table is given and knows the name: every identifier in the question, and
    every candidate of :func:`identifier_candidates`. Confidences: :data:`ENTITY_CONFIDENCE`.
    """
    return entities_from_words(query, lex(query), symbols)


def entities_from_words(
    text: str,
    words: Sequence[Word],
    symbols: SymbolTable | None,
    candidates: Sequence[str] | None = None,
) -> list[Entity]:
    """:func:`extract_entities` on an already lexed question (``words`` from ``lex(text)``,
    possibly with language mentions left out); ``candidates`` is
    ``candidates_from_words(words, text)`` when the caller has it already."""
    found: dict[tuple[str, str], Entity] = {}

    def put(ent: Entity) -> None:
        key = (ent.kind, ent.value)
        prev = found.get(key)
        if prev is None or ent.confidence > prev.confidence:
            found[key] = ent

    path_spans: list[tuple[int, int]] = []
    for m in PATH_RE.finditer(text):
        raw = m.group(0)
        path_spans.append((m.start(), m.end()))
        norm = norm_path(raw)
        if not norm:
            continue
        last = norm.rsplit("/", 1)[-1]
        has_ext = "." in last and last.rsplit(".", 1)[-1].lower() in ALL_EXTENSIONS
        if symbols is not None:
            conf = ENTITY_CONFIDENCE["path_known" if symbols.has_path(norm) else "path_unknown"]
        elif has_ext and "/" in norm:
            conf = ENTITY_CONFIDENCE["path_shaped"]
        else:
            conf = ENTITY_CONFIDENCE["path_weak"]
        put(Entity("file", norm, conf))
    if symbols is None:
        return _sorted_entities(found.values())
    names: list[tuple[str, float]] = []
    for w in words:
        if any(s <= w.start and w.end <= e for s, e in path_spans):
            continue
        if w.typed:
            names.append((w.text, ENTITY_CONFIDENCE["symbol_typed"]))
        elif len(w.text) > MIN_WORD_LEN and w.text.lower() not in QUERY_STOPWORDS:
            names.append((w.text, ENTITY_CONFIDENCE["symbol_word"]))
    if candidates is None:
        candidates = candidates_from_words(words, text)
    names.extend((c, ENTITY_CONFIDENCE["symbol_joined"]) for c in candidates)
    for name, base in names:
        ids = symbols.lookup(name)
        if not ids:
            continue
        conf = base / 2 if len(ids) >= _AMBIGUOUS_IDS else base
        put(Entity("symbol", name, conf, tuple(ids)))
    return _sorted_entities(found.values())


def _sorted_entities(ents: Iterable[Entity]) -> list[Entity]:
    return sorted(ents, key=lambda e: (-e.confidence, e.kind, e.value))
