"""``ragloom cache``: the vector cache shared by every index of this user (issue 23, item 3;
:mod:`ragloom.embed.cache`): its size, and pruning it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from ragloom.cli.app import echo_json, handle_errors
from ragloom.errors import ConfigError

if TYPE_CHECKING:
    from ragloom.embed.cache import VectorCache

__all__ = ["cache_group"]


def _open() -> VectorCache:
    from ragloom.embed.cache import CACHE_ENV, open_default_cache

    cache = open_default_cache()
    if cache is None:
        raise ConfigError(f"no vector cache: {CACHE_ENV} is off, or the cache cannot be opened")
    return cache


def _run(op: Callable[[VectorCache], int]) -> tuple[int, dict[str, object]]:
    """``op`` on the opened cache (what it removed) and the statistics after it; a cache
    that does not exist yet is reported empty, not created (the first index creates it)."""
    from ragloom.embed.cache import _max_bytes, default_cache_path

    path = default_cache_path()
    if path is not None and not path.exists():
        return 0, {"path": str(path), "entries": 0, "bytes": 0, "max_bytes": _max_bytes()}
    cache = _open()
    try:
        return op(cache), cache.stats()
    finally:
        cache.close()


@click.group("cache")
def cache_group() -> None:
    """The vector cache: document vectors kept by text, shared by every index and work tree."""


@cache_group.command("stats")
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
@handle_errors
def cache_stats_cmd(as_json: bool) -> None:
    """Where the cache is, how many vectors it holds, and its bound."""
    _, st = _run(lambda _cache: 0)
    if as_json:
        echo_json(st)
        return
    mb = int(str(st["bytes"])) / 2**20
    bound = int(str(st["max_bytes"])) / 2**20
    click.echo(f"{st['path']}: {st['entries']} vectors, {mb:.1f} MiB of {bound:.0f} MiB")


@cache_group.command("prune")
@click.option(
    "--max-mb",
    type=click.FloatRange(min=0),
    default=None,
    help="Keep at most this many MiB, least recently used out first [the bound].",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was removed as JSON.")
@handle_errors
def cache_prune_cmd(max_mb: float | None, as_json: bool) -> None:
    """Cut the cache to its bound (or --max-mb), least recently used vectors first."""
    removed, st = _run(lambda c: c.prune(None if max_mb is None else int(max_mb * 2**20)))
    if as_json:
        echo_json({"removed": removed, **st})
        return
    click.echo(f"removed {removed} vectors; {st['entries']} left")


@cache_group.command("clear")
@click.option("--json", "as_json", is_flag=True, help="Print what was removed as JSON.")
@handle_errors
def cache_clear_cmd(as_json: bool) -> None:
    """Empty the cache (indexes keep their own vectors; only re-embedding gets slower)."""
    removed, st = _run(lambda c: c.clear())
    if as_json:
        echo_json({"removed": removed, **st})
        return
    click.echo(f"removed {removed} vectors")
