"""BM25 over whole files: one document per version of a file (issue 22; docs/ranking.md,
"A BM25 over whole files").

The chunk index (:mod:`ragloom.index.bm25`) scores each chunk alone, so a file whose words
are spread over several chunks (the class in one, the method that uses it in another) scores
no better than its best chunk. The learned ranking stage reads, for each candidate file, the
BM25 score of the whole file for the question (:mod:`ragloom.retrieve.stages.features`).
With it the model's held-back commit-message MRR@10 is +0.043 over the hand-set order without
history and +0.069 with it, against +0.024 and +0.039 without it.

A document is a file version's path and the texts of its chunks (they tile the file, so
together they are its text; their order does not matter to BM25), tokenised as the chunk
index tokenises, in one ``body`` field, under the key :func:`file_key` of the file's path and
content hash. Like the chunk index, the engine holds the files of the published and of the
pending generation (:func:`sync_file_bm25` runs before and after each publish), so a reader
that reloads at a new generation finds its files; a file's two versions are two keys, the
old one dropped after the publish. A reader asks for the files it ranks by their keys in its
own generation (:class:`FileBm25Reader`), so a version the generation does not show is never
read. An index made before this module has no ``bm25-files`` folder: the next ``ragloom
index`` builds it from the store, and until then the learned stage ranks with the hand-set
order (it never reads made-up scores).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from ragloom.errors import DbError
from ragloom.index.bm25 import TantivyBm25
from ragloom.index.tokenize import code_tokens

__all__ = [
    "FILE_BM25_DIR",
    "FILE_FIELDS",
    "FileBm25Reader",
    "FileScorer",
    "FileVersions",
    "add_pending_files",
    "file_document",
    "file_key",
    "open_file_bm25",
    "sync_around_publish",
    "sync_file_bm25",
]

log = logging.getLogger("ragloom.index")

FILE_BM25_DIR = "bm25-files"
"""The engine's folder inside an index folder."""
FILE_FIELDS = ("body",)
"""A file document has one field: its path and text."""
ProgressFn = Callable[[str, int, int], None]
"""progress(stage, done, total), as the indexer's."""
_FEED_BATCH = 500
"""Files whose chunk texts are read from the store at once."""


class FileVersions(Protocol):
    """What :func:`sync_file_bm25` reads from a store."""

    def file_versions(
        self, paths: Sequence[str] | None = None
    ) -> tuple[dict[str, str], dict[str, str]]:
        """(path -> content hash of the published generation's files, the same for the
        pending generation's; empty when none is pending), of every file or of ``paths``."""
        ...

    def file_texts(self, paths: Sequence[str], *, pending: bool) -> dict[str, list[str]]:
        """The chunk texts of each of ``paths`` in the published (or pending) generation."""
        ...

    def pending_generation(self) -> int | None:
        """The generation an update is writing and has not published yet, if any."""
        ...


