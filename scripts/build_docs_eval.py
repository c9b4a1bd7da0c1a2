"""Build a documentation-question dataset from a repository's Markdown headings.

Each Markdown section heading (``##`` to ``####``) of 3 to 12 words becomes a question, its
file the gold: "how the default ranks a section whose title the user typed". A heading found
in more than one file is left out (its gold would be ambiguous), as are files under
``node_modules`` and the index folder, and changelogs (their headings are version numbers).
The output is the JSON Lines format ``ragloom eval --dataset`` reads (``id``, ``query``,
``gold_files``). Usage (docs/evaluation.md, "Documentation questions")::

    .venv/bin/python scripts/build_docs_eval.py eval-out/git-det/starlette/corpus \\
        --out eval-out/docs/starlette.jsonl --limit 60
    .venv/bin/ragloom eval --dataset eval-out/docs/starlette.jsonl \\
        --index-dir eval-out/git-det/starlette/corpus/.ragloom --strategy hybrid \\
        --strategy hybrid+handset --no-assembly --json
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

HEADING = re.compile(r"^(#{2,4})\s+(.+?)\s*#*\s*$")
SKIP_PARTS = {"node_modules", ".ragloom", ".git"}
SKIP_NAMES = {"changelog.md", "changes.md", "history.md", "release-notes.md"}
SEED = 20261128


def headings(root: Path) -> dict[str, set[str]]:
    """Heading text -> the files (relative, ``/``) holding it."""
    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.md")):
        rel = path.relative_to(root)
        if SKIP_PARTS & set(rel.parts) or path.name.lower() in SKIP_NAMES:
            continue
        fence = False
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lstrip().startswith("```"):
                fence = not fence
                continue
            m = None if fence else HEADING.match(line)
            if m is None:
                continue
            text = re.sub(r"[`*_\[\]()]", " ", m.group(2))
            text = " ".join(text.split())
            if 3 <= len(text.split()) <= 12:
                found.setdefault(text, set()).add(rel.as_posix())
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path, help="the repository's work tree")
    ap.add_argument("--out", type=Path, required=True, help="the dataset (JSON Lines)")
    ap.add_argument("--limit", type=int, default=60, help="questions at most (a seeded sample)")
    args = ap.parse_args(argv)
    found = headings(args.root)
    rows = sorted((text, next(iter(files))) for text, files in found.items() if len(files) == 1)
    random.Random(SEED).shuffle(rows)
    rows = sorted(rows[: args.limit])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as fh:
        for i, (text, path) in enumerate(rows):
            fh.write(json.dumps({"id": f"doc-{i:03d}", "query": text, "gold_files": [path]}) + "\n")
    print(f"{len(rows)} questions from {len(found)} headings -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
