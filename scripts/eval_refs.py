"""Reference agreement of ragloom's code graph with jedi (``ragloom.eval.refs``).

For each ``--repo`` (a Python work tree, ideally at a fixed commit): sample ``--n`` definitions
(functions, methods, classes; dunder methods left out; test and docs code never sampled),
find their references with jedi (the truth, cached under ``--cache``: jedi takes 0.1 to 0.4 s
a symbol) and with ragloom's graph (the repository is indexed first with the
deterministic ``hashing`` embedder, into ``<repo>/.ragloom``), then print precision, recall
and F1 (micro and macro) per repository and overall at two levels: reference lines
``(path, line)`` and callers ``(path, enclosing definition)``. Usage::

    .venv/bin/python scripts/eval_refs.py --repo /tmp/refs_eval/starlette \\
        --repo /tmp/refs_eval/loguru --n 300 --require 0.9,0.9

``--require P,R`` exits 1 unless the overall *callers* micro precision and recall reach P and
R. ``--jedi-only`` runs (and caches) the jedi side alone, e.g. before ragloom has a graph.
``--drop-other-definitions`` leaves out the jedi reference lines that hold only *other*
definitions of the name (overloads, a property's setter, ``obj.attr = ...``), which jedi counts
and ragloom's graph does not. ``--json`` prints one JSON document (settings, scores,
per-symbol disagreements) instead of the tables. ``--rebuild`` re-indexes from scratch (do it
after changing the graph code: an incremental index keeps unchanged files' old references).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragloom.eval.refs import (
    MODULE_SCOPE,
    Agreement,
    LevelScores,
    RefSite,
    SymbolSite,
    callers_of,
    compare,
    jedi_references,
    ragloom_references,
    sample_symbols,
)

LEVELS = ("lines", "callers")
DETAIL_LIMIT = 20
"""Missing and extra references listed per disagreeing symbol in the JSON output."""


def _commit(root: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        out = ""
    return out or "nogit"


def _thresholds(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    try:
        p, r = (float(x) for x in text.split(","))
    except ValueError:
        raise SystemExit(f"--require wants P,R (two numbers), got {text!r}") from None
    return p, r


def _ragloom_side(
    root: Path, sites: Sequence[SymbolSite], min_confidence: float, rebuild: bool
) -> tuple[dict[str, list[RefSite]], dict[str, str], float]:
    import ragloom
    from ragloom.embed.registry import HASHING_SPEC

    started = time.monotonic()
    index = ragloom.open(root, embedder=HASHING_SPEC)
    index.index(rebuild=rebuild, history=False)
    unmatched: dict[str, str] = {}
    refs = ragloom_references(index, sites, min_confidence, unmatched=unmatched)
    return refs, unmatched, time.monotonic() - started


def _attribution(root: Path, predicted: Mapping[str, Sequence[RefSite]]) -> tuple[int, int]:
    """(same, reported): of the ragloom references that name a caller, how many name the same
    enclosing definition as :func:`callers_of` (diagnostic only, not a score)."""
    same = reported = 0
    for refs in predicted.values():
        for r in refs:
            if r.caller is None:
                continue
            reported += 1
            ((_, ours),) = callers_of(root, [r])
            if r.caller == ours or (ours == MODULE_SCOPE and r.caller == MODULE_SCOPE):
                same += 1
    return same, reported


def _disagreements(
    root: Path,
    sites: Sequence[SymbolSite],
    truth: Mapping[str, Sequence[RefSite]],
    predicted: Mapping[str, Sequence[RefSite]],
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for site in sites:
        if site.key not in truth:
            continue
        t = {(r.path, r.line) for r in truth[site.key]}
        p = {(r.path, r.line) for r in predicted.get(site.key, ())}
        if t == p:
            continue
        tc = callers_of(root, truth[site.key])
        pc = callers_of(root, predicted.get(site.key, ()))
        out.append(
            {
                "key": site.key,
                "symbol": site.qualname,
                "kind": site.kind,
                "missing_lines": [f"{a}:{b}" for a, b in sorted(t - p)][:DETAIL_LIMIT],
                "extra_lines": [f"{a}:{b}" for a, b in sorted(p - t)][:DETAIL_LIMIT],
                "missing_callers": [f"{a}:{b}" for a, b in sorted(tc - pc)][:DETAIL_LIMIT],
                "extra_callers": [f"{a}:{b}" for a, b in sorted(pc - tc)][:DETAIL_LIMIT],
            }
        )
    return out


def _row(name: str, level: str, s: LevelScores) -> str:
    return (
        f"{name:<14} {level:<8} {len(s.symbols):>7} {s.truth:>6} {s.predicted:>6} {s.tp:>6}"
        f" {s.precision:>6.3f} {s.recall:>6.3f} {s.f1:>6.3f}"
        f" {s.macro_precision:>7.3f} {s.macro_recall:>7.3f} {s.macro_f1:>7.3f}"
        f" {s.exact:>6} {s.both_empty:>6}"
    )


HEADER = (
    f"{'repo':<14} {'level':<8} {'symbols':>7} {'truth':>6} {'pred':>6} {'tp':>6}"
    f" {'P':>6} {'R':>6} {'F1':>6} {'macroP':>7} {'macroR':>7} {'macroF1':>7}"
    f" {'exact':>6} {'empty':>6}"
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--repo", action="append", required=True, type=Path, help="work tree")
    ap.add_argument("--n", type=int, default=300, help="symbols sampled per repository")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", type=Path, default=Path(".ragloom-eval/refs"), help="jedi cache")
    ap.add_argument("--min-confidence", type=float, default=0.5)
    ap.add_argument("--timeout", type=float, default=60.0, help="jedi seconds per symbol")
    ap.add_argument(
        "--jedi-file-limit",
        type=int,
        default=100_000,
        help="files jedi parses per name (its own default, 30, truncates popular names; "
        "0: keep jedi's)",
    )
    ap.add_argument(
        "--drop-other-definitions",
        action="store_true",
        help="drop jedi's lines holding only other definitions of the name (overloads, "
        "setters, attribute assignments)",
    )
    ap.add_argument("--require", metavar="P,R", help="overall callers precision,recall floor")
    ap.add_argument("--jedi-only", action="store_true", help="run and cache the jedi side only")
    ap.add_argument("--rebuild", action="store_true", help="re-index each repository")
    ap.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = ap.parse_args(argv)
    need = _thresholds(args.require)
    if need is not None and args.jedi_only:
        raise SystemExit("--require needs the ragloom side: drop --jedi-only")

    results: dict[str, Any] = {
        "settings": {
            "n": args.n,
            "seed": args.seed,
            "min_confidence": args.min_confidence,
            "jedi_file_limit": args.jedi_file_limit or None,
            "timeout_s": args.timeout,
            "other_definitions": not args.drop_other_definitions,
        },
        "repos": {},
    }
    parts: list[Agreement] = []
    names: list[str] = []
    for repo in args.repo:
        root = repo.resolve()
        if not root.is_dir():
            raise SystemExit(f"not a directory: {repo}")
        commit = _commit(root)
        sites = sample_symbols(root, args.n, args.seed)
        cache = args.cache / f"{root.name}-{commit[:12]}.json"
        skipped: dict[str, str] = {}
        started = time.monotonic()
        truth = jedi_references(
            root,
            sites,
            cache=cache,
            timeout_s=args.timeout,
            file_limit=args.jedi_file_limit or None,
            skipped=skipped,
            other_definitions=not args.drop_other_definitions,
        )
        jedi_s = time.monotonic() - started
        entry: dict[str, Any] = {
            "path": str(root),
            "commit": commit,
            "sampled": len(sites),
            "kinds": {
                k: sum(1 for s in sites if s.kind == k) for k in ("function", "method", "class")
            },
            "jedi_seconds": round(jedi_s, 1),
            "jedi_skipped": skipped,
            "jedi_references": sum(len(v) for v in truth.values()),
            "jedi_empty": sum(1 for v in truth.values() if not v),
        }
        results["repos"][root.name] = entry
        if not args.json:
            print(
                f"{root.name} @ {commit[:12]}: {len(sites)} symbols, jedi {jedi_s:.1f} s"
                f" ({len(skipped)} skipped, {entry['jedi_references']} reference lines,"
                f" {entry['jedi_empty']} symbols without references)",
                file=sys.stderr,
            )
        if args.jedi_only:
            continue
        predicted, unmatched, ragloom_s = _ragloom_side(
            root, sites, args.min_confidence, args.rebuild
        )
        agreement = compare(truth, predicted, root)
        same, reported = _attribution(root, predicted)
        entry.update(
            {
                "ragloom_seconds": round(ragloom_s, 1),
                "ragloom_unmatched": unmatched,
                "caller_attribution": {"same": same, "reported": reported},
                "scores": agreement.as_dict(),
                "disagreements": _disagreements(root, sites, truth, predicted),
            }
        )
        parts.append(agreement)
        names.append(root.name)
        if not args.json:
            print(
                f"{root.name}: ragloom {ragloom_s:.1f} s, {len(unmatched)} sites without a "
                f"matching definition, caller attribution {same}/{reported}",
                file=sys.stderr,
            )

    ok = True
    if parts:
        overall = Agreement.combine(parts, names)
        results["overall"] = overall.as_dict()
        if need is not None:
            p, r = overall.callers.precision, overall.callers.recall
            ok = p >= need[0] and r >= need[1]
            results["require"] = {"precision": need[0], "recall": need[1], "met": ok}
        if not args.json:
            print(HEADER)
            for name, a in [*zip(names, parts, strict=True), ("overall", overall)]:
                for level in LEVELS:
                    print(_row(name, level, getattr(a, level)))
            if need is not None:
                print(f"require callers P>={need[0]} R>={need[1]}: {'met' if ok else 'NOT met'}")
    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
