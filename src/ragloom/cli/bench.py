"""``ragloom bench`` and ``ragloom bench-scale``: the benchmarks of :mod:`ragloom.bench`
(slow; outside the default test run)."""

from __future__ import annotations

import json
import shlex
import sys
import time
from datetime import date
from pathlib import Path
from typing import Any

import click

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
from ragloom.cli.app import echo_json, handle_errors, progress_bars

__all__ = ["bench_cmd", "bench_scale_cmd"]


@click.command("bench")
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
@handle_errors
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
        with progress_bars(sys.stderr.isatty()) as progress:
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
        echo_json(results)
    else:
        click.echo(bench.render_markdown(results, command))
    if out is not None:
        with out.open("a", encoding="utf-8") as fh:
            fh.write("\n" + bench.render_markdown(results, command) + "\n")


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
@handle_errors
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
