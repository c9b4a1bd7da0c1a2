"""The ``ragloom`` command line.

Errors are one clear line on stderr and a non-zero exit code defined by the error class
(:mod:`ragloom.errors`); ``--json`` outputs are a stable contract: fields are only added.
"""

from __future__ import annotations

import json
import logging
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any, TypeVar

import click

from ragloom._version import __version__
from ragloom.bench.indexing import machine
from ragloom.bench.peers import PEERS, bench_peers
from ragloom.bench.scale import (
    INTERLEAVE_MODES,
    assembly_latency,
    bench_concurrency,
    bench_latency,
    bench_synthetic,
    render_report,
)
from ragloom.errors import RagError

__all__ = ["main"]

F = TypeVar("F", bound=Callable[..., Any])


def _echo_json(obj: object) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=False, default=str))


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[str, int, int], None]]:
    """A rich progress bar per pipeline stage, on stderr so stdout stays parseable."""
    if not enabled:
        yield lambda *_: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(stderr=True)
    labels = {
        "scan": "scan files",
        "parse": "parse",
        "bm25": "bm25",
        "embed": "embed",
        "vectors": "vectors",
    }
    with Progress(
        TextColumn("{task.description:<11}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    ) as bar:
        tasks: dict[str, Any] = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(labels.get(stage, stage), total=max(total, 1))
            bar.update(tasks[stage], completed=done if total else 1, total=max(total, 1))

        yield update


INTERNAL_ERROR_EXIT = 70
"""Exit code of an unexpected exception (EX_SOFTWARE from sysexits.h)."""


def _handle_errors(fn: F) -> F:
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RagError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except Exception as exc:
            # A bug, not bad input: one line by default, the traceback with -v (and in the log).
            logging.getLogger("ragloom.cli").info("internal error", exc_info=True)
            click.echo(
                f"internal error: {type(exc).__name__}: {exc} (run with -v for the traceback; "
                "please report it)",
                err=True,
            )
            sys.exit(INTERNAL_ERROR_EXIT)

    return wrapper  # type: ignore[return-value]


def _open_for_read(index_dir: str | None, embedder: str | None = None) -> Any:
    import ragloom

    if index_dir is None:
        return ragloom.Index.at(ragloom.find_index_dir(), embedder=embedder)
    return ragloom.open(index_dir, embedder=embedder)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ragloom")
@click.option("-v", "--verbose", count=True, help="More logging (structured, on stderr).")
def cli(verbose: int) -> None:
    """ragloom: the best context for a question about a codebase, inside a token budget."""
    from ragloom.logs import configure_logging

    configure_logging(logging.WARNING - 10 * verbose)


@cli.command("index")
@click.argument("path", type=click.Path(path_type=Path), default=".")
@click.option("--index-dir", type=click.Path(path_type=Path), help="Index folder [PATH/.ragloom].")
@click.option(
    "--model",
    "model",
    default=None,
    help="Embedding model: 'default', 'hashing[:DIM]', an ONNX model folder, or a sentence-transformers name/path.",
)
@click.option("--rebuild", is_flag=True, help="Discard the existing index and build from scratch.")
@click.option("--no-embed", is_flag=True, help="Parse and BM25 only; embed on a later run.")
@click.option("--max-file-bytes", type=int, default=None, help="Skip files above this size.")
@click.option("--json", "as_json", is_flag=True, help="Print statistics as JSON.")
@click.option("--no-progress", is_flag=True, help="No progress bars.")
@_handle_errors
def index_cmd(
    path: Path,
    index_dir: Path | None,
    model: str | None,
    rebuild: bool,
    no_embed: bool,
    max_file_bytes: int | None,
    as_json: bool,
    no_progress: bool,
) -> None:
    """Index PATH (build, or update only what changed)."""
    import ragloom
    from ragloom.errors import InputError
    from ragloom.ingest.walker import DEFAULT_MAX_FILE_BYTES

    if not path.exists():
        raise InputError(f"path not found: {path}")
    if not path.is_dir():
        raise InputError(f"not a directory: {path}")
    idx = ragloom.Index(path, index_dir or path / ".ragloom", embedder=model)
    show = not no_progress and sys.stderr.isatty()
    with _progress(show) as progress:
        stats = idx.index(
            rebuild=rebuild,
            embed=not no_embed,
            max_file_bytes=max_file_bytes or DEFAULT_MAX_FILE_BYTES,
            progress=progress,
        )
    if as_json:
        _echo_json(stats.to_dict())
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


def _hit_json(hit: Any, explain: bool) -> dict[str, object]:
    out: dict[str, object] = {
        "id": hit.id,
        "path": hit.path,
        "start_line": hit.start_line,
        "end_line": hit.end_line,
        "kind": hit.kind,
        "symbol": hit.symbol,
        "language": hit.language,
        "score": hit.score,
        "ranks": hit.ranks,
    }
    if explain:
        out["scores"] = hit.scores
        out["explain"] = hit.explain
    return out


@cli.command("search")
@click.argument("query")
@click.option(
    "--index-dir", type=click.Path(path_type=Path), help="Index folder [nearest .ragloom]."
)
@click.option("-k", "--top-k", type=int, default=10, show_default=True)
@click.option(
    "--strategy",
    default="hybrid",
    show_default=True,
    help="hybrid | hybrid-mmr | dense | sparse, optionally +raw, +seed (seed RRF defaults) "
    "or +no-STEP (STEP: expand, synonyms, entities, exact, decompose, language).",
)
@click.option("--explain", is_flag=True, help="Show each modality's rank and score, and boosts.")
@click.option("--json", "as_json", is_flag=True, help="Print hits as a JSON list.")
@_handle_errors
def search_cmd(
    query: str, index_dir: Path | None, top_k: int, strategy: str, explain: bool, as_json: bool
) -> None:
    """Search the index for QUERY."""
    idx = _open_for_read(str(index_dir) if index_dir else None)
    result = idx.search(query, top_k=top_k, strategy=strategy, explain=explain)
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    if as_json:
        _echo_json([_hit_json(h, explain) for h in result.hits])
        return
    if explain:
        click.echo(f"query: {json.dumps(result.query, sort_keys=True)}")
    if not result.hits:
        click.echo("no results")
        return
    for i, h in enumerate(result.hits, 1):
        ranks = " ".join(f"{m}#{r}" for m, r in sorted(h.ranks.items()))
        click.echo(
            f"{i:>2}. {h.path}:{h.start_line}-{h.end_line}  {h.kind} {h.symbol}  "
            f"score={h.score:.4f}  {ranks}"
        )
        if explain:
            for m, s in sorted(h.scores.items()):
                click.echo(f"      {m}: rank {h.ranks[m]} score {s:.4f}")
            for stage, info in h.explain.items():
                click.echo(f"      {stage}: {info}")


@cli.command("status")
@click.option(
    "--index-dir", type=click.Path(path_type=Path), help="Index folder [nearest .ragloom]."
)
@click.option(
    "--no-freshness", is_flag=True, help="Skip comparing the index with the files on disk."
)
@click.option("--json", "as_json", is_flag=True, help="Print status as JSON.")
@_handle_errors
def status_cmd(index_dir: Path | None, no_freshness: bool, as_json: bool) -> None:
    """Show counts, model, BM25 and vector readiness, and freshness."""
    idx = _open_for_read(str(index_dir) if index_dir else None)
    st = idx.status(freshness=not no_freshness)
    if as_json:
        _echo_json(st.to_dict())
        return
    click.echo(f"index     {st.index_dir} (root {st.root})")
    click.echo(f"files     {st.files}   chunks {st.chunks}   disk {st.disk_bytes / 1e6:.1f} MB")
    click.echo(f"model     {st.model} ({st.dim}-d)")
    click.echo(f"bm25      {st.bm25_status} ({st.bm25_docs} docs)")
    snap = st.bm25.get("snapshot")
    if isinstance(snap, dict):
        state = "stale" if st.bm25.get("snapshot_stale") else "current"
        click.echo(
            f"snapshot  {snap.get('doc_count')} docs, {state} ({st.bm25.get('snapshot_path')})"
        )
    elif st.bm25.get("snapshot_error"):
        click.echo(f"snapshot  unusable: {st.bm25['snapshot_error']}")
    click.echo(
        f"vectors   {st.vectors}/{st.chunks} {'ready' if st.vectors_ready else 'incomplete'}"
    )
    if st.stale_files is not None:
        click.echo(f"stale     {st.stale_files} files differ from the index")


@cli.command("bench")
@click.option(
    "--corpus",
    type=click.Path(path_type=Path),
    default=None,
    help="Folder to index [the CPython stdlib].",
)
@click.option(
    "--packages",
    default="",
    help="Comma-separated stdlib packages to use instead of the whole library.",
)
@click.option(
    "--work-dir", type=click.Path(path_type=Path), default=Path("bench-out"), show_default=True
)
@click.option("--model", default=None, help="Embedding model spec [default].")
@click.option(
    "--incremental-packages",
    default="json,http,email,asyncio",
    show_default=True,
    help="Corpus of the one-file-edit re-index benchmark.",
)
@click.option("--skip-cold", is_flag=True, help="Skip the cold index of the full corpus.")
@click.option(
    "--bm25-warm-start",
    "warm_start_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Only measure BM25 Rebuild vs snapshot Load on this index folder.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Append the Markdown figures to this file.",
)
@click.option("--json", "as_json", is_flag=True)
@_handle_errors
def bench_cmd(
    corpus: Path | None,
    packages: str,
    work_dir: Path,
    model: str | None,
    incremental_packages: str,
    skip_cold: bool,
    warm_start_dir: Path | None,
    out: Path | None,
    as_json: bool,
) -> None:
    """Benchmark indexing and querying on a real corpus (slow: minutes to half an hour)."""
    from ragloom.bench import indexing as bench

    results: dict[str, object] = {}
    command = "ragloom " + " ".join(sys.argv[1:])
    if warm_start_dir is not None:
        results["bm25 warm start: Rebuild vs Load"] = bench.bench_bm25_warm_start(warm_start_dir)
        _emit_bench(results, command, out, as_json)
        return
    source = corpus or bench.stdlib_root()
    pkgs = [p for p in packages.split(",") if p]
    if not skip_cold:
        root = bench.make_corpus(work_dir / "cold", source, pkgs or None)
        with _progress(sys.stderr.isatty()) as progress:
            results["cold index"] = bench.bench_index(root, embedder=model, progress=progress)
        results["warm queries (top 10)"] = bench.bench_queries(root / ".ragloom")
    inc_pkgs = [p for p in incremental_packages.split(",") if p]
    inc_root = bench.make_corpus(work_dir / "incremental", bench.stdlib_root(), inc_pkgs)
    bench.bench_index(inc_root, embedder=model)
    results["incremental re-index after a one-file edit"] = bench.bench_incremental(inc_root)
    results["warm queries on the incremental corpus (top 10)"] = bench.bench_queries(
        inc_root / ".ragloom"
    )
    if not skip_cold:
        results["bm25 warm start: Rebuild vs Load"] = bench.bench_bm25_warm_start(
            work_dir / "cold" / ".ragloom"
        )
    _emit_bench(results, command, out, as_json)


def _emit_bench(results: dict[str, object], command: str, out: Path | None, as_json: bool) -> None:
    from ragloom.bench import indexing as bench

    if as_json:
        _echo_json(results)
    else:
        click.echo(bench.render_markdown(results, command))
    if out is not None:
        with out.open("a", encoding="utf-8") as fh:
            fh.write("\n" + bench.render_markdown(results, command) + "\n")


@cli.command("context")
@click.argument("query")
@click.option(
    "--index-dir", type=click.Path(path_type=Path), help="Index folder [nearest .ragloom]."
)
@click.option("-k", "--top-k", type=int, default=15, show_default=True, help="Hits to assemble.")
@click.option("--budget", type=int, default=8000, show_default=True, help="Token budget.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["xml", "markdown", "plain", "json"]),
    default="xml",
    show_default=True,
)
@click.option(
    "--counter", default="cl100k", show_default=True, help="Token counter: cl100k | o200k | approx."
)
@click.option("--strategy", default="hybrid", show_default=True, help="As for `ragloom search`.")
@click.option("--scores", is_flag=True, help="Include scores in the rendered context.")
@click.option("--json", "as_json", is_flag=True, help="Print parts, stats and text as JSON.")
@_handle_errors
def context_cmd(
    query: str,
    index_dir: Path | None,
    top_k: int,
    budget: int,
    fmt: str,
    counter: str,
    strategy: str,
    scores: bool,
    as_json: bool,
) -> None:
    """Assemble a deduplicated, stitched, token-budgeted context for QUERY."""
    idx = _open_for_read(str(index_dir) if index_dir else None)
    ctx = idx.get_context(
        query,
        top_k=top_k,
        budget=budget,
        strategy=strategy,
        format=fmt,
        counter=counter,
        include_scores=scores,
    )
    if as_json:
        _echo_json(ctx.to_dict())
        return
    click.echo(ctx.text)
    st = ctx.stats
    click.echo(
        f"{len(ctx.parts)} parts from {st.unique_files} files, {st.tokens_total}/"
        f"{st.budget['available']} tokens{' (some hits left out)' if st.truncated else ''}, "
        f"{st.stale_reresolved} stale re-resolved, {st.stale_dropped} stale dropped",
        err=True,
    )


@click.command("bench-scale")
@click.argument("index_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--runs", type=int, default=3, show_default=True, help="Passes over the queries.")
@click.option("--peers-on", type=click.Path(path_type=Path), help="Index to build peers on.")
@click.option("--peers", "peer_names", default=",".join(PEERS), show_default=True)
@click.option("--dataset", type=click.Path(path_type=Path), help="Docstring dataset (quality).")
@click.option("--quality-queries", type=int, default=None, help="Score this many queries.")
@click.option(
    "--interleave",
    type=click.Choice(INTERLEAVE_MODES),
    default="pass",
    show_default=True,
    help="Alternate peers and ragloom by whole passes or by single queries (cold caches).",
)
@click.option("--synthetic", type=int, default=0, help="Also a synthetic scale of N chunks.")
@click.option("--work-dir", type=click.Path(path_type=Path), default=Path("bench-out"))
@click.option("--out", type=click.Path(path_type=Path), help="Append the Markdown here.")
@click.option("--json-out", type=click.Path(path_type=Path), help="Write the results as JSON.")
def bench_scale_cmd(
    index_dirs: tuple[Path, ...],
    runs: int,
    peers_on: Path | None,
    peer_names: str,
    dataset: Path | None,
    quality_queries: int | None,
    interleave: str,
    synthetic: int,
    work_dir: Path,
    out: Path | None,
    json_out: Path | None,
) -> None:
    """Latency per strategy at each INDEX_DIR, seed targets, concurrency, peers (slow)."""

    def log(msg: str) -> None:
        click.echo(f"[bench-scale {time.strftime('%H:%M:%S')}] {msg}", err=True)

    results: dict[str, Any] = {"machine": machine(), "date": date.today().isoformat()}
    scales: dict[str, Any] = {}
    for d in index_dirs:
        import ragloom

        idx = ragloom.open(d)
        n = idx.status(freshness=False).chunks
        idx.close()
        log(f"latency on {d} ({n} chunks)")
        scale: dict[str, Any] = {"index": str(d), "chunks": n}
        scale["latency"] = bench_latency(idx.index_dir, runs=runs)
        log("concurrency")
        scale["concurrency"] = bench_concurrency(idx.index_dir)
        scales[f"{round(n / 1000)}k real chunks ({d})"] = scale
    results["scales"] = scales
    if peers_on is not None:
        import ragloom

        pdir = ragloom.open(peers_on).index_dir
        mine = next((s["latency"] for s in scales.values() if Path(s["index"]) == peers_on), None)
        if mine is None:
            mine = bench_latency(pdir, runs=runs)
        names = [p for p in peer_names.split(",") if p]
        results["peers"] = bench_peers(
            pdir,
            mine,
            peers=names,
            runs=runs,
            dataset=dataset,
            quality_queries=quality_queries,
            interleave=interleave,
            log=log,
        )
    if synthetic:
        work_dir.mkdir(parents=True, exist_ok=True)
        import ragloom

        src = ragloom.open(index_dirs[-1]).index_dir
        syn = bench_synthetic(src, work_dir, n=synthetic, runs=runs, log=log)
        scales[f"{round(synthetic / 1000)}k synthetic"] = syn
    log("assembly micro-benchmark")
    results["assembly_microbench"] = assembly_latency()
    argv = sys.argv[sys.argv.index("bench-scale") + 1 :] if "bench-scale" in sys.argv else []
    command = "ragloom bench-scale " + " ".join(shlex.quote(a) for a in argv)
    report = render_report(results, command)
    click.echo(report)
    if json_out is not None:
        json_out.write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    if out is not None:
        with out.open("a", encoding="utf-8") as fh:
            fh.write("\n" + report + "\n")


def _register_plugins() -> None:
    from ragloom.eval.cli_eval import eval_cmd, eval_data_cmd

    cli.add_command(eval_cmd)
    cli.add_command(eval_data_cmd)
    cli.add_command(bench_scale_cmd)


_register_plugins()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=argv, prog_name="ragloom")


if __name__ == "__main__":
    main()
