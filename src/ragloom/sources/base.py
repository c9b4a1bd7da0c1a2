"""The source contract (tamma's ``IRAGSource``): what every retrieval source offers.

A source is one kind of knowledge an agent may need beside the code: documentation sections,
commits, issues, pull requests. Each one answers a query on its own (``retrieve``), keeps its own
index up to date (``sync``), and can say whether it works (``health_check``) and how fresh it is
(``freshness``). The orchestrator (:mod:`ragloom.sources.orchestrate`) queries the enabled ones
in parallel, each under its own timeout, and fuses their lists with per-source weights.

Built-in and third-party sources register the same way: a Python entry point in the group
``ragloom.sources`` names a factory ``(SourceContext) -> Source`` (docs/sources.md).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ragloom.errors import ConfigError

__all__ = [
    "DEFAULT_SETTINGS",
    "RetrieveOptions",
    "Source",
    "SourceContext",
    "SourceFactory",
    "SourceFilter",
    "SourceHit",
    "SourceQuery",
    "SourceSettings",
    "SyncReport",
]


@dataclass(frozen=True, slots=True)
class SourceSettings:
    """Per-source settings (tamma ``SourceSettings``): on or off, RRF weight, list length.

    ``options`` carries source-specific values (``github`` repository, JSON export paths).
    """

    enabled: bool = True
    weight: float = 1.0
    top_k: int = 5
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (self.weight >= 0.0):
            raise ConfigError(f"source weight must be >= 0, got {self.weight!r}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 1:
            raise ConfigError(f"source top_k must be an integer >= 1, got {self.top_k!r}")


DEFAULT_SETTINGS: Mapping[str, SourceSettings] = {
    # tamma rag-defaults.yaml: vector_db 1.0 / keyword 0.5 are the code index's two lists,
    # which ragloom's hybrid search already fuses; its fused list enters with weight 1.0.
    "code": SourceSettings(enabled=True, weight=1.0, top_k=10),
    "docs": SourceSettings(enabled=True, weight=0.3, top_k=5),
    "issues": SourceSettings(enabled=True, weight=0.2, top_k=5),
    "prs": SourceSettings(enabled=False, weight=0.2, top_k=5),
    "commits": SourceSettings(enabled=False, weight=0.1, top_k=5),
}
"""tamma's default configuration (``rag.sources``); a source not listed gets weight 0.2, top 5."""


class ItemStorage(Protocol):
    """Where the stored sources of an index keep their items, when not in the index folder
    (``SourceContext.storage``; PostgreSQL: :class:`ragloom.sources.pg_items.PgItemStorage`).
    Sources never ask which: they open their store through
    :func:`ragloom.sources.itemstore.open_item_store`, which checks that ``open_store`` gave an
    item store (defined here, below the stores, so the stores can import this module)."""

    index_flags: str
    """What ``ragloom index`` needs to write there (``--backend postgres``; ``""`` for none)."""

    def open_store(self, name: str) -> object:
        """The store of source ``name`` (a ``ragloom.sources.itemstore.BaseItemStore``)."""
        ...

    def has_store(self, name: str) -> bool: ...

    def load_config(self) -> dict[str, dict[str, Any]]: ...

    def save_config(self, sources: Mapping[str, Mapping[str, Any]]) -> None: ...

    def write_lock(self) -> AbstractContextManager[object]: ...


@dataclass(frozen=True, slots=True)
class SourceContext:
    """Where a source lives: the repository root and the index folder (its data goes under
    ``<index_dir>/sources/``), or ``storage``, where the stored sources keep their items
    instead (PostgreSQL: :class:`ragloom.sources.pg_items.PgItemStorage`; sources open their
    store with :func:`ragloom.sources.itemstore.open_item_store`, which picks)."""

    root: Path
    index_dir: Path
    storage: ItemStorage | None = None

    @property
    def data_dir(self) -> Path:
        return self.index_dir / "sources"


