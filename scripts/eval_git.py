"""Run the git-history evaluation (docs/evaluation-git.md) on every built and indexed repository.

For each repository of the list: the questions of OUT/<name>/questions.jsonl (or
questions-body.jsonl with ``--variant body``) against the index OUT/<name>/corpus/.ragloom, with
ragloom's strategies and the plain BM25 baseline, both run by ``ragloom.eval.gitrun`` (the
same code the golden sample test, tests/golden/test_git_sample.py, runs). Scores are file-level (ranked distinct files): R@1, R@5, R@10,
MRR@10, printed per repository and overall, tune and test split separately.

A ragloom method's file ranking is the first-seen order of the paths of its ``--top-k`` (50)
hits: 50 is the fusion depth of the hybrid strategies, so asking for 50 does not change their
order. When those hits hold fewer than 10 distinct files, the files of a 300-hit search follow
them. The baseline ranks every chunk that matches a query word. ``--repo chi --split test``
evaluates one repository's held-back questions only. Usage::

    .venv/bin/python scripts/build_git_eval.py --out eval-out/git
    for r in starlette rich chi echo axios zod axum; do .venv/bin/ragloom index eval-out/git/$r/corpus; done
    .venv/bin/python scripts/eval_git.py --out eval-out/git --markdown eval-out/git/results.md

Writes OUT/results-<variant>.json (settings, per-repository and overall means) and
OUT/<name>/runs-<variant>.jsonl (per question and method: the top 20 ranked files and the
metrics) for error analysis.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragloom.api import Index
from ragloom.eval.baseline import file_metrics, mean_metrics
from ragloom.eval.dataset import load_dataset
from ragloom.eval.gitdata import load_repo_specs, path_role
from ragloom.eval.gitrun import (
    BASELINE,
    DEFAULT_TOP_K,
    AsOfIndex,
    HistoryAsOf,
    build_history,
    evaluate_files,
    question_times,
    split_starts,
)
from ragloom.eval.stats import format_difference, paired_by_id

HERE = Path(__file__).resolve().parent
STRATEGIES = ("sparse", "dense", "hybrid", "hybrid+seed", "hybrid+raw")
METRICS = ("R@1", "R@5", "R@10", "MRR@10")
SPLITS = ("tune", "test")
RUN_FILES = 20
ALL = 2**40
"""A history cut no commit reaches: the whole history (``HistoryAsOf`` cuts it per question)."""


def _git_state() -> dict[str, object]:
    def run(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], cwd=HERE.parent, capture_output=True, text=True, check=False
            ).stdout.strip()
        except OSError:
            return ""

    dirty = [
        ln[3:] for ln in run("status", "--porcelain").splitlines() if ln[3:].startswith("src/")
    ]
    return {"head": run("rev-parse", "HEAD"), "dirty_src": sorted(dirty)}


def _split_of(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            obj = json.loads(line)
            out[str(obj["id"])] = str(obj.get("split", "test"))
    return out


def eval_repo(
    name: str,
    repo_dir: Path,
    variant: str,
    strategies: Sequence[str],
    top_k: int,
    splits: Sequence[str],
    history_git: tuple[Path, str] | None = None,
    history_mode: str = "question",
    source_only: bool = False,
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Per-question rows (one per method) of one repository, and the seconds each part took.
    With ``source_only`` every ranked file that is not a library source file
    (:func:`~ragloom.eval.gitdata.path_role`) is taken out before scoring.

    ``history_git`` = (bare git directory, pinned commit): each question is ranked with the
    commit history as it stood when it was asked (``history_mode`` "question": one store of the
    whole history under ``repo_dir/history-all``, seen through ``HistoryAsOf``), or as it
    stood before its split's oldest question ("split": ``repo_dir/history-<split>``). Never
    the question's own commit or a later one. None ranks without history."""
    qfile = repo_dir / ("questions.jsonl" if variant == "subject" else "questions-body.jsonl")
    split = _split_of(qfile)
    starts = split_starts(qfile)
    index_dir = repo_dir / "corpus" / ".ragloom"
    rows: list[dict[str, Any]] = []
    seconds: dict[str, float] = {}
    for part in splits:
        dataset = [q for q in load_dataset(qfile) if split[q.id] == part]
        if not dataset:
            continue
        idx = Index.at(index_dir)
        try:
            searched: Any = idx
            t0 = time.perf_counter()
            if history_git is None:
                idx.retriever.history = None
            elif history_mode == "split":
                idx.retriever.history = build_history(
                    history_git[0], history_git[1], starts[part], repo_dir / f"history-{part}"
                )
            else:
                whole = build_history(history_git[0], history_git[1], ALL, repo_dir / "history-all")
                as_of = HistoryAsOf(whole)
                idx.retriever.history = as_of
                searched = AsOfIndex(idx, as_of, question_times(qfile))
            seconds["history_build"] = seconds.get("history_build", 0.0) + (
                time.perf_counter() - t0
            )
            run = evaluate_files(searched, index_dir, dataset, strategies, top_k=top_k)
        finally:
            idx.close()
        for k, v in run.seconds.items():
            seconds[k] = seconds.get(k, 0.0) + v
        for note in run.notes:
            print(f"  {name}: note: {note}", file=sys.stderr)
        by_id = {q.id: q for q in dataset}
        rows.extend(
            _row(
                name,
                r.id,
                split[r.id],
                r.method,
                by_id[r.id].query,
                by_id[r.id].gold_files,
                [f for f in r.files if path_role(f) == "source"] if source_only else r.files,
                r.error,
            )
            for r in run.runs
        )
    return rows, seconds


