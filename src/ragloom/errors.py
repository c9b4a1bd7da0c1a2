"""One error tree for ragloom, rooted at :class:`RagError`.

The tree (every class is importable from ``ragloom``)::

    RagError                        any failure raised by ragloom
    +-- ChannelError                actor send / receive failed
    |   +-- TimeoutError_           an actor request exceeded its client-side timeout
    +-- DbError                     store or persistence failure (inner message kept)
    +-- SearchError                 a search could not be answered (e.g. "bm25 index not ready")
    +-- ContextError                context assembly failed
    +-- ConfigError                 invalid configuration or argument (bad budget, bad k, ...)
    +-- RerankError                 a reranker failed
    +-- EmbeddingError              the embedding model could not be loaded or run
    +-- IndexError_                 index-level failures
        +-- IndexNotFoundError      no index where one was expected
        +-- IndexLockedError        another writer holds the index
        +-- IncompatibleIndexError  index made by an incompatible version / model
    +-- InputError                  bad user input (path missing, not a directory, ...)

Exit codes used by the CLI live next to the classes (``exit_code``), so the mapping is
defined once and the HTTP layer can map the same classes to statuses.
"""

from __future__ import annotations

__all__ = [
    "ChannelError",
    "ConfigError",
    "ContextError",
    "DbError",
    "EmbeddingError",
    "FeedbackUnavailableError",
    "IncompatibleIndexError",
    "IndexError_",
    "IndexLockedError",
    "IndexNotFoundError",
    "InputError",
    "OverloadedError",
    "RagError",
    "RerankError",
    "SearchError",
    "SourceSyncError",
    "TimeoutError_",
    "UnknownIdError",
]


class RagError(Exception):
    """Root of every error ragloom raises on purpose."""

    exit_code: int = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ChannelError(RagError):
    """Sending to or receiving from an actor failed."""

    exit_code = 10


class TimeoutError_(ChannelError):
    """An actor request did not answer within its client-side timeout."""

    exit_code = 11


class OverloadedError(ChannelError):
    """A server is computing as many answers as it admits (``server.max_inflight``): the
    question is refused at once instead of waiting behind the others (HTTP 503 with
    ``Retry-After``; an MCP tool error)."""

    exit_code = 17

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class DbError(RagError):
    """The store or a persisted index failed; the inner message is kept."""

    exit_code = 12


class FeedbackUnavailableError(DbError):
    """This server or index keeps no ratings (its feedback database cannot be opened for
    writing, e.g. a read-only index folder): questions are answered, ratings refused (HTTP 503
    ``feedback_unavailable``)."""

    exit_code = 25


class SearchError(RagError):
    """A search could not be answered (for example the BM25 index is not ready)."""

    exit_code = 13


class ContextError(RagError):
    """Context assembly failed."""

    exit_code = 14


class ConfigError(RagError):
    """A configuration value or argument is invalid."""

    exit_code = 2


class RerankError(RagError):
    """A reranker failed."""

    exit_code = 15


class EmbeddingError(RagError):
    """The embedding model could not be loaded or run."""

    exit_code = 16


class IndexError_(RagError):
    """Index-level failures."""

    exit_code = 20


class IndexNotFoundError(IndexError_):
    """No index exists where one was expected."""

    exit_code = 21


class IndexLockedError(IndexError_):
    """Another process is writing to this index (``holder``: its pid as it wrote it, or
    ``unknown``)."""

    exit_code = 22

    def __init__(self, message: str, holder: str = "unknown") -> None:
        super().__init__(message)
        self.holder = holder


class IncompatibleIndexError(IndexError_):
    """The index was made by an incompatible ragloom version, schema or model."""

    exit_code = 23


class SourceSyncError(RagError):
    """A source named on the command line (``ragloom index --sources ... --issues-json ...``)
    could not be synced; the code index and the other sources were updated, and the source
    keeps what it held."""

    exit_code = 24


class InputError(RagError):
    """Bad user input: a path that does not exist, is not a directory, and so on."""

    exit_code = 3


class UnknownIdError(InputError):
    """Input naming something this index never made: an unknown ``query_id`` (feedback) or
    job id. The HTTP API answers it with 404."""

    exit_code = 4
