"""Persistent HNSW vector index (cosine), backed by hnswlib.

Why hnswlib (figures in docs/index-choices.md, measured on this machine): at 100k x 384 it
answered in 0.32 ms p50 with recall@10 1.000, built in 16 s (usearch 37 s, faiss 21 s), and
supports deletes with slot reuse (faiss HNSW cannot delete).

Labels are chunk rowids. The file is rewritten atomically (temporary file, then rename) after
every update, and ``labels.npz`` beside it lists the labels it holds together with the identity
(inode, size, mtime) of the file it describes, so the index is brought in line with the store by
a set difference after a crash, and a reader never pairs a new file with an old label list (it
waits for the pair to match, a few ms, while a writer is between the two renames). Folders
written before ``labels.npz`` existed keep a bare ``rowids.npy``, which is still read.

Readers call :meth:`HnswVectors.refreshed` before each query: one ``stat``, and a reload only
when the file was replaced (docs/consistency.md).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import struct
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragloom.index.atomic import atomic_write_bytes, atomic_write_json, load_npy, plain_mode

__all__ = [
    "HNSW_EF_CONSTRUCTION",
    "HNSW_M",
    "HnswVectors",
    "is_live",
    "live_vectors",
    "persist_live",
    "share_live",
    "unshare_live",
]

log = logging.getLogger("ragloom")

HNSW_M = 16
"""Graph degree: hnswlib's recommended default; recall@10 1.000 at 100k in DEPENDENCIES.md."""
HNSW_EF_CONSTRUCTION = 100
"""Build-time beam width (DEPENDENCIES.md measurement setting)."""
HNSW_EF_SEARCH_MIN = 100
"""Search beam width floor (raised to 2k for large k): recall@10 1.000 at 100k measured."""
_INITIAL_CAPACITY = 1024
REBUILD_SHARE = 0.3
"""A change that deletes at least this share of the vectors held (a batch that rewrote most of
the index) builds the graph again from the vectors that stay and the new ones, in rowid order
as a first build inserts them, instead of reusing the deleted slots: inserted into an old graph
whose links run through deleted nodes, a large cluster of new vectors left dense recall@10 at
0.24-0.46 where a fresh build reached 0.73-0.81 (docs/live-index.md, "A batch that replaces
most of the index")."""
_PAIR_WAIT_S = 0.005
_PAIR_ATTEMPTS = 20
"""A reader retries this many times, this long apart, while the file and its labels disagree
(a writer between its two renames, ~ms); past that (a writer killed between them) it loads the
file alone and searches defensively, until the next index run writes a matching pair."""

Ident = tuple[int, int, int]


def _ident(path: Path) -> Ident | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


_HEADER = struct.Struct("<6Q")
"""The start of an hnswlib index file: six size_t fields, the fifth (``label_offset_``) less
the sixth (``offsetData_``) being the bytes of one vector."""


