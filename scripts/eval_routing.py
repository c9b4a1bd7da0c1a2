"""Measure a second model for questions without history on the mined groups (issue 22;
docs/ranking.md "A model for questions without history: tried, not shipped").

    python scripts/eval_routing.py [--data eval-out/ltr] [--route changes] [--json]

Fits, on the mined ``train`` split (file rows, the commit evaluation's seven repositories left
out, as the shipped models are), the global model's recipe (commit questions and look-ups, with
and without history) and the no-history model's (``--no-history-kinds``, by default the commit
questions asked without history), then reports file MRR@10 on every ``test`` group, per kind
and for the evaluation's repositories apart: the hand-set order, the global model alone, and
both routed (:func:`routes_without_history`, ``--route``): a question whose candidates carry no
history evidence goes to the second model (``all``), or only such a question that reads as an
issue or a change request (``changes``). The fits are train_ranker.py's (fixed seed, one
thread). The tenth session measured the routing in the learned stage too; it did not ship.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import train_ranker as tr

from ragloom.eval.mining import load_groups
from ragloom.retrieve.stages.features import FEATURE_NAMES

ROUTES = ("off", "changes", "all")
_HIST_KNOWN = FEATURE_NAMES.index("hist_known")
_ASKS_CHANGE = [FEATURE_NAMES.index("query_issue"), FEATURE_NAMES.index("query_change")]


def routes_without_history(x: np.ndarray, route: str) -> bool:
    """True when the question whose candidates' features are ``x`` goes to the second model:
    no candidate carries history evidence (``hist_known`` 0 in every row) and, with ``route``
    ``changes``, it reads as an issue or a change request."""
    if route == "off" or x.size == 0 or bool(np.any(x[:, _HIST_KNOWN] > 0)):
        return False
    return route == "all" or bool(np.any(x[:, _ASKS_CHANGE] > 0))


GLOBAL_KINDS = "commit,lookup,lookup+history"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("eval-out/ltr"))
    ap.add_argument("--route", choices=ROUTES, default="changes")
    ap.add_argument("--global-kinds", default=GLOBAL_KINDS)
    ap.add_argument("--no-history-kinds", default="commit-no-history")
    ap.add_argument("--rounds", type=int, default=tr.ROUNDS)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    files = [
        *sorted(args.data.glob("groups-*.jsonl")),
        *sorted(args.data.glob("lookups-*.jsonl")),
        *sorted(args.data.glob("nohistory-*.jsonl")),
    ]
    if not files:
        print(f"no groups under {args.data}: run scripts/mine_ranking_data.py", file=sys.stderr)
        return 2
    groups = load_groups(files)
    evaluation = tr.leave_out("evaluation")
    train = [
        tr.file_rows(g) for g in groups if g["split"] == "train" and g["repo"] not in evaluation
    ]
    test = [g for g in groups if g["split"] == "test" and g["x"]]

    def kinds(spec: str) -> set[str]:
        return set(spec.split(","))

    main_model = tr.fit_trees(
        [g for g in train if g.get("kind", "commit") in kinds(args.global_kinds)], args.rounds
    )
    no_history = tr.fit_trees(
        [g for g in train if g.get("kind", "commit") in kinds(args.no_history_kinds)], args.rounds
    )
    per: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for g in test:
        x = np.asarray(g["x"], dtype=np.float32)
        routed = routes_without_history(x, args.route)
        figures = {"handset": tr.file_metrics(g["paths"], g["gold_files"], np.arange(len(x)))[0]}
        for name, model in (("global", main_model), ("routed", no_history if routed else None)):
            if model is None:
                figures[name] = figures["global"]
                continue
            order = np.lexsort((np.arange(len(x)), -model.predict(x)))
            figures[name] = tr.file_metrics(g["paths"], g["gold_files"], order)[0]
        kind = g.get("kind", "commit")
        where = "evaluation" if g["repo"] in evaluation else "training"
        for key in (kind, f"{kind} ({where} repositories)"):
            for name, value in figures.items():
                per[key][name].append(value)
            per[key]["routed_share"].append(float(routed))
    table = {
        k: {n: round(statistics.fmean(v), 4) for n, v in cols.items()} | {"n": len(cols["handset"])}
        for k, cols in sorted(per.items())
    }
    if args.json:
        print(json.dumps(table, indent=1))
        return 0
    print(f"test split, file MRR@10 (route {args.route})\n")
    print("| groups | n | routed | hand-set | global model | routed |")
    print("|---|---:|---:|---:|---:|---:|")
    for k, row in table.items():
        print(
            f"| {k} | {row['n']} | {row['routed_share']:.0%} | {row['handset']:.4f} | "
            f"{row['global']:.4f} | {row['routed']:.4f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
