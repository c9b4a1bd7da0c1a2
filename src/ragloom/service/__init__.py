"""The retrieval service layer: the BM25 actor, its snapshots and :class:`RagService`.

See ``docs/bm25-service.md`` for the status machine, retries, timeouts and snapshot format.
"""

from __future__ import annotations

from ragloom.service.bm25_actor import (
    DEFAULT_TIMEOUT_MS,
    Bm25Actor,
    Bm25Status,
    Building,
    DocumentSource,
    Empty,
    Error,
    Ready,
    StoreDocumentSource,
    Uninitialized,
)
from ragloom.service.persist import DEFAULT_SNAPSHOT_NAME, SnapshotHeader
from ragloom.service.rag import (
    Bm25Config,
    Bm25SearchResult,
    HybridResult,
    RagService,
    SyncRagService,
    bm25_state_for_index,
)

__all__ = [
    "DEFAULT_SNAPSHOT_NAME",
    "DEFAULT_TIMEOUT_MS",
    "Bm25Actor",
    "Bm25Config",
    "Bm25SearchResult",
    "Bm25Status",
    "Building",
    "DocumentSource",
    "Empty",
    "Error",
    "HybridResult",
    "RagService",
    "Ready",
    "SnapshotHeader",
    "StoreDocumentSource",
    "SyncRagService",
    "Uninitialized",
    "bm25_state_for_index",
]
