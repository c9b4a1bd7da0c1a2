"""Build the git-history evaluation datasets (docs/evaluation-git.md).

For every repository of the list (default scripts/git_eval_repos.toml) writes OUT/<name>/:
corpus/ (the tree of the pinned commit), questions.jsonl (subject-line questions, both splits),
questions-body.jsonl (subject + first body paragraph), tune.jsonl, test.jsonl and meta.json.
Running it twice gives byte-identical files. Usage::

    .venv/bin/python scripts/build_git_eval.py --out eval-out/git
    .venv/bin/python scripts/build_git_eval.py --out eval-out/git --repo chi --max-questions 50
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tomllib
from pathlib import Path

from ragloom.errors import RagError
from ragloom.eval.gitdata import (
    DEFAULT_MAX_QUESTIONS,
    DEFAULT_TUNE_SHARE,
    build_repo,
    load_repo_specs,
    summary_lines,
)

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repos", type=Path, default=HERE / "git_eval_repos.toml", help="repo list")
    ap.add_argument("--out", type=Path, default=Path("eval-out/git"), help="output folder")
    ap.add_argument("--mirror-root", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--repo", action="append", default=[], help="only this repo (repeatable)")
    ap.add_argument("--max-questions", type=int, default=DEFAULT_MAX_QUESTIONS)
    ap.add_argument("--tune-share", type=float, default=DEFAULT_TUNE_SHARE)
    ap.add_argument("--force-extract", action="store_true", help="re-extract every corpus")
    ap.add_argument("--json", action="store_true", help="print the builds as JSON")
    args = ap.parse_args(argv)
    try:
        specs = load_repo_specs(tomllib.loads(args.repos.read_text(encoding="utf-8")))
        if args.repo:
            unknown = set(args.repo) - {s.name for s in specs}
            if unknown:
                ap.error(f"unknown repo(s): {', '.join(sorted(unknown))}")
            specs = [s for s in specs if s.name in args.repo]
        builds = []
        for spec in specs:
            t0 = time.perf_counter()
            b = build_repo(
                spec,
                args.out,
                args.mirror_root,
                max_questions=args.max_questions,
                tune_share=args.tune_share,
                force_extract=args.force_extract,
            )
            builds.append(b)
            print(
                f"{spec.name}: {b.tune} tune + {b.test} test questions "
                f"({'extracted' if b.extracted else 'corpus kept'}, "
                f"{time.perf_counter() - t0:.1f} s)",
                file=sys.stderr,
            )
    except (RagError, OSError, tomllib.TOMLDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([b.to_dict() for b in builds], indent=2, sort_keys=True))
    else:
        print("\n".join(summary_lines(builds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
