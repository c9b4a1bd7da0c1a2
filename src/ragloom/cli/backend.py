"""``--backend``, ``--dsn`` and ``--repo``: where ``index``, ``search``, ``context`` and
``status`` find the index (docs/postgres.md).

The embedded backend (a ``.ragloom`` folder) is the default and needs no server. ``--backend
postgres`` (or ``RAGLOOM_BACKEND=postgres``, or a ``--dsn`` on the command line) selects a
PostgreSQL + pgvector database: ``--dsn postgresql://...`` or ``RAGLOOM_DSN``, and ``--repo
NAME`` for the repository inside it (default: the indexed folder's name; for reading, the
current folder's name, or the database's only repository).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ragloom.errors import ConfigError

__all__ = ["BACKENDS", "backend_options", "chosen_backend", "open_postgres_index", "open_read"]

BACKENDS = ("embedded", "postgres")
BACKEND_ENV = "RAGLOOM_BACKEND"

F = TypeVar("F", bound=Callable[..., Any])


def backend_options(fn: F) -> F:
    """Add ``--backend``, ``--dsn`` and ``--repo`` to a command."""
    fn = click.option(
        "--repo",
        "repo",
        default=None,
        help="Repository name inside the database (postgres) [folder name].",
    )(fn)
    fn = click.option(
        "--dsn",
        default=None,
        help="PostgreSQL connection URI (postgres backend) [$RAGLOOM_DSN].",
    )(fn)
    fn = click.option(
        "--backend",
        type=click.Choice(BACKENDS),
        default=None,
        help="Where the index lives: embedded (a .ragloom folder) or postgres "
        "[$RAGLOOM_BACKEND or embedded].",
    )(fn)
    return fn


def chosen_backend(backend: str | None, dsn: str | None) -> str:
    """The backend a command uses: ``--backend``, else postgres when ``--dsn`` was given, else
    ``RAGLOOM_BACKEND``, else embedded."""
    if backend:
        return backend
    if dsn:
        return "postgres"
    env = os.environ.get(BACKEND_ENV, "").strip().lower()
    if env and env not in BACKENDS:
        raise ConfigError(f"{BACKEND_ENV}={env!r}: choose one of {', '.join(BACKENDS)}")
    return env or "embedded"


def open_postgres_index(
    path: Path | None,
    dsn: str | None,
    repo: str | None,
    *,
    model: str | None = None,
    create: bool = False,
) -> Any:
    """A :class:`ragloom.api.PostgresIndex` for ``path`` (None: read the repository's own
    root when it exists here)."""
    from ragloom.api import open_postgres

    return open_postgres(path, dsn=dsn, repository=repo, embedder=model, create=create)


def open_read(
    index_dir: Path | None, backend: str | None, dsn: str | None, repo: str | None
) -> Any:
    """The index a reading command uses: the folder (``--index-dir`` or the nearest
    ``.ragloom``) for the embedded backend, the repository in the database for postgres."""
    from ragloom.cli.app import open_for_read

    if chosen_backend(backend, dsn) == "postgres":
        if index_dir is not None:
            raise ConfigError("--index-dir names a folder index; not with --backend postgres")
        return open_postgres_index(None, dsn, repo)
    if repo is not None:
        raise ConfigError("--repo names a repository in PostgreSQL; use it with --backend postgres")
    return open_for_read(str(index_dir) if index_dir else None)
