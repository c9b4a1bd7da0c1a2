"""``ragloom serve http`` and ``ragloom serve mcp``: keep one index warm in a long-running
process and answer over HTTP (FastAPI + uvicorn) or MCP (stdio or streamable HTTP).

Both open the index once through :class:`ragloom.server.engine.ServingEngine` with the
settings of the repository (``ragloom.toml`` / ``[tool.ragloom]``, ``RAGLOOM_*``, then these
flags); ``serve http`` also watches the configuration files and applies a valid change live.
A missing index is the usual one ``error:`` line and exit code, before anything listens.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ragloom.cli.app import handle_errors
from ragloom.cli.backend import backend_options

if TYPE_CHECKING:
    from ragloom.server.engine import ServingEngine
    from ragloom.settings import LoadedSettings
    from ragloom.watch import BatchReport

__all__ = ["serve_cmd"]

log = logging.getLogger("ragloom.cli.serve")


def _locate(path: Path | None, index_dir: Path | None) -> tuple[Path, Path]:
    """(index folder, repository root) of a folder index."""
    import ragloom

    target = index_dir or path
    index = ragloom.Index.at(target) if target is not None else None
    if index is None:
        index = ragloom.Index.at(ragloom.find_index_dir())
    if not index.exists:
        from ragloom.errors import IndexNotFoundError

        raise IndexNotFoundError(
            f"no index at {index.index_dir}; create one with `ragloom index {index.root}`"
        )
    return index.index_dir, index.root


@dataclass
class _Served:
    """What a serve command serves: the repository root (its settings), and how to open
    the engine once the socket is bound."""

    root: Path
    loaded: LoadedSettings
    open: Callable[[], ServingEngine]
    label: str


def _load(
    path: Path | None,
    index_dir: Path | None,
    overrides: dict[str, Any],
    backend: str | None = None,
    dsn: str | None = None,
    repo: str | None = None,
) -> _Served:
    """The folder index (default) or the PostgreSQL repository to serve, with its settings
    (``overrides`` applied)."""
    from ragloom.cli.backend import chosen_backend, open_postgres_index
    from ragloom.errors import ConfigError, IndexNotFoundError
    from ragloom.server.engine import ServingEngine
    from ragloom.settings import load_settings

    if chosen_backend(backend, dsn, path) == "postgres":
        if index_dir is not None:
            raise ConfigError("--index-dir names a folder index; not with --backend postgres")
        idx = open_postgres_index(path.resolve() if path is not None else None, dsn, repo)
        if not idx.exists:
            raise IndexNotFoundError(
                f"no repository {idx.repository!r} in this PostgreSQL database; create it with "
                f"`ragloom index PATH --backend postgres --repo {idx.repository}`"
            )
        pg_root: Path = idx.root
        # without PATH, the root recorded at indexing is used when it exists here; otherwise
        # the current folder stands in for it (search works, re-index jobs are refused)
        tree = path is not None or idx.recorded_root.resolve() == pg_root.resolve()
        loaded = load_settings(pg_root, overrides=overrides)
        pg_dsn, name, ef = idx.dsn, idx.repository, idx.ef_search
        idx.close()
        return _Served(
            pg_root,
            loaded,
            lambda: ServingEngine.open_postgres(
                pg_dsn, name, pg_root, loaded.settings, ef_search=ef, source_tree=tree
            ),
            f"postgres:{name} ({pg_root})",
        )
    if repo is not None:
        raise ConfigError("--repo names a repository in PostgreSQL; use it with --backend postgres")
    folder, root = _locate(path, index_dir)
    loaded = load_settings(root, overrides=overrides)
    return _Served(root, loaded, lambda: ServingEngine.open(folder, loaded.settings), str(root))


def _server_overrides(
    host: str | None, port: int | None, no_watch: bool = False, workers: int | None = None
) -> dict[str, Any]:
    server: dict[str, Any] = {}
    if workers is not None:
        server["workers"] = workers
    if no_watch:
        server["watch"] = False
    if host is not None:
        server["host"] = host
    if port is not None:
        server["port"] = port
    return {"server": server} if server else {}


_PATH = click.argument("path", required=False, type=click.Path(path_type=Path))
_INDEX_DIR = click.option(
    "--index-dir",
    type=click.Path(path_type=Path),
    help="Index folder [PATH/.ragloom, or the nearest .ragloom].",
)
_NO_WATCH = click.option(
    "--no-watch",
    is_flag=True,
    help="Do not follow the work tree [settings.server.watch: follow it, for a folder index].",
)


def _start_watching(engine: ServingEngine, loaded: LoadedSettings, label: str) -> None:
    """Follow the served work tree when ``server.watch`` is on (a folder index): one line on
    stderr per applied batch, as ``ragloom watch`` prints it."""
    server = loaded.settings.server
    if not server.watch:
        return

    def on_batch(report: BatchReport) -> None:
        if report.trigger != "start" or report.files_changed or report.files_removed:
            click.echo(f"ragloom: {report.line()}", err=True)

    if engine.start_watching(debounce_ms=server.watch_debounce_ms, on_batch=on_batch):
        click.echo(f"ragloom: watching {label} for edits (--no-watch to stop)", err=True)


@click.group("serve")
def serve_cmd() -> None:
    """Serve a warm index: an HTTP API for teams, an MCP server for agents."""


@serve_cmd.command("http")
@_PATH
@_INDEX_DIR
@click.option("--host", help="Address to bind [settings.server.host: 127.0.0.1].")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    help="Port to bind, 0 for a free one [settings.server.port: 8765].",
)
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="warning",
    show_default=True,
    help="uvicorn's log level.",
)
@click.option(
    "--workers",
    type=click.IntRange(0, 64),
    help="Worker processes, each with its own copy of the index; 0 = automatic (the CPUs, "
    "at most 4), 1 = one process [settings.server.workers: 0].",
)
@_NO_WATCH
@backend_options
@handle_errors
def serve_http_cmd(
    path: Path | None,
    index_dir: Path | None,
    host: str | None,
    port: int | None,
    log_level: str,
    workers: int | None = None,
    no_watch: bool = False,
    backend: str | None = None,
    dsn: str | None = None,
    repo: str | None = None,
) -> None:
    """Serve the index of PATH (a repository root or an index folder) over HTTP.

    Prints the URL it listens on; stops on Ctrl-C / SIGTERM. With several workers
    (--workers, docs/serving.md "Workers") each process holds the index and the kernel
    spreads connections over them. Routes and examples: docs/http-api.md, or GET /docs on the
    running server.
    """
    from ragloom.server.http import bind_socket, create_app, serve, url_of
    from ragloom.settings import resolve_workers

    overrides = _server_overrides(host, port, no_watch, workers)
    served = _load(path, index_dir, overrides, backend, dsn, repo)
    loaded = served.loaded
    server = loaded.settings.server
    count = resolve_workers(server.workers)
    sock = bind_socket(server.host, server.port)  # a port in use fails before the model loads
    if count > 1:
        try:
            _supervise(
                served, sock, count, (path, index_dir, overrides, backend, dsn, repo, log_level)
            )
        finally:
            sock.close()
        return
    try:
        engine = served.open()
        try:
            app = create_app(engine)
            watcher = (
                _start_watcher(served.root, engine, loaded, overrides) if server.reload else None
            )
            auth = " (bearer token required)" if _has_token(app) else ""
            click.echo(f"ragloom: serving {served.label} on {url_of(sock)}{auth}")
            _start_watching(engine, loaded, served.label)
            try:
                serve(app, sock, log_level=log_level)
            finally:
                if watcher is not None:
                    watcher.stop()
        finally:
            engine.close()
    finally:
        sock.close()


def _supervise(served: _Served, sock: Any, count: int, args: tuple[Any, ...]) -> None:
    """``serve http`` with ``count`` worker processes (ragloom.server.http.workers): the URL
    line once every worker is ready; a PostgreSQL-backed server starts worker 0 alone first,
    so one process builds this node's BM25 cache and the others find it built."""
    from ragloom.server.http import url_of
    from ragloom.server.http.workers import run_workers

    postgres = served.label.startswith("postgres:")

    def announce(infos: list[dict[str, Any]]) -> None:
        auth = " (bearer token required)" if any(i.get("token") for i in infos) else ""
        pids = ", ".join(str(i["pid"]) for i in infos)
        click.echo(f"ragloom: serving {served.label} on {url_of(sock)}{auth}")
        click.echo(f"ragloom: {count} worker processes (pids {pids})", err=True)

    run_workers(
        _http_worker,
        (*args, logging.getLogger("ragloom").level),
        count,
        sock,
        announce=announce,
        echo=lambda line: click.echo(line, err=True),
        stagger=postgres,
    )


