"""Adapters that plug a ragloom index into agent frameworks as a retriever.

- :mod:`ragloom.integrations.langchain`: ``RagloomRetriever``, a LangChain ``BaseRetriever``
  (extra ``ragloom[langchain]``).
- :mod:`ragloom.integrations.llamaindex`: ``RagloomRetriever``, a LlamaIndex ``BaseRetriever``
  (extra ``ragloom[llamaindex]``).

Both return the same records (:mod:`ragloom.integrations.records`): ranked chunks, or, with a
token ``budget``, the parts of the assembled context (deduplicated, stitched, inside the budget).
"""

from __future__ import annotations

from ragloom.integrations.records import Record, RecordSource

__all__ = ["Record", "RecordSource"]
