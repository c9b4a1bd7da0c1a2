"""BM25 snapshots: the full engine state in one versioned, checksummed file.

A snapshot is the BM25 engine's whole directory (tantivy's own segment files and
``meta.json``, the ``rowids.npy`` set of indexed rowids and ``state.json``) packed into one
file, so Load restores the index byte for byte without re-reading the store or re-tokenising
anything (issue 5 item 3: "real persistence, not a sidecar").

Layout (all integers little-endian)::

    magic        8 bytes   b"RLBM25SN"
    header_len   4 bytes   uint32, length of the JSON header
    header       JSON      SnapshotHeader (format and tokenizer version, doc count, checksum,
                           payload size, member files as [name, size] in payload order, ...)
    payload      bytes     the member files' contents, concatenated in header order

``checksum`` is ``sha256:<hex>`` over the canonical JSON of the header *without* its checksum
field followed by the payload, so a flipped byte anywhere (header or payload) is detected.
Saving writes a temporary file beside the target, fsyncs it and renames it over the target:
a reader sees the old snapshot or the new one, never half of one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path, PurePosixPath
from typing import IO, Final

from ragloom._version import __version__
from ragloom.errors import DbError
from ragloom.index.atomic import plain_mode
from ragloom.index.tokenize import TOKENIZER_VERSION

__all__ = [
    "DEFAULT_SNAPSHOT_NAME",
    "SNAPSHOT_FORMAT_VERSION",
    "SNAPSHOT_MAGIC",
    "SnapshotHeader",
    "load_snapshot",
    "read_header",
    "save_snapshot",
]

SNAPSHOT_MAGIC: Final = b"RLBM25SN"
"""First 8 bytes of every snapshot (ragloom BM25 snapshot)."""
SNAPSHOT_FORMAT_VERSION: Final = 1
"""Bumped whenever the layout above changes; a different version is refused on Load."""
DEFAULT_SNAPSHOT_NAME: Final = "bm25.snapshot"
"""File name of an index's default snapshot, inside the index folder."""
_HEADER_LEN = struct.Struct("<I")
_MAX_HEADER_BYTES: Final = 16 * 1024 * 1024
"""A header larger than this is corrupt (a real one lists a few hundred files at most)."""
_COPY_CHUNK: Final = 1 << 20
"""Bytes per read while hashing and copying (1 MiB)."""
_SKIP_SUFFIXES: Final = (".lock", ".tmp")
"""tantivy's writer/meta lock files and our own temporaries are not part of the state."""


