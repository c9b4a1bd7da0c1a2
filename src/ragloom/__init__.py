"""ragloom: the best context for a question about a codebase, inside a token budget, fast.

Start with :func:`open`::

    import ragloom
    idx = ragloom.open("path/to/repo")
    idx.index()
    for hit in idx.search("where are HTTP headers parsed?").hits:
        print(hit.path, hit.start_line, hit.symbol)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragloom._version import __version__
from ragloom.errors import (
    ChannelError,
    ConfigError,
    ContextError,
    DbError,
    EmbeddingError,
    FeedbackUnavailableError,
    IncompatibleIndexError,
    IndexError_,
    IndexLockedError,
    IndexNotFoundError,
    InputError,
    OverloadedError,
    RagError,
    RerankError,
    SearchError,
    SourceSyncError,
    TimeoutError_,
    UnknownIdError,
)
from ragloom.types import Chunk, Hit

if TYPE_CHECKING:
    from ragloom.api import Index, IndexStatus, find_index_dir, open
    from ragloom.index.indexer import IndexStats
    from ragloom.retrieve.search import SearchResult

# Heavy modules load on first use so `import ragloom` (and the CLI) start fast.
_LAZY = {
    "Index": "ragloom.api",
    "IndexStatus": "ragloom.api",
    "find_index_dir": "ragloom.api",
    "open": "ragloom.api",
    "IndexStats": "ragloom.index.indexer",
    "SearchResult": "ragloom.retrieve.search",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ragloom' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ChannelError",
    "Chunk",
    "ConfigError",
    "ContextError",
    "DbError",
    "EmbeddingError",
    "FeedbackUnavailableError",
    "Hit",
    "IncompatibleIndexError",
    "Index",
    "IndexError_",
    "IndexLockedError",
    "IndexNotFoundError",
    "IndexStats",
    "IndexStatus",
    "InputError",
    "OverloadedError",
    "RagError",
    "RerankError",
    "SearchError",
    "SearchResult",
    "SourceSyncError",
    "TimeoutError_",
    "UnknownIdError",
    "__version__",
    "find_index_dir",
    "open",
]
