"""Choose the per-repository adaptation's settings on the mined repositories, each one left out
of the global model it is adapted from (issue 22; docs/ranking.md "Per-repository adaptation").

    python scripts/tune_adapt.py [--data eval-out/ltr] [--lookups] [--out eval-out/adapt-loo] \
        [--pairs all --pairs lambda] [--cache eval-out/adapt-loo/models]

Until the eighth session the commit evaluation's seven repositories were mined into the shipped
model (their older history), so adapting to them re-learnt what the global model had seen, and
their tune split was in its training data; the settings were chosen here instead. For every
mined repository R: a global model is fitted (as ``scripts/train_ranker.py --level file --fit-on
all`` fits the shipped one) on every group of the other repositories (less those
``--leave-out`` names: ``evaluation`` fits them as the shipped model is fitted, without the
commit evaluation's seven); the adaptation (ragloom.retrieve.adapt / ragloom.learn.adapt) is
fitted on R's
``train`` groups (its older questions, newest first, as mining at index time takes them) and
measured on R's ``test`` groups: file MRR@10 of the global model, of each setting, and of the
setting the adaptation's own check picks (``choose_setting``, None: the global model).
Writes OUT/results.json and prints per setting how many repositories it raises and lowers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import train_ranker as tr  # noqa: E402

from ragloom.eval.mining import load_groups  # noqa: E402
from ragloom.learn import adapt as learn_adapt  # noqa: E402
from ragloom.retrieve.adapt import (  # noqa: E402
    FROZEN_SETS,
    HISTORY_L2,
    HISTORY_MAX_NORM,
    HISTORY_PAIRS,
    PAIR_WEIGHTINGS,
    Example,
)
from ragloom.retrieve.ranker import model_from_dict  # noqa: E402

FROZEN_HELP = "columns the history correction leaves alone (FROZEN_SETS; shipped: file)"

GRID = (
    (HISTORY_L2, HISTORY_MAX_NORM),
    (0.1, 0.25),
    (1.0, 0.5),
    (1.0, 1.0),
    (3.0, 1.0),
    (10.0, 1.0),
    (30.0, 1.0),
)
"""(L2, length cap) settings measured; each also behind the adaptation's own check
(``checked L2/cap``: kept only where it beats the global model on the newest 30 % of the
train questions)."""


def _examples(groups: list[dict[str, Any]]) -> list[Example]:
    out = []
    for g in sorted(groups, key=lambda g: g["id"]):
        x = np.asarray(g["x"], dtype=np.float64)
        labels = np.asarray(g["labels"])
        if len(x) and labels.any():
            out.append(Example(x, labels, 1.0, g["id"], tuple(g["paths"])))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("eval-out/ltr"))
    ap.add_argument("--lookups", action="store_true", help="fit the global models on look-ups too")
    ap.add_argument("--out", type=Path, default=Path("eval-out/adapt-loo"))
    ap.add_argument("--repo", action="append", default=[], help="only this one (repeatable)")
    ap.add_argument(
        "--leave-out",
        default="",
        metavar="REPOS",
        help="fit no global model on these repositories either (train_ranker.py --leave-out; "
        "`evaluation`, as the shipped model since the eighth session)",
    )
    ap.add_argument(
        "--pairs",
        action="append",
        default=[],
        choices=PAIR_WEIGHTINGS,
        help="the history correction's pair weightings to measure (repeatable; default the "
        "shipped one); rows other than the shipped one are named PAIRS:L2/CAP",
    )
    ap.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="keep each left-out global model here and reuse it (the same data and flags)",
    )
    ap.add_argument("--frozen", choices=FROZEN_SETS, default="file", help=FROZEN_HELP)
    args = ap.parse_args(argv)
    weightings = args.pairs or [HISTORY_PAIRS]
    frozen = FROZEN_SETS[args.frozen]
    left_out = tr.leave_out(args.leave_out)
    files = sorted(args.data.glob("groups-*.jsonl"))
    if args.lookups:
        files += sorted(args.data.glob("lookups-*.jsonl"))
    groups = load_groups(files)
    questions = {
        json.loads(line)["id"]: json.loads(line)["timestamp"]
        for f in sorted(args.data.glob("questions-*.jsonl"))
        for line in f.read_text(encoding="utf-8").splitlines()
        if line.strip()
    }
    repos = sorted({g["repo"] for g in groups if g.get("kind", "commit") == "commit"})
    if args.repo:
        repos = [r for r in repos if r in args.repo or r.split("/")[1] in args.repo]
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    for repo in repos:
        cached = args.cache / f"{repo.replace('/', '+')}.json" if args.cache else None
        if cached is not None and cached.is_file():
            base = model_from_dict(json.loads(cached.read_text(encoding="utf-8")))
        else:
            base = tr.fit_trees(
                [tr.file_rows(g) for g in groups if g["repo"] != repo and g["repo"] not in left_out]
            )
            if cached is not None:
                cached.parent.mkdir(parents=True, exist_ok=True)
                cached.write_text(json.dumps(base.to_dict()) + "\n", encoding="utf-8")
        own = [g for g in groups if g["repo"] == repo and g.get("kind", "commit") == "commit"]
        train = [g for g in own if g["split"] == "train"]
        train.sort(key=lambda g: -questions.get(g["id"], 0))  # newest first
        history = _examples(train)
        history.sort(key=lambda e: -questions.get(e.id, 0))
        test = [g for g in own if g["split"] == "test"]
        res: dict[str, Any] = {"examples": len(history), "test": len(test)}
        res["global"] = tr.evaluate(test, base.predict)["all"][0]
        for pairs in weightings:
            name = "" if pairs == HISTORY_PAIRS else f"{pairs}:"
            for l2, cap in GRID:
                m = learn_adapt.fit_adapted(
                    base,
                    history,
                    history_l2=l2,
                    history_max_norm=cap,
                    history_pairs=pairs,
                    history_frozen=frozen,
                )
                res[f"{name}{l2}/{cap}"] = (
                    tr.evaluate(test, m.predict)["all"][0] if m else res["global"]
                )
        for l2, cap in GRID:
            learn_adapt.SETTINGS = ((l2, cap),)
            setting, figures = learn_adapt.choose_setting(base, history)
            res[f"checked {l2}/{cap}"] = res[f"{l2}/{cap}"] if setting else res["global"]
            res[f"validation {l2}/{cap}"] = figures
        results[repo] = res
        print(
            f"{repo}: global {res['global']:.4f} "
            + " ".join(f"{k} {res[k]:.4f}" for k in res if "/" in k and "validation" not in k),
            flush=True,
        )
    (args.out / "results.json").write_text(
        json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8"
    )
    print("\n| setting | mean MRR@10 | raised | lowered | level |")
    print("|---|---:|---:|---:|---:|")
    names = ["" if p == HISTORY_PAIRS else f"{p}:" for p in weightings]
    keys = [f"{n}{a}/{b}" for n in names for a, b in GRID]
    for key in ["global", *keys, *(f"checked {a}/{b}" for a, b in GRID)]:
        d = [results[r][key] - results[r]["global"] for r in results]
        print(
            f"| {key} | {statistics.fmean(results[r][key] for r in results):.4f} | "
            f"{sum(x > 1e-9 for x in d)} | {sum(x < -1e-9 for x in d)} | "
            f"{sum(abs(x) <= 1e-9 for x in d)} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