def _row(
    repo: str,
    qid: str,
    split: str,
    method: str,
    query: str,
    gold: Sequence[str],
    files: Sequence[str],
    error: str | None,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "repo": repo,
        "id": qid,
        "split": split,
        "method": method,
        "query": query,
        "gold_files": list(gold),
        "files": list(files[:RUN_FILES]),
        "n_files": len(files),
        "metrics": file_metrics(files, gold),
    }
    if error is not None:
        row["error"] = error
    return row


def aggregate(
    rows: Sequence[Mapping[str, Any]], methods: Sequence[str], repos: Sequence[str]
) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    """split -> repo (and "overall") -> method -> mean metrics (plus "n")."""
    out: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for split in SPLITS:
        per: dict[str, dict[str, dict[str, float]]] = {}
        for repo in [*repos, "overall"]:
            per[repo] = {}
            for m in methods:
                sel = [
                    r["metrics"]
                    for r in rows
                    if r["split"] == split
                    and r["method"] == m
                    and (repo == "overall" or r["repo"] == repo)
                ]
                if sel:
                    per[repo][m] = {**mean_metrics(sel), "n": float(len(sel))}
        if any(per[r] for r in per):
            out[split] = per
    return out


_PROSE = (".md", ".mdx", ".rst", ".txt", ".markdown", ".adoc")
_CONFIG = (".json", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".lock", ".xml", ".html", ".css")


def category(path: str, gold: Sequence[str] = ()) -> str:
    """What a ranked file is, for the error analysis (gold files are "gold")."""
    if path in gold:
        return "gold"
    role = path_role(path)
    low = path.lower()
    if role == "other":
        if low.endswith(_PROSE):
            return "docs"
        if low.endswith(_CONFIG):
            return "config/data"
        return "other"
    if role == "docs" and not low.endswith(_PROSE):
        return "docs-code"  # code in a docs folder (snippets, docs site)
    if role == "source":
        return "other-source"
    return role


def error_analysis(
    rows: Sequence[Mapping[str, Any]], method: str, split: str, k: int = 10
) -> dict[str, Any]:
    """What ranked above the first gold file, over the questions where gold is not first."""
    sel = [r for r in rows if r["method"] == method and r["split"] == split]
    failed = [r for r in sel if r["metrics"]["MRR@10"] < 1.0]
    missed = [r for r in failed if r["metrics"]["MRR@10"] == 0.0]
    above: dict[str, int] = {}
    questions_with: dict[str, int] = {}
    first: dict[str, int] = {}
    for r in failed:
        gold = r["gold_files"]
        ranked = r["files"][:k]
        cut = next((i for i, f in enumerate(ranked) if f in gold), len(ranked))
        cats = [category(f, gold) for f in ranked[:cut]]
        for c in cats:
            above[c] = above.get(c, 0) + 1
        for c in set(cats):
            questions_with[c] = questions_with.get(c, 0) + 1
        if cats:
            first[cats[0]] = first.get(cats[0], 0) + 1
    return {
        "method": method,
        "split": split,
        "questions": len(sel),
        "gold_not_first": len(failed),
        "gold_not_in_top10": len(missed),
        "files_above_gold": dict(sorted(above.items(), key=lambda kv: -kv[1])),
        "questions_with_category_above_gold": dict(
            sorted(questions_with.items(), key=lambda kv: -kv[1])
        ),
        "rank1_category_when_gold_not_first": dict(sorted(first.items(), key=lambda kv: -kv[1])),
    }