def _http_worker(
    ctx: Any,
    path: Path | None,
    index_dir: Path | None,
    overrides: dict[str, Any],
    backend: str | None,
    dsn: str | None,
    repo: str | None,
    log_level: str,
    ragloom_level: int,
) -> None:
    """One worker process of ``serve http --workers N`` (a
    :class:`~ragloom.server.http.workers.WorkerContext` ``ctx``): its own engine and app on
    the shared socket. Worker 0, the primary, alone follows the work tree; every worker
    follows the configuration files."""
    from ragloom.embed.onnx import share_cores
    from ragloom.logs import configure_logging
    from ragloom.server.http import create_app, serve

    configure_logging(ragloom_level or logging.WARNING)
    share_cores(ctx.count)  # before the engine loads the model
    served = _load(path, index_dir, overrides, backend, dsn, repo)
    loaded = served.loaded
    engine = served.open()
    try:
        engine.set_worker(ctx.index, ctx.count)
        app = create_app(engine)
        watcher = (
            _start_watcher(served.root, engine, loaded, overrides)
            if loaded.settings.server.reload
            else None
        )
        ctx.ready({"token": _has_token(app)})
        if ctx.primary:
            _start_watching(engine, loaded, served.label)
        try:
            serve(app, ctx.sock, log_level=log_level)
        finally:
            if watcher is not None:
                watcher.stop()
    finally:
        engine.close()


