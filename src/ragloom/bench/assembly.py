"""Micro-benchmark of :func:`assemble_context` (ploke section 6: "Context assembly p50 <= 30ms,
p95 <= 120ms for 15 parts and 4 files"; ragloom's own target: p50 <= 5 ms).

The corpus is real code: ``n_files`` modules of the running Python's standard library are
copied to a temporary root, their top-level functions and classes become hits (chunk ids,
tracking hashes and spans made exactly as the indexer makes them), ``n_parts`` hits are spread
round-robin over the files, and assembly runs ``runs`` times with a 4000-token budget.
"""

from __future__ import annotations

import ast
import statistics
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from ragloom.assemble.budget import MAX_TOTAL_DEFAULT, AssemblyPolicy, TokenBudget
from ragloom.assemble.context import assemble_context
from ragloom.assemble.tokens import get_counter
from ragloom.ingest.ids import chunk_id, file_hash, text_hash
from ragloom.types import Hit

__all__ = ["BENCH_MODULES", "bench_assembly", "hits_for_file"]

BENCH_MODULES = ("textwrap.py", "shlex.py", "fnmatch.py", "bisect.py", "glob.py", "colorsys.py")
"""Stable, mid-sized stdlib modules (present in every CPython 3.11+)."""


def hits_for_file(root: Path, rel: str, *, first_rank: int = 0) -> list[Hit]:
    """Hits for every top-level function/class of ``root/rel`` (python), spans as the indexer."""
    data = (root / rel).read_bytes()
    fh = file_hash(data)
    starts = [0]
    for line in data.split(b"\n"):
        starts.append(starts[-1] + len(line) + 1)
    hits: list[Hit] = []
    for node in ast.parse(data).body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        end = node.end_lineno or node.lineno
        sb, eb = starts[start - 1], starts[end] - 1
        kind = "class" if isinstance(node, ast.ClassDef) else "function"
        rank = first_rank + len(hits) + 1
        hits.append(
            Hit(
                id=chunk_id("code", rel, node.name, kind),
                path=rel,
                start_line=start,
                end_line=end,
                kind=kind,
                symbol=node.name,
                language="python",
                score=1.0 / (60 + rank),
                ranks={"bm25": rank, "dense": rank},
                node_hash=text_hash(data[sb:eb].decode("utf-8")),
                file_hash=fh,
                start_byte=sb,
                end_byte=eb,
            )
        )
    return hits


def bench_assembly(
    n_parts: int = 15,
    n_files: int = 4,
    runs: int = 200,
    *,
    counter: str = "cl100k",
    fmt: str = "xml",
    total: int = MAX_TOTAL_DEFAULT,
) -> dict[str, Any]:
    """p50/p95/mean latency (ms) of one assembly, plus what the assembly produced."""
    if not 1 <= n_files <= len(BENCH_MODULES):
        raise ValueError(f"n_files must be in 1..{len(BENCH_MODULES)}")
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    tc = get_counter(counter)
    with tempfile.TemporaryDirectory(prefix="ragloom-bench-") as tmp:
        root = Path(tmp)
        per_file: list[list[Hit]] = []
        for name in BENCH_MODULES[:n_files]:
            (root / name).write_bytes((stdlib / name).read_bytes())
            per_file.append(hits_for_file(root, name))
        hits: list[Hit] = []
        i = 0
        while len(hits) < n_parts and any(per_file):
            pool = per_file[i % n_files]
            if pool:
                h = pool.pop(0)
                h.score = 1.0 / (60 + len(hits) + 1)
                hits.append(h)
            i += 1
        budget = TokenBudget.for_total(total)
        policy = AssemblyPolicy(format=fmt)  # type: ignore[arg-type]
        times: list[float] = []
        result = None
        for _ in range(runs):
            t0 = time.perf_counter()
            result = assemble_context(
                "bench", hits, root=root, budget=budget, policy=policy, counter=tc
            )
            times.append((time.perf_counter() - t0) * 1000.0)
    assert result is not None
    times.sort()
    return {
        "n_hits": len(hits),
        "n_files": n_files,
        "runs": runs,
        "counter": counter,
        "format": fmt,
        "budget": total,
        "parts": len(result.parts),
        "tokens": result.stats.tokens_total,
        "p50_ms": round(statistics.median(times), 3),
        "p95_ms": round(times[min(len(times) - 1, int(0.95 * len(times)))], 3),
        "mean_ms": round(statistics.fmean(times), 3),
    }


if __name__ == "__main__":  # pragma: no cover - manual run
    import json

    for name in ("cl100k", "approx"):
        print(json.dumps(bench_assembly(counter=name)))
