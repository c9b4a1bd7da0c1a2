"""What the learned ranking stage costs on a repository with its history (issue 22;
docs/benchmarks.md "Learned ranking (issue 22)"). Bench-only, not part of the test suite.

    .venv/bin/python scripts/bench_learned_history.py --repo rich [--rounds 5] [--questions 60]

A repository of the commit evaluation (docs/evaluation-git.md; its index under
``eval-out/git/<repo>/corpus/.ragloom`` and its mirror under ``--mirror-root``), with its whole
commit history attached as the ``history`` source, so that the history stage and the learned
stage's history features read a real history. Its first ``--questions`` test questions (commit
messages: the learned stage re-orders those that read as change requests) are asked with
``hybrid`` and ``hybrid+handset``, alternated per question and round, after a warm-up pass; the
query embedding is computed in both arms. Prints the p50 of each arm, of each arm's
``timings_ms["priors"]`` (where the learned stage's time is counted), and the p50 difference.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import tomllib
from pathlib import Path

from ragloom.api import Index
from ragloom.eval.gitdata import load_repo_specs
from ragloom.eval.gitrun import build_history

ROOT = Path(__file__).resolve().parent.parent
ARMS = ("hybrid", "hybrid+handset")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", required=True, help="a repository of scripts/git_eval_repos.toml")
    ap.add_argument("--out", type=Path, default=Path("eval-out/git"))
    ap.add_argument("--mirror-root", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--questions", type=int, default=60)
    args = ap.parse_args()
    specs = load_repo_specs(tomllib.loads((ROOT / "scripts" / "git_eval_repos.toml").read_text()))
    spec = next(s for s in specs if s.name == args.repo)
    repo_dir = args.out / spec.name
    idx = Index.at(repo_dir / "corpus" / ".ragloom")
    try:
        git_dir = args.mirror_root / spec.git_dir
        idx.retriever.history = build_history(git_dir, spec.commit, 2**40, repo_dir / "history-all")
        lines = (repo_dir / "test.jsonl").read_text(encoding="utf-8").splitlines()
        qs = [json.loads(line)["query"] for line in lines if line][: args.questions]
        for q in qs:
            for a in ARMS:
                idx.search(q, top_k=10, strategy=a)
        took: dict[str, list[float]] = {a: [] for a in ARMS}
        priors: dict[str, list[float]] = {a: [] for a in ARMS}
        for rnd in range(args.rounds):
            for i, q in enumerate(qs):
                for a in ARMS if (i + rnd) % 2 == 0 else ARMS[::-1]:
                    t0 = time.perf_counter()
                    res = idx.search(q, top_k=10, strategy=a)
                    took[a].append((time.perf_counter() - t0) * 1e3)
                    priors[a].append(res.timings_ms.get("priors", 0.0))
    finally:
        idx.close()
    p50 = {a: statistics.median(v) for a, v in took.items()}
    print(f"{spec.name}: {len(qs)} questions x {args.rounds} rounds")
    for a in ARMS:
        print(f"  {a}: p50 {p50[a]:.2f} ms, priors p50 {statistics.median(priors[a]):.2f} ms")
    print(f"  the learned stage adds {p50['hybrid'] - p50['hybrid+handset']:+.2f} ms p50")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
