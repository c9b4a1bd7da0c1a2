"""Measure the docs and commits sources on a git repository (a work tree or a bare mirror).

    .venv/bin/python scripts/bench_sources.py /work/.mirror/Textualize+rich/repo [--queries 200]

Prints: the first sync (items, seconds) and a no-change re-sync of each source; then, for
``--queries`` commit subjects of the repository (cleaned like the git-history evaluation's
questions), the commits source's latency (p50 / p95 over the orchestrator, per-source timeout
2000 ms) and how often the commit itself is ranked first or in the top 5 (a sanity check of
the BM25 field set-up, not a retrieval-quality figure: the question is the commit's own words).
The index goes to a temporary folder; nothing is written into the repository.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from ragloom.eval.gitdata import clean_message, read_log, skip_reason
from ragloom.sources.commits import git_dir_of
from ragloom.sources.multi import SourceSet


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("repo", type=Path)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument(
        "--with-code",
        action="store_true",
        help="also index the code (work trees only) and compare the wall time of a code-only "
        "query with code+docs+commits through the orchestrator",
    )
    ap.add_argument("--model", default=None, help="embedder for --with-code (e.g. hashing)")
    args = ap.parse_args()
    root = args.repo.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        index_dir = Path(tmp) / "index"
        names = ["commits"] if (root / "HEAD").exists() else ["docs", "commits"]
        if args.with_code:
            import ragloom

            t0 = time.perf_counter()
            ragloom.Index(root, index_dir, embedder=args.model).index()
            print(f"code index {time.perf_counter() - t0:.2f} s")
            names = ["code", *names]
        ss = SourceSet(root, index_dir, names)
        t0 = time.perf_counter()
        for rep in ss.sync():
            print(f"sync {rep.source}: {rep.total} items in {rep.seconds:.2f} s")
        print(f"first sync total {time.perf_counter() - t0:.2f} s")
        for rep in ss.sync():
            print(f"re-sync {rep.source} (no change): +{rep.added} in {rep.seconds:.3f} s")
        git_dir = git_dir_of(root)
        assert git_dir is not None
        commits = [c for c in read_log(git_dir, "HEAD") if not skip_reason(c.message)]
        picked = commits[:: max(1, len(commits) // args.queries)][: args.queries]
        lat: list[float] = []
        first = top5 = 0
        for c in picked:
            q = clean_message(c.message)
            if not q:
                continue
            res = ss.search(q, top_k=5)
            status = res.statuses[-1]
            lat.append(status.latency_ms)
            ids = [h.id for h in res.hits if h.source == "commits"]
            first += bool(ids[:1] == [c.sha])
            top5 += c.sha in ids[:5]
        if args.with_code:
            alone = SourceSet(root, index_dir, ["code"])
            walls: dict[str, list[float]] = {"code": [], "+".join(names): []}
            for c in picked[:100]:
                q = clean_message(c.message)
                for key, which in (("code", alone), ("+".join(names), ss)):
                    t1 = time.perf_counter()
                    which.search(q, top_k=10)
                    walls[key].append((time.perf_counter() - t1) * 1000)
            alone.close()
            for key, vals in walls.items():
                vals.sort()
                print(
                    f"wall {key}: p50 {statistics.median(vals):.1f} ms, "
                    f"p95 {vals[int(0.95 * (len(vals) - 1))]:.1f} ms ({len(vals)} queries)"
                )
        ss.close()
        n = len(lat)
        lat.sort()
        print(
            f"{n} queries: commits latency p50 {statistics.median(lat):.1f} ms, "
            f"p95 {lat[int(0.95 * (n - 1))]:.1f} ms; own commit first {first / n:.3f}, "
            f"top-5 {top5 / n:.3f}"
        )


if __name__ == "__main__":
    main()