def file_dim(path: Path) -> int | None:
    """The dimension of the float vectors an hnswlib index file holds, read from its header
    (None when the file cannot be read or does not look like one). hnswlib loads a file with
    whatever dimension its caller names and then compares only that many floats of each
    vector: a file of another model's vectors (``ragloom index --model OTHER`` by another
    process) would answer every search with nonsense, and this is how it is told apart."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_HEADER.size)
    except OSError:
        return None
    if len(head) < _HEADER.size:
        return None
    label_offset, offset_data = _HEADER.unpack(head)[4:6]
    size = label_offset - offset_data
    return size // 4 if size > 0 and size % 4 == 0 else None


def _read_labels(directory: Path) -> tuple[np.ndarray | None, Ident | None]:
    """(rowids, identity of the file they describe) from ``labels.npz``; the legacy
    ``rowids.npy`` has no identity."""
    try:
        with np.load(directory / "labels.npz", allow_pickle=False) as data:
            rowids = np.asarray(data["rowids"], dtype=np.int64)
            ident = tuple(int(x) for x in data["ident"])
        return rowids, (ident[0], ident[1], ident[2])
    except (OSError, ValueError, KeyError, IndexError):
        pass
    return load_npy(directory / "rowids.npy"), None


class HnswVectors:
    """An hnswlib cosine index over L2-normalised vectors, labelled by chunk rowid."""

    def __init__(self, directory: Path, dim: int, key: str | None = None) -> None:
        import hnswlib

        self.directory = directory
        self.dim = dim
        self.key = key
        """Embedding storage key the vectors were made under (``embedding_key``)."""
        self._hnswlib: Any = hnswlib
        self._index: Any = None
        self._members: set[int] | None = None
        self._rowids: np.ndarray = np.zeros(0, dtype=np.int64)
        self._ident: Ident | None = None
        self._verified = True
        """False when the label list could not be matched with the file (see _PAIR_ATTEMPTS)."""
        self._lock = threading.RLock()
        """Held by searches and by changes in memory: a shared (live) index is changed by the
        writer thread while request threads search it (hnswlib's resize is not thread-safe)."""
        self.dirty = False
        """True when the index in memory holds changes the file does not (a live index applies
        changes without saving; :func:`persist_live` saves them)."""
        self.damaged: str | None = None
        """Why the file in the folder could not be loaded (nothing is searched; the next
        writer replaces it)."""
        self.foreign_key: str | None = None
        """The embedding key the folder's vectors were saved under when it is not :attr:`key`
        (given): nothing is loaded from it, and searches find nothing."""
        self.foreign_dim: int | None = None
        """The dimension of the file in the folder when it is not :attr:`dim` (another model's
        vectors): nothing is loaded from it, and searches find nothing, rather than compare
        the first ``dim`` floats of each of its vectors with the query's."""
        self._load()

    def _load(self) -> None:
        path = self.directory / "vectors.hnsw"
        for attempt in range(_PAIR_ATTEMPTS + 1):
            ident = _ident(path)
            rowids, described = _read_labels(self.directory)
            if ident is None or rowids is None or not len(rowids):
                self._ident = ident
                return
            last = attempt == _PAIR_ATTEMPTS
            if described is not None and described != ident and not last:
                time.sleep(_PAIR_WAIT_S)
                continue
            found = file_dim(path)
            if found is not None and found != self.dim:
                if _ident(path) != ident and not last:
                    continue  # replaced while reading its header
                log.warning(
                    "vector index %s holds %d-d vectors, not the %d-d of this index's model "
                    "(re-embedded with another model since it was opened): not searched",
                    path,
                    found,
                    self.dim,
                )
                self.foreign_dim = found
                self._ident = ident
                return
            stored = HnswVectors.stored_key(self.directory) if self.key is not None else None
            if stored is not None and stored != self.key:
                # vectors of another model of the same dimension (a model switch killed between
                # its manifest and its vector files): compared with this model's queries they
                # would rank at random, silently; the next `ragloom index` rebuilds them
                log.warning(
                    "vector index %s was made under %s, not this index's %s: not searched "
                    "(`ragloom index` rebuilds it from the stored embeddings)",
                    path,
                    stored,
                    self.key,
                )
                self.foreign_key = stored
                self._ident = ident
                return
            index = self._hnswlib.Index(space="cosine", dim=self.dim)
            try:
                index.load_index(str(path), allow_replace_deleted=True)
            except (RuntimeError, OSError) as exc:
                if not last and _ident(path) != ident:
                    continue  # replaced while loading
                # derived data (the store keeps every vector): searched as empty, so BM25,
                # `status` and the next `index` (which writes the file anew from the store)
                # still work; a damaged file blocked every command, `--rebuild` too
                log.warning(
                    "vector index %s cannot be read (%s): dense search finds nothing until "
                    "`ragloom index` writes it again",
                    path,
                    exc,
                )
                self.damaged = str(exc)
                self._ident = ident
                return
            if _ident(path) != ident and not last:
                continue
            self._index = index
            self._rowids = rowids
            self._ident = ident
            self._verified = described == ident or described is None
            return

    def refreshed(self) -> HnswVectors:
        """This index, or a fresh load when the file on disk was replaced since (one stat).
        A live index replaced so (another process's update wrote the file: it holds every
        vector of the store) is replaced in the registry too, so readers and writer of this
        process keep sharing one."""
        if _ident(self.directory / "vectors.hnsw") == self._ident:
            return self
        fresh = HnswVectors(self.directory, self.dim, self.key)
        with _LIVE_LOCK:
            d = self.directory.resolve()
            if _LIVE.get(d) is self:
                _LIVE[d] = fresh
        return fresh

    def rowids(self) -> np.ndarray:
        """The labels the index holds (for a writer; see :meth:`held_rowids`)."""
        return self._rowids

    def held_rowids(self) -> np.ndarray:
        """The labels to diff against the store: the label list, or, when it could not be
        matched with the file (a writer killed between its renames), every label in the file
        (marked-deleted ones too: deleting those again is a no-op)."""
        if self._verified or self._index is None:
            return self._rowids
        return np.unique(np.asarray(self._index.get_ids_list(), dtype=np.int64))

    def get(self, rowids: Sequence[int]) -> dict[int, np.ndarray]:
        """The stored (unit-length, cosine space) vectors of the rowids the index holds."""
        with self._lock:
            return self._get(rowids)

    def _get(self, rowids: Sequence[int]) -> dict[int, np.ndarray]:
        if self._index is None or not len(rowids):
            return {}
        if self._members is None:
            self._members = set(self._rowids.tolist())
        present = [int(r) for r in rowids if int(r) in self._members]
        if not present:
            return {}
        try:
            mat = np.asarray(self._index.get_items(present, return_type="numpy"), dtype=np.float32)
        except RuntimeError:  # a label marked deleted: fall back to one at a time
            out: dict[int, np.ndarray] = {}
            for r in present:
                with contextlib.suppress(RuntimeError):
                    out[r] = np.asarray(self._index.get_items([r], return_type="numpy")[0])
            return out
        return {r: mat[i] for i, r in enumerate(present)}

    @staticmethod
    def stored_key(directory: Path) -> str | None:
        """The embedding key recorded by the last save in ``directory`` (None if unknown)."""
        try:
            state = json.loads((directory / "state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        key = state.get("key") if isinstance(state, dict) else None
        return key if isinstance(key, str) else None

    @staticmethod
    def stored_labels(directory: Path) -> np.ndarray | None:
        """The labels the saved index holds, read from its label list alone (no graph load);
        None when the list does not describe the file there (load the index to know)."""
        ident = _ident(directory / "vectors.hnsw")
        rowids, described = _read_labels(directory)
        if ident is None:
            return np.zeros(0, dtype=np.int64)
        if rowids is None or (described is not None and described != ident):
            return None
        return rowids

    @staticmethod
    def stored_dim(directory: Path) -> int | None:
        """The dimension recorded by the last save in ``directory`` (None if unknown)."""
        try:
            state = json.loads((directory / "state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        dim = state.get("dim") if isinstance(state, dict) else None
        return dim if isinstance(dim, int) and not isinstance(dim, bool) else None

    def count(self) -> int:
        return len(self._rowids)

    def search(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Top ``k`` (rowid, cosine similarity), best first."""
        n = len(self._rowids)
        if self._index is None or n == 0 or k <= 0:
            return []
        k = min(k, n)
        while k > 0:
            try:
                with self._lock:
                    self._index.set_ef(max(HNSW_EF_SEARCH_MIN, 2 * k))
                    labels, distances = self._index.knn_query(vector.reshape(1, -1), k=k)
            except RuntimeError:
                # fewer live vectors than k (a label list out of step with the file) or a graph
                # too sparse after many deletions: ask for fewer
                k //= 2
                continue
            # similarity in float32, as hnswlib's distances are (one array op, not a Python
            # subtraction per hit): the same values NumPy 2 gives for ``1.0 - d`` one by one
            sims = (np.float32(1.0) - distances[0].astype(np.float32, copy=False)).tolist()
            return list(zip(labels[0].tolist(), sims, strict=True))
        return []

    def apply(
        self,
        add_rowids: np.ndarray,
        add_vectors: np.ndarray,
        remove: Sequence[int],
        *,
        persist: bool = True,
    ) -> None:
        """Delete and add labels, then save atomically (index file, then the rowid list).
        ``persist`` False changes the index in memory only (:attr:`dirty`): a live index shared
        with the readers of this process, saved later by :meth:`save`."""
        with self._lock:
            self._apply_in_memory(add_rowids, add_vectors, remove)
            self.dirty = True
        if persist:
            self.save()

    def _apply_in_memory(
        self, add_rowids: np.ndarray, add_vectors: np.ndarray, remove: Sequence[int]
    ) -> None:
        hnswlib = self._hnswlib
        held = self.held_rowids()
        gone = np.asarray([int(r) for r in remove], dtype=np.int64)
        present = gone[np.isin(gone, held)] if len(gone) else gone
        rebuild = len(held) and len(present) >= REBUILD_SHARE * len(held)
        if self._index is not None and rebuild:
            # what stays: the label list, or every label of the file when the list could not be
            # matched with it (a copied folder), less what this change deletes or replaces
            kept = np.asarray(held, dtype=np.int64)
            kept = kept[~np.isin(kept, present) & ~np.isin(kept, add_rowids)]
            kept, kept_vectors = self._live_items(kept)
            ids = np.concatenate([kept, np.asarray(add_rowids, dtype=np.int64)])
            vectors = np.concatenate(
                [kept_vectors, np.asarray(add_vectors, dtype=np.float32).reshape(-1, self.dim)]
            )
            order = np.argsort((ids * 2654435761) % (1 << 32), kind="stable")
            self._index = None
            self._verified = True  # the new graph holds exactly the new label list
            held = np.zeros(0, dtype=np.int64)
            present = np.zeros(0, dtype=np.int64)
            add_rowids, add_vectors = ids[order], vectors[order]
        if self._index is None:
            self._index = hnswlib.Index(space="cosine", dim=self.dim)
            self._index.init_index(
                max_elements=max(_INITIAL_CAPACITY, len(add_rowids)),
                ef_construction=HNSW_EF_CONSTRUCTION,
                M=HNSW_M,
                allow_replace_deleted=True,
            )
        index = self._index
        for rowid in present.tolist():
            with contextlib.suppress(RuntimeError):  # already deleted: a replay after a crash
                index.mark_deleted(int(rowid))
        if len(add_rowids):
            needed = index.get_current_count() + len(add_rowids)
            if needed > index.get_max_elements():
                index.resize_index(max(needed, int(index.get_max_elements() * 1.5)))
            # one thread: the graph depends on the insertion order only, so the same vectors
            # give the same graph and the same answers (several threads insert in a racing
            # order; the learned ranking's training data must be mined reproducibly)
            index.add_items(
                np.ascontiguousarray(add_vectors, dtype=np.float32),
                np.asarray(add_rowids, dtype=np.int64),
                num_threads=1,
                replace_deleted=True,
            )
        # numpy, not a Python set of every rowid: ~3 ms instead of ~25 ms at 100k vectors
        ids = held[~np.isin(held, present)] if len(present) else np.asarray(held, dtype=np.int64)
        if len(add_rowids):
            ids = np.union1d(ids, np.asarray(add_rowids, dtype=np.int64))
        self._rowids = np.unique(ids)
        self._members = None

    def _live_items(self, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The labels of ``labels`` the graph holds undeleted, and their vectors (a label of
        the file's list that was marked deleted is left out)."""
        index = self._index
        try:
            got = np.asarray(index.get_items(labels), dtype=np.float32).reshape(-1, self.dim)
            return labels, got
        except RuntimeError:  # a deleted label among them: one by one
            kept: list[int] = []
            rows: list[np.ndarray] = []
            for label in labels.tolist():
                try:
                    rows.append(np.asarray(index.get_items([label]), dtype=np.float32)[0])
                except RuntimeError:
                    continue
                kept.append(label)
            vectors = np.stack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)
            return np.asarray(kept, dtype=np.int64), vectors

    def save(self) -> None:
        """Write the index in memory to its folder atomically (the file, then its label list).
        Holds the GIL for the whole write (hnswlib does not release it): ~0.5 s at 100k."""
        with self._lock:
            if self._index is None:
                return
            self._save_locked()
            self.dirty = False

    def _save_locked(self) -> None:
        index = self._index
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".vectors.", suffix=".tmp")
        plain_mode(fd)
        os.close(fd)
        try:
            index.save_index(tmp)
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, self.directory / "vectors.hnsw")
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        ident = _ident(self.directory / "vectors.hnsw")
        assert ident is not None
        buf = io.BytesIO()
        np.savez(buf, rowids=self._rowids, ident=np.array(ident, dtype=np.int64))
        atomic_write_bytes(self.directory / "labels.npz", buf.getvalue())
        self._ident = ident
        self._verified = True
        (self.directory / "rowids.npy").unlink(missing_ok=True)
        atomic_write_json(
            self.directory / "state.json",
            {"dim": self.dim, "count": len(self._rowids), "key": self.key},
        )


# -- live indexes: one in-memory index shared by a writer and the readers of one process -----

_LIVE: dict[Path, HnswVectors] = {}
_LIVE_LOCK = threading.Lock()


def share_live(vectors: HnswVectors) -> None:
    """Make ``vectors`` (a reader's loaded index) the live index of its folder in this process:
    an update run here applies its changes to it in memory instead of loading the file,
    rewriting it and making every reader load it again (each a stall of every thread: hnswlib
    holds the GIL while it reads or writes the file). The file is brought up to date by
    :func:`persist_live`; until then other processes read the previous file, which the next
    update's set difference reconciles like a run killed after its publication."""
    with _LIVE_LOCK:
        _LIVE[vectors.directory.resolve()] = vectors


def live_vectors(directory: Path, dim: int) -> HnswVectors | None:
    """The live index of ``directory`` in this process, if one is shared (and of ``dim``),
    brought in line with the file first (:meth:`HnswVectors.refreshed`)."""
    with _LIVE_LOCK:
        v = _LIVE.get(directory.resolve())
    if v is None or v.dim != dim:
        return None
    return v.refreshed()


def is_live(vectors: HnswVectors) -> bool:
    """Whether ``vectors`` is the live index of its folder in this process."""
    with _LIVE_LOCK:
        return _LIVE.get(vectors.directory.resolve()) is vectors


def unshare_live(directory: Path, *, persist: bool = True) -> None:
    """Stop sharing the live index of ``directory`` (saving it first when ``persist``)."""
    if persist:
        persist_live(directory)
    with _LIVE_LOCK:
        _LIVE.pop(directory.resolve(), None)


def persist_live(directory: Path) -> bool:
    """Save the live index of ``directory`` when it holds unsaved changes; True if it saved.
    The caller holds the index's write lock (no other writer replaces the file meanwhile)."""
    with _LIVE_LOCK:
        v = _LIVE.get(directory.resolve())
    if v is None or not v.dirty:
        return False
    v.save()
    return True
