"""The test PostgreSQL server: a real PostgreSQL 18 with pgvector, one database per test."""

from __future__ import annotations

import psycopg


def test_server_has_pgvector(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        version = conn.execute("SHOW server_version_num").fetchone()
        ext = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
        dist = conn.execute("SELECT '[1,0]'::vector <=> '[0,1]'::vector").fetchone()
    assert version is not None and int(version[0]) >= 160000
    assert ext is not None and tuple(int(x) for x in ext[0].split(".")[:2]) >= (0, 8)
    assert dist is not None and abs(float(dist[0]) - 1.0) < 1e-6


def test_each_test_gets_a_fresh_database(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone()
    assert tables == (0,)