@dataclass(frozen=True, slots=True)
class SourceQuery:
    """A processed query (tamma ``ProcessedQuery``): the text plus expansion terms."""

    text: str
    expanded: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SourceFilter:
    """Filters applied inside each source (tamma ``SourceFilter``); empty means no filter.

    ``paths`` are globs matched against the files an item names (a commit's changed files, a
    section's document, a PR's files); ``since`` / ``until`` are epoch seconds on the item date.
    """

    paths: tuple[str, ...] = ()
    languages: tuple[str, ...] = ()
    since: float | None = None
    until: float | None = None
    authors: tuple[str, ...] = ()

    def accepts(
        self,
        *,
        paths: tuple[str, ...] = (),
        language: str = "",
        date: float | None = None,
        author: str = "",
    ) -> bool:
        """True when an item with these attributes passes every filter that is set."""
        if self.paths and not any(fnmatch.fnmatchcase(p, g) for p in paths for g in self.paths):
            return False
        if self.languages and language not in self.languages:
            return False
        if self.since is not None and (date is None or date < self.since):
            return False
        if self.until is not None and (date is None or date > self.until):
            return False
        return not self.authors or author.lower() in {a.lower() for a in self.authors}

    @property
    def empty(self) -> bool:
        return not (self.paths or self.languages or self.authors) and (
            self.since is None and self.until is None
        )


@dataclass(frozen=True, slots=True)
class RetrieveOptions:
    """tamma ``RetrieveOptions``: how many hits, which filter, the caller's timeout."""

    top_k: int = 5
    filter: SourceFilter = field(default_factory=SourceFilter)
    timeout_ms: float | None = None


@dataclass(slots=True)
class SourceHit:
    """One item a source returned, with what attribution needs.

    ``id`` is unique within the source; ``date`` is epoch seconds (None when the item has none);
    ``attribution`` names the item the way a person cites it: ``{"commit": "<sha>"}``,
    ``{"issue": 12}``, ``{"pr": 7}``, ``{"path": "docs/x.md"}``. ``paths`` lists files the item
    touches or lives in; ``payload`` keeps a source's native object (the code source's ``Hit``).
    """

    source: str
    id: str
    title: str
    text: str
    score: float
    date: float | None = None
    url: str | None = None
    attribution: dict[str, object] = field(default_factory=dict)
    author: str = ""
    kind: str = ""
    paths: tuple[str, ...] = ()
    payload: object = None
    explain: dict[str, object] = field(default_factory=dict)
    """What cross-source fusion did (filled by the orchestrator)."""

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form (without the payload)."""
        return {
            "source": self.source,
            "id": self.id,
            "title": self.title,
            "kind": self.kind,
            "score": self.score,
            "date": self.date,
            "url": self.url,
            "author": self.author,
            "attribution": dict(self.attribution),
            "paths": list(self.paths),
            "text": self.text,
        }


@dataclass(slots=True)
class SyncReport:
    """What one ``sync`` did: items added or updated and removed, where it got to, and the
    error that stopped it early (items synced before the error are kept)."""

    source: str
    added: int = 0
    removed: int = 0
    total: int = 0
    status: str = "ok"
    error: str | None = None
    cursor: str | None = None
    resynced: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "status": self.status,
            "added": self.added,
            "removed": self.removed,
            "total": self.total,
            "cursor": self.cursor,
            "resynced": self.resynced,
            "error": self.error,
            "seconds": round(self.seconds, 3),
        }


@runtime_checkable
class Source(Protocol):
    """tamma's ``IRAGSource`` plus the indexing side.

    ``initialize`` is called once before anything else; ``retrieve`` must be cancellable (the
    orchestrator cancels it at its timeout); ``sync`` brings the source's own index up to date
    incrementally and never raises for a remote failure: it reports it in the SyncReport.
    """

    name: str

    @property
    def enabled(self) -> bool: ...

    def initialize(self, settings: SourceSettings) -> None: ...

    async def retrieve(self, query: SourceQuery, options: RetrieveOptions) -> list[SourceHit]: ...

    async def health_check(self) -> bool: ...

    async def dispose(self) -> None: ...

    def sync(self) -> SyncReport: ...

    def freshness(self) -> dict[str, object]: ...


class SourceFactory(Protocol):
    """What an entry point of the group ``ragloom.sources`` loads: usually the source class."""

    def __call__(self, context: SourceContext) -> Source: ...
