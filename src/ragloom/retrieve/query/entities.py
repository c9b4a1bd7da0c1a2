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

    Symbols are kept under their last dotted component and paths under their last segment; a
    lookup filters that one bucket. Building it costs one entry a row, not one a dotted suffix
    and path suffix (0.22 s -> 0.07 s for 55k rows, docs/benchmarks.md "A command's start-up").
    """

    __slots__ = ("_by_base", "_by_last", "_shared")

    def __init__(self, rows: Iterable[tuple[str, str, str]] = ()) -> None:
        self._by_last: dict[str, list[tuple[str, str]]] = {}
        """Last dotted component -> (symbol, chunk id) in the order they were added (a row
        added twice is listed twice and found once)."""
        self._by_base: dict[str, dict[str, int]] = {}
        """Last path segment -> {normalised path: how many indexed rows have it}."""
        self._shared: set[str] = set()
        """Keys (``s:`` symbol buckets, ``p:`` path buckets) whose bucket is shared with the
        table this one was derived from: copied before a change (copy on write)."""
        norms: dict[str, str] = {}
        by_last, by_base = self._by_last, self._by_base
        for symbol, path, chunk_id in rows:
            if symbol:
                entry = (symbol, chunk_id)
                bucket = by_last.get(last := symbol.rpartition(".")[2])
                if bucket is None:
                    by_last[last] = [entry]
                else:
                    bucket.append(entry)
            if path:
                norm = norms.get(path)
                if norm is None:
                    norm = norms[path] = norm_path(path)
                files = by_base.get(base := norm.rpartition("/")[2])
                if files is None:
                    by_base[base] = {norm: 1}
                else:
                    files[norm] = files.get(norm, 0) + 1

    def _symbols(self, last: str) -> list[tuple[str, str]]:
        bucket = self._by_last.get(last)
        if bucket is None:
            bucket = self._by_last[last] = []
        elif "s:" + last in self._shared:
            bucket = self._by_last[last] = list(bucket)
            self._shared.discard("s:" + last)
        return bucket

    def _files(self, base: str) -> dict[str, int]:
        files = self._by_base.get(base)
        if files is None:
            files = self._by_base[base] = {}
        elif "p:" + base in self._shared:
            files = self._by_base[base] = dict(files)
            self._shared.discard("p:" + base)
        return files

    def add(self, symbol: str, path: str, chunk_id: str) -> None:
        """Index one chunk."""
        if symbol:
            self._symbols(symbol.rpartition(".")[2]).append((symbol, chunk_id))
        if path:
            norm = norm_path(path)
            files = self._files(norm.rpartition("/")[2])
            files[norm] = files.get(norm, 0) + 1

    def remove(self, symbol: str, path: str, chunk_id: str) -> None:
        """Forget one chunk added with these values (the inverse of :meth:`add`)."""
        if symbol:
            last = symbol.rpartition(".")[2]
            entry = (symbol, chunk_id)
            if entry in self._by_last.get(last, ()):
                bucket = self._symbols(last)
                bucket[:] = [e for e in bucket if e != entry]
                if not bucket:
                    del self._by_last[last]
        if path:
            norm = norm_path(path)
            base = norm.rpartition("/")[2]
            if norm in self._by_base.get(base, {}):
                files = self._files(base)
                n = files[norm] - 1
                if n > 0:
                    files[norm] = n
                else:
                    del files[norm]
                    if not files:
                        del self._by_base[base]

    def derived(
        self,
        removed: Iterable[tuple[str, str, str]],
        added: Iterable[tuple[str, str, str]],
    ) -> InMemorySymbolTable:
        """A new table: this one less ``removed`` plus ``added`` rows. This one is not changed
        (readers of its generation may still use it); the buckets are shared until changed,
        so a one-file update costs its rows, not the table's size."""
        new = InMemorySymbolTable()
        new._by_last = dict(self._by_last)
        new._by_base = dict(self._by_base)
        new._shared = {"s:" + k for k in self._by_last} | {"p:" + k for k in self._by_base}
        for row in removed:
            new.remove(*row)
        for row in added:
            new.add(*row)
        return new

    def lookup(self, name: str) -> list[str]:
        """Chunk ids for ``name`` (a copy, in insertion order)."""
        tail = "." + name
        ids = [
            chunk_id
            for symbol, chunk_id in self._by_last.get(name.rpartition(".")[2], ())
            if symbol == name or symbol.endswith(tail)
        ]
        return list(dict.fromkeys(ids))

    def has_path(self, path: str) -> bool:
        """True for an indexed path or a ``/``-aligned suffix of one."""
        norm = norm_path(path)
        tail = "/" + norm
        files = self._by_base.get(norm.rpartition("/")[2], ())
        return any(f == norm or f.endswith(tail) for f in files)


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
