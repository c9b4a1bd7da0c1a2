"""Retrieval sources beside the code: documentation, git history, issues and pull requests.

- :mod:`ragloom.sources.base`: the ``Source`` contract (tamma's ``IRAGSource``), ``SourceHit``,
  settings, filters and sync reports;
- :mod:`ragloom.sources.registry`: built-in and third-party sources through the entry-point
  group ``ragloom.sources``, and the saved per-index configuration;
- :mod:`ragloom.sources.code`, :mod:`~ragloom.sources.docs`, :mod:`~ragloom.sources.commits`,
  :mod:`~ragloom.sources.issues` (issues and prs, with :mod:`~ragloom.sources.github`);
- :mod:`ragloom.sources.itemstore`: SQLite + BM25 storage of the non-code sources;
- :mod:`ragloom.sources.orchestrate`: parallel retrieval with timeouts, weighted fusion, recency;
- :mod:`ragloom.sources.multi`: ``SourceSet``, the sources of one index together;
- :mod:`ragloom.sources.context`: context assembly with non-code items and their attribution.

docs/sources.md describes them and what was measured.
"""

from __future__ import annotations

from ragloom.sources.base import (
    RetrieveOptions,
    Source,
    SourceContext,
    SourceFilter,
    SourceHit,
    SourceQuery,
    SourceSettings,
    SyncReport,
)
from ragloom.sources.multi import SourceSet

__all__ = [
    "RetrieveOptions",
    "Source",
    "SourceContext",
    "SourceFilter",
    "SourceHit",
    "SourceQuery",
    "SourceSet",
    "SourceSettings",
    "SyncReport",
]
