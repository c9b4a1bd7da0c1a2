"""Train the learned ranking stage's model on mined groups (issue 22; docs/ranking.md "Learned
ranking").

    pip install -e '.[learn]'
    python scripts/train_ranker.py [--data eval-out/ltr] [--out src/ragloom/retrieve/models/ranker.json]

Reads OUT/groups-*.jsonl (scripts/mine_ranking_data.py; with ``--lookups`` OUT/lookups-*.jsonl
too, the look-up groups of its ``--lookups``; with ``--no-history`` OUT/nohistory-*.jsonl, the
commit questions asked again without history, of its ``--no-history``), fits LightGBM LambdaRank (fixed seed,
deterministic, one thread: the same groups give the same model bytes) and a linear pairwise
model on the ``train`` split, and reports file-level MRR@10 and recall@10 on the ``test`` split
of every repository for the hand-set order (the candidates as the hand-set stages leave them),
each model, and each model per language. ``--write KIND`` saves that model in the package's
JSON form (ragloom.retrieve.ranker), with its provenance. ``--level file`` fits on each file's
first candidate only. ``--fit-on all`` writes the model fitted again on every group (test groups
included) once the test groups have chosen its settings. ``--leave-out evaluation`` fits on no
group of the commit evaluation's seven repositories (it measures repositories the model never
saw). The shipped model: ``--level file --lookups --leave-out evaluation --bag 5 --write trees
--fit-on all`` on a mining of every text embedded alone, as ``make ltr LTR_WRITE=trees`` runs it
(docs/ranking.md, "The file's history as features, and a model of files", "150 questions a
repository", "Trees scored by bit masks, bigger models measured, the evaluation's repositories
left out" and "A model of the vectors serving uses").
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tomllib
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragloom.eval.baseline import file_metrics as ranked_file_metrics
from ragloom.eval.mining import load_groups, load_mining_specs
from ragloom.retrieve.ranker import RankerModel, from_lightgbm_dump
from ragloom.retrieve.stages.features import FEATURE_NAMES, FEATURES_VERSION, file_first_rows

ROOT = Path(__file__).resolve().parent.parent
SEED = 20261126
TREE_PARAMS: dict[str, Any] = {
    "objective": "lambdarank",
    "metric": "ndcg",
    "ndcg_eval_at": [10],
    "learning_rate": 0.05,
    "num_leaves": 3,
    "min_data_in_leaf": 50,
    "feature_fraction": 0.8,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "lambdarank_truncation_level": 20,
    "seed": SEED,
    "deterministic": True,
    "force_row_wise": True,
    "num_threads": 1,
    "verbose": -1,
}
ROUNDS = 300
"""Trees and leaves: chosen on the mined test groups (docs/ranking.md, "Learned ranking"):
3 leaves x 300 rounds 0.722 MRR@10, 7 x 100 0.716, 15 x 200 0.704, hand-set 0.697; on file rows
and the commit evaluation's tune split (fifth session) 3 x 300 0.761, 7 x 150 0.757, 5 x 300
0.757, 3 x 600 0.755."""


def file_metrics(
    paths: Sequence[str], gold: Sequence[str], order: np.ndarray
) -> tuple[float, float]:
    """(MRR@10, recall@10) of the files of ``paths`` taken in ``order``, first seen first."""
    files = list(dict.fromkeys(paths[i] for i in order))
    m = ranked_file_metrics(files, gold, ks=(10,), mrr_k=10)
    return m["MRR@10"], m["R@10"]


def evaluate(
    groups: Sequence[dict[str, Any]], score: Callable[[np.ndarray], np.ndarray] | None
) -> dict[str, tuple[float, float, int]]:
    """Per repository, language and kind (``kind:commit``, ``kind:commit-no-history``,
    ``kind:lookup``, ``kind:lookup+history``), and ``all`` (every commit question, as before look-up groups
    were mined): mean MRR@10, mean recall@10 and the question count. Repository and language
    keys count commit questions only."""
    per: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for g in groups:
        x = np.asarray(g["x"], dtype=np.float32)
        if score is None or len(x) == 0:
            order = np.arange(len(x))
        else:
            s = score(x)
            order = np.lexsort((np.arange(len(x)), -s))
        m = file_metrics(g["paths"], g["gold_files"], order)
        kind = g.get("kind", "commit")
        per["kind:" + kind].append(m)
        if kind != "commit":
            continue
        per[g["repo"]].append(m)
        per["all"].append(m)
        per["lang:" + g["language"]].append(m)
    return {
        k: (statistics.fmean(a for a, _ in v), statistics.fmean(b for _, b in v), len(v))
        for k, v in per.items()
    }


FIT_ON = ("train", "all")
"""The groups a written model is fitted on: the mined ``train`` split (its ``test`` split then
measures the very model written), or ``all`` (the settings chosen on the test split, fitted again
on every group: the model shipped since the sixth session; its test figures are the train split's
fit's)."""

LEVELS = ("chunk", "file")
"""What a training row is: every candidate (``chunk``), or each file's first candidate only
(``file``: its row carries the file's aggregates; the label is the file's, so every group is a
ranking of files, as the metric is). The stage orders files by their best candidate either way
(``keep_shape``)."""


def file_rows(group: dict[str, Any]) -> dict[str, Any]:
    """``group`` with only each file's first candidate (``file_first_chunk``)."""
    keep = file_first_rows(np.asarray(group["x"], dtype=np.float64)).tolist()
    return dict(
        group,
        x=[group["x"][i] for i in keep],
        labels=[group["labels"][i] for i in keep],
        paths=[group["paths"][i] for i in keep],
    )


def _matrix(
    groups: Sequence[dict[str, Any]], kind_weight: Mapping[str, float] | None = None
) -> tuple[np.ndarray, np.ndarray, list[int], np.ndarray]:
    """Rows, labels, group sizes and each row's weight (its group's kind's in ``kind_weight``,
    1 for a kind it does not name)."""
    xs, ys, sizes, ws = [], [], [], []
    for g in groups:
        if not g["x"]:
            continue
        xs.append(np.asarray(g["x"], dtype=np.float64))
        ys.append(np.asarray(g["labels"], dtype=np.float64))
        sizes.append(len(g["x"]))
        ws.append(np.full(len(g["x"]), (kind_weight or {}).get(g.get("kind", "commit"), 1.0)))
    return np.vstack(xs), np.concatenate(ys), sizes, np.concatenate(ws)


def fit_trees(
    train: Sequence[dict[str, Any]],
    rounds: int = ROUNDS,
    params: dict[str, Any] | None = None,
    kind_weight: Mapping[str, float] | None = None,
    bag: int = 1,
) -> RankerModel:
    """LambdaRank on ``train``: :data:`TREE_PARAMS`, updated by ``params``; each group weighted
    by its kind's ``kind_weight`` (1 by default). With ``bag`` > 1, the mean of ``bag`` such
    fits whose seeds differ (``seed`` + k: other bagging samples and feature subsets), written
    as one model: every tree of every fit, its leaves divided by ``bag``."""
    import lightgbm as lgb

    x, y, sizes, w = _matrix(train, kind_weight)
    ds = lgb.Dataset(
        x,
        label=y,
        group=sizes,
        weight=w if kind_weight else None,
        feature_name=list(FEATURE_NAMES),
        free_raw_data=False,
    )
    used = {**TREE_PARAMS, **(params or {})}
    dump: dict[str, Any] = {}
    for k in range(bag):
        fit = lgb.train({**used, "seed": used["seed"] + k}, ds, num_boost_round=rounds)
        one = fit.dump_model()
        if bag > 1:
            for tree in one["tree_info"]:
                _scale_leaves(tree["tree_structure"], 1.0 / bag)
        if not dump:
            dump = one
        else:
            dump["tree_info"].extend(one["tree_info"])
    meta = {
        "trainer": f"lightgbm {lgb.__version__} lambdarank",
        "rounds": rounds,
        **({"bag": bag} if bag > 1 else {}),
        "params": {k: v for k, v in used.items() if k != "ndcg_eval_at"},
        **({"kind_weight": dict(sorted(kind_weight.items()))} if kind_weight else {}),
        "train_groups": len(sizes),
        "train_rows": len(y),
    }
    return from_lightgbm_dump(dump, features=FEATURES_VERSION, names=FEATURE_NAMES, meta=meta)


def _scale_leaves(node: dict[str, Any], factor: float) -> None:
    """Multiply every leaf value under ``node`` (a tree of ``dump_model()``) by ``factor``."""
    if "leaf_value" in node:
        node["leaf_value"] = float(node["leaf_value"]) * factor
        return
    node["internal_value"] = float(node.get("internal_value", 0.0)) * factor
    _scale_leaves(node["left_child"], factor)
    _scale_leaves(node["right_child"], factor)


def fit_linear(
    train: Sequence[dict[str, Any]], steps: int = 300, lr: float = 0.5, l2: float = 0.1
) -> RankerModel:
    """A pairwise logistic (RankNet) linear model: every positive against every negative of
    its group, full-batch gradient descent from zero (deterministic). ``l2`` 0.1 on the mined
    test groups: 0.721 MRR@10 (0.01: 0.717)."""
    x, _, _, _ = _matrix(train)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    diffs = []
    for g in train:
        if not g["x"]:
            continue
        gx = (np.asarray(g["x"], dtype=np.float64) - mean) / scale
        lab = np.asarray(g["labels"])
        pos, neg = gx[lab == 1], gx[lab == 0]
        if len(pos) and len(neg):
            d = (pos[:, None, :] - neg[None, :, :]).reshape(-1, gx.shape[1])
            w = 1.0 / len(d)  # each question weighs the same
            diffs.append((d, w))
    wvec = np.zeros(x.shape[1])
    total = sum(w * len(d) for d, w in diffs)
    for _ in range(steps):
        grad = l2 * wvec
        for d, w in diffs:
            z = d @ wvec
            grad -= w * (d.T @ (1.0 / (1.0 + np.exp(z)))) / total
        wvec -= lr * grad
    meta = {
        "trainer": "pairwise logistic (numpy)",
        "steps": steps,
        "lr": lr,
        "l2": l2,
        "train_groups": len(diffs),
    }
    return RankerModel.linear(FEATURES_VERSION, FEATURE_NAMES, meta, wvec, mean, scale)


def _fmt(res: dict[str, tuple[float, float, int]], key: str) -> str:
    m, r, _n = res.get(key, (0.0, 0.0, 0))
    return f"{m:.3f} / {r:.3f}"


REPOS_TOML = ROOT / "scripts" / "ltr_repos.toml"


def leave_out(spec: str, repos_toml: Path = REPOS_TOML) -> set[str]:
    """The repositories ``--leave-out`` names: comma-separated owner/name, where ``evaluation``
    stands for the commit evaluation's (the repositories of ``repos_toml`` with a ``before``,
    whose newer history the commit evaluation asks about)."""
    out: set[str] = set()
    for name in (n.strip() for n in spec.split(",")):
        if name == "evaluation":
            specs = load_mining_specs(tomllib.loads(repos_toml.read_text(encoding="utf-8")))
            out.update(m.repo for m in specs if m.before)
        elif name:
            out.add(name)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("eval-out/ltr"))
    ap.add_argument(
        "--out", type=Path, default=ROOT / "src" / "ragloom" / "retrieve" / "models" / "ranker.json"
    )
    ap.add_argument("--write", choices=["trees", "linear"], help="save this model to --out")
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument(
        "--level", choices=LEVELS, default="chunk", help="a training row: a candidate or a file"
    )
    ap.add_argument("--leaves", type=int, help=f"num_leaves (default {TREE_PARAMS['num_leaves']})")
    ap.add_argument(
        "--min-data",
        type=int,
        help=f"min_data_in_leaf (default {TREE_PARAMS['min_data_in_leaf']})",
    )
    ap.add_argument(
        "--learning-rate",
        type=float,
        help=f"learning_rate (default {TREE_PARAMS['learning_rate']})",
    )
    ap.add_argument(
        "--fit-on",
        choices=FIT_ON,
        default="train",
        help="the groups the written model is fitted on (the figures are the train split's fit)",
    )
    ap.add_argument(
        "--lookups",
        action="store_true",
        help="train (and test) on the look-up groups (lookups-*.jsonl) too",
    )
    ap.add_argument(
        "--no-history",
        action="store_true",
        help="train (and test) on the commit questions asked without history "
        "(nohistory-*.jsonl) too",
    )
    ap.add_argument(
        "--kinds",
        help="fit on these kinds of group only (comma-separated: commit, commit-no-history, "
        "lookup, lookup+history); the figures cover every test group. The model for indexes "
        "without history: --lookups --no-history --kinds commit-no-history,lookup,lookup+history "
        "--out src/ragloom/retrieve/models/ranker-nohistory.json",
    )
    ap.add_argument(
        "--leave-out",
        default="",
        metavar="REPOS",
        help="fit on no group of these repositories (comma-separated owner/name; `evaluation`: "
        "the commit evaluation's, those with a `before` in scripts/ltr_repos.toml); the "
        "figures still cover their test groups, as repositories the model never saw",
    )
    ap.add_argument(
        "--kind-weight",
        action="append",
        default=[],
        metavar="KIND=W",
        help="weight the groups of one kind in the tree model's fit (repeatable; 1 by default)",
    )
    ap.add_argument(
        "--bag",
        type=int,
        default=1,
        help="the tree model is the mean of this many fits with other seeds (1: one fit)",
    )
    ap.add_argument(
        "--seed",
        type=int,
        help=f"the tree model's seed (default {SEED}): another seed is another bagging sample "
        "and feature subset, how far the figures move between equally good fits",
    )
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    kind_weight: dict[str, float] = {}
    for item in args.kind_weight:
        kind, sep, value = item.partition("=")
        try:
            kind_weight[kind] = float(value)
        except ValueError:
            sep = ""
        if not sep or kind_weight[kind] <= 0:
            ap.error(f"--kind-weight takes KIND=W with W > 0, got {item!r}")
    params: dict[str, Any] = {}
    for key, value in (
        ("num_leaves", args.leaves),
        ("min_data_in_leaf", args.min_data),
        ("learning_rate", args.learning_rate),
        ("seed", args.seed),
    ):
        if value is not None:
            params[key] = value
    files = sorted(args.data.glob("groups-*.jsonl"))
    if args.lookups:
        files += sorted(args.data.glob("lookups-*.jsonl"))
    if args.no_history:
        files += sorted(args.data.glob("nohistory-*.jsonl"))
    if not files:
        print(f"no groups under {args.data}: run scripts/mine_ranking_data.py", file=sys.stderr)
        return 2
    groups = load_groups(files)
    kinds = set(args.kinds.split(",")) if args.kinds else None
    left_out = leave_out(args.leave_out)
    unknown = left_out - {g["repo"] for g in groups}
    if unknown:
        ap.error(f"--leave-out names repositories with no groups: {', '.join(sorted(unknown))}")
    fitted = [
        g
        for g in groups
        if (kinds is None or g.get("kind", "commit") in kinds) and g["repo"] not in left_out
    ]
    train = [g for g in fitted if g["split"] == "train"]
    test = [g for g in groups if g["split"] == "test"]
    repos = sorted({g["repo"] for g in groups})
    print(
        f"{len(groups)} groups of {len(repos)} repositories: {len(train)} train, {len(test)} test"
    )

    def rows(gs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return [file_rows(g) for g in gs] if args.level == "file" else list(gs)

    fit_on = rows(train)
    models = {
        "trees": fit_trees(fit_on, args.rounds, params, kind_weight, args.bag),
        "linear": fit_linear(fit_on),
    }
    results = {"handset": evaluate(test, None)}
    for name, m in models.items():
        results[name] = evaluate(test, m.predict)
    keys = [
        "all",
        *sorted(k for k in results["handset"] if k.startswith(("kind:", "lang:"))),
        *(r for r in repos if r in results["handset"]),
    ]
    print("\ntest split, file MRR@10 / recall@10\n")
    print("| repository | n | handset | trees | linear |")
    print("|---|---:|---:|---:|---:|")
    for k in keys:
        n = results["handset"].get(k, (0, 0, 0))[2]
        print(f"| {k} | {n} | " + " | ".join(_fmt(results[m], k) for m in results) + " |")
    if args.json:
        print(json.dumps({m: {k: list(v) for k, v in r.items()} for m, r in results.items()}))
    if args.write:
        model = models[args.write]
        if args.fit_on == "all":
            # the settings chosen on the test split, fitted again on every group
            every = rows(fitted)
            model = (
                fit_trees(every, args.rounds, params, kind_weight, args.bag)
                if args.write == "trees"
                else fit_linear(every)
            )
        meta = dict(model.meta)
        meta.update(
            {
                "level": args.level,
                "fit_on": args.fit_on,
                "kinds": sorted(kinds) if kinds else "all",
                **({"left_out": sorted(left_out)} if left_out else {}),
                "data": sorted(f.name for f in files),
                "repositories": len(repos),
                "test_mrr10": round(results[args.write]["all"][0], 4),
                "test_mrr10_handset": round(results["handset"]["all"][0], 4),
            }
        )
        out = dataclasses.replace(model, meta=meta)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out.to_dict(), sort_keys=True) + "\n", encoding="utf-8")
        print(f"\nwrote {args.write} model ({out.digest}) -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
