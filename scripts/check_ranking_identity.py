"""Byte-identical ranking: record every strategy's full answers and compare with a snapshot.

A refactor of the ranking pipeline (issue 21: ranking as a pipeline of stages) must not change a
single answer. This script indexes a fixed corpus, runs every strategy name and modifier over a
fixed set of questions, and records each answer in full: path, symbol, start and end line, the
score as ``repr(float)``, the modality ranks and scores, and with ``explain`` the explain record.
``tests/golden/test_ranking_identity.py`` runs the same check in the default test run against the
committed snapshot, so any change to an answer fails it.

The corpus is in the repository and independent of the Python version (a stdlib copy is not):
go-chi/chi at its pinned commit (``tests/data/git-sample/chi``) with its commit history
(``history.jsonl``, for the ``history`` step), the multi-language samples of
``tests/fixtures/langs`` and a few generated files that exercise the declaration prior and
split symbols (heads first). Files get fixed, distinct mtimes (for recency). The embedder is
the deterministic ``hashing`` one, so the snapshot does not depend on an ONNX build.

Questions: the first chi test-split questions (``test.jsonl``, the git golden set) plus
questions written to trigger each stage (a named symbol and file, a language mention, a
compound question, a role intent, a change request, a keyword query, a split symbol).

Usage::

    .venv/bin/python scripts/check_ranking_identity.py            # compare, exit 1 on a change
    .venv/bin/python scripts/check_ranking_identity.py --update   # rewrite the snapshot

Only rewrite the snapshot for an intended ranking change, and say so in the commit message.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "src") not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO / "src"))

from ragloom.api import Index  # noqa: E402
from ragloom.eval.dataset import load_dataset  # noqa: E402
from ragloom.eval.gitrun import history_from_commits, load_commits  # noqa: E402
from ragloom.retrieve.config import RecencyConfig  # noqa: E402
from ragloom.retrieve.rerank import LexicalOverlapReranker  # noqa: E402
from ragloom.types import Hit  # noqa: E402

SAMPLE = REPO / "tests" / "data" / "git-sample" / "chi"
LANGS = REPO / "tests" / "fixtures" / "langs"
SNAPSHOT = REPO / "tests" / "golden" / "ranking_identity.jsonl.gz"
COMMIT_TIME = 1787227434
"""Committer time of chi's pinned commit: the newest mtime of the corpus."""
NOW = COMMIT_TIME + 3 * 86_400
"""``time.time()`` while the recency variant runs (its boost depends on the clock)."""
CHI_QUESTIONS = 10
"""How many chi test-split questions (first in file order) take part."""
TOP_K = 10

BASES = ("hybrid", "hybrid-mmr", "dense", "sparse")
MODIFIERS = (
    "",
    "+raw",
    "+seed",
    "+changes",
    "+lookup",
    "+no-expand",
    "+no-synonyms",
    "+no-entities",
    "+no-exact",
    "+no-decompose",
    "+no-language",
    "+no-roles",
    "+no-decl",
    "+no-filerank",
    "+no-history",
)
COMBINED = (
    "hybrid+no-history+no-roles",
    "hybrid+raw+changes",
    "hybrid-mmr+seed+no-exact",
    "hybrid+no-decl+no-filerank+lookup",
)
VARIANT_STRATEGIES = ("hybrid", "hybrid-mmr", "hybrid+seed", "sparse", "dense")
"""Strategies run again on retrievers set up differently (no history, reranker, recency)."""

WRITTEN_QUESTIONS = (
    "`Mux.ServeHTTP` dispatch",
    "middleware/throttle.go limits",
    "go function that compresses responses",
    "how are routes matched and where are url params stored?",
    "tests for the throttle middleware",
    "fix: the logger middleware drops the status code",
    "middleware compress gzip encoder",
    "reticulate_splines_quux step_marker_420",
    "render widget payload",
    "parse the config file in rust",
)

SPLINES = "".join(
    [
        "import os\n\n\n",
        "def reticulate_splines_quux(data, limit):\n",
        '    """Reticulate the splines of every record in ``data``."""\n',
        "    total = 0\n",
        *(
            f"    total += data.get({i}, 0)  # step_marker_{i}\n"
            if i % 10 == 0
            else f"    total += data.get({i}, 0)\n"
            for i in range(600)
        ),
        "    return total\n\n\n",
        "def other_function(x):\n    return x + 1\n",
    ]
)
EXTRA_FILES = {
    "extra/splines.py": SPLINES,
    "extra/widget.ts": (
        "export function renderWidget(payload: string): string {\n"
        "  const parts = payload.split(',');\n"
        "  return parts.map((p) => p.trim()).join(' ');\n"
        "}\n"
    ),
    "extra/widget.d.ts": "export declare function renderWidget(payload: string): string;\n",
    "extra/widget_stub.pyi": "def render_widget(payload: str) -> str: ...\n",
    "extra/docs/widgets.md": "# Widgets\n\nRender a widget payload with `renderWidget`.\n",
}


def build_corpus(dest: Path) -> Path:
    """The corpus under ``dest / "corpus"``: chi, the language samples, the extra files; every
    file with a fixed mtime (a day older per file in sorted path order, newest COMMIT_TIME)."""
    root = dest / "corpus"
    shutil.copytree(SAMPLE / "tree", root)
    shutil.copytree(LANGS, root / "langs")
    for rel, text in EXTRA_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    files = sorted(
        os.path.relpath(os.path.join(d, f), root) for d, _, names in os.walk(root) for f in names
    )
    for i, rel in enumerate(files):
        stamp = COMMIT_TIME - (i % 90) * 86_400
        os.utime(root / rel, (stamp, stamp))
    return root


