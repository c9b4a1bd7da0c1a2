"""History-aware code ranking on the git-history evaluation, time-split (issue 13, item 4).

For every question of eval-out/git/<repo> (a commit's cleaned subject; gold = the library files
it changed), the commits source is built from the repository's mirror and searched with
``until = question date - 1 s``: only history strictly older than the question's own commit
(never the commit itself, never its future). Each retrieved commit (rank r) votes for the
library source files it changed that are in the pinned corpus, ``1 / (60 + r)`` divided by the
number of files it touched; the voted files form a "history" list fused with hybrid's file
ranking (ragloom's hybrid search over OUT/<repo>/corpus, run here: the distinct paths of its
top 50 hits, first seen first) by weighted RRF (k = 60): ``code`` 1.0, ``history``
W. File-level MRR@10 and R@10, tune and test split apart.

    .venv/bin/python scripts/eval_history.py --out eval-out/git [--mirrors /work/.mirror]

The weight and the number of commits are chosen on the tune split only; the test split is
printed for the chosen setting and for W = 0 (hybrid alone).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from ragloom.api import Index
from ragloom.eval.baseline import file_metrics
from ragloom.eval.gitdata import path_role
from ragloom.retrieve.fusion import rrf_fuse
from ragloom.sources.base import (
    RetrieveOptions,
    SourceContext,
    SourceFilter,
    SourceQuery,
    SourceSettings,
)
from ragloom.sources.commits import CommitsSource

WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
DEPTHS = (10, 20)
METHOD = "hybrid"
SEARCH_K = 50
"""Hits asked of ragloom (its fusion depth); their paths in first-seen order are the ranking."""
RUN_FILES = 20


def _corpus_files(corpus: Path) -> set[str]:
    out: set[str] = set()
    for dirpath, dirs, files in os.walk(corpus):
        dirs[:] = [d for d in dirs if d != ".ragloom"]
        for name in files:
            out.add(os.path.relpath(os.path.join(dirpath, name), corpus).replace(os.sep, "/"))
    return out


def history_hits(
    repo_dir: Path, mirror: Path, tmp: Path
) -> tuple[dict[str, tuple[list[tuple[str, ...]], dict[str, object]]], set[str]]:
    """Question id -> (the changed paths of each older commit retrieved, best first; the
    question record), and the pinned corpus's files."""
    questions = [json.loads(line) for line in (repo_dir / "questions.jsonl").open()]
    corpus = _corpus_files(repo_dir / "corpus")
    src = CommitsSource(SourceContext(mirror, tmp / repo_dir.name))
    src.initialize(SourceSettings(options={"max_commits": 1_000_000}))
    rep = src.sync()
    print(f"{repo_dir.name}: {rep.total} commits synced in {rep.seconds:.1f} s", flush=True)
    out: dict[str, tuple[list[tuple[str, ...]], dict[str, object]]] = {}
    for q in questions:
        when = datetime.fromisoformat(q["date"].replace("Z", "+00:00")).timestamp()
        opts = RetrieveOptions(top_k=max(DEPTHS), filter=SourceFilter(until=when - 1))
        hits = asyncio.run(src.retrieve(SourceQuery(q["query"]), opts))
        out[q["id"]] = ([h.paths for h in hits if h.id != q["commit"]], q)
    asyncio.run(src.dispose())
    return out, corpus


def vote(paths_per_commit: list[tuple[str, ...]], depth: int, corpus: set[str]) -> list[str]:
    """Files voted by the first ``depth`` commits, best first."""
    votes: dict[str, float] = defaultdict(float)
    for rank, paths in enumerate(paths_per_commit[:depth], 1):
        for p in paths:
            if p in corpus and path_role(p) == "source":
                votes[p] += 1.0 / (60 + rank) / max(len(paths), 1)
    return sorted(votes, key=lambda p: (-votes[p], p))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("eval-out/git"))
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    args = ap.parse_args()
    repos = sorted(p for p in args.out.iterdir() if (p / "corpus" / ".ragloom").is_dir())
    # (depth, weight) -> split -> list of (repo, metrics)
    table: dict[tuple[int, float], dict[str, list[dict[str, float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    per_repo: dict[tuple[int, float, str, str], list[float]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        for repo_dir in repos:
            mirrors = sorted(args.mirrors.glob(f"*+{repo_dir.name}/repo"))
            if not mirrors:
                print(f"{repo_dir.name}: no mirror, skipped")
                continue
            index = Index.at(repo_dir / "corpus")
            runs: dict[str, list[str]] = {}
            for line in (repo_dir / "questions.jsonl").open():
                q0 = json.loads(line)
                hits = index.search(q0["query"], top_k=SEARCH_K, strategy=METHOD).hits
                runs[q0["id"]] = list(dict.fromkeys(h.path for h in hits))[:RUN_FILES]
            index.close()
            hist, corpus = history_hits(repo_dir, mirrors[0], Path(tmp))
            for depth in DEPTHS:
                for qid, (commit_paths, q) in hist.items():
                    hfiles = vote(commit_paths, depth, corpus)
                    code = runs.get(qid)
                    if code is None:
                        continue
                    for w in WEIGHTS:
                        fused = [
                            f
                            for f, _ in rrf_fuse(
                                {"code": [(f, 0.0) for f in code], "history": [(f, 0.0) for f in hfiles]},
                                {"code": 1.0, "history": w},
                            )
                        ] if w else list(code)  # fmt: skip
                        m = file_metrics(fused, q["gold_files"])  # type: ignore[arg-type]
                        table[(depth, w)][str(q["split"])].append(m)
                        per_repo[(depth, w, repo_dir.name, str(q["split"]))].append(m["MRR@10"])
    print("\nfile-level, hybrid fused with the history list (k = 60)")
    print("| commits | weight | tune MRR@10 | tune R@10 | test MRR@10 | test R@10 | n tune/test |")
    print("|---|---|---|---|---|---|---|")
    best = max(
        (key for key in table if key[1] > 0),
        key=lambda key: statistics.fmean(m["MRR@10"] for m in table[key]["tune"]),
    )
    for key in sorted(table):
        row = table[key]
        cells = []
        for split in ("tune", "test"):
            ms = row[split]
            cells.append(f"{statistics.fmean(m['MRR@10'] for m in ms):.3f}")
            cells.append(f"{statistics.fmean(m['R@10'] for m in ms):.3f}")
        mark = " (chosen on tune)" if key == best else ""
        print(
            f"| {key[0]} | {key[1]}{mark} | {' | '.join(cells)} | "
            f"{len(row['tune'])}/{len(row['test'])} |"
        )
    print("\nper repository, test MRR@10: hybrid alone -> with history (chosen setting)")
    for name in sorted({k[2] for k in per_repo}):
        base = per_repo.get((best[0], 0.0, name, "test"), [])
        with_h = per_repo.get((best[0], best[1], name, "test"), [])
        if base and with_h:
            print(f"  {name}: {statistics.fmean(base):.3f} -> {statistics.fmean(with_h):.3f}")


if __name__ == "__main__":
    main()
