"""Build and score the large symbol-level docstring sets (docs/evaluation-symbols.md).

Subcommands (SET is sym10k, sym50k or all; OUT defaults to eval-out/symbols)::

    build    [--set SET] [--out OUT]   OUT/SET/corpus/, queries.jsonl, tune.jsonl, test.jsonl,
                                       meta.json (byte-identical on every run)
    baseline [--set SET] [--out OUT]   plain BM25 over OUT/SET/index's chunks -> runs-bm25.jsonl
    score    [--set SET] [--out OUT]   every OUT/SET/runs-*.jsonl scored per split -> scores.json
                                       and Markdown tables on stdout
    analyze  [--set SET] [--out OUT]   what ranks above the gold function on the tune half
                                       -> errors.json and a Markdown table on stdout

The index and the ragloom runs come from the CLI (see the doc)::

    ragloom index OUT/SET/corpus --index-dir OUT/SET/index
    ragloom eval --dataset OUT/SET/queries.jsonl --index-dir OUT/SET/index -k 10 --no-assembly \\
        --strategy sparse --strategy dense --strategy hybrid --strategy hybrid+seed \\
        --strategy hybrid+raw --runs-out OUT/SET/runs-ragloom.jsonl --json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ragloom.errors import RagError
from ragloom.eval.dataset import load_dataset
from ragloom.eval.symbolset import (
    ERROR_CATEGORIES,
    REPORT_METRICS,
    SETS,
    analyze_errors,
    bm25_runs,
    build_symbol_set,
    score_run_file,
)

STRATEGY_ORDER = ("bm25-baseline", "sparse", "dense", "hybrid", "hybrid+seed", "hybrid+raw")


def _sets(name: str) -> list[str]:
    return list(SETS) if name == "all" else [name]


def cmd_build(out: Path, name: str) -> None:
    entries, minimum = SETS[name]
    t0 = time.perf_counter()
    built = build_symbol_set(out / name, entries, name=name, min_functions=minimum)
    secs = time.perf_counter() - t0
    meta = built.to_dict()
    print(
        f"{name}: {meta['files']} files ({meta['test_files']} test), {meta['functions']} "
        f"functions ({meta['test_functions']} in test code), {meta['candidates']} candidates, "
        f"dropped {meta['dropped']}, {meta['queries']} queries "
        f"(tune {meta['tune']}, test {meta['test']}) in {secs:.1f} s -> {out / name}"
    )


def cmd_baseline(out: Path, name: str) -> None:
    base = out / name
    t0 = time.perf_counter()
    n = bm25_runs(base / "index", load_dataset(base / "queries.jsonl"), base / "runs-bm25.jsonl")
    print(f"{name}: bm25 baseline, {n} queries in {time.perf_counter() - t0:.1f} s")


def _fmt_table(scores: dict[str, dict[str, dict[str, float]]], split: str) -> list[str]:
    labels = [label for _, label in REPORT_METRICS]
    lines = [
        "| strategy | " + " | ".join(labels) + " |",
        "|---|" + "---:|" * len(labels),
    ]
    order = [s for s in STRATEGY_ORDER if s in scores] + sorted(
        s for s in scores if s not in STRATEGY_ORDER
    )
    for strategy in order:
        row = scores[strategy].get(split)
        if row is None:
            continue
        cells = [f"{row[key]:.3f}" for key, _ in REPORT_METRICS]
        lines.append(f"| {strategy} | " + " | ".join(cells) + " |")
    return lines


def cmd_score(out: Path, name: str) -> None:
    base = out / name
    merged: dict[str, dict[str, dict[str, float]]] = {}
    for runs in sorted(base.glob("runs-*.jsonl")):
        merged.update(score_run_file(base / "queries.jsonl", runs))
    (base / "scores.json").write_text(json.dumps(merged, indent=1) + "\n", encoding="utf-8")
    for split in ("tune", "test"):
        n = next(iter(merged.values()))[split]["queries"] if merged else 0
        print(f"\n{name}, {split} half ({int(n)} queries):\n")
        print("\n".join(_fmt_table(merged, split)))


def cmd_analyze(out: Path, name: str) -> None:
    base = out / name
    stats: dict[str, dict[str, object]] = {}
    for runs in sorted(base.glob("runs-*.jsonl")):
        for strategy, rec in analyze_errors(
            base / "queries.jsonl", runs, base / "index", split="tune"
        ).items():
            stats[strategy] = rec.to_dict()
    (base / "errors.json").write_text(json.dumps(stats, indent=1) + "\n", encoding="utf-8")
    order = [s for s in STRATEGY_ORDER if s in stats]
    print(f"\n{name}, tune half: hits ranked above the gold function (top 10)\n")
    print("| | " + " | ".join(order) + " |")
    print("|---|" + "---:|" * len(order))
    rank_keys = ["1", "2-5", "6-10", "miss, gold file found", "miss, gold file missed"]
    for key in rank_keys:
        cells = [str(dict(stats[s]["rank"]).get(key, 0)) for s in order]  # type: ignore[call-overload]
        print(f"| gold at rank {key} | " + " | ".join(cells) + " |")
    for cat in ERROR_CATEGORIES:
        cells = [str(dict(stats[s]["above"]).get(cat, 0)) for s in order]  # type: ignore[call-overload]
        print(f"| above gold: {cat} | " + " | ".join(cells) + " |")
    for cat in ERROR_CATEGORIES:
        cells = [str(dict(stats[s]["above_mentioning"]).get(cat, 0)) for s in order]  # type: ignore[call-overload]
        print(f"| above gold, naming the gold function: {cat} | " + " | ".join(cells) + " |")
    for cat in ERROR_CATEGORIES:
        cells = [str(dict(stats[s]["top1"]).get(cat, 0)) for s in order]  # type: ignore[call-overload]
        print(f"| rank 1 (not gold): {cat} | " + " | ".join(cells) + " |")
    cells = [str(stats[s]["no_gold_chunk"]) for s in order]
    print("| gold function without its own chunk | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("command", choices=("build", "baseline", "score", "analyze"))
    ap.add_argument("--set", default="all", choices=(*SETS, "all"))
    ap.add_argument("--out", type=Path, default=Path("eval-out/symbols"))
    args = ap.parse_args(argv)
    fn = {
        "build": cmd_build,
        "baseline": cmd_baseline,
        "score": cmd_score,
        "analyze": cmd_analyze,
    }[args.command]
    try:
        for name in _sets(args.set):
            fn(args.out, name)
    except RagError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