@contextmanager
def _one_thread_hnsw() -> Iterator[None]:
    """hnswlib inserts with every core by default, and the graph (so the tail of a deep dense
    list) then depends on thread timing; one thread with hnswlib's fixed seed builds the same
    graph every time."""
    import hnswlib

    real = hnswlib.Index.add_items

    def add_items(
        self: Any, data: Any, ids: Any = None, num_threads: int = -1, replace_deleted: bool = False
    ) -> Any:
        return real(self, data, ids, 1, replace_deleted)

    hnswlib.Index.add_items = add_items
    try:
        yield
    finally:
        hnswlib.Index.add_items = real


def open_index(dest: Path) -> Index:
    """Index the corpus with the hashing embedder and attach chi's history."""
    root = build_corpus(dest)
    idx = Index.at(root, embedder="hashing")
    with _one_thread_hnsw():
        idx.index()
    history = history_from_commits(load_commits(SAMPLE / "history.jsonl"), dest / "history")
    idx.retriever.history = history
    return idx


def questions() -> list[str]:
    chi = [q.query for q in load_dataset(SAMPLE / "test.jsonl")[:CHI_QUESTIONS]]
    return [*chi, *WRITTEN_QUESTIONS]


def strategies() -> list[str]:
    return [*(b + m for b in BASES for m in MODIFIERS), *COMBINED]


def _canon(value: Any) -> Any:
    """JSON-ready with every float as its ``repr`` (so equality is bit-for-bit)."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dict):
        return {str(k): _canon(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple):
        return [_canon(v) for v in value]
    return value


def _hit(hit: Hit, explain: bool) -> list[Any]:
    out: list[Any] = [hit.path, hit.symbol, hit.start_line, hit.end_line, repr(hit.score)]
    out.append(_canon(dict(hit.ranks)))
    if explain:
        out.append(_canon(dict(hit.scores)))
        out.append(_canon(hit.explain))
    return out


@contextmanager
def _variant(idx: Index, name: str) -> Iterator[None]:
    """The retriever set up as the variant ``name`` asks, restored afterwards."""
    ret = idx.retriever
    saved = (ret.history, ret.reranker, ret.recency)
    real_time = time.time
    try:
        if name == "no-history":
            ret.history = None
        elif name == "rerank":
            ret.reranker = LexicalOverlapReranker()
        elif name == "recency":
            ret.recency = RecencyConfig()
            time.time = lambda: float(NOW)  # the boost decays with the clock
        yield
    finally:
        time.time = real_time
        ret.history, ret.reranker, ret.recency = saved


def record(idx: Index) -> list[dict[str, Any]]:
    """Every case's answer, in a fixed order."""
    out: list[dict[str, Any]] = []
    qs = questions()
    plan: list[tuple[str, list[str], tuple[bool, ...]]] = [
        ("default", strategies(), (True,)),
        ("default", list(BASES), (False,)),
        ("no-history", list(VARIANT_STRATEGIES), (True,)),
        ("rerank", list(VARIANT_STRATEGIES), (True,)),
        ("recency", list(VARIANT_STRATEGIES), (True,)),
    ]
    for variant, names, explains in plan:
        with _variant(idx, variant):
            for strategy in names:
                for explain in explains:
                    for q in qs:
                        res = idx.search(q, top_k=TOP_K, strategy=strategy, explain=explain)
                        out.append(
                            {
                                "case": f"{variant} | {strategy} | explain={explain} | {q}",
                                "notes": list(res.notes),
                                "hits": [_hit(h, explain) for h in res.hits],
                            }
                        )
    return out


def write_snapshot(records: list[dict[str, Any]], path: Path = SNAPSHOT) -> None:
    text = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in records)
    # no name and mtime 0 in the gzip header: the same records give the same bytes
    with open(path, "wb") as raw, gzip.GzipFile("", "wb", fileobj=raw, mtime=0) as fh:
        fh.write(text.encode("utf-8"))


def read_snapshot(path: Path = SNAPSHOT) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def differences(
    got: list[dict[str, Any]], want: list[dict[str, Any]], limit: int = 10
) -> list[str]:
    """Human-readable differences (at most ``limit``), empty when identical."""
    out: list[str] = []
    if [r["case"] for r in got] != [r["case"] for r in want]:
        out.append(f"case lists differ: {len(got)} cases now, {len(want)} in the snapshot")
    wanted = {r["case"]: r for r in want}
    for r in got:
        w = wanted.get(r["case"])
        if w is None or json.dumps(r, sort_keys=True) == json.dumps(w, sort_keys=True):
            continue
        detail = ""
        for i, (a, b) in enumerate(zip(r["hits"], w["hits"], strict=False)):
            if a != b:
                detail = f"hit {i + 1}: now {a!r}\n      was {b!r}"
                break
        if not detail:
            detail = f"{len(r['hits'])} hits now, {len(w['hits'])} before; notes {r['notes']}"
        out.append(f"{r['case']}\n    {detail}")
        if len(out) >= limit:
            break
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="rewrite the snapshot")
    parser.add_argument("--snapshot", type=Path, default=SNAPSHOT)
    args = parser.parse_args(argv)
    t = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ragloom-identity-") as tmp:
        idx = open_index(Path(tmp))
        try:
            got = record(idx)
        finally:
            idx.close()
    seconds = time.perf_counter() - t
    if args.update:
        write_snapshot(got, args.snapshot)
        print(f"wrote {len(got)} cases to {args.snapshot} ({seconds:.1f} s)")
        return 0
    diffs = differences(got, read_snapshot(args.snapshot))
    if diffs:
        print("ranking changed:\n" + "\n".join(diffs))
        return 1
    print(f"identical: {len(got)} cases ({seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
