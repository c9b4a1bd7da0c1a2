"""BM25 state of an index folder for ``ragloom status``, read from disk (no actor needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ragloom.errors import DbError
from ragloom.index.bm25 import TantivyBm25
from ragloom.index.store import Store
from ragloom.retrieve.reader import DB_NAME
from ragloom.service.persist import DEFAULT_SNAPSHOT_NAME, read_header

__all__ = ["bm25_state_for_index"]


def bm25_state_for_index(index_dir: Path) -> dict[str, object]:
    """BM25 state of an index folder for ``ragloom status`` (no actor needed).

    Keys: ``live_status`` (``ready``/``empty``/``uninitialized``/``error``) and ``live_docs``
    for the indexer's engine in ``<index>/bm25``; ``live_unpublished``: how many of those
    documents belong to no published chunk (an update stopped before it published: searches
    never see them, and the next ``ragloom index`` finishes or rolls them back); ``snapshot_path``; ``snapshot`` (the
    validated header as a dict, or ``None`` when there is no snapshot); ``snapshot_error``
    (why the snapshot is unusable, or ``None``); ``snapshot_stale`` (``True`` when the store
    changed since the snapshot was taken, ``None`` when unknown).
    """
    out: dict[str, object] = {}
    out["live_unpublished"] = 0
    try:
        engine = TantivyBm25(index_dir / "bm25")
        docs = engine.doc_count()
        out["live_status"] = "ready" if docs else "empty"
        out["live_docs"] = docs
        if docs and (index_dir / DB_NAME).exists():
            out["live_unpublished"] = _unpublished(engine, index_dir / DB_NAME)
    except DbError:
        out["live_status"] = "uninitialized"
        out["live_docs"] = 0
    except Exception as exc:  # an unreadable engine folder
        out["live_status"] = "error"
        out["live_docs"] = 0
        out["live_error"] = str(exc)
    snap = index_dir / DEFAULT_SNAPSHOT_NAME
    out["snapshot_path"] = str(snap)
    out["snapshot"] = None
    out["snapshot_error"] = None
    out["snapshot_stale"] = None
    if snap.exists():
        try:
            header = read_header(snap)
        except DbError as exc:
            out["snapshot_error"] = str(exc)
        else:
            out["snapshot"] = header.to_dict()
            db = index_dir / DB_NAME
            if header.source_generation is not None and db.exists():
                store = Store(db, readonly=True)
                try:
                    out["snapshot_stale"] = store.generation() != header.source_generation
                finally:
                    store.close()
    return out


def _unpublished(engine: TantivyBm25, db: Path) -> int:
    """Documents ``engine`` holds for rows outside the published generation (20 ms at 56k)."""
    store = Store(db, readonly=True)
    try:
        return int(np.setdiff1d(engine.held_rowids(), store.visible_rowids()).size)
    finally:
        store.close()
