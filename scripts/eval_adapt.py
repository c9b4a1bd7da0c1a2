"""Per-repository adaptation of the learned ranking, measured on the commit evaluation
(issue 22; docs/ranking.md "Per-repository adaptation").

For each repository of the git evaluation (scripts/git_eval_repos.toml, built and indexed as
scripts/eval_git.py needs) and each split: the repository's own history questions older than
the split's first question are mined (:func:`ragloom.learn.adapt.history_examples`, the history
cut before each commit), a repository model is fitted on them for every setting of a small grid
of (L2, length cap), and the split's questions are asked (each with the history as it stood when
it was asked) with the hand-set default, the global learned model and each adapted model.
Settings are chosen on ``tune``; ``test`` is the held-back report.

``--feedback`` adds the simulated feedback loop: every tune question is answered by the
repository model, and its top 10 hits are rated from the gold files (a gold file's chunks
helpful, the best-ranked other chunk not helpful), through a real feedback store; the model is
refitted with that feedback and the test questions asked again; then 10 adversarial ratings
(the gold rated not helpful and a wrong chunk helpful) are added alone, and on top.

``--feedback-bed tune`` measures the feedback's settings without a test question: each
repository's older tune questions (by time) are rated, its newer ones scored, for every
``--feedback-cap`` (how ``FEEDBACK_MAX_NORM`` was chosen; docs/ranking.md, "A BM25 over whole
files").

``--scored mined`` is the production protocol: the repository model is fitted as ``ragloom
adapt`` fits it (history questions asked of the indexed tree) on commits older than the first
question scored, and scored on the repository's mined test questions (``--mined``, as
``scripts/mine_ltr.py`` wrote them: features taken at each commit's parent, where the change
asked for is not yet in the tree). With ``--feedback`` the older half of them is rated and the
newer half scored; ``--mined-split train`` is its bed (the newest train questions, no test one).

``--history-age`` and ``--feedback-trim`` measure corrections tried and not shipped (docs/ranking.md,
"A setting chosen without test questions"); ``--examples-cache DIR`` keeps the production
protocol's mined history questions, so a sweep of settings reruns in a minute.

    .venv/bin/python scripts/eval_adapt.py --out eval-out/git [--feedback] [--repo chi]
    .venv/bin/python scripts/eval_adapt.py --out eval-out/git --scored mined --feedback
    .venv/bin/python scripts/eval_adapt.py --out eval-out/git --feedback-bed tune \
        --feedback-cap 0.25 --feedback-cap 0.1 --feedback-cap 0.05

Writes OUT/adapt-results.json; prints per repository MRR@10 and R@10 per method.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragloom.api import Index
from ragloom.eval.baseline import file_metrics, mean_metrics
from ragloom.eval.dataset import EvalQuery, load_dataset
from ragloom.eval.gitdata import load_repo_specs, read_log
from ragloom.eval.gitrun import (
    AsOfIndex,
    HistoryAsOf,
    build_history,
    question_times,
    ragloom_runs,
    split_starts,
)
from ragloom.eval.mining import load_groups, load_mining_specs, qualifying_questions
from ragloom.eval.stats import format_difference, paired_by_id
from ragloom.index.atomic import atomic_write_bytes
from ragloom.learn.adapt import (
    SCAN_COMMITS,
    choose_setting,
    feedback_examples,
    fit_adapted,
    history_examples,
)
from ragloom.retrieve.adapt import (
    FEEDBACK_FROZEN,
    FEEDBACK_FULL,
    FEEDBACK_MAX_NORM,
    FEEDBACK_PAIRS,
    FROZEN_SETS,
    HISTORY_FROZEN,
    HISTORY_L2,
    HISTORY_MAX_NORM,
    HISTORY_PAIRS,
    PAIR_WEIGHTINGS,
    AdaptedModel,
    Example,
)
from ragloom.retrieve.ranker import model_from_dict
from ragloom.retrieve.stages.learned import default_model
from ragloom.server.feedback import FeedbackStore, QueryLogEntry

HERE = Path(__file__).resolve().parent
ALL = 2**40
GRID = [(0.1, 0.5), (1.0, 1.0)]
MAX_EXAMPLES = 200
RATED_HITS = 10
HISTORY_PAIRS_USED = HISTORY_PAIRS
FEEDBACK_PAIRS_USED = FEEDBACK_PAIRS
FROZEN_USED: tuple[str, ...] = HISTORY_FROZEN
FEEDBACK_FROZEN_USED: tuple[str, ...] = FEEDBACK_FROZEN
FEEDBACK_FULL_USED = FEEDBACK_FULL
HISTORY_AGE_USED: float | None = None
HISTORY_AGES_USED = "tree"
FEEDBACK_TRIM_USED = 0.0
SHOWN = (
    "handset",
    "global",
    "auto",
    "auto rolling",
    "feedback",
    "adversarial10",
    "feedback+adversarial10",
)


def _split_of(path: Path) -> dict[str, str]:
    return {
        str(o["id"]): str(o.get("split", "test"))
        for o in (json.loads(ln) for ln in path.read_text().splitlines() if ln.strip())
    }


def _commits(path: Path, part: str) -> set[str]:
    """The commits of a questions file's ``part`` split."""
    return {
        str(o["commit"])
        for o in (json.loads(ln) for ln in path.read_text().splitlines() if ln.strip())
        if str(o.get("split", "test")) == part
    }


