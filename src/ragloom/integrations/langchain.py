"""A LangChain retriever over a ragloom index (extra ``ragloom[langchain]``).

.. code-block:: python

    from ragloom.integrations.langchain import RagloomRetriever

    retriever = RagloomRetriever.from_path("path/to/repo", top_k=8)
    docs = retriever.invoke("where are BM25 fields weighted?")

Each ``Document`` holds a chunk's text; its metadata carries the path, lines, symbol and score.
With ``budget=`` (tokens) the documents are the parts of ragloom's assembled context instead.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from ragloom.integrations.records import Record, RecordSource

__all__ = ["RagloomRetriever"]


def _document(record: Record) -> Document:
    return Document(
        page_content=record.text,
        metadata={**record.metadata, "score": record.score},
        id=record.id,
    )


class RagloomRetriever(BaseRetriever):
    """LangChain ``BaseRetriever`` answering from a warm ragloom index."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    source: RecordSource
    """The index and the retrieval settings (top_k, strategy, budget)."""

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], **kwargs: Any) -> RagloomRetriever:
        """Open the index of a repository root or index folder; ``kwargs`` go to
        :class:`~ragloom.integrations.records.RecordSource` (``top_k``, ``strategy``,
        ``budget``)."""
        return cls(source=RecordSource.at(path, **kwargs))

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [_document(r) for r in self.source.records(query)]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        records = await asyncio.to_thread(self.source.records, query)
        return [_document(r) for r in records]
