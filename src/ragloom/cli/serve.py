"""``ragloom serve http`` and ``ragloom serve mcp``: keep one index warm in a long-running
process and answer over HTTP (FastAPI + uvicorn) or MCP (stdio or streamable HTTP).

Both open the index once through :class:`ragloom.server.engine.ServingEngine` with the
settings of the repository (``ragloom.toml`` / ``[tool.ragloom]``, ``RAGLOOM_*``, then these
flags); ``serve http`` also watches the configuration files and applies a valid change live.
A missing index is the usual one ``error:`` line and exit code, before anything listens.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ragloom.cli.app import handle_errors

if TYPE_CHECKING:
    from ragloom.server.engine import ServingEngine
    from ragloom.settings import LoadedSettings

__all__ = ["serve_cmd"]

log = logging.getLogger("ragloom.cli.serve")


def _locate(path: Path | None, index_dir: Path | None) -> tuple[Path, Path]:
    """(index folder or repository root to open, repository root for the settings)."""
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


def _load(
    path: Path | None, index_dir: Path | None, overrides: dict[str, Any]
) -> tuple[Path, Path, LoadedSettings]:
    """(index folder, repository root, its settings with ``overrides`` applied)."""
    from ragloom.settings import load_settings

    folder, root = _locate(path, index_dir)
    return folder, root, load_settings(root, overrides=overrides)


def _server_overrides(host: str | None, port: int | None) -> dict[str, Any]:
    server: dict[str, Any] = {}
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
@handle_errors
def serve_http_cmd(
    path: Path | None, index_dir: Path | None, host: str | None, port: int | None, log_level: str
) -> None:
    """Serve the index of PATH (a repository root or an index folder) over HTTP.

    Prints the URL it listens on; stops on Ctrl-C / SIGTERM. Routes and examples:
    docs/http-api.md, or GET /docs on the running server.
    """
    from ragloom.server.engine import ServingEngine
    from ragloom.server.http import bind_socket, create_app, serve, url_of

    overrides = _server_overrides(host, port)
    folder, root, loaded = _load(path, index_dir, overrides)
    server = loaded.settings.server
    sock = bind_socket(server.host, server.port)  # a port in use fails before the model loads
    try:
        engine = ServingEngine.open(folder, loaded.settings)
        try:
            app = create_app(engine)
            watcher = _start_watcher(root, engine, loaded, overrides) if server.reload else None
            auth = " (bearer token required)" if _has_token(app) else ""
            click.echo(f"ragloom: serving {root} on {url_of(sock)}{auth}")
            try:
                serve(app, sock, log_level=log_level)
            finally:
                if watcher is not None:
                    watcher.stop()
        finally:
            engine.close()
    finally:
        sock.close()


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
@handle_errors
def serve_mcp_cmd(
    path: Path | None, index_dir: Path | None, transport: str, host: str, port: int
) -> None:
    """Serve the index of PATH to MCP clients (tools: search_code, get_context,
    index_status, reindex, record_feedback, reload_config). Edits of the repository's configuration apply
    live, as for ``serve http``; logs and notices go to stderr (stdout is the protocol)."""
    from ragloom.server.engine import ServingEngine
    from ragloom.server.mcp import run_mcp

    folder, root, loaded = _load(path, index_dir, {})
    engine = ServingEngine.open(folder, loaded.settings)
    watcher = _start_watcher(root, engine, loaded, {}) if loaded.settings.server.reload else None
    try:
        run_mcp(engine, transport="http" if transport == "http" else "stdio", host=host, port=port)
    finally:
        if watcher is not None:
            watcher.stop()
        engine.close()