@dataclass(frozen=True, slots=True)
class SnapshotHeader:
    """What a snapshot says about itself; validated on every Load."""

    format_version: int
    tokenizer_version: str
    doc_count: int
    checksum: str
    payload_bytes: int
    files: tuple[tuple[str, int], ...]
    created_at: float
    ragloom_version: str
    source_generation: int | None = None

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form (files as lists)."""
        d = asdict(self)
        d["files"] = [list(f) for f in self.files]
        return d

    def _unsigned(self) -> bytes:
        d = self.to_dict()
        d.pop("checksum")
        return json.dumps(d, sort_keys=True, separators=(",", ":")).encode()


def _members(engine_dir: Path) -> list[tuple[str, Path]]:
    out: list[tuple[str, Path]] = []
    for p in sorted(engine_dir.rglob("*")):
        if not p.is_file() or p.name.endswith(_SKIP_SUFFIXES):
            continue
        out.append((p.relative_to(engine_dir).as_posix(), p))
    return out


def _iter_file(path: Path) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while block := fh.read(_COPY_CHUNK):
            yield block


def save_snapshot(
    engine_dir: Path,
    path: Path,
    *,
    doc_count: int,
    source_generation: int | None = None,
) -> int:
    """Pack ``engine_dir`` into the snapshot ``path`` atomically; returns bytes written.

    The caller guarantees nothing writes to ``engine_dir`` meanwhile (the actor only saves in
    Ready or Empty, from its serialised writer lane). Failures raise :class:`DbError` with the
    inner message and leave any previous snapshot at ``path`` untouched.
    """
    try:
        members = _members(engine_dir)
        files = tuple((name, p.stat().st_size) for name, p in members)
        unsigned = SnapshotHeader(
            format_version=SNAPSHOT_FORMAT_VERSION,
            tokenizer_version=TOKENIZER_VERSION,
            doc_count=doc_count,
            checksum="",
            payload_bytes=sum(size for _, size in files),
            files=files,
            created_at=time.time(),
            ragloom_version=__version__,
            source_generation=source_generation,
        )
        digest = hashlib.sha256(unsigned._unsigned())
        for _, p in members:
            for block in _iter_file(p):
                digest.update(block)
        header = replace(unsigned, checksum=f"sha256:{digest.hexdigest()}")
        head = json.dumps(header.to_dict(), sort_keys=True).encode()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            plain_mode(fd)
            written = 0
            with os.fdopen(fd, "wb") as out:
                out.write(SNAPSHOT_MAGIC)
                out.write(_HEADER_LEN.pack(len(head)))
                out.write(head)
                written = len(SNAPSHOT_MAGIC) + _HEADER_LEN.size + len(head)
                for (_, p), (name, size) in zip(members, files, strict=True):
                    n = 0
                    for block in _iter_file(p):
                        out.write(block)
                        n += len(block)
                    if n != size:
                        raise DbError(f"bm25 file {name} changed while saving")
                    written += n
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return written
    except DbError:
        raise
    except OSError as exc:
        raise DbError(f"cannot save bm25 snapshot to {path}: {exc}") from exc


def _read_exact(fh: IO[bytes], n: int, path: Path, what: str) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise DbError(f"bm25 snapshot {path} is truncated (in the {what})")
    return data


def _parse_header(raw: bytes, path: Path) -> SnapshotHeader:
    try:
        d = json.loads(raw)
        files = tuple((str(name), int(size)) for name, size in d.pop("files"))
        header = SnapshotHeader(files=files, **d)
    except (ValueError, TypeError, KeyError) as exc:
        raise DbError(f"bm25 snapshot {path} has a corrupt header: {exc}") from exc
    if header.format_version != SNAPSHOT_FORMAT_VERSION:
        raise DbError(
            f"bm25 snapshot {path} has format version {header.format_version}, this ragloom "
            f"reads version {SNAPSHOT_FORMAT_VERSION}; rebuild the BM25 index"
        )
    if header.tokenizer_version != TOKENIZER_VERSION:
        raise DbError(
            f"bm25 snapshot {path} was made with tokenizer {header.tokenizer_version!r}, this "
            f"ragloom uses {TOKENIZER_VERSION!r}; rebuild the BM25 index"
        )
    if header.payload_bytes != sum(size for _, size in header.files):
        raise DbError(f"bm25 snapshot {path} has a corrupt header: sizes do not add up")
    for name, size in header.files:
        pure = PurePosixPath(name)
        if pure.is_absolute() or ".." in pure.parts or not name or size < 0:
            raise DbError(f"bm25 snapshot {path} has a corrupt header: bad member {name!r}")
    return header


def read_header(path: Path) -> SnapshotHeader:
    """Read and validate a snapshot's magic, header, format and tokenizer version.

    The payload checksum is not verified here (that needs the whole file); use
    :func:`load_snapshot` for a full check. Raises :class:`DbError` with a clear message.
    """
    try:
        with path.open("rb") as fh:
            return _read_head(fh, path)
    except OSError as exc:
        raise DbError(f"cannot read bm25 snapshot {path}: {exc}") from exc


def _read_head(fh: IO[bytes], path: Path) -> SnapshotHeader:
    magic = fh.read(len(SNAPSHOT_MAGIC))
    if magic != SNAPSHOT_MAGIC:
        raise DbError(f"{path} is not a ragloom BM25 snapshot (bad magic)")
    (n,) = _HEADER_LEN.unpack(_read_exact(fh, _HEADER_LEN.size, path, "header length"))
    if n > _MAX_HEADER_BYTES:
        raise DbError(f"bm25 snapshot {path} has a corrupt header: length {n}")
    return _parse_header(_read_exact(fh, n, path, "header"), path)


def load_snapshot(path: Path, dest_dir: Path) -> tuple[SnapshotHeader, int]:
    """Verify the snapshot ``path`` and unpack it into the new folder ``dest_dir``.

    Returns the header and the number of bytes read. Every check (magic, format version,
    tokenizer version, size, checksum) happens before the caller opens the engine; on any
    failure ``dest_dir`` is removed and :class:`DbError` says what is wrong.
    """
    if dest_dir.exists():
        raise DbError(f"cannot unpack bm25 snapshot into {dest_dir}: it already exists")
    try:
        with path.open("rb") as fh:
            header = _read_head(fh, path)
            total = fh.tell() + header.payload_bytes
            actual = os.fstat(fh.fileno()).st_size
            if actual != total:
                raise DbError(
                    f"bm25 snapshot {path} is {actual} bytes, its header says {total}: "
                    "the file is truncated or has trailing data"
                )
            digest = hashlib.sha256(header._unsigned())
            dest_dir.mkdir(parents=True, exist_ok=False)
            for name, size in header.files:
                target = dest_dir / name
                target.parent.mkdir(parents=True, exist_ok=True)
                left = size
                with target.open("wb") as out:
                    while left:
                        block = _read_exact(fh, min(left, _COPY_CHUNK), path, "payload")
                        digest.update(block)
                        out.write(block)
                        left -= len(block)
            got = f"sha256:{digest.hexdigest()}"
            if got != header.checksum:
                raise DbError(
                    f"bm25 snapshot {path} checksum mismatch (file corrupted): header says "
                    f"{header.checksum}, content hashes to {got}; rebuild the BM25 index"
                )
            return header, total
    except BaseException as exc:
        shutil.rmtree(dest_dir, ignore_errors=True)
        if isinstance(exc, OSError):
            raise DbError(f"cannot load bm25 snapshot {path}: {exc}") from exc
        raise