def _fit(*args: Any, **kw: Any) -> AdaptedModel | None:
    """:func:`fit_adapted` with the history pair weighting this run measures (``--pairs``)."""
    return fit_adapted(
        *args,
        history_pairs=HISTORY_PAIRS_USED,
        feedback_pairs=FEEDBACK_PAIRS_USED,
        history_frozen=FROZEN_USED,
        feedback_frozen=FEEDBACK_FROZEN_USED,
        feedback_full=FEEDBACK_FULL_USED,
        history_age=HISTORY_AGE_USED,
        history_ages=HISTORY_AGES_USED,
        feedback_trim=FEEDBACK_TRIM_USED,
        **kw,
    )


def _means(
    idx: Index,
    searched: Any,
    dataset: Sequence[EvalQuery],
    ranker: Any,
    strategy: str,
    per_question: dict[str, float] | None = None,
) -> dict[str, float]:
    """Mean file metrics of ``dataset`` ranked with ``ranker``; each question's MRR@10 goes to
    ``per_question`` (by id) when given, for the paired comparisons."""
    idx.retriever.ranker = ranker
    run = ragloom_runs(searched, dataset, [strategy])
    gold = {q.id: q.gold_files for q in dataset}
    metrics = [(r.id, file_metrics(r.files, gold[r.id])) for r in run.runs]
    if per_question is not None:
        per_question.update((qid, m["MRR@10"]) for qid, m in metrics)
    return mean_metrics([m for _, m in metrics])


PAIRED = (("auto", "global"), ("auto rolling", "global"), ("auto rolling", "auto"),
          ("feedback", "auto"), ("feedback", "global"),
          ("feedback+adversarial10", "feedback"))  # fmt: skip
"""(arm, reference) pairs whose per-question MRR@10 difference is reported with a 95 % paired
bootstrap interval (``paired`` per split, and over every repository's test questions)."""


def _paired(
    scores: dict[str, dict[str, float]], prefix: str = ""
) -> dict[str, dict[str, float | int]]:
    out: dict[str, dict[str, float | int]] = {}
    for arm, ref in PAIRED:
        if arm in scores and ref in scores:
            d = paired_by_id(scores[arm], scores[ref])
            if d is not None:
                out[f"{prefix}{arm} - {ref}"] = d.as_dict()
    return out


def _simulated_feedback(
    idx: Index,
    searched: Any,
    dataset: Sequence[EvalQuery],
    model: Any,
    adversarial: int = 0,
    legit: bool = True,
) -> list[Example]:
    """Feedback examples from ratings drawn from the gold of ``dataset`` (see the module
    docstring), through a real feedback store in a temporary folder."""
    idx.retriever.ranker = model
    with tempfile.TemporaryDirectory() as tmp:
        store = FeedbackStore(Path(tmp))
        try:
            qs = list(dataset)
            chosen = qs if legit else []
            bad = qs[-adversarial:] if adversarial else []
            for kind, group in (("legit", chosen), ("adversarial", bad)):
                for q in group:
                    res = searched.search(q.query, top_k=RATED_HITS, strategy="hybrid+learned")
                    hits = list(res.hits)
                    qid = f"{kind}-{q.id}"
                    store.log_queries(
                        [QueryLogEntry(qid, "search", q.query, "hybrid+learned", 0,
                                       tuple(h.id for h in hits), time.time(), "eval")]
                    )  # fmt: skip
                    gold = set(q.gold_files)
                    good = [h for h in hits if h.path in gold]
                    wrong = [h for h in hits if h.path not in gold]
                    if kind == "legit":
                        for h in good:
                            store.record_feedback(qid, h.id, "helpful")
                        if wrong:
                            store.record_feedback(qid, wrong[0].id, "not_helpful")
                    else:
                        for h in good:
                            store.record_feedback(qid, h.id, "not_helpful")
                        if wrong:
                            store.record_feedback(qid, wrong[-1].id, "helpful")
            answers = store.rated_answers()
        finally:
            store.close()
    return feedback_examples(idx, answers, searcher=searched)


