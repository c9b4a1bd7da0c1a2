"""A LlamaIndex retriever over a ragloom index (extra ``ragloom[llamaindex]``).

.. code-block:: python

    from ragloom.integrations.llamaindex import RagloomRetriever

    retriever = RagloomRetriever.from_path("path/to/repo", top_k=8)
    nodes = retriever.retrieve("where are BM25 fields weighted?")

Each ``NodeWithScore`` holds a chunk's text (a ``TextNode`` whose id is the chunk id) and its
score; the node metadata carries the path, lines and symbol. With ``budget=`` (tokens) the
nodes are the parts of ragloom's assembled context instead.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ragloom.integrations.records import Record, RecordSource

__all__ = ["RagloomRetriever"]


def _node(record: Record) -> NodeWithScore:
    node = TextNode(id_=record.id, text=record.text, metadata=dict(record.metadata))
    return NodeWithScore(node=node, score=record.score)


class RagloomRetriever(BaseRetriever):
    """LlamaIndex ``BaseRetriever`` answering from a warm ragloom index."""

    def __init__(self, source: RecordSource, **kwargs: Any) -> None:
        self.source = source
        super().__init__(**kwargs)

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], **kwargs: Any) -> RagloomRetriever:
        """Open the index of a repository root or index folder; ``kwargs`` go to
        :class:`~ragloom.integrations.records.RecordSource` (``top_k``, ``strategy``,
        ``budget``)."""
        return cls(RecordSource.at(path, **kwargs))

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [_node(r) for r in self.source.records(query_bundle.query_str)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        records = await asyncio.to_thread(self.source.records, query_bundle.query_str)
        return [_node(r) for r in records]
