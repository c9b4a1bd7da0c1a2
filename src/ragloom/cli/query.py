"""``ragloom search`` and ``ragloom context``: ranked hits for a query, and the assembled,
token-budgeted context built from them.

An option left out takes its value from the index's repository configuration
(:mod:`ragloom.settings`: ``ranking.*``, ``assembly.*``); an option given on the command line
wins. Without any configuration the defaults are the ones shown in ``--help``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from ragloom.cli.app import echo_json, handle_errors
from ragloom.cli.backend import backend_options, open_read
from ragloom.cli.feedback import log_answer
from ragloom.cli.sources import (
    checked_source_args,
    filter_code_hits,
    query_source_options,
    run_context,
    run_search,
)
from ragloom.ingest.chunker import part_label

__all__ = ["context_cmd", "search_cmd"]


def _configured(root: Path, keys: dict[str, str]) -> dict[str, Any]:
    """The configured value of every option in ``keys`` (parameter -> dotted setting) the user
    did not give; explicit options keep their value. A bad configuration is a ConfigError."""
    from ragloom.settings import load_settings

    ctx = click.get_current_context()
    flat = load_settings(root).settings.flat(mask_secrets=False)
    return {
        name: flat[key]
        for name, key in keys.items()
        if ctx.get_parameter_source(name) in (ParameterSource.DEFAULT, None)
    }


def _ids(hits: list[Any]) -> list[str]:
    return [h.id for h in hits]


def _hit_json(hit: Any, explain: bool) -> dict[str, object]:
    from ragloom.retrieve.search import hit_to_json

    return hit_to_json(hit, explain=explain)


@click.command("search")
@click.argument("query")
@click.option(
    "--index-dir", type=click.Path(path_type=Path), help="Index folder [nearest .ragloom]."
)
@click.option(
    "-k", "--top-k", type=int, default=10, show_default=True, help="Hits [config: ranking.top_k]."
)
@click.option(
    "--strategy",
    default="hybrid",
    show_default=True,
    help="hybrid | hybrid-mmr | dense | sparse, optionally +raw, +seed (seed RRF defaults), "
    "+changes / +lookup (history weighed as for a change request / a lookup, whatever the "
    "question), +graph[=W] (relevance spread along the code graph; off by default) or "
    "+no-STEP (STEP: expand, synonyms, "
    "entities, exact, decompose, language, roles, decl, filerank, history) "
    "[config: ranking.strategy].",
)
@click.option("--explain", is_flag=True, help="Show each modality's rank and score, and boosts.")
@click.option("--json", "as_json", is_flag=True, help="Print hits as a JSON list.")
@query_source_options
@backend_options
@handle_errors
def search_cmd(
    query: str,
    index_dir: Path | None,
    top_k: int,
    strategy: str,
    explain: bool,
    as_json: bool,
    backend: str | None = None,
    dsn: str | None = None,
    repo: str | None = None,
    **source_args: Any,
) -> None:
    """Search the index for QUERY."""
    source_args = checked_source_args(source_args)
    idx = open_read(index_dir, backend, dsn, repo)
    given = _configured(idx.root, {"top_k": "ranking.top_k", "strategy": "ranking.strategy"})
    top_k = given.get("top_k", top_k)
    strategy = given.get("strategy", strategy)
    if source_args.get("sources"):  # several sources (ragloom.cli.sources)
        run_search(idx, query, top_k, strategy, explain, as_json, source_args, _hit_json)
        return
    from ragloom.sources.code import filtered_depth

    filtered = bool(source_args.get("path_globs") or source_args.get("languages"))
    asked = filtered_depth(top_k) if filtered else top_k
    result = idx.search(query, top_k=asked, strategy=strategy, explain=explain)
    if filtered:
        result.hits = filter_code_hits(result.hits, source_args, top_k)
        if len(result.hits) < top_k:
            result.notes.append(
                f"{len(result.hits)} of the best {asked} hits match --path/--language"
            )
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    changed = idx.changed_since_indexed({h.path for h in result.hits})
    if changed:
        shown = ", ".join(sorted(changed)[:5]) + (", ..." if len(changed) > 5 else "")
        click.echo(
            f"note: {len(changed)} of the hits' files changed since indexing, so their lines "
            f"may have moved ({shown}); `ragloom index` brings them up to date",
            err=True,
        )
    if as_json:
        # every hit names the index generation the whole answer comes from
        gen = result.generation
        qid = log_answer(idx, "search", query, result.strategy, gen, _ids(result.hits))
        extra = {"generation": gen, "query_id": qid}  # null: no query log kept here
        echo_json(
            [{**_hit_json(h, explain), **extra, "stale": h.path in changed} for h in result.hits]
        )
        return
    if explain:
        click.echo(f"query: {json.dumps(result.query, sort_keys=True)}")
    if not result.hits:
        click.echo("no results")
        return
    for i, h in enumerate(result.hits, 1):
        ranks = " ".join(f"{m}#{r}" for m, r in sorted(h.ranks.items()))
        click.echo(
            f"{i:>2}. {h.path}:{h.start_line}-{h.end_line}  {h.kind} "
            f"{part_label(h.id, h.text) or h.symbol}  "
            f"score={h.score:.4f}  {ranks}"
            + ("  (file changed since indexing)" if h.path in changed else "")
        )
        if explain:
            for m, s in sorted(h.scores.items()):
                click.echo(f"      {m}: rank {h.ranks[m]} score {s:.4f}")
            for stage, info in h.explain.items():
                click.echo(f"      {stage}: {info}")


@click.command("context")
@click.argument("query")
@click.option(
    "--index-dir", type=click.Path(path_type=Path), help="Index folder [nearest .ragloom]."
)
@click.option(
    "-k",
    "--top-k",
    type=int,
    default=15,
    show_default=True,
    help="Hits to assemble [config: assembly.context_top_k].",
)
@click.option(
    "--budget",
    type=click.IntRange(min=1),
    default=8000,
    show_default=True,
    help="Token budget [config: assembly.budget].",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["xml", "markdown", "plain", "json"]),
    default="xml",
    show_default=True,
    help="Rendering [config: assembly.format].",
)
@click.option(
    "--counter",
    default="cl100k",
    show_default=True,
    help="Token counter: cl100k | o200k | approx [config: assembly.counter].",
)
@click.option(
    "--strategy",
    default="hybrid",
    show_default=True,
    help="As for `ragloom search` [config: ranking.strategy].",
)
@click.option(
    "--structure",
    type=click.Choice(["off", "signatures", "bodies"]),
    default="off",
    show_default=True,
    help="Add what the selected code calls and what calls it (signatures or bodies), within "
    "the same budget [config: assembly.structure].",
)
@click.option("--scores", is_flag=True, help="Include scores in the rendered context.")
@click.option("--json", "as_json", is_flag=True, help="Print parts, stats and text as JSON.")
@query_source_options
@backend_options
@handle_errors
def context_cmd(
    query: str,
    index_dir: Path | None,
    top_k: int,
    budget: int,
    fmt: str,
    counter: str,
    strategy: str,
    structure: str,
    scores: bool,
    as_json: bool,
    backend: str | None = None,
    dsn: str | None = None,
    repo: str | None = None,
    **source_args: Any,
) -> None:
    """Assemble a deduplicated, stitched, token-budgeted context for QUERY."""
    source_args = checked_source_args(source_args)
    idx = open_read(index_dir, backend, dsn, repo)
    given = _configured(
        idx.root,
        {
            "top_k": "assembly.context_top_k",
            "budget": "assembly.budget",
            "fmt": "assembly.format",
            "counter": "assembly.counter",
            "strategy": "ranking.strategy",
            "structure": "assembly.structure",
        },
    )
    structure = given.get("structure", structure)
    top_k = given.get("top_k", top_k)
    budget = given.get("budget", budget)
    fmt = given.get("fmt", fmt)
    counter = given.get("counter", counter)
    strategy = given.get("strategy", strategy)
    if source_args.get("path_globs") or source_args.get("languages"):
        # filters on the code alone: the code source applies them (the same context, and
        # `--json` adds `sources`)
        source_args["sources"] = source_args.get("sources") or "code"
    if source_args.get("sources"):  # several sources (ragloom.cli.sources)
        args = (query, top_k, budget, fmt, counter, strategy, scores, as_json, source_args)
        run_context(idx, *args)
        return
    ctx = idx.get_context(
        query,
        top_k=top_k,
        budget=budget,
        strategy=strategy,
        format=fmt,
        counter=counter,
        include_scores=scores,
        structure=structure,
    )
    if as_json:
        gen = idx.retriever.store.generation()
        hit_ids = list(dict.fromkeys(i for p in ctx.parts for i in p.hit_ids))
        qid = log_answer(idx, "context", query, strategy, gen, hit_ids)
        echo_json({**ctx.to_dict(), "query_id": qid})  # null: no query log kept here
        return
    click.echo(ctx.text)
    for note in ctx.notes:
        click.echo(f"note: {note}", err=True)
    st = ctx.stats
    click.echo(
        f"{len(ctx.parts)} parts from {st.unique_files} files, {st.tokens_total}/"
        f"{st.budget['available']} tokens{' (some hits left out)' if st.truncated else ''}, "
        f"{st.stale_reresolved} stale re-resolved, {st.stale_dropped} stale dropped",
        err=True,
    )