def _feedback_bed(
    idx: Index,
    searched: Any,
    base: Any,
    dataset: Sequence[EvalQuery],
    times: dict[str, float],
    history: Sequence[Example],
    setting: tuple[float, float],
    caps: Sequence[float],
) -> dict[str, Any]:
    """The feedback loop on the tune split alone: its older half (by time) rated, as the test
    report rates every tune question, and its newer half scored, for each feedback cap."""
    ordered = sorted(dataset, key=lambda q: times.get(q.id, 0.0))
    rated, scored = ordered[: len(ordered) // 2], ordered[len(ordered) // 2 :]
    l2, cap = setting
    auto = _fit(base, history, history_l2=l2, history_max_norm=cap)
    out: dict[str, Any] = {
        "rated": len(rated),
        "scored": len(scored),
        "auto": _means(idx, searched, scored, auto, "hybrid+learned")["MRR@10"],
    }
    fb = _simulated_feedback(idx, searched, rated, auto)
    adv = _simulated_feedback(idx, searched, rated, auto, 10, legit=False)
    for c in caps:
        for name, extra in (("feedback", fb), ("feedback+adversarial10", fb + adv)):
            m = _fit(base, history, extra, history_l2=l2, history_max_norm=cap, feedback_max_norm=c)
            out[f"{name} {c}"] = _means(idx, searched, scored, m, "hybrid+learned")["MRR@10"]
    return out


def _mined_groups(mined: Path, name: str, split: str = "test") -> list[dict[str, Any]]:
    """The commit questions of the ``test`` split of ``name``'s mining in ``mined``
    (``scripts/mine_ltr.py``: each asked at its commit's parent), oldest first. ``train``: as
    many of the newest ``train`` questions instead (a bed that reads no test question)."""
    exact = mined / f"groups-{name}.jsonl"  # owner+name
    found = (
        [exact] if "+" in name and exact.is_file() else sorted(mined.glob(f"groups-*+{name}.jsonl"))
    )
    if len(found) != 1:
        raise SystemExit(f"{name}: expected one mined groups file in {mined}, found {len(found)}")
    stamps = {
        str(o["id"]): int(o["timestamp"])
        for f in sorted(mined.glob("questions-*.jsonl"))
        for o in (json.loads(ln) for ln in f.read_text().splitlines() if ln.strip())
    }
    groups = [
        dict(g, timestamp=stamps[g["id"]])
        for g in load_groups(found)
        if g.get("kind", "commit") == "commit" and g["id"] in stamps
    ]
    groups.sort(key=lambda g: (g["timestamp"], g["id"]))
    test = [g for g in groups if g["split"] == "test"]
    if split == "test":
        return test
    train = [g for g in groups if g["split"] == "train"]
    return train[-len(test) :] if test else train


def _scored(groups: Sequence[dict[str, Any]], model: Any, prefix: str) -> dict[str, float]:
    """Each mined question's file MRR@10 with its stored feature rows ranked by ``model``."""
    out: dict[str, float] = {}
    for g in groups:
        x = np.asarray(g["x"], dtype=np.float64)
        s = model.predict(x)
        order = np.lexsort((np.arange(len(x)), -s))
        files = list(dict.fromkeys(g["paths"][int(i)] for i in order))
        out[f"{prefix}{g['id']}"] = file_metrics(files, g["gold_files"], ks=(10,))["MRR@10"]
    return out


def _mined_protocol(
    idx: Index,
    git_dir: Path,
    spec: Any,
    whole: Any,
    groups: Sequence[dict[str, Any]],
    base: Any,
    feedback: bool,
    pooled: dict[str, dict[str, float]],
    caps: Sequence[float] = (FEEDBACK_MAX_NORM,),
    cache: Path | None = None,
) -> dict[str, Any]:
    """The production protocol (``--scored mined``): the repository model fitted as ``ragloom
    adapt`` fits it (its history questions asked of the indexed tree, each with the history cut
    before its commit), on the commits older than the oldest scored question; scored on the
    mined questions, whose features were taken at each commit's parent (a question whose change
    is not in the tree yet). With ``feedback``: the older half of the scored questions is rated
    through a real feedback store and the newer half scored."""
    before = int(groups[0]["timestamp"])
    idx.retriever.history = whole
    t0 = time.perf_counter()
    # v2: the examples know their commits since (Example.since)
    kept = cache / f"{spec.name}-{before}-v2.pkl" if cache is not None else None
    if kept is not None and kept.is_file():
        examples, asked = pickle.loads(kept.read_bytes())  # written by this script, below
    else:
        examples, asked, _ = history_examples(
            idx, git_dir, rev=spec.commit, before=before, max_examples=MAX_EXAMPLES, time_limit=1e9
        )
        if kept is not None:
            kept.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(kept, pickle.dumps((examples, asked)))
    row: dict[str, Any] = {
        "examples": len(examples),
        "asked": asked,
        "scored": len(groups),
        "mine_s": time.perf_counter() - t0,
    }
    auto = _fit(base, examples)
    prefix = f"{spec.name}/"
    scores = {"global": _scored(groups, base, prefix)}
    scores["auto"] = _scored(groups, auto if auto is not None else base, prefix)
    for arm, got in scores.items():
        row[arm] = {"MRR@10": sum(got.values()) / len(got)}
        pooled.setdefault(arm, {}).update(got)
    if feedback:
        half = len(groups) // 2
        rated, later = groups[:half], groups[half:]
        queries = [EvalQuery(str(g["id"]), str(g["query"]), tuple(g["gold_files"])) for g in rated]
        as_of = HistoryAsOf(whole)
        idx.retriever.history = as_of
        searched = AsOfIndex(idx, as_of, {str(g["query"]): float(g["timestamp"]) for g in rated})
        fb = _simulated_feedback(idx, searched, queries, auto if auto is not None else base)
        adv = _simulated_feedback(
            idx, searched, queries, auto if auto is not None else base, 10, legit=False
        )
        idx.retriever.ranker = None
        row["rated"], row["feedback_scored"] = len(rated), len(later)
        arms: dict[str, Any] = {"auto (newer half)": auto if auto is not None else base}
        for c in caps:
            tag = f" {c}" if len(caps) > 1 else ""
            for name, extra in (("feedback", fb), ("feedback+adversarial10", fb + adv)):
                arms[name + tag] = _fit(base, examples, extra, feedback_max_norm=c) or base
        later_scores = {k: _scored(later, m, prefix) for k, m in arms.items()}
        for arm, got in later_scores.items():
            row[arm] = {"MRR@10": sum(got.values()) / len(got), "n_feedback": len(fb)}
            pooled.setdefault(arm, {}).update(got)
        scores.update(later_scores)
    row["paired"] = {
        f"{a} - {b}": d.as_dict()
        for a, b in _mined_paired(caps)
        if a in scores and b in scores and (d := paired_by_id(scores[a], scores[b])) is not None
    }
    return row


def _mined_paired(caps: Sequence[float]) -> list[tuple[str, str]]:
    """The (arm, reference) pairs of the production protocol, per feedback cap."""
    out = [("auto", "global")]
    for c in caps:
        tag = f" {c}" if len(caps) > 1 else ""
        out += [(f"feedback{tag}", "auto (newer half)"),
                (f"feedback+adversarial10{tag}", f"feedback{tag}")]  # fmt: skip
    return out


def _print_mined(name: str, row: dict[str, Any]) -> None:
    """One line of the production protocol's figures for a repository."""
    arms = "  ".join(
        f"{k} {v['MRR@10']:.4f}" for k, v in row.items() if isinstance(v, dict) and "MRR@10" in v
    )
    print(f"{name} ({row['examples']} ex, {row['scored']} scored): {arms}", flush=True)


def _rolling(
    idx: Index,
    searched: Any,
    base: Any,
    git_dir: Path,
    rev: str,
    whole: Any,
    dataset: Sequence[EvalQuery],
    times: dict[str, float],
    every: int,
    per_question: dict[str, float],
) -> dict[str, Any]:
    """``--refit-every N``: the split's questions asked in time order, each ranked by the
    repository model as ``ragloom index`` keeps it (fitted again once ``REFIT_AFTER`` commits
    came in): the model fitted on the newest ``MAX_EXAMPLES`` history questions older than the
    first question of its block of ``every`` questions. A block's model may read the split's
    earlier questions (their commits are older than every question it ranks), never a newer
    one. The first block's model is the one-fit ``auto`` model."""
    ordered = sorted(dataset, key=lambda q: (times[q.query], q.id))
    blocks = [ordered[i : i + every] for i in range(0, len(ordered), every)]
    starts = [int(times[b[0].query]) for b in blocks]
    as_of = idx.retriever.history
    idx.retriever.history = whole
    examples, _, _ = history_examples(
        idx, git_dir, rev=rev, before=max(starts),
        max_examples=MAX_EXAMPLES + len(dataset) + 50, time_limit=1e9,
    )  # fmt: skip
    idx.retriever.history = as_of
    log = read_log(git_dir, f"--max-count={SCAN_COMMITS}", rev)
    fitted: list[int] = []
    recall = 0.0
    for block, start in zip(blocks, starts, strict=True):
        # the questions `ragloom adapt` would ask then: the newest MAX_EXAMPLES qualifying
        # commits before the block (those with an answer in the index become examples)
        asked = {sha for _, sha, _, _ in qualifying_questions(log, MAX_EXAMPLES, start)}
        used = [e for e in examples if e.id in asked]  # newest first
        setting, _ = choose_setting(base, used)
        l2, cap = setting or (HISTORY_L2, HISTORY_MAX_NORM)
        model = _fit(base, used if setting is not None else [], history_l2=l2, history_max_norm=cap)
        got = _means(idx, searched, block, model, "hybrid+learned", per_question)
        recall += got["R@10"] * len(block)
        fitted.append(len(used))
    ids = {q.id for q in dataset}
    mrr = [v for k, v in per_question.items() if k in ids]
    return {
        "MRR@10": sum(mrr) / len(mrr),
        "R@10": recall / len(ordered),
        "blocks": len(blocks),
        "examples": fitted,
    }


@dataclass(frozen=True)
class _Target:
    name: str
    commit: str


def _count(rows: dict[str, Any], arm: str, ref: str) -> tuple[int, int]:
    """Repositories where ``arm`` is above / below ``ref`` (mean MRR@10)."""
    d = [r[arm]["MRR@10"] - r[ref]["MRR@10"] for r in rows.values() if arm in r and ref in r]
    return sum(x > 1e-9 for x in d), sum(x < -1e-9 for x in d)


def _fit_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The fit's settings a results file records, in both protocols."""
    return {
        "feedback_full": args.feedback_full,
        "history_age": args.history_age,
        "history_ages": args.history_ages,
        "feedback_trim": args.feedback_trim,
    }


def _mined_trees(args: argparse.Namespace, base: Any, caps: Sequence[float]) -> int:
    """``--scored mined --trees DIR``: the production protocol on every mined repository
    (``--ltr-repos``), each adapted on the index its mining left in ``DIR/<owner+name>`` (the
    tree at its newest question's parent, newer than every question scored)."""
    specs = load_mining_specs(tomllib.loads(args.ltr_repos.read_text()))
    results: dict[str, Any] = {
        "scored": "mined",
        "trees": str(args.trees),
        "base_models": str(args.base_models or "shipped"),
        **_fit_settings(args),
        "repos": {},
    }
    pooled: dict[str, dict[str, float]] = {}
    for spec in specs:
        stem = spec.repo.replace("/", "+")
        if args.repo and not {spec.repo, stem, spec.repo.split("/")[1]} & set(args.repo):
            continue
        index_dir = args.trees / stem / ".ragloom"
        groups = _mined_groups(args.mined, stem, args.mined_split) if index_dir.is_dir() else []
        if len(groups) < 2:
            print(f"{spec.repo}: no index or too few mined questions, skipped", file=sys.stderr)
            continue
        git_dir = args.mirror_root / spec.git_dir
        whole = build_history(git_dir, spec.commit, ALL, args.out / "mined-history" / stem)
        own = base
        if args.base_models is not None:
            # the global model fitted without this repository (tune_adapt.py --cache): the
            # shipped one was fitted on every mined question of the 28 it was mined from
            own = model_from_dict(json.loads((args.base_models / f"{stem}.json").read_text()))
        idx = Index.at(index_dir)
        try:
            row = _mined_protocol(
                idx, git_dir, _Target(stem, spec.commit), whole, groups, own, args.feedback,
                pooled, caps, args.examples_cache,
            )  # fmt: skip
        finally:
            idx.close()
        results["repos"][spec.repo] = row
        _print_mined(spec.repo, row)
    results["paired_all"] = {
        f"{a} - {b}": d.as_dict()
        for a, b in _mined_paired(caps)
        if a in pooled and b in pooled and (d := paired_by_id(pooled[a], pooled[b]))
    }
    results["counts"] = {
        f"{a} - {b}": _count(results["repos"], a, b) for a, b in _mined_paired(caps)
    }
    out = args.results or args.out / "adapt-mined-trees.json"
    out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    for name, d in results["paired_all"].items():
        up, down = results["counts"][name]
        print(
            f"all, {name}: MRR@10 {format_difference(d)} ({d['better']} better, {d['worse']} "
            f"worse of {d['n']}); repositories raised {up}, lowered {down}"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("eval-out/git"))
    ap.add_argument("--repos", type=Path, default=HERE / "git_eval_repos.toml")
    ap.add_argument("--mirror-root", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--repo", action="append", default=[])
    ap.add_argument("--feedback", action="store_true")
    ap.add_argument("--results", type=Path, default=None)
    ap.add_argument(
        "--feedback-bed",
        choices=("test", "tune"),
        default="test",
        help="tune: a bed for the feedback's settings that reads no test question (each "
        "repository's older tune questions rated, its newer ones scored; the tune split only)",
    )
    ap.add_argument(
        "--feedback-cap",
        type=float,
        action="append",
        default=[],
        help="feedback correction caps compared on the tune bed (repeatable; default the shipped)",
    )
    ap.add_argument(
        "--pairs",
        choices=PAIR_WEIGHTINGS,
        default=HISTORY_PAIRS,
        help="the history correction's pair weighting (default the shipped one)",
    )
    ap.add_argument(
        "--feedback-pairs",
        choices=PAIR_WEIGHTINGS,
        default=FEEDBACK_PAIRS,
        help="the feedback correction's pair weighting (default the shipped one)",
    )
    ap.add_argument(
        "--setting",
        default=None,
        metavar="L2/CAP",
        help="the history correction's L2 and length cap (default the shipped ones)",
    )
    for flag, default in (("history", "file"), ("feedback", "none")):
        ap.add_argument(
            "--frozen" if flag == "history" else "--feedback-frozen",
            choices=FROZEN_SETS,
            default=default,
            help=f"columns the {flag} correction leaves alone (FROZEN_SETS; shipped: {default})",
        )
    ap.add_argument(
        "--feedback-full",
        type=int,
        default=FEEDBACK_FULL,
        help="rated answers from which the feedback takes its whole cap (FEEDBACK_FULL; 0: always)",
    )
    ap.add_argument(
        "--scored",
        choices=("split", "mined"),
        default="split",
        help="split: the commit evaluation's questions, asked of the pinned tree (default); "
        "mined: the production protocol, each repository's mined test questions (--mined), "
        "asked at their commit's parent, the adaptation fitted on the indexed tree",
    )
    ap.add_argument("--mined", type=Path, default=Path("eval-out/ltr"))
    ap.add_argument(
        "--mined-split",
        choices=("test", "train"),
        default="test",
        help="with --scored mined: score the mined test questions (held back), or as many of "
        "the newest train questions (a bed for settings; --feedback-cap compares caps there)",
    )
    ap.add_argument(
        "--trees",
        type=Path,
        default=None,
        help="with --scored mined: every repository of --ltr-repos, adapted on the index its "
        "mining left in TREES/<owner+name> (eval-out/ltr/work), instead of the commit "
        "evaluation's seven",
    )
    ap.add_argument("--ltr-repos", type=Path, default=HERE / "ltr_repos.toml")
    ap.add_argument(
        "--base-models",
        type=Path,
        default=None,
        help="with --trees: each repository's global model from BASE_MODELS/<owner+name>.json, "
        "one fitted without it (scripts/tune_adapt.py --cache writes them)",
    )
    ap.add_argument(
        "--history-age",
        type=float,
        default=None,
        metavar="A",
        help="the history correction fitted as one that changes with the question's age "
        "(0 the newest history question, 1 the oldest) and taken at age A (0: extrapolated "
        "to the newest); default: one correction for every age, as shipped",
    )
    ap.add_argument(
        "--history-ages",
        choices=("tree", "rank"),
        default="tree",
        help="with --history-age: a question's age is its commits since, in the indexed "
        "tree's history (tree), or its place among the history questions (rank)",
    )
    ap.add_argument(
        "--feedback-trim",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="set aside this share of the rated answers the history-corrected model disagrees "
        "with most before the feedback is fitted (default 0: none, as shipped)",
    )
    ap.add_argument(
        "--refit-every",
        type=int,
        default=0,
        metavar="N",
        help="with the pinned protocol: add the arm 'auto rolling', the repository model fitted "
        "again before every N questions of a split (in time order), as `ragloom index` refits "
        "it once REFIT_AFTER commits came in (default 0: the one fit before the split only)",
    )
    ap.add_argument(
        "--examples-cache",
        type=Path,
        default=None,
        help="with --trees: keep each repository's mined history questions in "
        "EXAMPLES_CACHE/<owner+name>-<before>-v2.pkl and read them from there on the next run "
        "(the mining is most of the run's time; a setting's sweep then takes a minute)",
    )
    args = ap.parse_args(argv)
    setting_used = (
        tuple(float(v) for v in args.setting.split("/"))
        if args.setting
        else (HISTORY_L2, HISTORY_MAX_NORM)
    )
    global HISTORY_PAIRS_USED, FEEDBACK_PAIRS_USED, FROZEN_USED, FEEDBACK_FROZEN_USED
    global FEEDBACK_FULL_USED, HISTORY_AGE_USED, HISTORY_AGES_USED, FEEDBACK_TRIM_USED
    FEEDBACK_TRIM_USED = args.feedback_trim
    FEEDBACK_FULL_USED = args.feedback_full
    HISTORY_AGE_USED = args.history_age
    HISTORY_AGES_USED = args.history_ages
    FROZEN_USED = FROZEN_SETS[args.frozen]
    FEEDBACK_FROZEN_USED = FROZEN_SETS[args.feedback_frozen]
    HISTORY_PAIRS_USED = args.pairs
    FEEDBACK_PAIRS_USED = args.feedback_pairs
    caps = args.feedback_cap or [FEEDBACK_MAX_NORM]
    base = default_model()
    if args.trees is not None:
        if args.scored != "mined":
            ap.error("--trees needs --scored mined")
        return _mined_trees(args, base, caps)
    specs = load_repo_specs(tomllib.loads(args.repos.read_text()))
    results: dict[str, Any] = {
        "grid": GRID,
        "default": list(setting_used),
        "history_pairs": args.pairs,
        "feedback_pairs": args.feedback_pairs,
        "frozen": args.frozen,
        "feedback_frozen": args.feedback_frozen,
        **_fit_settings(args),
        "repos": {},
    }
    pooled: dict[str, dict[str, float]] = {}
    """Every repository's test questions, per arm (ids prefixed by the repository)."""
    for spec in specs:
        if args.repo and spec.name not in args.repo:
            continue
        repo_dir = args.out / spec.name
        qfile = repo_dir / "questions.jsonl"
        index_dir = repo_dir / "corpus" / ".ragloom"
        if not index_dir.is_dir():
            print(f"{spec.name}: no index, skipped", file=sys.stderr)
            continue
        git_dir = args.mirror_root / spec.git_dir
        split = _split_of(qfile)
        starts = split_starts(qfile)
        times = question_times(qfile)
        per: dict[str, Any] = {}
        idx = Index.at(index_dir)
        try:
            whole = build_history(git_dir, spec.commit, ALL, repo_dir / "history-all")
            if args.scored == "mined":
                row = _mined_protocol(
                    idx, git_dir, spec, whole,
                    _mined_groups(args.mined, spec.name, args.mined_split), base,
                    args.feedback, pooled, caps,
                )  # fmt: skip
                per["mined"] = row
                _print_mined(f"{spec.name} mined", row)
            parts: tuple[str, ...] = ("tune",) if args.feedback_bed == "tune" else ("tune", "test")
            for part in parts if args.scored == "split" else ():
                dataset = [q for q in load_dataset(qfile) if split[q.id] == part]
                t0 = time.perf_counter()
                idx.retriever.history = whole
                examples, asked, _ = history_examples(
                    idx, git_dir, rev=spec.commit, before=starts[part],
                    max_examples=MAX_EXAMPLES, time_limit=1e9,
                )  # fmt: skip
                mined = time.perf_counter() - t0
                as_of = HistoryAsOf(whole)
                idx.retriever.history = as_of
                searched = AsOfIndex(idx, as_of, times)
                row: dict[str, Any] = {"examples": len(examples), "asked": asked, "mine_s": mined}
                scores: dict[str, dict[str, float]] = {
                    k: {} for k in ("global", "auto", "feedback", "feedback+adversarial10")
                }
                row["handset"] = _means(idx, searched, dataset, None, "hybrid+handset")
                row["global"] = _means(
                    idx, searched, dataset, None, "hybrid+learned", scores["global"]
                )
                models: dict[str, AdaptedModel | None] = {}
                for l2, cap in GRID:
                    m = _fit(base, examples, history_l2=l2, history_max_norm=cap)
                    models[f"{l2}/{cap}"] = m
                    row[f"adapted {l2}/{cap}"] = _means(idx, searched, dataset, m, "hybrid+learned")
                setting, figures = choose_setting(base, examples)
                if args.setting:
                    setting = setting_used
                l2, cap = setting or (HISTORY_L2, HISTORY_MAX_NORM)
                used = examples if setting is not None else []
                auto = _fit(base, used, history_l2=l2, history_max_norm=cap)
                row["auto"] = _means(idx, searched, dataset, auto, "hybrid+learned", scores["auto"])
                row["auto"]["setting"] = setting  # type: ignore[assignment]
                if args.refit_every > 0:
                    scores["auto rolling"] = {}
                    row["auto rolling"] = _rolling(
                        idx, searched, base, git_dir, spec.commit, whole, dataset, times,
                        args.refit_every, scores["auto rolling"],
                    )  # fmt: skip
                row["validation_mrr"] = figures
                if args.feedback_bed == "tune":
                    row["bed"] = _feedback_bed(
                        idx, searched, base, dataset, times, used, (l2, cap), caps
                    )
                if args.feedback and part == "test":
                    tune_q = [q for q in load_dataset(qfile) if split[q.id] == "tune"]
                    # how many rated questions the history correction was already fitted on
                    row["tune_in_history"] = len(_commits(qfile, "tune") & {e.id for e in used})
                    fb = _simulated_feedback(idx, searched, tune_q, auto)
                    adv = _simulated_feedback(idx, searched, tune_q, auto, 10, legit=False)
                    for name, extra in (("feedback", fb), ("adversarial10", adv),
                                        ("feedback+adversarial10", fb + adv)):  # fmt: skip
                        m = _fit(base, used, extra, history_l2=l2, history_max_norm=cap)
                        row[name] = _means(
                            idx, searched, dataset, m, "hybrid+learned", scores.get(name)
                        )
                        row[name]["n_feedback"] = len(extra)
                scores = {k: v for k, v in scores.items() if v}
                row["paired"] = _paired(scores)
                if part == "test":
                    for arm, got in scores.items():
                        pooled.setdefault(arm, {}).update(
                            (f"{spec.name}/{qid}", v) for qid, v in got.items()
                        )
                per[part] = row
                shown = "  ".join(
                    f"{k} {v['MRR@10']:.3f}/{v['R@10']:.3f}"
                    for k, v in row.items()
                    if isinstance(v, dict) and k in SHOWN
                )
                print(f"{spec.name} {part} ({len(examples)} ex, {mined:.0f}s): {shown}", flush=True)
                if "bed" in row:
                    bed = row["bed"]
                    print(f"  bed: {json.dumps(bed)}", flush=True)
        finally:
            idx.close()
        results["scored"] = args.scored
        results["repos"][spec.name] = per
        results["paired_test_all"] = (
            {
                f"{a} - {b}": d.as_dict()
                for a, b in _mined_paired(caps)
                if a in pooled and b in pooled and (d := paired_by_id(pooled[a], pooled[b]))
            }
            if args.scored == "mined"
            else _paired(pooled)
        )
        out = args.results or args.out / "adapt-results.json"
        out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    for name, d in results.get("paired_test_all", {}).items():
        print(
            f"all test questions, {name}: MRR@10 {format_difference(d)} "
            f"({d['better']} better, {d['worse']} worse of {d['n']})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