def _has_token(app: Any) -> bool:
    from ragloom.server.http import api_token

    return api_token(app.state.engine) is not None


def _start_watcher(
    root: Path, engine: ServingEngine, initial: LoadedSettings, overrides: dict[str, Any]
) -> Any:
    """Live reload: a valid change of the configuration files swaps the engine's ranking,
    assembly and cache settings (server settings such as host and port need a restart); an
    invalid one is logged by the watcher and the old settings stay."""
    from ragloom.settings import SettingsWatcher

    def on_change(loaded: LoadedSettings) -> None:
        engine.apply_settings(loaded.settings)
        files = ", ".join(map(str, loaded.files)) or "the environment"
        click.echo(f"ragloom: configuration reloaded from {files}", err=True)

    watcher = SettingsWatcher(root, on_change, overrides=overrides, initial=initial)
    watcher.start()
    return watcher


@serve_cmd.command("mcp")
@_PATH
@_INDEX_DIR
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio for an MCP client that starts the server; http for streamable HTTP.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address (--transport http).")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8766,
    show_default=True,
    help="Port (--transport http).",
)
@_NO_WATCH
@backend_options
@handle_errors
def serve_mcp_cmd(
    path: Path | None,
    index_dir: Path | None,
    transport: str,
    host: str,
    port: int,
    no_watch: bool = False,
    backend: str | None = None,
    dsn: str | None = None,
    repo: str | None = None,
) -> None:
    """Serve the index of PATH to MCP clients (tools: search_code, get_context,
    index_status, reindex, record_feedback, reload_config). Edits of the repository's configuration apply
    live, as for ``serve http``; logs and notices go to stderr (stdout is the protocol)."""
    from ragloom.server.mcp import run_mcp

    overrides = _server_overrides(None, None, no_watch)
    served = _load(path, index_dir, overrides, backend, dsn, repo)
    loaded = served.loaded
    engine = served.open()
    _start_watching(engine, loaded, served.label)
    watcher = (
        _start_watcher(served.root, engine, loaded, overrides)
        if loaded.settings.server.reload
        else None
    )
    stdio = transport != "http"
    signalled = False
    try:
        signalled = run_mcp(engine, transport="stdio" if stdio else "http", host=host, port=port)
    finally:
        if watcher is not None:
            watcher.stop()
        engine.close()
    if stdio and signalled:
        # the SDK's reader thread may still wait on the client's open input, and the
        # interpreter would wait for it at exit: SIGTERM with the input open hung for ever
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