def file_key(path: str, content_hash: str) -> int:
    """The engine key of one version of one file: 63 bits of a hash of its path and content
    hash (positive, so it fits tantivy's signed integer field)."""
    digest = hashlib.blake2b(f"{path}\0{content_hash}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFF_FFFF_FFFF_FFFF


def file_document(path: str, texts: Iterable[str]) -> str:
    """The indexed token string of a file: the code tokens of its path and of each text."""
    tokens = code_tokens(path)
    for text in texts:
        tokens.extend(code_tokens(text))
    return " ".join(tokens)


def open_file_bm25(index_dir: Path, *, create: bool = False) -> TantivyBm25 | None:
    """The file engine of ``index_dir`` (None when it has none and ``create`` is false)."""
    directory = index_dir / FILE_BM25_DIR
    if not create and not (directory / "engine").is_dir():
        return None
    return TantivyBm25(directory, create=create, fields=FILE_FIELDS)


def sync_file_bm25(
    store: FileVersions, engine: TantivyBm25, progress: ProgressFn | None = None
) -> int:
    """Make ``engine`` hold exactly the file versions of the published and the pending
    generation; returns the documents added. Idempotent, so a run killed anywhere is
    repaired by the next. ``progress(stage, done, total)`` hears ``bm25-files``."""
    published, pending = store.file_versions()
    want: dict[int, tuple[str, bool]] = {}
    for path, digest in published.items():
        want[file_key(path, digest)] = (path, False)
    for path, digest in pending.items():
        want.setdefault(file_key(path, digest), (path, True))
    have = engine.held_rowids()
    keys = np.fromiter(want, dtype=np.int64, count=len(want))
    add = np.setdiff1d(keys, have)
    remove = np.setdiff1d(have, keys)
    if not len(add) and not len(remove):
        return 0
    docs: list[tuple[int, str]] = []
    todo = [(int(k), *want[int(k)]) for k in add.tolist()]
    if progress is not None:
        progress("bm25-files", 0, len(todo))
    for side in (False, True):
        part = [(k, p) for k, p, pend in todo if pend is side]
        for start in range(0, len(part), _FEED_BATCH):
            batch = part[start : start + _FEED_BATCH]
            texts = store.file_texts([p for _, p in batch], pending=side)
            docs.extend((k, file_document(p, texts.get(p, ()))) for k, p in batch)
            if progress is not None:
                progress("bm25-files", len(docs), len(todo))
    engine.apply(docs, remove.tolist())
    return len(docs)


def add_pending_files(store: FileVersions, engine: TantivyBm25, paths: Sequence[str]) -> list[int]:
    """:func:`sync_file_bm25` for one small update whose changed files are ``paths``, the
    engine in step before it (a watcher's batch): add the pending versions of ``paths``, and
    return the keys of their published versions that the update replaces (drop them after
    the publish: ``engine.apply([], keys)``). Reads those files only, not the whole store. A
    run killed between the two leaves keys the next full sync removes. Nothing without a
    pending generation (then nothing is replaced)."""
    if not paths or store.pending_generation() is None:
        return []
    published, pending = store.file_versions(paths)
    new = {file_key(p, h): p for p, h in pending.items() if published.get(p) != h}
    stale = [file_key(p, h) for p, h in published.items() if pending.get(p) != h]
    have = set(engine.held_rowids().tolist()) if new else set()
    todo = [(k, p) for k, p in new.items() if k not in have]
    if todo:
        texts = store.file_texts([p for _, p in todo], pending=True)
        engine.apply([(k, file_document(p, texts.get(p, ()))) for k, p in todo], [])
    return stale


def sync_file_bm25_or_rebuild(
    store: FileVersions, index_dir: Path, progress: ProgressFn | None = None
) -> int:
    """:func:`sync_file_bm25` on ``index_dir``'s engine (created when missing); an engine that
    cannot be opened or written is rebuilt from the store, the source of truth."""
    directory = index_dir / FILE_BM25_DIR
    try:
        engine = TantivyBm25(directory, create=True, fields=FILE_FIELDS)
        return sync_file_bm25(store, engine, progress)
    except (DbError, ValueError) as exc:
        log.warning(
            "file bm25 index unusable, rebuilding",
            extra={"path": str(directory), "error": str(exc)},
        )
    return sync_file_bm25(store, TantivyBm25.reset(directory, FILE_FIELDS), progress)


def sync_around_publish(
    store: FileVersions,
    index_dir: Path,
    changed: Sequence[str] | None,
    progress: ProgressFn | None = None,
) -> Callable[[], object]:
    """Before a publish, bring ``index_dir``'s file engine in line (the versions of both
    generations); returns what to run after the publish (drop the replaced versions).
    ``changed``: the files of a watcher's batch, the engine in step before it
    (:func:`add_pending_files`, which reads those files only: a full sync reads every file's
    hash, 8 ms at 100k chunks); None: a full :func:`sync_file_bm25` on both sides."""
    if changed is not None:
        try:
            engine = open_file_bm25(index_dir)
            if engine is not None:
                stale = add_pending_files(store, engine, changed)
                return lambda: _drop_or_sync(store, index_dir, engine, stale)
        except (DbError, ValueError) as exc:
            log.warning("file bm25 update failed, syncing", extra={"error": str(exc)})
    sync_file_bm25_or_rebuild(store, index_dir, progress)
    return lambda: sync_file_bm25_or_rebuild(store, index_dir, progress)


def _drop_or_sync(
    store: FileVersions, index_dir: Path, engine: TantivyBm25, stale: Sequence[int]
) -> None:
    if not stale:
        return
    try:
        engine.apply([], list(stale))
    except (DbError, ValueError) as exc:
        log.warning("file bm25 update failed, syncing", extra={"error": str(exc)})
        sync_file_bm25_or_rebuild(store, index_dir)


class FileScorer(Protocol):
    """What a reader asks of a BM25 over whole files (:class:`FileBm25Reader` for an index
    folder, :class:`~ragloom.index.pg_search.PgFileBm25` for PostgreSQL)."""

    def reload(self) -> None:
        """Take the engine's last commit (the reader's generation changed)."""
        ...

    def scores(
        self, query: str | Sequence[tuple[str, float]], paths: Sequence[str], generation: object
    ) -> dict[str, float] | None:
        """Score of ``query`` for each of ``paths`` the generation shows (None: none kept)."""
        ...


class FileBm25Reader:
    """Whole-file BM25 scores for a reader: the engine, and the keys of the files of the
    generation the reader answers from."""

    def __init__(self, engine: TantivyBm25, files: Callable[[], Mapping[str, str]]) -> None:
        self.engine = engine
        self._files = files
        """path -> content hash of the published generation's files (the store's
        ``file_hashes``)."""
        self._keys: tuple[object, dict[str, int]] | None = None

    def reload(self) -> None:
        self.engine.reload()

    def scores(
        self,
        query: str | Sequence[tuple[str, float]],
        paths: Sequence[str],
        generation: object,
    ) -> dict[str, float]:
        """BM25 score of ``query`` for each of ``paths`` (0.0 where no term matches or the
        engine does not hold the file's version; paths the generation does not show are left
        out). The files' keys are read once per ``generation`` (the reader's pinned one)."""
        cached = self._keys
        if cached is None or cached[0] != generation:
            cached = (generation, {p: file_key(p, h) for p, h in self._files().items()})
            self._keys = cached
        keys = cached[1]
        wanted = {p: keys[p] for p in paths if p in keys}
        got = self.engine.scores_of(query, list(wanted.values()))
        return {p: got.get(k, 0.0) for p, k in wanted.items()}
