"""``--sources`` for ``ragloom index``, ``search``, ``context`` and ``status`` (docs/sources.md).

Without ``--sources`` every command behaves and prints exactly as before. With it:

* ``index PATH --sources code,docs,commits [--github OWNER/NAME] [--issues-json F]
  [--prs-json F]`` indexes the code as before, then syncs each other source; ``--json`` adds
  ``sources`` (one sync report per source) to the statistics.
* ``search``/``context --sources code,docs,commits,...`` query the sources in parallel with
  per-source and total timeouts and fuse them. ``search --json`` then prints an object
  ``{"hits": [...], "sources": [...], "notes": [...], "timings_ms": {...}}`` (a list cannot carry
  the per-source status): code hits have the usual fields, every hit has ``source``.
  ``context --json`` adds ``sources`` to the usual object.
* ``status`` shows each synced source's freshness (``sources`` in ``--json``).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ragloom.errors import ConfigError

if TYPE_CHECKING:
    from ragloom.sources.base import SourceHit

__all__ = [
    "index_source_options",
    "query_source_options",
    "run_context",
    "run_index_sources",
    "run_search",
    "status_sources",
]

F = TypeVar("F", bound=Callable[..., Any])


def _date(value: str | None, name: str, *, end_of_day: bool = False) -> float | None:
    """Epoch seconds of an ISO date or time (UTC unless it says otherwise); a bare date with
    ``end_of_day`` is the last moment of that day (``--until 2024-09-20`` keeps items of the
    20th: "on or before")."""
    if not value:
        return None
    try:
        d = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ConfigError(f"{name} must be an ISO date (2024-05-01), got {value!r}") from exc
    if d.tzinfo is None:
        d = d.replace(tzinfo=UTC)
    if end_of_day and "T" not in value.upper() and " " not in value.strip():
        return (d + timedelta(days=1)).timestamp() - 1e-3
    return d.timestamp()


_SOURCES_ONLY = {
    "since": "--since",
    "until": "--until",
    "author": "--author",
    "source_weights": "--source-weight",
    "source_timeout_ms": "--source-timeout-ms",
    "total_timeout_ms": "--total-timeout-ms",
    "strict_sources": "--strict-sources",
    "history_weight": "--history-weight",
}
"""Options that mean something only when several sources are asked (``--sources``)."""


def known_languages() -> frozenset[str]:
    """Every language ``--language`` can name: the code index's and the docs source's."""
    from ragloom.ingest.languages import EXTENSIONS, FILENAMES

    return (
        frozenset(EXTENSIONS.values())
        | frozenset(FILENAMES.values())
        | {
            "markdown",
            "rst",
            "text",
        }
    )


def checked_source_args(args: dict[str, Any]) -> dict[str, Any]:
    """The ``--sources`` options of ``search``/``context``, checked (ConfigError, exit 2):
    an empty ``--sources``, options that only filter or weigh other sources given without
    ``--sources`` (they were silently ignored), an unknown ``--language`` (lower-cased: the
    index names languages in lower case), and ``--since`` after ``--until``."""
    out = dict(args)
    sources = out.get("sources")
    if sources is not None and not str(sources).strip(" ,"):
        raise ConfigError("--sources names no source; leave it out to search the code alone")
    if not sources:
        given = [flag for key, flag in _SOURCES_ONLY.items() if out.get(key)]
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            raise ConfigError(
                f"{', '.join(given)} only {verb} with --sources (they filter or weigh the docs, "
                "commits, issues and pull requests); add e.g. --sources code,commits"
            )
    langs = tuple(str(x).strip().lower() for x in out.get("languages") or ())
    unknown = sorted(set(langs) - known_languages())
    if unknown:
        raise ConfigError(
            f"unknown --language {', '.join(unknown)}; one of: "
            + ", ".join(sorted(known_languages()))
        )
    out["languages"] = langs
    since = _date(out.get("since"), "--since")
    until = _date(out.get("until"), "--until", end_of_day=True)
    if since is not None and until is not None and since > until:
        raise ConfigError(f"--since {out.get('since')} is after --until {out.get('until')}")
    return out


def filter_code_hits(hits: list[Any], args: dict[str, Any], top_k: int) -> list[Any]:
    """``--path`` and ``--language`` on the code index alone (no ``--sources``): the hits
    whose file matches a glob and whose language is one named, best first, at most
    ``top_k`` (the search asked more: :func:`ragloom.sources.code.filtered_depth`)."""
    globs = tuple(args.get("path_globs") or ())
    langs = tuple(args.get("languages") or ())
    kept = [
        h
        for h in hits
        if (not globs or any(fnmatch.fnmatchcase(h.path, g) for g in globs))
        and (not langs or h.language in langs)
    ]
    return kept[:top_k]


def query_source_options(fn: F) -> F:
    """The ``--sources`` options of ``search`` and ``context``."""
    opts = [
        click.option(
            "--sources",
            "sources",
            default=None,
            help="Query these sources in parallel and fuse them: code, docs, commits, issues, "
            "prs or an installed plug-in (comma-separated). Default: the code index alone.",
        ),
        click.option(
            "--source-timeout-ms",
            type=click.FloatRange(min=0, min_open=True),
            default=None,
            help="Per-source timeout [2000].",
        ),
        click.option(
            "--total-timeout-ms",
            type=click.FloatRange(min=0, min_open=True),
            default=None,
            help="Timeout of all sources [5000].",
        ),
        click.option(
            "--strict-sources", is_flag=True, help="Fail when a source times out or fails."
        ),
        click.option("--since", default=None, help="Only items dated on or after (ISO date)."),
        click.option("--until", default=None, help="Only items dated on or before (ISO date)."),
        click.option("--author", multiple=True, help="Only items by this author (repeatable)."),
        click.option(
            "--language",
            "languages",
            multiple=True,
            help="Only items in this language (code: python, ...; docs: markdown, rst, text).",
        ),
        click.option(
            "--history-weight",
            type=click.FloatRange(min=0),
            default=0.0,
            help="History-aware code ranking: files changed by past commits like the question "
            "are lifted with this RRF weight (off: 0; measured in docs/sources.md).",
        ),
        click.option(
            "--source-weight",
            "source_weights",
            multiple=True,
            help="NAME=WEIGHT, the RRF weight of one source (repeatable; default: code 1.0, "
            "docs 0.3, issues 0.2, prs 0.2, commits 0.1; 0 leaves its items out).",
        ),
        click.option(
            "--path",
            "path_globs",
            multiple=True,
            help="Only items naming a file matching this glob (repeatable).",
        ),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def index_source_options(fn: F) -> F:
    """The ``--sources`` options of ``index``."""
    opts = [
        click.option(
            "--sources",
            "sources",
            default=None,
            help="Also sync these sources (comma-separated: code, docs, commits, issues, prs).",
        ),
        click.option("--github", default=None, help="OWNER/NAME for the issues and prs sources."),
        click.option(
            "--issues-json",
            type=click.Path(path_type=Path, exists=True, dir_okay=False),
            default=None,
            help="Issues from `gh issue list --json ...` output (offline).",
        ),
        click.option(
            "--prs-json",
            type=click.Path(path_type=Path, exists=True, dir_okay=False),
            default=None,
            help="Pull requests from `gh pr list --json ...,files` output (offline).",
        ),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _weights(specs: tuple[str, ...]) -> dict[str, float]:
    out: dict[str, float] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError(spec)
            out[name.strip().lower()] = weight = float(value)
        except ValueError as exc:
            raise ConfigError(f"--source-weight takes NAME=WEIGHT, got {spec!r}") from exc
        if not weight >= 0 or weight == float("inf"):
            raise ConfigError(f"--source-weight needs a finite weight of 0 or more, got {spec!r}")
    return out


def _source_set(
    idx: Any,
    names: list[str],
    options: dict[str, dict[str, Any]] | None = None,
    weights: dict[str, float] | None = None,
) -> Any:
    from ragloom.sources.multi import SourceSet

    return SourceSet(idx.root, idx.index_dir, names, options=options, weights=weights, index=idx)


def _search(
    idx: Any, query: str, top_k: int, strategy: str, explain: bool, args: dict[str, Any]
) -> Any:
    from ragloom.sources.base import SourceFilter
    from ragloom.sources.orchestrate import DEFAULT_PER_SOURCE_MS, DEFAULT_TOTAL_MS
    from ragloom.sources.registry import parse_source_list

    names = parse_source_list(str(args["sources"]))
    options = {"code": {"strategy": strategy, "explain": explain}}
    ss = _source_set(idx, names, options, _weights(args.get("source_weights") or ()))
    flt = SourceFilter(
        paths=tuple(args.get("path_globs") or ()),
        languages=tuple(args.get("languages") or ()),
        since=_date(args.get("since"), "--since"),
        until=_date(args.get("until"), "--until", end_of_day=True),
        authors=tuple(args.get("author") or ()),
    )
    try:
        result = ss.search(
            query,
            top_k=top_k,
            filter=flt,
            per_source_ms=args.get("source_timeout_ms") or DEFAULT_PER_SOURCE_MS,
            total_ms=args.get("total_timeout_ms") or DEFAULT_TOTAL_MS,
            strict=bool(args.get("strict_sources")),
            history_weight=float(args.get("history_weight") or 0.0),
        )
    finally:
        ss.close()
    return result


def _status_line(result: Any) -> str:
    line = "sources: " + ", ".join(
        f"{s.source} {s.status} {s.count} ({s.latency_ms:.0f} ms)" for s in result.statuses
    )
    notes = [f"\nnote: {s.message}" for s in result.statuses if getattr(s, "message", None)]
    return line + "".join(notes)


def hit_json(
    h: SourceHit, explain: bool, code_json: Callable[[Any, bool], dict[str, object]]
) -> dict[str, object]:
    """A fused hit as JSON: a code hit as ``ragloom search`` prints it plus ``source``; any
    other hit with its title, date, URL, author, attribution and paths."""
    if h.source == "code" and h.payload is not None:
        code = {**code_json(h.payload, explain), "source": "code", "score": h.score}
        if explain:
            old = code.get("explain")
            code["explain"] = {**(old if isinstance(old, dict) else {}), "sources": h.explain}
        return code
    out = h.to_dict()
    if not explain:
        out.pop("text", None)
    else:
        out["explain"] = h.explain
    return out


def run_search(
    idx: Any,
    query: str,
    top_k: int,
    strategy: str,
    explain: bool,
    as_json: bool,
    args: dict[str, Any],
    code_json: Callable[[Any, bool], dict[str, object]],
) -> None:
    """``ragloom search --sources``."""
    from ragloom.cli.app import echo_json
    from ragloom.cli.feedback import log_answer
    from ragloom.sources.context import item_label

    result = _search(idx, query, top_k, strategy, explain, args)
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    if as_json:
        # the code hits carry what `ragloom search --json` gives them (generation, stale),
        # and the answer a query_id to rate them by, as without --sources
        code = [h.payload for h in result.hits if h.source == "code" and h.payload is not None]
        changed = idx.changed_since_indexed({c.path for c in code})
        gen = int(idx.retriever.store.generation())
        qid = log_answer(idx, "search", query, strategy, gen, [c.id for c in code])
        hits = []
        for h in result.hits:
            out = hit_json(h, explain, code_json)
            if h.source == "code" and h.payload is not None:
                out = {**out, "generation": gen, "stale": h.payload.path in changed}
            hits.append(out)
        body: dict[str, object] = {
            "hits": hits,
            "sources": result.sources_json(),
            "notes": result.notes,
            "timings_ms": result.timings_ms,
            "generation": gen,
            "query_id": qid,  # null: no query log kept here
        }
        echo_json(body)
        return
    click.echo(_status_line(result), err=True)
    if not result.hits:
        click.echo("no results")
        return
    for i, h in enumerate(result.hits, 1):
        if h.source == "code" and h.payload is not None:
            p = h.payload
            where = f"{p.path}:{p.start_line}-{p.end_line}  {p.kind} {p.symbol}"
        else:
            when = datetime.fromtimestamp(h.date, UTC).strftime("%Y-%m-%d") if h.date else "no date"
            files = f"  files: {', '.join(h.paths[:5])}" if h.paths and h.source != "docs" else ""
            where = f"{item_label(h)}  {h.title}  ({when}){files}"
            if h.url:
                where += f"  {h.url}"
        click.echo(f"{i:>2}. [{h.source}] {where}  score={h.score:.4f}")
        if explain:
            rrf = h.explain.get("rrf", {})
            rec = h.explain.get("recency", {})
            click.echo(f"      rrf: {rrf}")
            click.echo(f"      normalised: {h.explain.get('normalised')}  recency: {rec}")


def run_context(
    idx: Any,
    query: str,
    top_k: int,
    budget: int,
    fmt: str,
    counter: str,
    strategy: str,
    scores: bool,
    as_json: bool,
    args: dict[str, Any],
) -> None:
    """``ragloom context --sources``."""
    from ragloom.cli.app import echo_json
    from ragloom.sources.context import assemble_sources

    result = _search(idx, query, top_k, strategy, False, args)
    ctx = assemble_sources(
        idx,
        query,
        result.hits,
        budget=budget,
        format=fmt,  # type: ignore[arg-type]
        counter=counter,
        include_scores=scores,
    )
    if as_json:
        from ragloom.cli.feedback import log_answer

        # a query_id to rate the code parts by, as `ragloom context --json` gives one
        gen = int(idx.retriever.store.generation())
        hit_ids = list(dict.fromkeys(i for p in ctx.parts for i in p.hit_ids))
        qid = log_answer(idx, "context", query, strategy, gen, hit_ids)
        body = {**ctx.to_dict(), "sources": result.sources_json(), "notes": result.notes}
        echo_json({**body, "query_id": qid})  # null: no query log kept here
        return
    click.echo(ctx.text)
    st = ctx.stats
    click.echo(
        f"{len(ctx.parts)} parts, {st.tokens_total}/{st.budget['available']} tokens",
        err=True,
    )
    click.echo(_status_line(result), err=True)


def run_index_sources(
    idx: Any,
    sources: str,
    github: str | None,
    issues_json: Path | None,
    prs_json: Path | None,
) -> list[dict[str, object]]:
    """Sync the non-code sources named (the code index was just built); returns the reports."""
    from ragloom.sources.registry import parse_source_list

    names = parse_source_list(sources)
    options: dict[str, dict[str, Any]] = {}
    if github:
        options.setdefault("issues", {})["github"] = github
        options.setdefault("prs", {})["github"] = github
        if "issues" not in names and "prs" not in names:
            names.append("issues")
    if issues_json is not None:
        options.setdefault("issues", {})["issues_json"] = str(issues_json.resolve())
        if "issues" not in names:
            names.append("issues")
    if prs_json is not None:
        options.setdefault("prs", {})["prs_json"] = str(prs_json.resolve())
        if "prs" not in names:
            names.append("prs")
    ss = _source_set(idx, names, options)
    try:
        reports = ss.sync(skip=("code",))
    finally:
        ss.close()
    return [r.to_dict() for r in reports]


def sync_configured_sources(idx: Any) -> list[dict[str, object]] | None:
    """A plain ``ragloom index``: sync the non-code sources the last ``index --sources`` named
    (``<index>/sources/config.json``), so docs, issues and pull requests do not go stale while
    the code is kept up to date; None when none were named. ``commits`` is left out: the code
    index's own history sync just brought it up to date (or ``--no-history`` asked for none)."""
    from ragloom.sources.base import SourceContext
    from ragloom.sources.multi import SourceSet
    from ragloom.sources.registry import load_source_config

    storage = idx.source_storage()
    ctx = SourceContext(idx.root.resolve(), idx.index_dir.resolve(), storage)
    names = [n for n in load_source_config(ctx) if n not in ("code", "commits")]
    if not names:  # the usual case: nothing to open (loading the sources took 47 ms)
        return None
    ss = SourceSet(idx.root, idx.index_dir, names, index=idx, storage=storage, tolerant=True)
    try:
        reports = ss.sync(skip=("code", "commits"))
    finally:
        ss.close()
    return [r.to_dict() for r in reports]


def check_source_reports(reports: list[dict[str, object]], named: set[str]) -> None:
    """SourceSyncError (exit 24) when a source named on the command line failed to sync."""
    from ragloom.errors import SourceSyncError

    failed = [r for r in reports if r.get("status") == "error" and r.get("source") in named]
    if failed:
        raise SourceSyncError(
            "; ".join(f"source {r['source']} not synced: {r.get('error')}" for r in failed)
        )


def status_sources(idx: Any) -> list[dict[str, object]] | None:
    """Freshness of the sources the last ``index --sources`` synced (None when none were)."""
    from ragloom.sources.multi import configured_freshness

    return configured_freshness(idx)
