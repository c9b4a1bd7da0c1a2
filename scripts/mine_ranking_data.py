"""Mine the learned ranking stage's training data from outside repositories' history (issue 22).

    python scripts/mine_ranking_data.py [--repo NAME ...] [--questions 40] [--out eval-out/ltr]

For each repository of scripts/ltr_repos.toml (mirrors under --mirror-root, as `fetch` brings
them): the newest qualifying commits are the questions, each asked at its parent commit with the
hand-set hybrid (ragloom.eval.mining). Writes OUT/questions-<owner+name>.jsonl (the questions,
byte-reproducible), OUT/groups-<owner+name>.jsonl (one group per question: candidates' features,
paths, labels) and OUT/meta.json (the feature set). --resume skips the groups already written
(and goes on in the work tree it left); without it each repository starts from a fresh work tree.
Embeddings are cached by text in OUT/embeddings.sqlite, so a rerun embeds nothing.

--lookups (or --lookups-only) also writes OUT/lookups-<owner+name>.jsonl for each Python
repository without a `before`: docstring look-up questions asked at the parent of its newest
train question, without and with history (ragloom.eval.mining.mine_lookups), mined afresh.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
import tomllib
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TextIO

from ragloom.embed.registry import load_embedder
from ragloom.eval.mining import (
    DEFAULT_QUESTIONS,
    feature_header,
    load_mining_specs,
    lookup_commit,
    mine_lookups,
    mine_questions,
    mine_repo,
)
from ragloom.eval.swebench import EmbeddingCache
from ragloom.retrieve.stages.features import FEATURES_VERSION

ROOT = Path(__file__).resolve().parent.parent


def _jsonl_writer(fh: TextIO) -> Callable[[dict[str, Any]], None]:
    """Write each group as one JSON line (sorted keys) to ``fh``, flushed at once (a killed run
    keeps what it wrote, for --resume)."""

    def write(group: dict[str, Any]) -> None:
        fh.write(json.dumps(group, sort_keys=True, ensure_ascii=False) + "\n")
        fh.flush()

    return write


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repos", type=Path, default=ROOT / "scripts" / "ltr_repos.toml")
    ap.add_argument("--mirror-root", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--out", type=Path, default=Path("eval-out/ltr"))
    ap.add_argument("--repo", action="append", default=[], help="only this one (repeatable)")
    ap.add_argument(
        "--questions",
        type=int,
        default=DEFAULT_QUESTIONS,
        help="questions per repository (unless it says)",
    )
    ap.add_argument("--questions-only", action="store_true", help="write the questions only")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument(
        "--lookups",
        action="store_true",
        help="also mine look-up groups (lookups-OWNER+NAME.jsonl) of the Python repositories "
        "without a `before` (those of the commit evaluation have their own look-up evaluation)",
    )
    ap.add_argument(
        "--no-history",
        action="store_true",
        help="also ask each commit question with the history detached: "
        "nohistory-OWNER+NAME.jsonl (not with --resume)",
    )
    ap.add_argument(
        "--lookups-only",
        action="store_true",
        help="mine the look-up groups only (implies --lookups)",
    )
    args = ap.parse_args(argv)

    specs = load_mining_specs(tomllib.loads(args.repos.read_text(encoding="utf-8")))
    if args.repo:
        want = {r.lower() for r in args.repo}
        specs = [s for s in specs if s.repo.lower() in want or s.repo.split("/")[1] in want]
        if not specs:
            print(f"no repository of {args.repos} matches {args.repo}", file=sys.stderr)
            return 2
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "meta.json").write_text(
        json.dumps(feature_header(), indent=1, sort_keys=True) + "\n", encoding="utf-8"
    )
    embedder = None
    t_all = time.perf_counter()

    def progress(message: str) -> None:
        print(f"[{time.perf_counter() - t_all:7.0f}s] {message}", flush=True)

    for spec in specs:
        stem = spec.repo.replace("/", "+")
        qs = mine_questions(spec, args.mirror_root, max_questions=spec.questions or args.questions)
        lines = [
            json.dumps(
                {
                    "commit": q.commit,
                    "gold_files": list(q.gold_files),
                    "id": q.id,
                    "parent": q.parent,
                    "query": q.query,
                    "repo": q.repo,
                    "split": q.split,
                    "timestamp": q.timestamp,
                },
                sort_keys=True,
                ensure_ascii=False,
            )
            for q in qs
        ]
        (args.out / f"questions-{stem}.jsonl").write_text(
            "".join(line + "\n" for line in lines), encoding="utf-8"
        )
        print(f"== {spec.repo}: {len(qs)} questions", flush=True)
        if args.questions_only:
            continue
        if embedder is None:
            embedder = EmbeddingCache(load_embedder(None), args.out / "embeddings.sqlite")
        if (args.lookups or args.lookups_only) and spec.language == "python" and not spec.before:
            commit = lookup_commit(qs)
            out = args.out / f"lookups-{stem}.jsonl"
            out.unlink(missing_ok=True)
            for old in ("lookup-tree", "lookups", "lookup-history"):
                shutil.rmtree(args.out / "work" / f"{stem}-{old}", ignore_errors=True)
            if commit is not None:
                with out.open("a", encoding="utf-8") as fh:
                    n = mine_lookups(
                        spec,
                        commit,
                        mirror_root=args.mirror_root,
                        work_dir=args.out / "work",
                        embedder=embedder,
                        on_group=_jsonl_writer(fh),
                        progress=progress,
                    )
                print(f"   {out.name}: {n} look-up groups", flush=True)
        if args.lookups_only:
            continue
        groups = args.out / f"groups-{stem}.jsonl"
        done: set[str] = set()
        if args.resume and groups.exists():
            kept = [json.loads(x) for x in groups.read_text("utf-8").splitlines() if x]
            if any(g.get("features") != FEATURES_VERSION for g in kept):
                # mined with another feature set: those rows cannot be trained on with these
                print(f"   {groups.name}: another feature set, mined again", flush=True)
            else:
                done = {g["id"] for g in kept}
        if not done:
            # mined from the start, in a fresh work tree: one left by an earlier (killed or
            # trial) run holds an index the incremental indexing would build on
            groups.unlink(missing_ok=True)
            shutil.rmtree(args.out / "work" / stem, ignore_errors=True)
        plain = args.out / f"nohistory-{stem}.jsonl"
        plain.unlink(missing_ok=True)
        if args.no_history and done:
            print("   --no-history needs every question asked again: not with --resume")
            return 2
        with ExitStack() as files:
            fh = files.enter_context(groups.open("a", encoding="utf-8"))
            ph = files.enter_context(plain.open("w", encoding="utf-8")) if args.no_history else None
            mine_repo(
                spec,
                qs,
                mirror_root=args.mirror_root,
                work_dir=args.out / "work",
                embedder=embedder,
                on_group=_jsonl_writer(fh),
                done=done,
                progress=progress,
                on_no_history=_jsonl_writer(ph) if ph is not None else None,
            )
    if embedder is not None:
        embedder.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
