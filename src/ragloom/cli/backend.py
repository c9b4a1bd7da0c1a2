"""``--backend``, ``--dsn`` and ``--repo``: where ``index``, ``search``, ``context`` and
``status`` find the index (docs/postgres.md).

The embedded backend (a ``.ragloom`` folder) is the default and needs no server. ``--backend
postgres`` (or ``storage.backend = "postgres"`` in ``ragloom.toml``, ``RAGLOOM_BACKEND=postgres``,
or a ``--dsn`` on the command line) selects a PostgreSQL + pgvector database: ``--dsn
postgresql://...``, ``storage.dsn`` or ``RAGLOOM_DSN``, and ``--repo NAME`` (or
``storage.repository``) for the repository inside it (default: the indexed folder's name; for
reading, the current folder's name, or the database's only repository). Flags win over the
settings (docs/configuration.md).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ragloom.errors import ConfigError

if TYPE_CHECKING:
    from ragloom.settings import StorageSettings

__all__ = ["BACKENDS", "backend_options", "chosen_backend", "open_postgres_index", "open_read"]

BACKENDS = ("embedded", "postgres")

F = TypeVar("F", bound=Callable[..., Any])


def backend_options(fn: F) -> F:
    """Add ``--backend``, ``--dsn`` and ``--repo`` to a command."""
    fn = click.option(
        "--repo",
        "repo",
        default=None,
        help="Repository name inside the database (postgres) [storage.repository or the "
        "folder's name].",
    )(fn)
    fn = click.option(
        "--dsn",
        default=None,
        help="PostgreSQL connection URI (postgres backend) [storage.dsn, $RAGLOOM_DSN].",
    )(fn)
    fn = click.option(
        "--backend",
        type=click.Choice(BACKENDS),
        default=None,
        help="Where the index lives: embedded (a .ragloom folder) or postgres "
        "[storage.backend, $RAGLOOM_BACKEND, or embedded].",
    )(fn)
    return fn


def _storage(start: Path | None = None) -> StorageSettings:
    """The ``storage`` settings of the repository at or above ``start`` (``ragloom.toml``,
    ``[tool.ragloom]``, ``RAGLOOM_STORAGE__*`` and the short ``RAGLOOM_BACKEND`` /
    ``RAGLOOM_DSN``)."""
    from ragloom.settings import find_config_root, load_settings

    return load_settings(find_config_root(start)).settings.storage


def chosen_backend(backend: str | None, dsn: str | None, start: Path | None = None) -> str:
    """The backend a command uses: ``--backend``, else postgres when ``--dsn`` was given, else
    ``storage.backend`` (``RAGLOOM_BACKEND``, ``ragloom.toml``), else embedded."""
    if backend:
        return backend
    if dsn:
        return "postgres"
    return _storage(start).backend


def open_postgres_index(
    path: Path | None,
    dsn: str | None,
    repo: str | None,
    *,
    model: str | None = None,
    create: bool = False,
) -> Any:
    """A :class:`ragloom.api.PostgresIndex` for ``path`` (None: read the repository's own
    root when it exists here); the DSN, repository and ``ef_search`` not given fall back to
    the ``storage`` settings."""
    from ragloom.api import open_postgres

    storage = _storage(path)
    if dsn is None and storage.dsn is not None:
        dsn = storage.dsn.get_secret_value()
    return open_postgres(
        path,
        dsn=dsn,
        repository=repo or storage.repository,
        embedder=model,
        create=create,
        ef_search=storage.ef_search,
    )


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
