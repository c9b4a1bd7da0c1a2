"""The service's settings and constants: BM25 client timeouts, lenient retries and backoff,
strict error texts, and the shapes of the dense backend and the embedding lookup.

Every default comes from the seed (ploke-rag-plan.md section 3 D and F) or issue 5 item 2.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from ragloom.errors import ConfigError
from ragloom.service.bm25_actor import DEFAULT_TIMEOUT_MS

__all__ = [
    "BM25_EMPTY_MESSAGE",
    "BM25_NOT_READY_MESSAGE",
    "DEFAULT_BACKOFF_MS",
    "DEFAULT_RETRIES",
    "HYBRID_CANDIDATES_MIN",
    "Bm25Config",
    "DenseSearch",
    "EmbeddingLookup",
    "Hits",
]

DEFAULT_RETRIES: Final = 2
"""Lenient retries on Building/Uninitialized (ploke-rag-plan.md section 3 D)."""
DEFAULT_BACKOFF_MS: Final = (50.0, 100.0)
"""Sleep before retry 1 and 2 (ploke-rag-plan.md section 3 D: "50ms, 100ms")."""
BM25_NOT_READY_MESSAGE: Final = "bm25 index not ready"
"""Strict error text (issue 5 item 2)."""
BM25_EMPTY_MESSAGE: Final = "bm25 index empty"
"""Strict error text (issue 5 item 2)."""
HYBRID_CANDIDATES_MIN: Final = 50
"""Depth of each modality's list before fusion (the MMR candidate_pool default, 50; same as
:data:`ragloom.retrieve.search.HYBRID_CANDIDATES_MIN`)."""

Hits = list[tuple[int, float]]
DenseSearch = Callable[[str, int], Awaitable[Hits]] | Callable[[str, int], Hits]
"""``dense(query, k)``: ``(rowid, score)`` best first; async, or sync (run in a thread)."""
EmbeddingLookup = Callable[[Sequence[int]], Mapping[int, np.ndarray]]
"""``lookup(rowids)``: stored embeddings by rowid, for MMR (sync, run in a thread)."""


@dataclass(frozen=True, slots=True)
class Bm25Config:
    """BM25 client settings (ploke-rag-plan.md section 3 F: ``RagConfig.bm25``)."""

    timeout_ms: float = DEFAULT_TIMEOUT_MS
    retries: int = DEFAULT_RETRIES
    backoff_ms: tuple[float, ...] = DEFAULT_BACKOFF_MS
    strict_default: bool = False
    persist_path: Path | None = None

    def __post_init__(self) -> None:
        if not self.timeout_ms > 0:
            raise ConfigError(f"bm25 timeout_ms must be > 0, got {self.timeout_ms!r}")
        if isinstance(self.retries, bool) or not isinstance(self.retries, int):
            raise ConfigError(f"bm25 retries must be an int, got {self.retries!r}")
        if self.retries < 0:
            raise ConfigError(f"bm25 retries must be >= 0, got {self.retries}")
        if len(self.backoff_ms) < self.retries:
            raise ConfigError(
                f"bm25 backoff_ms needs one sleep per retry ({self.retries}), "
                f"got {list(self.backoff_ms)}"
            )
        if any(not b >= 0 for b in self.backoff_ms):
            raise ConfigError(f"bm25 backoff_ms must be >= 0, got {list(self.backoff_ms)}")