PAIRED_REFERENCE = ("hybrid+handset", BASELINE)
"""What the other methods are compared with, question by question: the first of these run."""
PAIRED_METRICS = ("MRR@10", "R@10")


def paired(rows: Sequence[Mapping[str, Any]], methods: Sequence[str]) -> dict[str, dict[str, Any]]:
    """split -> {"reference": method, method -> metric -> :class:`PairedDifference` as a dict}:
    every method against the reference (:data:`PAIRED_REFERENCE`) on the questions both
    answered, with a 95 % paired bootstrap interval over the questions (all repositories)."""
    ref = next((m for m in PAIRED_REFERENCE if m in methods), None)
    out: dict[str, dict[str, Any]] = {}
    if ref is None:
        return out
    for split in SPLITS:
        by: dict[str, dict[str, Mapping[str, float]]] = {}
        for r in rows:
            if r["split"] == split:
                by.setdefault(r["method"], {})[f"{r['repo']}/{r['id']}"] = r["metrics"]
        if ref not in by:
            continue
        part: dict[str, Any] = {"reference": ref}
        for m in methods:
            if m == ref or m not in by:
                continue
            part[m] = {
                k: d.as_dict()
                for k in PAIRED_METRICS
                if (
                    d := paired_by_id(
                        {i: v[k] for i, v in by[m].items()}, {i: v[k] for i, v in by[ref].items()}
                    )
                )
            }
        out[split] = part
    return out


def paired_lines(result: Mapping[str, Mapping[str, Any]]) -> str:
    """The paired differences as Markdown, one table per split."""
    lines: list[str] = []
    for split, part in result.items():
        ref = part["reference"]
        lines.append(f"### {split} split: against {ref}, question by question (95 % bootstrap)\n")
        lines.append("| method | n | " + " | ".join(f"{k} diff [95 % CI]" for k in PAIRED_METRICS)
                     + " | better / worse (MRR@10) |")  # fmt: skip
        lines.append("|---|---:|" + "---:|" * (len(PAIRED_METRICS) + 1))
        for m, per in part.items():
            if m == "reference":
                continue
            cells = [format_difference(per[k]) for k in PAIRED_METRICS]
            mrr = per["MRR@10"]
            lines.append(f"| {m} | {mrr['n']} | " + " | ".join(cells)
                         + f" | {mrr['better']} / {mrr['worse']} |")  # fmt: skip
        lines.append("")
    return "\n".join(lines)


def _fmt(x: float) -> str:
    return f"{x:.3f}"


