"""One file's references, each tied to the chunk it sits in: the record the index keeps per file.

A record belongs to one version of one file (its path and the hash of its bytes), so it never
changes once written: the index keeps it beside the file row and a generation shows the records
of the file versions it shows (docs/graph.md). Each reference names its *owner*, the innermost
chunk whose span holds it (a method inside its class, a decorator inside the function it
decorates); the graph resolves the names later, over the whole index.

The stored form is zlib-compressed JSON by column: ``{"v": 3, "ids": [the file's chunk ids],
"cols": [names, kinds, lines, bytes, qualifiers, modules, aliases, owners]}``, ``kinds`` as
indexes into :data:`~ragloom.ingest.refs.REF_KINDS` and ``owners`` into ``ids`` (-1: no chunk
holds the reference).
"""

from __future__ import annotations

import json
import operator
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragloom.errors import DbError
from ragloom.ingest.refs import REF_KINDS, Ref
from ragloom.types import Chunk

__all__ = ["FILE_GRAPH_VERSION", "FileGraph", "Row", "owners_of"]

FILE_GRAPH_VERSION = 6
"""Version of what the extractor finds and of the stored form: an index whose records were
made by another version extracts them again (``meta graph_version``). 6: Rust attribute
arguments (``#[derive(Debug)]``) are no reads."""

_KIND_INDEX = {k: i for i, k in enumerate(REF_KINDS)}
_COLUMNS = operator.attrgetter("name", "kind", "line", "byte", "qualifier", "module", "alias")

Row = tuple[Any, ...]
"""One stored reference: (name, kind (index into REF_KINDS), line, byte, qualifier, module,
alias, owner (index into the record's ids, -1 for none))."""


def owners_of(chunks: Sequence[Chunk], byte: Sequence[int]) -> list[int]:
    """Index into ``chunks`` of the innermost chunk holding each reference start (-1 for none).

    Chunks are laid from the widest span to the narrowest, each over the references its span
    holds, so the narrowest one wins: one binary search per chunk instead of a scan of every
    chunk per reference."""
    if not byte:
        return []
    pos = np.asarray(byte, dtype=np.int64)
    order = np.argsort(pos, kind="stable")
    sorted_pos = pos[order]
    owner = np.full(len(pos), -1, dtype=np.int64)
    by_width = sorted(
        range(len(chunks)),
        key=lambda i: (-(chunks[i].end_byte - chunks[i].start_byte), chunks[i].start_byte),
    )
    for i in by_width:
        c = chunks[i]
        lo = int(np.searchsorted(sorted_pos, c.start_byte, side="left"))
        hi = int(np.searchsorted(sorted_pos, c.end_byte, side="left"))
        if lo < hi:
            owner[order[lo:hi]] = i
    return owner.tolist()


def _python_kept(chunks: Sequence[Chunk], refs: Sequence[Ref]) -> Sequence[Ref]:
    """The references of a Python file less the bare reads that cannot name a definition.

    Python's names are lexical: a bare name the file neither defines at its top level nor
    imports is a local, a parameter or a builtin, and the graph never resolves it (without a
    ``*`` import). Those reads are about half of a Python file's references; leaving them out
    here saves storing and reading them."""
    names = {c.symbol for c in chunks if c.parent_id is None and "." not in c.symbol}
    for r in refs:
        if r.kind == "import":
            if r.name == "*":
                return refs
            if r.alias:
                names.add(r.alias)
            elif r.name:
                names.add(r.name)
            elif r.module:
                names.add(r.module.split(".")[0])
    return [r for r in refs if r.kind != "read" or r.qualifier is not None or r.name in names]


@dataclass(frozen=True, slots=True)
class FileGraph:
    """The references of one file version, each with the chunk holding it.

    Kept column by column (names, kinds, lines, ...), as stored: a large index has millions of
    references, and one Python object per reference would cost more than resolving it; a
    reader iterates :attr:`rows` (tuples made by ``zip`` in C)."""

    ids: tuple[str, ...]
    """The file's chunk ids; a reference's owner is an index into them."""
    cols: tuple[list[Any], ...]
    """Eight columns: name, kind index, line, byte, qualifier, module, alias, owner index."""

    @classmethod
    def build(cls, chunks: Sequence[Chunk], refs: Sequence[Ref]) -> FileGraph:
        if chunks and chunks[0].language == "python":
            refs = _python_kept(chunks, refs)
        if not refs:
            return cls(tuple(c.id for c in chunks), tuple([] for _ in range(8)))
        cols = map(list, zip(*map(_COLUMNS, refs), strict=True))
        name, kind, line, byte, qual, module, alias = cols
        kinds = list(map(_KIND_INDEX.__getitem__, kind))
        owners = owners_of(chunks, byte)
        return cls(
            tuple(c.id for c in chunks), (name, kinds, line, byte, qual, module, alias, owners)
        )

    @property
    def rows(self) -> list[Row]:
        return list(zip(*self.cols, strict=True))

    @property
    def refs(self) -> list[Ref]:
        """The references as :class:`~ragloom.ingest.refs.Ref` values."""
        return [Ref(r[0], REF_KINDS[r[1]], r[2], r[3], r[4], r[5], r[6]) for r in self.rows]

    @property
    def owners(self) -> list[str | None]:
        """Per reference: the id of the innermost chunk holding it, None when none does."""
        return [self.ids[o] if o >= 0 else None for o in self.cols[7]]

    def to_blob(self) -> bytes:
        doc = {"v": FILE_GRAPH_VERSION, "ids": list(self.ids), "cols": list(self.cols)}
        return zlib.compress(json.dumps(doc, separators=(",", ":")).encode("utf-8"), 1)

    @classmethod
    def from_blob(cls, blob: bytes) -> FileGraph:
        try:
            doc = json.loads(zlib.decompress(blob))
            ids = tuple(doc["ids"])
            cols = tuple(doc["cols"])
            n = len(cols[0]) if cols else 0
            if len(cols) != 8 or any(len(c) != n for c in cols):
                raise ValueError("malformed reference columns")
            if n and max(cols[7]) >= len(ids):
                raise ValueError("owner out of range")
        except (ValueError, KeyError, TypeError, IndexError, zlib.error) as exc:
            raise DbError(f"unreadable file graph record: {exc}") from exc
        return cls(ids, cols)
