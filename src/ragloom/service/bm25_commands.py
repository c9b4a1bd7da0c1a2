"""The messages of the BM25 actor (ploke-rag-crucial-notes.md section 2): :class:`Search`,
:class:`IndexBatch`, :class:`Remove`, :class:`Rebuild`, :class:`FinalizeSeed`,
:class:`Status`, :class:`Save` and :class:`Load`, each answering through its future.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from opentelemetry import context as otel_context

from ragloom.service.bm25_status import Bm25Status

__all__ = [
    "Command",
    "FinalizeSeed",
    "IndexBatch",
    "Load",
    "Rebuild",
    "Remove",
    "Save",
    "Search",
    "Status",
]

T = TypeVar("T")


@dataclass(eq=False)
class Command(Generic[T]):
    """A message to the actor: ``fut`` carries the answer; ``ctx`` the caller's trace context."""

    fut: asyncio.Future[T]
    ctx: otel_context.Context = field(default_factory=otel_context.get_current)

    name: str = field(default="", init=False)


@dataclass(eq=False)
class Search(Command[list[tuple[int, float]]]):
    """Top ``top_k`` (rowid, score); empty when there is no engine."""

    query: str = ""
    top_k: int = 10
    name: str = field(default="search", init=False)


@dataclass(eq=False)
class IndexBatch(Command[Bm25Status]):
    """Add or replace documents ``(rowid, text)``; answers the status afterwards."""

    docs: Sequence[tuple[int, str]] = ()
    name: str = field(default="index_batch", init=False)


@dataclass(eq=False)
class Remove(Command[Bm25Status]):
    """Delete documents by rowid; answers the status afterwards."""

    ids: Sequence[int] = ()
    name: str = field(default="remove", init=False)


@dataclass(eq=False)
class Rebuild(Command[Bm25Status]):
    """Rebuild from the document source. ``fut`` answers on acceptance (Building); ``done``
    answers the final status, or fails with DbError."""

    done: asyncio.Future[Bm25Status] | None = None
    name: str = field(default="rebuild", init=False)


@dataclass(eq=False)
class FinalizeSeed(Command[Bm25Status]):
    """End an IndexBatch seeding phase: make sure an engine exists; answers the status."""

    name: str = field(default="finalize_seed", init=False)


@dataclass(eq=False)
class Status(Command[Bm25Status]):
    """The current status."""

    name: str = field(default="status", init=False)


@dataclass(eq=False)
class Save(Command[int]):
    """Write a snapshot to ``path``; answers the bytes written."""

    path: Path = field(default_factory=Path)
    name: str = field(default="save", init=False)


@dataclass(eq=False)
class Load(Command[int]):
    """Restore the snapshot at ``path``; answers the bytes read."""

    path: Path = field(default_factory=Path)
    name: str = field(default="load", init=False)
