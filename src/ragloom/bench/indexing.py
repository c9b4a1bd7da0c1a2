"""Index and query benchmarks (``ragloom bench``), outside the default test run.

Measures, on a real corpus (the CPython standard library by default): cold index time split
into parse, BM25 and embedding, chunks/s, when BM25 became searchable, warm query latency
p50/p95 per strategy, index size on disk, peak RSS, and the incremental re-index time after a
one-file edit (median of 5). Results are returned as a dict and rendered as Markdown.
"""

from __future__ import annotations

import math
import os
import platform
import resource
import shutil
import statistics
import sysconfig
import time
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path

__all__ = ["bench_incremental", "bench_index", "bench_queries", "percentile", "render_markdown"]

SAMPLE_QUERIES: tuple[str, ...] = (
    "decode a JSON document",
    "parse HTTP headers from a response",
    "send an email message over SMTP",
    "run an asyncio event loop until complete",
    "split a path into directory and file name",
    "compute a cryptographic hash of bytes",
    "read rows from a CSV file",
    "format a date as a string",
    "wrap text to a fixed width",
    "copy a directory tree recursively",
    "create a temporary file",
    "parse command line arguments",
    "compress data with gzip",
    "open a TCP socket connection",
    "match a regular expression against a string",
    "serialize an object with pickle",
    "thread pool executor submit tasks",
    "URL quote and unquote",
    "logging handler that writes to a file",
    "base64 encode binary data",
)
"""Fixed, varied queries over the standard library, so runs are comparable."""

STRATEGIES: tuple[str, ...] = ("sparse", "dense", "hybrid", "hybrid-mmr")


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]) of a non-empty sample: the ceil(q/100 * n)-th
    smallest value (p95 of 100 values is the 95th)."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered) - 1e-9)))
    return ordered[rank - 1]


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def make_corpus(dest: Path, source: Path, packages: Sequence[str] | None = None) -> Path:
    """Copy ``source`` (or some of its packages) to ``dest``, Python sources only."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "site-packages", "*.so")
    if dest.exists():
        shutil.rmtree(dest)
    if not packages:
        shutil.copytree(source, dest, ignore=ignore, symlinks=True)
        return dest
    dest.mkdir(parents=True)
    for pkg in packages:
        if (source / pkg).is_dir():
            shutil.copytree(source / pkg, dest / pkg, ignore=ignore, symlinks=True)
        elif (source / f"{pkg}.py").exists():
            shutil.copy2(source / f"{pkg}.py", dest / f"{pkg}.py")
    return dest


def bench_index(
    root: Path, *, embedder: str | None = None, progress: Callable[..., None] | None = None
) -> dict[str, object]:
    """Cold-index ``root`` from scratch and report timings, sizes and RSS."""
    import ragloom

    index_dir = root / ".ragloom"
    shutil.rmtree(index_dir, ignore_errors=True)
    idx = ragloom.open(root, embedder=embedder)
    t = time.perf_counter()
    stats = idx.index(progress=progress)
    wall = time.perf_counter() - t
    n = stats.chunks_total
    timings = stats.timings
    out: dict[str, object] = {
        "files": stats.files_scanned,
        "chunks": n,
        "seconds_total": round(wall, 2),
        "seconds_scan": round(timings.get("scan", 0.0), 2),
        "seconds_parse": round(timings.get("parse", 0.0), 2),
        "seconds_store": round(timings.get("store", 0.0), 2),
        "seconds_bm25": round(timings.get("bm25", 0.0), 2),
        "seconds_embed": round(timings.get("embed", 0.0), 2),
        "seconds_vectors": round(timings.get("vectors", 0.0), 2),
        "bm25_searchable_after_s": round(stats.bm25_ready_seconds, 2),
        "chunks_per_s_parse": round(n / max(timings.get("parse", 1e-9), 1e-9), 1),
        "chunks_per_s_bm25": round(n / max(timings.get("bm25", 1e-9), 1e-9), 1),
        "chunks_per_s_embed": round(
            stats.chunks_embedded / max(timings.get("embed", 1e-9), 1e-9), 1
        ),
        "index_mb": round(_dir_bytes(index_dir) / 1e6, 1),
        "peak_rss_mb": round(_peak_rss_mb(), 1),
        "model": stats.model,
    }
    idx.close()
    return out


def bench_queries(
    index_dir: Path, *, runs: int = 5, top_k: int = 10, strategies: Sequence[str] = STRATEGIES
) -> dict[str, dict[str, float]]:
    """Warm query latency per strategy over SAMPLE_QUERIES x runs (first run is warm-up)."""
    import ragloom

    idx = ragloom.open(index_dir)
    for q in SAMPLE_QUERIES[:3]:  # warm-up: model load, page cache
        for s in strategies:
            idx.search(q, top_k=top_k, strategy=s)
    out: dict[str, dict[str, float]] = {}
    for s in strategies:
        samples: list[float] = []
        for _ in range(runs):
            for q in SAMPLE_QUERIES:
                t = time.perf_counter()
                idx.search(q, top_k=top_k, strategy=s)
                samples.append((time.perf_counter() - t) * 1000)
        out[s] = {
            "p50_ms": round(statistics.median(samples), 2),
            "p95_ms": round(percentile(samples, 95), 2),
            "n": float(len(samples)),
        }
    idx.close()
    return out


def bench_incremental(
    root: Path, *, repeats: int = 5, target: str | None = None
) -> dict[str, object]:
    """Edit one file, re-index, restore; median and each run's time and embedded chunks."""
    import ragloom

    files = sorted(root.rglob("*.py")) if target is None else [root / target]
    path = next(p for p in files if p.stat().st_size > 2000 and ".ragloom" not in p.parts)
    original = path.read_bytes()
    times: list[float] = []
    embedded: list[int] = []
    try:
        for i in range(repeats):
            text = original.decode("utf-8", "replace")
            marker = f"\n\ndef _ragloom_bench_edit_{i}(x):\n    return x + {i}\n"
            path.write_text(text + marker, encoding="utf-8")
            idx = ragloom.open(root)
            t = time.perf_counter()
            stats = idx.index()
            times.append(time.perf_counter() - t)
            embedded.append(stats.chunks_embedded)
            idx.close()
    finally:
        path.write_bytes(original)
        with ragloom.open(root) as idx:
            idx.index()
    return {
        "file": str(path.relative_to(root)),
        "median_s": round(statistics.median(times), 3),
        "runs_s": [round(t, 3) for t in times],
        "chunks_embedded": embedded,
    }


