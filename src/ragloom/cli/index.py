"""``ragloom index`` and ``ragloom status``: build or update an index, and report on it."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ragloom.cli.app import echo_json, handle_errors, progress_bars
from ragloom.cli.backend import backend_options, chosen_backend, open_postgres_index, open_read
from ragloom.cli.sources import (
    check_source_reports,
    index_source_options,
    run_index_sources,
    status_sources,
    sync_configured_sources,
)
from ragloom.errors import ConfigError

__all__ = ["index_cmd", "status_cmd"]


@click.command("index")
@click.argument("path", type=click.Path(path_type=Path), default=".")
@click.option("--index-dir", type=click.Path(path_type=Path), help="Index folder [PATH/.ragloom].")
@click.option(
    "--model",
    "model",
    default=None,
    help="Embedding model: 'default', 'hashing[:DIM]', an ONNX model folder, "
    "'openai:MODEL@URL' (any OpenAI-compatible embeddings server), or a sentence-transformers "
    "name/path.",
)
@click.option("--rebuild", is_flag=True, help="Discard the existing index and build from scratch.")
@click.option("--no-embed", is_flag=True, help="Parse and BM25 only; embed on a later run.")
@click.option(
    "--max-file-bytes",
    type=click.IntRange(min=1),
    default=None,
    help="Skip files above this size (bytes).",
)
@click.option("--json", "as_json", is_flag=True, help="Print statistics as JSON.")
@click.option("--no-progress", is_flag=True, help="No progress bars.")
@click.option(
    "--no-history",
    is_flag=True,
    help="Do not sync the git history (ranking then uses no change history).",
)
@click.option(
    "--wait",
    "wait_s",
    type=click.FloatRange(min=0),
    default=0.0,
    help="Wait up to this many seconds for another writer (a watcher's batch) [0: exit 22].",
)
@index_source_options
@backend_options
@handle_errors
def index_cmd(
    path: Path,
    index_dir: Path | None,
    model: str | None,
    rebuild: bool,
    no_embed: bool,
    max_file_bytes: int | None,
    as_json: bool,
    no_progress: bool,
    no_history: bool,
    wait_s: float,
    sources: str | None,
    github: str | None,
    issues_json: Path | None,
    prs_json: Path | None,
    backend: str | None,
    dsn: str | None,
    repo: str | None,
) -> None:
    """Index PATH (build, or update only what changed)."""
    import ragloom
    from ragloom.ingest.walker import DEFAULT_MAX_FILE_BYTES
    from ragloom.paths import existing_dir, path_exists

    path = existing_dir(path)
    if index_dir is not None:
        path_exists(index_dir)  # a NUL byte or an over-long name is bad input, said once
    if chosen_backend(backend, dsn) == "postgres":
        if index_dir is not None:
            raise ConfigError("--index-dir names a folder index; not with --backend postgres")
        idx = open_postgres_index(path, dsn, repo, model=model, create=True)
    else:
        idx = ragloom.Index(path, index_dir or path / ".ragloom", embedder=model)
    show = not no_progress and sys.stderr.isatty()
    reports: list[dict[str, object]] | None = None
    adapted = None
    try:
        with progress_bars(show) as progress:
            stats = idx.index(
                rebuild=rebuild,
                embed=not no_embed,
                max_file_bytes=max_file_bytes or DEFAULT_MAX_FILE_BYTES,
                progress=progress,
                # `--sources ...commits` syncs the history itself below (and reports it)
                history=not no_history and not _names_commits(sources),
                wait_s=wait_s,
            )
        named: set[str] = set()
        if sources or github or issues_json or prs_json:  # other sources (ragloom.cli.sources)
            reports = run_index_sources(idx, sources or "code", github, issues_json, prs_json)
            named = {str(r["source"]) for r in reports}
            for rep in reports:  # the history the commits source synced (the index did not)
                if rep["source"] == "commits" and rep["status"] == "ok":
                    total = rep.get("total")
                    stats.history_commits = total if isinstance(total, int) else None
        else:  # the sources an earlier `index --sources` named, kept up to date
            reports = sync_configured_sources(idx)
        if not no_history:
            from ragloom.learn.adapt import refresh

            # a model fitted by `ragloom adapt` follows the history and the ratings
            with progress_bars(show) as progress:
                adapted = refresh(idx, progress=lambda i, n: progress("adapt", i, n))
    finally:
        idx.close()
    if as_json:
        extra: dict[str, object] = {"sources": reports} if reports is not None else {}
        if adapted is not None:
            extra["adapted"] = adapted.to_dict()
        echo_json({**stats.to_dict(), **extra})
        check_source_reports(reports or [], named)
        return
    skipped = sum(stats.files_skipped.values())
    click.echo(
        f"indexed {stats.files_scanned} files ({stats.files_changed} changed, "
        f"{stats.files_removed} removed, {skipped} skipped): {stats.chunks_total} chunks "
        f"(+{stats.chunks_added} ~{stats.chunks_updated} -{stats.chunks_removed}), "
        f"{stats.chunks_embedded} embedded in {stats.seconds:.2f}s"
    )
    if stats.embeddings_pending:
        click.echo(f"{stats.embeddings_pending} chunks still have no vector", err=True)
    if stats.history_commits is not None:
        click.echo(f"history: {stats.history_commits} commits")
    if adapted is not None:
        click.echo(
            f"ranking model adapted again: {adapted.examples} history questions, "
            f"{adapted.feedback_answers} rated answers ({adapted.status})"
        )
    for rep in reports or []:
        err = f" ({rep['error']})" if rep["error"] else ""
        click.echo(
            f"source {rep['source']}: {rep['status']}{err}, +{rep['added']} -{rep['removed']}, "
            f"{rep['total']} items"
        )
    check_source_reports(reports or [], named)


def _names_commits(sources: str | None) -> bool:
    from ragloom.sources.registry import parse_source_list

    return bool(sources) and "commits" in parse_source_list(sources or "")


@click.command("status")
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option(
    "--index-dir", type=click.Path(path_type=Path), help="Index folder [nearest .ragloom]."
)
@click.option(
    "--no-freshness", is_flag=True, help="Skip comparing the index with the files on disk."
)
@click.option("--json", "as_json", is_flag=True, help="Print status as JSON.")
@backend_options
@handle_errors
def status_cmd(
    path: Path | None,
    index_dir: Path | None,
    no_freshness: bool,
    as_json: bool,
    backend: str | None,
    dsn: str | None,
    repo: str | None,
) -> None:
    """Show counts, model, BM25 and vector readiness, and freshness of the index of PATH (a
    repository root or an index folder; default: the nearest index)."""
    if path is not None and index_dir is not None:
        raise ConfigError("give PATH or --index-dir, not both")
    idx = open_read(path if path is not None else index_dir, backend, dsn, repo)
    try:
        st = idx.status(freshness=not no_freshness)
        fresh = status_sources(idx)  # None unless `index --sources` synced some
    finally:
        idx.close()
    if as_json:
        echo_json({**st.to_dict(), **({"sources": fresh} if fresh is not None else {})})
        return
    click.echo(f"index     {st.index_dir} (root {st.root})")
    click.echo(f"files     {st.files}   chunks {st.chunks}   disk {st.disk_bytes / 1e6:.1f} MB")
    click.echo(f"model     {st.model} ({st.dim}-d)")
    pending = (
        f", {st.bm25_unpublished} of an update that did not finish: searches skip them and the "
        "next `ragloom index` finishes or rolls it back"
        if st.bm25_unpublished
        else ""
    )
    click.echo(f"bm25      {st.bm25_status} ({st.bm25_docs} docs{pending})")
    snap = st.bm25.get("snapshot")
    if isinstance(snap, dict):
        state = "stale" if st.bm25.get("snapshot_stale") else "current"
        click.echo(
            f"snapshot  {snap.get('doc_count')} docs, {state} ({st.bm25.get('snapshot_path')})"
        )
    elif st.bm25.get("snapshot_error"):
        click.echo(f"snapshot  unusable: {st.bm25['snapshot_error']}")
    why = (
        ""
        if st.vectors_current
        else ": made with another model, not searched "
        "(`ragloom index` rebuilds them from the stored embeddings)"
    )
    click.echo(
        f"vectors   {st.vectors}/{st.chunks} {'ready' if st.vectors_ready else 'incomplete'}{why}"
    )
    if not st.checkout:
        click.echo("stale     not checked: no checkout of the repository here (contexts come "
                   "from the files as indexed)")  # fmt: skip
    elif st.stale_files is not None:
        click.echo(f"stale     {st.stale_files} files differ from the index")
    if st.history:
        last = str(st.history.get("last_commit") or "")[:10]
        use = "" if st.history.get("ranking") else ", unused: no commit touched this folder"
        click.echo(f"history   {st.history.get('commits')} commits (last {last}{use})")
    rm = st.ranking_model
    if rm.get("model") == "repository":
        pending = rm.get("ratings_since_fit")
        waiting = ""
        if isinstance(pending, int) and pending > 0:
            from ragloom.learn.adapt import REFIT_AFTER_RATINGS

            waiting = f"; {pending} answers rated since (`index` fits it again from "
            waiting += f"{REFIT_AFTER_RATINGS})"
        rated = ""
        if rm.get("feedback_used"):
            rated = f" and {rm.get('feedback_answers')} rated answers"
        click.echo(
            f"ranking   repository model {rm.get('digest')} ({rm.get('examples')} history "
            f"questions{rated}, over global model {rm.get('base_digest')}){waiting}"
        )
    elif rm.get("set_aside"):
        click.echo(f"ranking   global model; the repository model is set aside: {rm['set_aside']}")
    if rm.get("file_bm25") is False:
        click.echo(
            "ranking   no BM25 over whole files: the model without it ranks "
            "(`ragloom index` adds it)"
        )
    if st.git is not None:
        click.echo(f"git       {_git_line(st.git)}")
    for info in fresh or []:
        shown = "  ".join(
            f"{k} {_shown(k, v)}" for k, v in info.items() if k != "source" and v is not None
        )
        click.echo(f"source    {info['source']}: {shown}")


def _shown(key: str, value: object) -> str:
    """A source's freshness value as a person reads it: times as UTC dates (``--json`` keeps
    the epoch seconds), commit hashes short."""
    from datetime import UTC, datetime

    if key.endswith(("_sync", "_date")) and isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%d %H:%M UTC")
    if key.endswith("_commit") and isinstance(value, str):
        return value[:10]
    return str(value)


def _git_line(git: dict[str, object]) -> str:
    """``main @ 3bc4255 (index: main @ 55f85da, HEAD moved; 3 files differ)``."""

    def where(branch: object, head: object) -> str:
        return f"{branch or 'detached'} @ {str(head)[:7] if head else 'no commit'}"

    line = where(git.get("branch"), git.get("head"))
    if git.get("indexed_head") is None:
        notes = ["index: git state not recorded"]
    else:
        notes = [f"index: {where(git.get('indexed_branch'), git.get('indexed_head'))}"]
        notes[0] += ", HEAD moved" if git.get("head_moved") else ", HEAD unchanged"
    dirty = git.get("dirty_paths")
    if isinstance(dirty, int):
        notes.append(f"{dirty} file{'' if dirty == 1 else 's'} differ{'s' if dirty == 1 else ''}")
    return f"{line} ({'; '.join(notes)})"
