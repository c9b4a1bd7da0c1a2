"""Reads shared by one query: what a store read once while a query answers is not read again.

A query answers from one pinned generation (``Retriever.search``'s seqlock), so a chunk row
or a source's write counter read by one of its stages is the one every later stage would read.
With PostgreSQL each read is a round trip; several stages read the same rows (the candidates'
rows for their roles, then the hits' rows) and the change history asks the commits' version
twice. :func:`read_scope` opens such a scope for the current thread (a ``ContextVar``: threads
and tasks do not share it); a backend keeps what it read in :func:`memo` while one is open and
reads as before outside one. Each attempt of the seqlock opens a fresh scope, so an answer
retried after a publish never sees the rows of the generation it left.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_SCOPE: ContextVar[dict[object, Any] | None] = ContextVar("ragloom_read_scope", default=None)


@contextmanager
def read_scope() -> Iterator[None]:
    """Open a read scope for the current thread until the block ends (nested: the outer one
    stays in use, so a stage that opens its own shares the query's)."""
    if _SCOPE.get() is not None:
        yield
        return
    token = _SCOPE.set({})
    try:
        yield
    finally:
        _SCOPE.reset(token)


def memo(key: object) -> dict[Any, Any] | None:
    """The scope's dict for ``key`` (created empty on first use), None outside a scope."""
    scope = _SCOPE.get()
    if scope is None:
        return None
    found: dict[Any, Any] | None = scope.get(key)
    if found is None:
        found = scope[key] = {}
    return found
