"""What both index backends share about their rows: the row types readers get, the chunk
columns, and how a file's new chunk set is compared with its stored chunk rows.

The embedded store (:mod:`ragloom.index.store`) and the PostgreSQL backend
(:mod:`ragloom.index.postgres`, :mod:`ragloom.index.pg_update`) store the same chunk columns and
decide the same way which rows a new chunk set keeps, moves, replaces and drops
(:func:`diff_chunk_set`); each applies the result in its own SQL. :mod:`ragloom.index.store`
re-exports the row types.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from ragloom.types import Chunk

__all__ = [
    "CHUNK_COLS",
    "CHUNK_META_COLS",
    "CHUNK_VALUE_COLS",
    "FILE_COLS",
    "MANIFEST_WHERE",
    "ChunkCounts",
    "ChunkRow",
    "ChunkSetDiff",
    "FileRow",
    "GraphDefRow",
    "chunk_meta",
    "chunk_values",
    "diff_chunk_set",
    "graph_record",
    "manifest_texts",
    "row_to_chunk",
]


@dataclass(frozen=True, slots=True)
class FileRow:
    """One indexed file."""

    path: str
    hash: str
    size: int
    mtime: float
    language: str | None
    source: str
    n_chunks: int


@dataclass(frozen=True, slots=True)
class ChunkRow:
    """A chunk as stored, without its text (fetch text separately when needed)."""

    rowid: int
    id: str
    path: str
    symbol: str
    kind: str
    language: str
    source: str
    parent_id: str | None
    start_byte: int
    end_byte: int
    start_line: int
    end_line: int
    node_hash: str
    file_hash: str


@dataclass(frozen=True, slots=True)
class GraphDefRow:
    """A code chunk as the graph sees it: a definition (or a module's remainder)."""

    rowid: int
    id: str
    path: str
    symbol: str
    kind: str
    language: str
    parent_id: str | None
    start_line: int
    end_line: int


FILE_COLS = "path, hash, size, mtime, language, source, n_chunks"
"""The columns of a :class:`FileRow`, in its order."""

CHUNK_COLS = (
    "rowid, id, path, symbol, kind, language, source, parent_id, start_byte, end_byte, "
    "start_line, end_line, node_hash, file_hash"
)
"""The columns of a :class:`ChunkRow`, in its order."""

CHUNK_META_COLS: tuple[str, ...] = (
    "symbol",
    "kind",
    "language",
    "source",
    "parent_id",
    "start_byte",
    "end_byte",
    "start_line",
    "end_line",
    "file_hash",
)
"""What may change on a chunk row that keeps its rowid (same id and text, moved)."""

# the meta columns in their order, but file_hash after node_hash
_VALUE_NAMES = ("id", "path", *CHUNK_META_COLS[:-1], "node_hash", "file_hash", "text")
CHUNK_VALUE_COLS = ", ".join(_VALUE_NAMES)
"""The columns a new chunk row is written with (:func:`chunk_values`), in that order."""

_meta = attrgetter(*CHUNK_META_COLS)
_values = attrgetter(*_VALUE_NAMES)


def row_to_chunk(row: Sequence[Any]) -> ChunkRow:
    """A :class:`ChunkRow` from a row of the columns :data:`CHUNK_COLS`."""
    return ChunkRow(*row)


def chunk_meta(c: Chunk) -> tuple[Any, ...]:
    """The :data:`CHUNK_META_COLS` values of a chunk (its attributes of those names)."""
    return _meta(c)


def chunk_values(c: Chunk) -> tuple[Any, ...]:
    """The :data:`CHUNK_VALUE_COLS` values of a chunk's new row."""
    return _values(c)


def graph_record(row: Sequence[Any]) -> tuple[str, str, bytes]:
    """(path, language, record) from a (path, language, data) row of a file and its graph
    record (``b""`` for a file without one; language ``""`` when unknown)."""
    return str(row[0]), str(row[1] or ""), bytes(row[2]) if row[2] is not None else b""


MANIFEST_WHERE = (
    "(path IN ('go.mod', 'package.json') OR path LIKE '%/go.mod' OR path LIKE '%/package.json')"
)
"""SQL condition on ``chunks.path``: the files whose text says what imports name
(:data:`ragloom.graph.modules.MANIFEST_NAMES`)."""


def manifest_texts(rows: Iterable[Sequence[Any]]) -> list[tuple[str, str]]:
    """(path, text) per file from its chunks' (path, start_byte, end_byte, text) rows, in order:
    the windows of a text file tile it, so their texts are joined (a line break where a gap
    was)."""
    parts: dict[str, list[str]] = {}
    end: dict[str, int] = {}
    for path, start, stop, text in rows:
        path = str(path)
        if path in parts and int(start) > end[path]:
            parts[path].append("\n")
        parts.setdefault(path, []).append(str(text))
        end[path] = int(stop)
    return [(path, "".join(texts)) for path, texts in parts.items()]


class ChunkCounts:
    """The published chunks counted by kind and by language: one grouped count each, in the
    backend's SQL (:meth:`_count_by`)."""

    def _count_by(self, column: str) -> dict[str, int]:
        """The published generation's chunks by the value of ``column``."""
        raise NotImplementedError

    def kind_counts(self) -> dict[str, int]:
        return self._count_by("kind")

    def language_counts(self) -> dict[str, int]:
        return self._count_by("language")


class ChunkSetDiff(NamedTuple):
    """How a file's new chunk set differs from its stored rows (:func:`diff_chunk_set`)."""

    moved: list[tuple[int, tuple[Any, ...]]]
    """(rowid, new :func:`chunk_meta`) of kept rows whose position or metadata changed."""
    drop: list[int]
    """Rowids to remove, before :attr:`new` is written: the old rows of chunks whose text
    changed (in chunk order), then those of chunks no longer in the file."""
    new: list[Chunk]
    """Chunks that need a new row (added, or their text changed), in chunk order."""
    counts: tuple[int, int, int, int]
    """(added, updated, removed, kept) chunk counts."""


def diff_chunk_set(stored: Iterable[Sequence[Any]], chunks: Sequence[Chunk]) -> ChunkSetDiff:
    """Compare a file's new chunk set with its stored rows, given as (id, rowid, node hash,
    *the :data:`CHUNK_META_COLS` values) rows. A chunk whose id and node hash are unchanged
    keeps its rowid (so its BM25 entry and embedding stay valid); one whose text changed gets a
    new row in place of its old one; rows of chunks no longer in the set are dropped."""
    existing = {str(r[0]): (int(r[1]), str(r[2]), tuple(r[3:])) for r in stored}
    new_ids = {c.id for c in chunks}
    moved: list[tuple[int, tuple[Any, ...]]] = []
    drop: list[int] = []
    new: list[Chunk] = []
    added = updated = kept = 0
    for c in chunks:
        old = existing.get(c.id)
        if old is not None and old[1] == c.node_hash:
            meta = chunk_meta(c)
            if meta != old[2]:
                moved.append((old[0], meta))
            kept += 1
            continue
        if old is not None:
            drop.append(old[0])
            updated += 1
        else:
            added += 1
        new.append(c)
    stale = [rowid for cid, (rowid, _, _) in existing.items() if cid not in new_ids]
    drop.extend(stale)
    return ChunkSetDiff(moved, drop, new, (added, updated, len(stale), kept))