def machine() -> str:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores, {mem:.0f} GiB RAM, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def render_markdown(results: dict[str, object], command: str) -> str:
    """A Markdown section with the figures, the command and the machine."""
    lines = [
        f"## Index benchmark ({date.today().isoformat()})",
        "",
        f"Command: `{command}`  ",
        f"Machine: {machine()}",
        "",
    ]
    for name, section in results.items():
        lines.append(f"### {name}")
        lines.append("")
        if (
            isinstance(section, dict)
            and section
            and all(isinstance(v, dict) for v in section.values())
        ):
            keys = sorted({k for v in section.values() for k in v})
            lines.append("| | " + " | ".join(keys) + " |")
            lines.append("|---" * (len(keys) + 1) + "|")
            for row, vals in section.items():
                lines.append(f"| {row} | " + " | ".join(str(vals.get(k, "")) for k in keys) + " |")
        elif isinstance(section, dict):
            lines.append("| metric | value |")
            lines.append("|---|---|")
            for k, v in section.items():
                lines.append(f"| {k} | {v} |")
        else:
            lines.append(str(section))
        lines.append("")
    return "\n".join(lines)


_WARM_START_SCRIPT = """
import sys, time, json
from pathlib import Path
from ragloom.service.bm25_actor import Bm25Actor
from ragloom.service.rag import RagService, SyncRagService
mode, index_dir, snap = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
if mode == "rebuild":
    svc = SyncRagService.for_index(index_dir)
    t = time.perf_counter(); status = svc.bm25_rebuild(wait_timeout_s=600)
    ready = (time.perf_counter() - t) * 1000
    svc.bm25_save(snap)
else:
    svc = SyncRagService(lambda: RagService(Bm25Actor(None)))
    t = time.perf_counter(); svc.bm25_load(snap, timeout_ms=60000)
    ready = (time.perf_counter() - t) * 1000
    status = svc.bm25_status()
t = time.perf_counter(); hits = svc.search_bm25_strict("parse http headers", 10)
first = (time.perf_counter() - t) * 1000
svc.close()
print(json.dumps({"ready_ms": ready, "first_search_ms": first, "status": str(status),
                  "hits": len(hits)}))
"""


def bench_bm25_warm_start(index_dir: Path, *, repeats: int = 3) -> dict[str, object]:
    """BM25 warm start: Rebuild from the store vs Load of a snapshot, each in a fresh process
    (issue 5); medians of ``repeats`` runs, plus the snapshot size."""
    import json
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        snap = Path(tmp) / "bm25.snapshot"
        runs: dict[str, list[dict[str, float]]] = {"rebuild": [], "load": []}
        for _ in range(repeats):
            for mode in ("rebuild", "load"):
                out = subprocess.run(
                    [sys.executable, "-c", _WARM_START_SCRIPT, mode, str(index_dir), str(snap)],
                    check=True,
                    capture_output=True,
                    text=True,
                )
                runs[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
        size = snap.stat().st_size
    return {
        "rebuild_ready_ms_median": round(
            statistics.median(r["ready_ms"] for r in runs["rebuild"]), 1
        ),
        "load_ready_ms_median": round(statistics.median(r["ready_ms"] for r in runs["load"]), 1),
        "first_search_after_load_ms": round(
            statistics.median(r["first_search_ms"] for r in runs["load"]), 2
        ),
        "snapshot_mb": round(size / 1e6, 1),
        "runs": repeats,
    }