def tables(agg: Mapping[str, Any], methods: Sequence[str], repos: Sequence[str]) -> str:
    """Markdown tables: overall and per repository, per split."""
    lines: list[str] = []
    for split, per in agg.items():
        overall = per["overall"]
        n = int(next(iter(overall.values()))["n"]) if overall else 0
        lines.append(f"### {split} split: overall ({n} questions)\n")
        lines.append("| method | " + " | ".join(METRICS) + " | MRR@10 / bm25 |")
        lines.append("|---|" + "---:|" * (len(METRICS) + 1))
        base = overall.get(BASELINE, {}).get("MRR@10", 0.0)
        for m in methods:
            if m not in overall:
                continue
            vals = [_fmt(overall[m][k]) for k in METRICS]
            ratio = f"{overall[m]['MRR@10'] / base:.2f}x" if base else "-"
            lines.append(f"| {m} | " + " | ".join(vals) + f" | {ratio} |")
        lines.append("")
        lines.append(f"### {split} split: MRR@10 / R@10 per repository\n")
        lines.append("| repo | n | " + " | ".join(methods) + " | hybrid / bm25 (MRR@10) |")
        lines.append("|---|---:|" + "---:|" * (len(methods) + 1))
        for repo in repos:
            cells = per.get(repo, {})
            if not cells:
                continue
            n_repo = int(next(iter(cells.values()))["n"])
            vals = [
                f"{_fmt(cells[m]['MRR@10'])} / {_fmt(cells[m]['R@10'])}" if m in cells else "-"
                for m in methods
            ]
            b = cells.get(BASELINE, {}).get("MRR@10", 0.0)
            h = cells.get("hybrid", {}).get("MRR@10")
            ratio = f"{h / b:.2f}x" if b and h is not None else "-"
            lines.append(f"| {repo} | {n_repo} | " + " | ".join(vals) + f" | {ratio} |")
        lines.append("")
        lines.append(f"### {split} split: all metrics per repository\n")
        lines.append("| repo | method | " + " | ".join(METRICS) + " |")
        lines.append("|---|---|" + "---:|" * len(METRICS))
        for repo in repos:
            for m in methods:
                if m in per.get(repo, {}):
                    vals = [_fmt(per[repo][m][k]) for k in METRICS]
                    lines.append(f"| {repo} | {m} | " + " | ".join(vals) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repos", type=Path, default=HERE / "git_eval_repos.toml")
    ap.add_argument("--out", type=Path, default=Path("eval-out/git"))
    ap.add_argument("--repo", action="append", default=[], help="only this repo (repeatable)")
    ap.add_argument("--strategy", action="append", default=[], help=f"[{', '.join(STRATEGIES)}]")
    ap.add_argument("--variant", choices=("subject", "body"), default="subject")
    ap.add_argument("--split", action="append", choices=SPLITS, default=[])
    ap.add_argument(
        "--top-k",
        type=int,
        default=DEFAULT_TOP_K,
        help="hits per ragloom search; files are ranked by first appearance in them",
    )
    ap.add_argument("--markdown", type=Path, help="also write the tables to this file")
    ap.add_argument(
        "--mirror-root",
        type=Path,
        default=Path("/work/.mirror"),
        help="bare git snapshots (git_dir of --repos is relative to it): the history source",
    )
    ap.add_argument(
        "--history",
        choices=("question", "split", "none"),
        default="question",
        help="the commit history ranking sees: as it stood when each question was asked "
        "(an index kept in sync; default), as it stood before the split's oldest question "
        "(an index not synced during the split), or none",
    )
    ap.add_argument(
        "--source-only",
        action="store_true",
        help="score the ranking of library source files only (every other file taken out "
        "before scoring); results go to results-<variant>-source.json",
    )
    args = ap.parse_args(argv)
    specs = load_repo_specs(tomllib.loads(args.repos.read_text(encoding="utf-8")))
    if args.repo:
        specs = [s for s in specs if s.name in args.repo]
    strategies = args.strategy or list(STRATEGIES)
    splits = args.split or list(SPLITS)
    methods = [BASELINE, *strategies]
    repos = [s.name for s in specs]
    all_rows: list[dict[str, Any]] = []
    timing: dict[str, dict[str, float]] = {}
    started = time.perf_counter()
    for spec in specs:
        repo_dir = args.out / spec.name
        t0 = time.perf_counter()
        git_dir = args.mirror_root / spec.git_dir
        history = None if args.history == "none" or not git_dir.is_dir() else (git_dir, spec.commit)
        if history is None and args.history != "none":
            print(
                f"  {spec.name}: no snapshot at {git_dir}: ranked without history", file=sys.stderr
            )
        rows, seconds = eval_repo(
            spec.name, repo_dir, args.variant, strategies, args.top_k, splits, history,
            args.history, args.source_only,
        )  # fmt: skip
        seconds["total"] = time.perf_counter() - t0
        timing[spec.name] = {k: round(v, 1) for k, v in seconds.items()}
        all_rows.extend(rows)
        runs_name = f"runs-{args.variant}{'-source' if args.source_only else ''}.jsonl"
        with (repo_dir / runs_name).open("w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")
        print(f"{spec.name}: {len(rows)} rows in {seconds['total']:.1f} s", file=sys.stderr)
    agg = aggregate(all_rows, methods, repos)
    pairs = paired(all_rows, methods)
    text = tables(agg, methods, repos) + "\n" + paired_lines(pairs)
    print(text)
    errors = {
        m: error_analysis(all_rows, m, "tune")
        for m in (BASELINE, "hybrid")
        if m in methods and "tune" in splits
    }
    for m, e in errors.items():
        print(f"error analysis ({m}, tune): {json.dumps(e, sort_keys=True)}")
    result = {
        "variant": args.variant,
        "top_k": args.top_k,
        "history": args.history,
        "strategies": strategies,
        "repos": {s.name: {"commit": s.commit, "language": s.language} for s in specs},
        "ragloom": _git_state(),
        "seconds": timing,
        "total_seconds": round(time.perf_counter() - started, 1),
        "results": agg,
        "paired": pairs,
        "error_analysis_tune": errors,
    }
    suffix = "-source" if args.source_only else ""
    result["source_only"] = args.source_only
    (args.out / f"results-{args.variant}{suffix}.json").write_text(
        json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    if args.markdown:
        args.markdown.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
