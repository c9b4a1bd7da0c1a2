"""SWE-bench issue localisation (docs/evaluation.md, "SWE-bench localisation").

    python scripts/eval_swebench.py build --data swebench_verified.jsonl --reserved swebench_lite.jsonl
    python scripts/eval_swebench.py run [--repo sympy/sympy] [--strategy hybrid ...]
    python scripts/eval_swebench.py report --split test --markdown eval-out/swebench/test.md

``make eval-swebench`` runs all three on the mirrors under ``MIRROR`` (default /work/.mirror),
taking the data from the ``ITMO-NSS-team/chronorepo_icdm26`` mirror at the pinned commit.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ragloom.eval.stats import format_difference, paired_by_id
from ragloom.eval.swebench import (
    BUDGETS,
    EmbeddingCache,
    build_questions,
    dump_questions,
    load_instances,
    load_questions,
    protocol_gold,
    reserved_ids,
    run_repo,
    summarize,
)
from ragloom.retrieve.stages.base import ISSUE_WEIGHTS, IssueWeights

DATA_REPO = "ITMO-NSS-team/chronorepo_icdm26"
DATA_COMMIT = "ff6efadabca2f2930ffae9001c7e42f073413c12"
DEFAULT_STRATEGIES = ("sparse", "dense", "hybrid+seed", "hybrid+no-issue", "hybrid")
"""``hybrid+no-issue`` is the previous default (no issue-text step)."""
METRICS = (
    "file_acc@1",
    "file_acc@3",
    "file_acc@5",
    "file_acc@10",
    "file_mrr@10",
    "fn_acc@5",
    "fn_acc@10",
    *(f"ctx@{b // 1000}k" for b in BUDGETS),
)


def _data_file(mirror_root: Path, name: str, out: Path) -> Path:
    """``data/<name>`` of the pinned data commit, copied out of its mirror."""
    git_dir = mirror_root / DATA_REPO.replace("/", "+") / "repo"
    text = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{DATA_COMMIT}:data/{name}"],
        capture_output=True,
        check=True,
    ).stdout
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(text)
    return out


def cmd_build(args: argparse.Namespace) -> int:
    out: Path = args.out
    data = args.data or _data_file(args.mirror_root, "swebench_verified.jsonl", out / "data.jsonl")
    lite = args.reserved or _data_file(
        args.mirror_root, "swebench_lite.jsonl", out / "reserved.jsonl"
    )
    reserved = reserved_ids(lite)
    if args.reserved is None:
        # only the ids are kept: the reserved instances' texts never stay on disk
        lite.write_text("".join(f"{i}\n" for i in sorted(reserved)), encoding="utf-8")
    skipped: list[str] = []
    instances = load_instances(data)
    if args.data is None:
        data.unlink()  # the copy holds the reserved instances' texts too: keep none of it
    qs = build_questions(
        instances,
        args.mirror_root,
        reserved,
        on_missing=lambda i, why: skipped.append(f"{i}: {why}"),
    )
    n = dump_questions(qs, out / "questions.jsonl")
    repos: dict[str, list[int]] = {}
    for q in qs:
        repos.setdefault(q.repo, [0, 0])[q.split == "test"] += 1
    print(f"{n} questions -> {out / 'questions.jsonl'} (reserved ids: {len(reserved)})")
    for repo, (tune, test) in sorted(repos.items()):
        print(f"  {repo}: {tune} tune, {test} test")
    if skipped:
        print(f"  skipped {len(skipped)} (no mirror or commit); first: {skipped[0]}")
    return 0


def issue_grid() -> dict[str, tuple[str, IssueWeights]]:
    """The variants the issue reading was chosen from (docs/ranking.md, "Issue texts"): the
    previous default, the query side alone, the title's intent, the history profile, and the
    bonus of the names an issue gives."""
    base = IssueWeights(path=0.0, symbol=0.0, history="auto", title_intent=False)
    grid: dict[str, tuple[str, IssueWeights]] = {
        "prev": ("hybrid+no-issue", ISSUE_WEIGHTS),
        "seed-noissue": ("hybrid+seed+no-issue", ISSUE_WEIGHTS),
        "seed-issue": ("hybrid+seed", ISSUE_WEIGHTS),
        "q": ("hybrid", base),
        "q-noroles": ("hybrid+no-roles", base),
    }
    for hist in ("auto", "changes", "lookup", "off"):
        for title in (False, True):
            grid[f"h={hist},t={int(title)}"] = (
                "hybrid",
                replace(base, history=hist, title_intent=title),
            )
    for hist in ("auto", "off"):
        for path in (0.0, 1.0, 2.0):
            for sym in (0.0, 1.0):
                if path or sym:
                    grid[f"h={hist},t=1,p={path:g},s={sym:g}"] = (
                        "hybrid",
                        replace(base, history=hist, title_intent=True, path=path, symbol=sym),
                    )
    # around the default: file evidence for issues, the names' RRF k and weights, more names
    grid["d"] = ("hybrid", ISSUE_WEIGHTS)
    for fe in (0.25, 0.5, 1.0):
        grid[f"d:fe={fe:g}"] = ("hybrid", replace(ISSUE_WEIGHTS, file_evidence=fe))
    grid["d:k=5"] = ("hybrid", replace(ISSUE_WEIGHTS, k=5.0))
    grid["d:p=2,s=2"] = ("hybrid", replace(ISSUE_WEIGHTS, path=2.0, symbol=2.0))
    grid["d:n=16"] = ("hybrid", replace(ISSUE_WEIGHTS, max_names=16))
    return grid


def candidates() -> dict[str, tuple[str, IssueWeights]]:
    """The defaults the choice on the tune half was made among, asked with context recall on
    every question (so the chosen one's held-back figures come from the same walk)."""
    base = replace(ISSUE_WEIGHTS, title_intent=True, path=1.0, symbol=1.0)
    return {
        "cand:h=changes,p=1,s=1": ("hybrid", replace(base, history="changes")),
        "cand:h=auto,p=1,s=1": ("hybrid", replace(base, history="auto")),
        "cand:h=off,p=1,s=1": ("hybrid", replace(base, history="off")),
        "cand:h=lookup,p=1,s=1": ("hybrid", replace(base, history="lookup")),
        "cand:h=auto,p=0,s=0": ("hybrid", replace(base, history="auto", path=0.0, symbol=0.0)),
    }


def cmd_run(args: argparse.Namespace) -> int:
    from ragloom.embed.registry import load_embedder

    qs = load_questions(args.out / "questions.jsonl")
    if args.split != "all":
        qs = [q for q in qs if q.split == args.split]
    repos = sorted({q.repo for q in qs})
    if args.repo:
        repos = [r for r in repos if r in args.repo or r.split("/")[1] in args.repo]
    strategies = args.strategy or list(DEFAULT_STRATEGIES)
    cache = EmbeddingCache(load_embedder(None), args.out / "embeddings.sqlite")
    results = args.out / (args.results or "results.jsonl")
    t0 = time.perf_counter()
    for repo in repos:
        mine = [q for q in qs if q.repo == repo]
        if args.limit:
            mine = sorted(mine, key=lambda q: q.time)[: args.limit]
        path = results.with_name(f"{results.stem}-{repo.replace('/', '+')}.jsonl")
        if args.resume and path.exists():
            done = {json.loads(line)["id"] for line in path.read_text().splitlines() if line}
            mine = [q for q in mine if q.id not in done]
        with path.open("a" if args.resume else "w", encoding="utf-8") as fh:

            def write(row: dict[str, object], fh: object = fh) -> None:
                fh.write(json.dumps(row, sort_keys=True) + "\n")  # type: ignore[attr-defined]
                fh.flush()  # type: ignore[attr-defined]

            run_repo(
                mine,
                mirror_root=args.mirror_root,
                work_dir=args.work or args.out / "work",
                strategies=[] if args.grid or args.only_candidates else strategies,
                variants=issue_grid() if args.grid else None,
                candidates=candidates() if args.candidates or args.only_candidates else None,
                embedder=cache,
                budgets=() if args.no_context else BUDGETS,
                baseline=not args.no_baseline,
                structure=args.structure or (),
                on_result=write,
                progress=lambda s: print(
                    f"[{time.perf_counter() - t0:7.0f}s] {s} (cache {cache.hits} hit, "
                    f"{cache.misses} embedded)",
                    flush=True,
                ),
            )
    cache.close()
    return 0


def _load_rows(out: Path, stem: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for path in sorted(out.glob(f"{stem}-*.jsonl")):
        rows.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return rows


def _merged_rows(out: Path, stems: Sequence[str]) -> list[dict[str, object]]:
    """The rows of several runs; a question asked in two runs counts once (the first)."""
    rows: list[dict[str, object]] = []
    seen: set[tuple[object, object, object]] = set()
    for stem in stems:
        for row in _load_rows(out, Path(stem).stem):
            key = (row["id"], row["method"], row["protocol"])
            if key not in seen:
                seen.add(key)
                rows.append(row)
    return rows


def _table(summary: dict[str, dict[str, float]], protocol: str, methods: Sequence[str]) -> str:
    head = "| method | n | " + " | ".join(METRICS) + " |"
    lines = [head, "|---|---:|" + "---:|" * len(METRICS)]
    for m in methods:
        s = summary.get(f"{m}|{protocol}")
        if s is None:
            continue
        cells = [f"{100 * s[k]:.1f}" if k in s else "-" for k in METRICS]
        lines.append(f"| {LABELS.get(m, m)} | {int(s['n'])} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


PAIRED = (("hybrid", "hybrid+handset"), ("hybrid+no-history", "hybrid+handset+no-history"))
"""(method, reference) pairs compared question by question when a run has both."""
PAIRED_METRICS = ("file_acc@1", "file_mrr@10")


def _paired_table(rows: Sequence[Mapping[str, Any]], protocol: str) -> str:
    """Each pair of :data:`PAIRED` present in ``rows``: the difference of the method and its
    reference on the questions both answered, with a 95 % paired bootstrap interval."""
    by: dict[str, dict[str, Mapping[str, Any]]] = {}
    for r in rows:
        if r["protocol"] == protocol:
            by.setdefault(str(r["method"]), {})[str(r["id"])] = r["metrics"]
    lines: list[str] = []
    for method, ref in PAIRED:
        if method not in by or ref not in by:
            continue
        ids = sorted(set(by[method]) & set(by[ref]))
        cells = []
        for k in PAIRED_METRICS:
            d = paired_by_id(
                {i: by[method][i].get(k) for i in ids}, {i: by[ref][i].get(k) for i in ids}
            )
            cells.append(format_difference(d.as_dict(), scale=100, digits=1) if d else "-")
        lines.append(f"| {method} - {ref} | {len(ids)} | " + " | ".join(cells) + " |")
    if not lines:
        return ""
    head = "| method - reference | n | " + " | ".join(f"{k} diff [95 % CI]" for k in PAIRED_METRICS)
    return "\n".join(
        [
            "\nQuestion by question (95 % paired bootstrap over the questions):\n",
            head + " |",
            "|---|---:|" + "---:|" * len(PAIRED_METRICS),
            *lines,
        ]
    )


DEFAULT_CANDIDATE = "cand:h=lookup,p=1,s=1"
"""The candidate chosen on the tune half: ``ISSUE_WEIGHTS``, the default ``hybrid``."""
LABELS = {
    "bm25": "bm25 (function-level, papers' protocol)",
    "hybrid+no-issue": "previous default (hybrid+no-issue)",
    "hybrid": "default (hybrid)",
    DEFAULT_CANDIDATE: "default (hybrid)",
}
MAIN_METHODS = (
    "bm25",
    "sparse",
    "dense",
    "hybrid+seed",
    "hybrid+no-issue",
    DEFAULT_CANDIDATE,
    "hybrid",
)


def cmd_report(args: argparse.Namespace) -> int:
    rows = _merged_rows(args.out, args.results or ["results.jsonl"])
    if args.split != "all":
        rows = [r for r in rows if r["split"] == args.split]
    methods = list(dict.fromkeys(str(r["method"]) for r in rows))
    wanted = list(MAIN_METHODS) if args.main else args.method
    if wanted:
        methods = [m for m in wanted if m in methods]
    rows = [r for r in rows if r["method"] in methods]
    title = f"SWE-bench localisation, split {args.split}"
    if args.one_file:
        # SWE-bench Lite keeps instances whose patch edits one file: the comparable subset
        qs = {q.id: q for q in load_questions(args.out / "questions.jsonl")}
        rows = [r for r in rows if len(protocol_gold(qs[str(r["id"])], "papers")) == 1]
        title += ", questions whose patch edits one non-test .py file"
    repos = sorted({str(r["repo"]) for r in rows})
    parts = [f"{title} ({len({r['id'] for r in rows})} questions)"]
    for protocol in ("papers", "product"):
        parts.append(f"\n### {protocol} protocol, all repositories\n")
        parts.append(
            _table(summarize(r for r in rows if r["protocol"] == protocol), protocol, methods)
        )
        paired = _paired_table(rows, protocol)
        if paired:
            parts.append(paired)
        for repo in repos:
            mine = [r for r in rows if r["protocol"] == protocol and r["repo"] == repo]
            parts.append(f"\n#### {repo} ({protocol})\n")
            parts.append(_table(summarize(mine), protocol, methods))
    text = "\n".join(parts) + "\n"
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(text, encoding="utf-8")
    print(text)
    return 0


TUNE_METRICS = ("file_acc@1", "file_acc@5", "file_mrr@10")


def cmd_tune_report(args: argparse.Namespace) -> int:
    """The grid and candidates on the tune split, best first by the mean of file Acc@1, Acc@5
    and MRR@10 under both protocols (the choice rule of docs/ranking.md, "Issue texts")."""
    rows = [
        r for r in _merged_rows(args.out, args.results or ["tune.jsonl"]) if r["split"] == "tune"
    ]
    summary = summarize(rows)
    methods = list(dict.fromkeys(str(r["method"]) for r in rows))
    scored = []
    for m in methods:
        cells = [
            100 * summary.get(f"{m}|{p}", {}).get(k, 0.0)
            for p in ("papers", "product")
            for k in TUNE_METRICS
        ]
        scored.append((sum(cells) / len(cells), m, cells))
    n = len({r["id"] for r in rows})
    head = " | ".join(f"{p} {k}" for p in ("papers", "product") for k in TUNE_METRICS)
    lines = [
        f"tune split, {n} questions",
        "",
        f"| variant | {head} | mean |",
        "|---|" + "---:|" * 7,
    ]
    for mean, m, cells in sorted(scored, key=lambda t: (-t[0], t[1])):
        lines.append(f"| {m} | " + " | ".join(f"{c:.1f}" for c in cells) + f" | {mean:.1f} |")
    print("\n".join(lines))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("eval-out/swebench"))
    ap.add_argument("--mirror-root", type=Path, default=Path("/work/.mirror"))
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="questions and gold from a SWE-bench file and the mirrors")
    b.add_argument("--data", type=Path, help="SWE-bench-format file (default: the pinned one)")
    b.add_argument("--reserved", type=Path, help="file whose instance ids are never used")
    r = sub.add_parser("run", help="index each base commit and ask every method")
    r.add_argument("--repo", action="append", help="only this repository (repeatable)")
    r.add_argument("--strategy", action="append", help="ragloom strategy (repeatable)")
    r.add_argument("--split", choices=("tune", "test", "all"), default="all")
    r.add_argument("--limit", type=int, default=0, help="first N questions per repository")
    r.add_argument("--results", help="results file stem (default results.jsonl)")
    r.add_argument("--no-context", action="store_true", help="skip context recall")
    r.add_argument("--no-baseline", action="store_true", help="skip the BM25 baseline")
    r.add_argument("--work", type=Path, help="work trees folder (default OUT/work)")
    r.add_argument("--grid", action="store_true", help="the issue-reading tuning grid only")
    r.add_argument("--resume", action="store_true", help="skip questions already in the results")
    r.add_argument("--candidates", action="store_true", help="ask the candidate defaults too")
    r.add_argument("--only-candidates", action="store_true", help="ask only the candidates")
    r.add_argument(
        "--structure",
        action="append",
        choices=("signatures", "bodies"),
        help="also assemble each strategy's contexts with structural context (repeatable)",
    )
    p = sub.add_parser("report", help="tables of a run")
    p.add_argument("--split", choices=("tune", "test", "all"), default="test")
    p.add_argument("--results", action="append", help="results file stem (repeatable)")
    p.add_argument("--markdown", type=Path)
    p.add_argument("--method", action="append", help="only these methods, in this order")
    p.add_argument("--main", action="store_true", help="the methods of docs/evaluation.md")
    p.add_argument(
        "--one-file", action="store_true", help="only questions with one gold file (as in Lite)"
    )
    t = sub.add_parser("tune-report", help="the tuning grid on the tune split, best first")
    t.add_argument("--results", action="append", help="results file stem (repeatable)")
    args = ap.parse_args(argv)
    cmds = {
        "build": cmd_build,
        "run": cmd_run,
        "report": cmd_report,
        "tune-report": cmd_tune_report,
    }
    return cmds[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
