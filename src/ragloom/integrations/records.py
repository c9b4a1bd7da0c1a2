"""What the framework adapters hand over: one :class:`Record` per retrieved chunk or context
part, from one :class:`RecordSource` that owns the warm index.

The adapters (LangChain, LlamaIndex) only translate records into their own document types, so
both return the same texts, scores and metadata for the same question.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any

from ragloom.api import Index
from ragloom.errors import InputError
from ragloom.retrieve.search import DEFAULT_STRATEGY, hit_to_json

__all__ = ["Record", "RecordSource"]


@dataclass(frozen=True, slots=True)
class Record:
    """One retrieved unit: its text, its score and JSON-ready metadata."""

    id: str
    text: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)


class RecordSource:
    """A warm ragloom index answering framework retrievers.

    ``budget=None`` returns the ``top_k`` ranked chunks (the ``ragloom search`` hits);
    a token ``budget`` returns the parts of the assembled context instead (the
    ``ragloom context`` parts: neighbouring hits of one file stitched, duplicates dropped, the
    total inside the budget). Calls are serialised by a lock, so one source can back a
    retriever that a framework calls from several threads.
    """

    def __init__(
        self,
        index: Index,
        *,
        top_k: int = 10,
        strategy: str = DEFAULT_STRATEGY,
        budget: int | None = None,
    ) -> None:
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise InputError(f"top_k must be a positive integer, got {top_k!r}")
        if budget is not None and (
            isinstance(budget, bool) or not isinstance(budget, int) or budget < 1
        ):
            raise InputError(f"budget must be a positive number of tokens, got {budget!r}")
        self.index = index
        self.top_k = top_k
        self.strategy = strategy
        self.budget = budget
        self._lock = threading.Lock()

    @classmethod
    def at(cls, path: str | os.PathLike[str], **kwargs: Any) -> RecordSource:
        """Open the index of a repository root (its ``.ragloom``) or an index folder."""
        return cls(Index.at(path), **kwargs)

    def records(self, query: str) -> list[Record]:
        """Records for ``query``, best first."""
        if not query.strip():
            raise InputError("the query is empty")
        with self._lock:
            if self.budget is None:
                return self._chunks(query)
            return self._parts(query, self.budget)

    def _chunks(self, query: str) -> list[Record]:
        result = self.index.search(query, top_k=self.top_k, strategy=self.strategy)
        return [
            Record(
                id=hit.id,
                text=hit.text,
                score=hit.score,
                metadata={
                    **hit_to_json(hit),
                    "generation": result.generation,
                    "source": "ragloom",
                },
            )
            for hit in result.hits
        ]

    def _parts(self, query: str, budget: int) -> list[Record]:
        ctx = self.index.get_context(query, top_k=self.top_k, budget=budget, strategy=self.strategy)
        return [
            Record(
                id=part.id,
                text=part.text,
                score=part.score,
                metadata={
                    "id": part.id,
                    "path": part.file_path,
                    "ranges": [[a, b] for a, b in part.ranges],
                    "kind": part.kind,
                    "symbol": part.symbol,
                    "symbols": list(part.symbols),
                    "language": part.language,
                    "tokens": part.tokens,
                    "hit_ids": list(part.hit_ids),
                    "trimmed": part.trimmed,
                    "source": "ragloom",
                },
            )
            for part in ctx.parts
        ]

    def close(self) -> None:
        with self._lock:
            self.index.close()
