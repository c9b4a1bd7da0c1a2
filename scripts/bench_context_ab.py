"""Context latency, old vs new assembly, alternated query by query in one process (issue 11).

    python scripts/bench_context_ab.py INDEX_DIR [--base COMMIT] [--runs 2]
        [--embed-threads N] [--no-spin]

Runs ``Index.get_context`` (hybrid-mmr, top_k 15, budget 8000, cl100k) on the bench queries in
three modes, rotating the mode order for every query so machine load hits each alike:

* ``old``: the token count and file fetch of ``--base`` (the commit before the 100k work):
  one ``encode_ordinary`` over every counted text, every file read, hashed and split per query;
* ``new``: the code as it is, caches warm (what a long-running process sees);
* ``cold``: the code as it is, with an empty file cache and token memo for each query (the
  cost of a question about files no earlier question touched); the warm caches of ``new``
  (and the line memo ``old`` already had) are set aside meanwhile, not emptied.

Every query's context text, parts and token total must be identical in the three modes (the
script fails otherwise). Prints medians and new/old ratios. ``--embed-threads`` and
``--no-spin`` configure the query embedder (onnxruntime intra-op threads, spinning) before its
first use, to show how much of the context latency is contention with its worker threads.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ragloom
import ragloom.assemble.context as context_mod
from ragloom.assemble import get_counter
from ragloom.assemble import snippets as snippets_mod
from ragloom.assemble import tokens as tokens_mod
from ragloom.bench.indexing import SAMPLE_QUERIES

MODES = ("old", "new", "cold")
DEFAULT_BASE = "c9ee01c"
"""The last commit before the 100k context work."""


def _old_snippets(base: str) -> Any:
    src = subprocess.run(
        ["git", "show", f"{base}:src/ragloom/assemble/snippets.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "old_snippets.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("old_snippets", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["old_snippets"] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("index_dir", type=Path)
    ap.add_argument("--base", default=DEFAULT_BASE)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--embed-threads", type=int, default=None)
    ap.add_argument("--no-spin", action="store_true")
    args = ap.parse_args(argv)

    old = _old_snippets(args.base)
    new_count = tokens_mod.TiktokenCounter.count
    new_fetch = context_mod.fetch_snippets
    counter = get_counter("cl100k")
    warm = (snippets_mod.FILE_CACHE, counter._lines, counter._segs)  # type: ignore[attr-defined]

    def old_count(self: tokens_mod.TiktokenCounter, text: str) -> int:
        return len(self._enc.encode_ordinary(text))

    def use(mode: str) -> None:
        old_mode = mode == "old"
        tokens_mod.TiktokenCounter.count = old_count if old_mode else new_count  # type: ignore[method-assign]
        context_mod.fetch_snippets = old.fetch_snippets if old_mode else new_fetch
        # cold: fresh, empty caches for this call; the warm ones stay intact for the others
        cache, lines, segs = (
            warm
            if mode != "cold"
            else (
                snippets_mod._FileCache(
                    snippets_mod.FILE_CACHE_MAX_BYTES, snippets_mod.FILE_CACHE_MAX_FILES
                ),
                {},
                {},
            )
        )
        snippets_mod.FILE_CACHE = cache
        counter._lines = lines  # type: ignore[attr-defined]
        counter._segs = segs  # type: ignore[attr-defined]

    idx = ragloom.open(args.index_dir)
    emb = idx.retriever.embedder
    if emb is not None and (args.embed_threads is not None or args.no_spin):
        emb.threads = args.embed_threads  # type: ignore[attr-defined]
        emb.spin = not args.no_spin  # type: ignore[attr-defined]
    try:
        for mode in MODES:  # warm-up: model, page cache, symbol table
            use(mode)
            for q in SAMPLE_QUERIES[:3]:
                idx.get_context(q, top_k=15, strategy="hybrid-mmr")
        lat: dict[str, list[float]] = {m: [] for m in MODES}
        asm: dict[str, list[float]] = {m: [] for m in MODES}
        n = 0
        for _ in range(args.runs):
            for q in SAMPLE_QUERIES:
                shift = n % len(MODES)
                n += 1
                outs = {}
                for mode in MODES[shift:] + MODES[:shift]:
                    use(mode)
                    t = time.perf_counter()
                    ctx = idx.get_context(q, top_k=15, strategy="hybrid-mmr")
                    lat[mode].append((time.perf_counter() - t) * 1000.0)
                    asm[mode].append(ctx.stats.timings_ms["total"])
                    outs[mode] = (
                        ctx.text,
                        [p.to_dict() for p in ctx.parts],
                        ctx.stats.tokens_total,
                    )
                if not outs["old"] == outs["new"] == outs["cold"]:
                    print(f"DIFFERENT OUTPUT for {q!r}", file=sys.stderr)
                    return 1
        # assembly alone on fixed hits (bench-scale's ``assembly-real``), modes rotated alike
        from ragloom.assemble import AssemblyPolicy, TokenBudget, assemble_context

        found = {q: idx.search(q, top_k=15, strategy="hybrid-mmr") for q in SAMPLE_QUERIES}
        real: dict[str, list[float]] = {m: [] for m in MODES}
        for _ in range(args.runs):
            for q in SAMPLE_QUERIES:
                shift = n % len(MODES)
                n += 1
                for mode in MODES[shift:] + MODES[:shift]:
                    use(mode)
                    t = time.perf_counter()
                    assemble_context(
                        q,
                        found[q].hits,
                        root=idx.root,
                        budget=TokenBudget.for_total(8000),
                        policy=AssemblyPolicy(),
                        counter=counter,
                        embeddings=found[q].embeddings,
                    )
                    real[mode].append((time.perf_counter() - t) * 1000.0)
        use("new")
    finally:
        idx.close()
    print(
        f"{n // 2} queries x 3 modes, identical context text, parts and token totals in every mode"
    )
    print(
        "| mode | context p50 / p95 ms | its assembly p50 / p95 ms "
        "| assembly alone (fixed hits) p50 / p95 ms |"
    )
    print("|---|---:|---:|---:|")
    for mode in MODES:
        c, a, r = lat[mode], asm[mode], real[mode]
        print(
            f"| {mode} | {statistics.median(c):.2f} / {_p95(c):.2f} | "
            f"{statistics.median(a):.2f} / {_p95(a):.2f} | "
            f"{statistics.median(r):.2f} / {_p95(r):.2f} |"
        )
    for mode in ("new", "cold"):
        ratios = [
            statistics.median(d[mode]) / statistics.median(d["old"]) for d in (lat, asm, real)
        ]
        print(
            f"{mode}/old p50: context {ratios[0]:.3f}, its assembly {ratios[1]:.3f}, "
            f"assembly alone {ratios[2]:.3f}"
        )
    return 0


def _p95(xs: list[float]) -> float:
    s = sorted(xs)
    return s[max(0, -(-95 * len(s) // 100) - 1)]


if __name__ == "__main__":
    sys.exit(main())
