"""Lookup questions on repositories with history: does the change-history step hurt them?

The git-history evaluation (scripts/eval_git.py) asks for changes; the history step was built
for them. This one asks the other kind of question on the same repositories: a documented
function's docstring first sentence, the function being the answer (with its docstring removed
from the corpus), as ``ragloom.eval.symbolset`` builds them. The index root is the pinned tree
of the git evaluation's Python repositories, and the history is the repository's whole
history up to the pinned commit. A good history step leaves these answers where they are
without it (docs/ranking.md "Change history", docs/evaluation.md).

Needs ``scripts/build_git_eval.py`` run first (the corpora under OUT) and the snapshots under
``--mirror-root``. Usage::

    .venv/bin/python scripts/eval_lookup_history.py --out eval-out/git --work eval-out/lookup

Writes WORK/<repo>/ (the question set, its corpus and index) and prints a Markdown table of
file and symbol MRR@10 and R@10 per split (``tune``/``test`` by the hash of each question id).
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

from ragloom.api import Index
from ragloom.eval.gitdata import load_repo_specs
from ragloom.eval.gitrun import HistoryAsOf, build_history
from ragloom.eval.symbolset import build_symbol_set

HERE = Path(__file__).resolve().parent
REPOS = {"starlette": "starlette", "rich": "rich"}
"""Python repositories of the git evaluation -> their library package folder."""
STRATEGIES = (
    "sparse",
    "dense",
    "hybrid",
    "hybrid+seed",
    "hybrid+no-history",
    "hybrid+lookup",
    "hybrid+changes",
)
ALL = 2**40


def evaluate(
    index: Index, questions: list[dict[str, Any]], strategies: tuple[str, ...]
) -> dict[str, dict[str, dict[str, float]]]:
    """split -> strategy -> file and symbol MRR@10 / R@10 (top 10 hits)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for split in ("tune", "test"):
        sel = [q for q in questions if q["split"] == split]
        for st in strategies:
            sums = {"file MRR@10": 0.0, "file R@10": 0.0, "symbol MRR@10": 0.0, "symbol R@10": 0.0}
            for q in sel:
                gold_file = q["gold_files"][0].removeprefix("repo/")
                gold_symbol = q["gold_symbols"][0]
                hits = index.search(q["query"], top_k=10, strategy=st).hits
                files = list(dict.fromkeys(h.path for h in hits))
                if gold_file in files:
                    sums["file MRR@10"] += 1 / (files.index(gold_file) + 1)
                    sums["file R@10"] += 1
                rank = next(
                    (
                        i
                        for i, h in enumerate(hits)
                        if h.path == gold_file and h.symbol == gold_symbol
                    ),
                    None,
                )
                if rank is not None:
                    sums["symbol MRR@10"] += 1 / (rank + 1)
                    sums["symbol R@10"] += 1
            n = max(1, len(sel))
            out.setdefault(split, {})[st] = {k: v / n for k, v in sums.items()} | {"n": len(sel)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repos", type=Path, default=HERE / "git_eval_repos.toml")
    ap.add_argument("--out", type=Path, default=Path("eval-out/git"), help="git eval folder")
    ap.add_argument("--work", type=Path, default=Path("eval-out/lookup"))
    ap.add_argument("--mirror-root", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--queries", type=int, default=400, help="questions per repository (at most)")
    ap.add_argument(
        "--strategy",
        action="append",
        default=[],
        help=f"a strategy to ask with (repeatable; default {', '.join(STRATEGIES)})",
    )
    args = ap.parse_args(argv)
    strategies = tuple(args.strategy) or STRATEGIES
    specs = {
        s.name: s for s in load_repo_specs(tomllib.loads(args.repos.read_text(encoding="utf-8")))
    }
    lines = [
        "| repo | split | n | strategy | file MRR@10 | file R@10 | symbol MRR@10 | symbol R@10 |",
        "|---|---|---:|---|---:|---:|---:|---:|",
    ]
    results: dict[str, Any] = {}
    for name, package in REPOS.items():
        spec = specs[name]
        work = args.work / name
        built = build_symbol_set(
            work,
            [f"repo:{package}"],
            name=name,
            n_queries=args.queries,
            roots={"repo": str(args.out / name / "corpus")},
        )
        root = built.corpus_dir / "repo"
        idx = Index.at(root)
        idx.index(history=False)  # the history comes from the snapshot, below
        idx.close()
        idx = Index.at(root)
        history = build_history(
            args.mirror_root / spec.git_dir, spec.commit, ALL, args.out / name / "history-all"
        )
        idx.retriever.history = HistoryAsOf(history)
        questions = [
            json.loads(line)
            for line in (work / "queries.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
        try:
            res = evaluate(idx, questions, strategies)
        finally:
            idx.close()
        results[name] = res
        for split, per in res.items():
            for st, m in per.items():
                lines.append(
                    f"| {name} | {split} | {int(m['n'])} | {st} | {m['file MRR@10']:.3f} | "
                    f"{m['file R@10']:.3f} | {m['symbol MRR@10']:.3f} | {m['symbol R@10']:.3f} |"
                )
        print(f"{name}: {len(questions)} questions", file=sys.stderr)
    print("\n".join(lines))
    (args.work / "results.json").write_text(
        json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
