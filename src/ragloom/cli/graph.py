"""``ragloom defs|refs|callers|callees SYMBOL`` and ``ragloom map [QUERY]``: the code graph as
agent tools (docs/graph.md). Every command has ``--json`` (the contract of
:mod:`ragloom.graph.views`) and ``--backend/--dsn/--repo`` (:mod:`ragloom.cli.backend`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ragloom.cli.app import echo_json, handle_errors
from ragloom.cli.backend import backend_options, open_read
from ragloom.graph.code_graph import DEFAULT_MIN_CONFIDENCE

__all__ = ["callees_cmd", "callers_cmd", "defs_cmd", "map_cmd", "refs_cmd"]


def _common(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")(fn)
    fn = click.option(
        "--limit",
        type=click.IntRange(min=1),
        default=200,
        show_default=True,
        help="Most rows to print.",
    )(fn)
    fn = click.option(
        "--min-confidence",
        type=click.FloatRange(0.0, 1.0),
        default=DEFAULT_MIN_CONFIDENCE,
        show_default=True,
        help="Leave out references resolved with less confidence (1.0: by scope or import; "
        "0.9: through self or a class; lower: by name alone).",
    )(fn)
    fn = click.option("--path", default=None, help="Only definitions in this file.")(fn)
    fn = click.option(
        "--index-dir", type=click.Path(path_type=Path), help="Index folder [nearest .ragloom]."
    )(fn)
    fn = backend_options(fn)
    return click.argument("symbol", callback=_non_empty)(fn)


def _non_empty(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not value.strip():
        raise click.BadParameter(
            "a symbol is required (a name, Class.method, a chunk id or path:line)"
        )
    return value


def _run(
    query: str,
    symbol: str,
    index_dir: Path | None,
    path: str | None,
    min_confidence: float,
    limit: int,
    as_json: bool,
    backend: str | None = None,
    dsn: str | None = None,
    repo: str | None = None,
) -> None:
    from ragloom.graph.views import graph_answer, graph_text

    with open_read(index_dir, backend, dsn, repo) as idx:  # closes a database connection
        answer = graph_answer(
            idx.graph(),
            query,  # type: ignore[arg-type]
            symbol,
            path=path,
            min_confidence=min_confidence,
            limit=limit,
        )
    if as_json:
        echo_json(answer)
    else:
        click.echo(graph_text(answer, query))  # type: ignore[arg-type]


@click.command("defs")
@_common
@handle_errors
def defs_cmd(symbol: str, **kw: Any) -> None:
    """Where SYMBOL is defined (a name, Class.method, a chunk id or path:line)."""
    _run("defs", symbol, **kw)


@click.command("refs")
@_common
@handle_errors
def refs_cmd(symbol: str, **kw: Any) -> None:
    """Every reference to SYMBOL: calls, uses as a value, imports, inheritance, type uses."""
    _run("refs", symbol, **kw)


@click.command("callers")
@_common
@handle_errors
def callers_cmd(symbol: str, **kw: Any) -> None:
    """The definitions that call SYMBOL (or use it as a value)."""
    _run("callers", symbol, **kw)


@click.command("callees")
@_common
@handle_errors
def callees_cmd(symbol: str, **kw: Any) -> None:
    """The definitions SYMBOL calls (or uses as a value)."""
    _run("callees", symbol, **kw)


@click.command("map")
@click.argument("query", required=False)
@click.option(
    "--index-dir", type=click.Path(path_type=Path), help="Index folder [nearest .ragloom]."
)
@click.option(
    "--budget",
    type=click.IntRange(min=1),
    default=2048,
    show_default=True,
    help="Token budget of the map (counted exactly; never exceeded).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown", "json"]),
    default="text",
    show_default=True,
    help="Rendering of the map text.",
)
@click.option(
    "--counter",
    default="cl100k",
    show_default=True,
    help="Token counter: cl100k | o200k | approx.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the map and its entries as JSON.")
@backend_options
@handle_errors
def map_cmd(
    query: str | None,
    index_dir: Path | None,
    budget: int,
    fmt: str,
    counter: str,
    as_json: bool,
    backend: str | None = None,
    dsn: str | None = None,
    repo: str | None = None,
) -> None:
    """A repository map: files with their most relevant signatures within --budget tokens,
    ranked by PageRank over the code graph (personalised to QUERY when given)."""
    with open_read(index_dir, backend, dsn, repo) as idx:
        answer = idx.repo_map(query, budget=budget, format=fmt, counter=counter)
    if as_json:
        echo_json(answer)
        return
    click.echo(answer["text"])
    click.echo(
        f"{answer['entries_shown']} of {answer['entries_total']} definitions, "
        f"{answer['tokens']}/{budget} tokens",
        err=True,
    )
