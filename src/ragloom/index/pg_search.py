"""Search over the PostgreSQL backend: the embeddings and pgvector reads of
:class:`~ragloom.index.postgres.PostgresBackend` (:class:`PgSearchBackend`, a mixin),
:class:`PgVectors` (the retriever's vector index) and :class:`PgBm25`, the BM25 engine a
serving node rebuilds from the database's current generation (the seed's "Rebuild from DB";
docs/postgres.md).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ragloom.errors import ConfigError
from ragloom.index.pg_schema import EF_SEARCH_MAX, RepositoryInfo, connect

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger("ragloom.index")

ANALYZE_AFTER_ROWS = 1000
"""Chunk rows an index run writes before it refreshes the planner's statistics (or a tenth of
the repository's rows, for a small one): ANALYZE samples at most 30,000 rows, a fraction of a
second, and a watch-mode run of one edited file skips it."""


def _vec_literal(vector: np.ndarray) -> str:
    return "[" + ",".join(repr(float(x)) for x in np.asarray(vector, dtype=np.float32)) + "]"


def _fill_vectors(
    conn: psycopg.Connection[Any], repo_id: int, key: str, hashes: Sequence[str] | None
) -> int:
    """Give the repository's chunks without a vector the cached one of their text (all such
    chunks, or those with these node hashes); keeps ``n_embedded`` and ``data_version`` in
    step. Runs inside the caller's transaction."""
    if hashes is None:
        cur = conn.execute(
            "UPDATE chunks c SET embedding = e.vector, embedding_dim = vector_dims(e.vector) "
            "FROM embeddings e WHERE c.repo_id = %s AND c.embedding IS NULL "
            "AND e.model_key = %s AND e.node_hash = c.node_hash",
            (repo_id, key),
        )
    else:
        # one index lookup per hash (chunks_repo_node_hash), not a scan of every chunk still
        # without a vector per batch
        cur = conn.execute(
            "UPDATE chunks c SET embedding = e.vector, embedding_dim = vector_dims(e.vector) "
            "FROM unnest(%s::text[]) AS h(node_hash) JOIN embeddings e "
            "ON e.model_key = %s AND e.node_hash = h.node_hash "
            "WHERE c.repo_id = %s AND c.node_hash = h.node_hash AND c.embedding IS NULL",
            (list(dict.fromkeys(hashes)), key, repo_id),
        )
    filled = int(cur.rowcount or 0)
    if filled:
        conn.execute(
            "UPDATE repositories SET n_embedded = n_embedded + %s, "
            "data_version = data_version + 1 WHERE id = %s",
            (filled, repo_id),
        )
    return filled


class PgSearchBackend:
    """The reads and embedding writes of :class:`~ragloom.index.postgres.PostgresBackend`
    that search uses: BM25 rebuilds, the embedding cache, pgvector search (a mixin; the
    attributes below are the backend's)."""

    dsn: str
    repo_id: int
    info: RepositoryInfo
    ef_search: int
    _conn: psycopg.Connection[Any]
    _lock: threading.RLock
    _efs: dict[int, int]

    if TYPE_CHECKING:

        def generation(self) -> int: ...

        def chunk_count(self) -> int: ...

        def _reader(self) -> AbstractContextManager[psycopg.Connection[Any]]: ...

        def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

    def _snapshot(self, *queries: str) -> tuple[int, list[list[Any]]]:
        """(generation, the rows of each query) of the published generation, read in one
        repeatable-read snapshot; each query takes the repository id as its one parameter."""
        import psycopg

        with connect(self.dsn) as conn:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            with conn.transaction():
                row = conn.execute(
                    "SELECT generation FROM repositories WHERE id = %s", (self.repo_id,)
                ).fetchone()
                rows = [conn.execute(q, (self.repo_id,)).fetchall() for q in queries]
        return (int(row[0]) if row else 0), rows

    def bm25_snapshot(self) -> tuple[int, dict[int, str]]:
        """(generation, node hash by rowid) of the published generation, read in one
        repeatable-read snapshot (what a serving node's BM25 must hold)."""
        generation, (rows,) = self._snapshot(
            "SELECT rowid, node_hash FROM chunks WHERE repo_id = %s"
        )
        return generation, {int(r[0]): str(r[1]) for r in rows}

    def file_snapshot(self) -> tuple[int, dict[str, str], dict[str, list[int]]]:
        """(generation, path -> content hash, path -> chunk rowids) of the published
        generation, read in one repeatable-read snapshot (what a serving node's BM25 over whole
        files must hold: :mod:`ragloom.index.file_bm25`)."""
        generation, (files, chunks) = self._snapshot(
            "SELECT path, hash FROM files WHERE repo_id = %s",
            "SELECT rowid, path FROM chunks WHERE repo_id = %s",
        )
        by_path: dict[str, list[int]] = {}
        for rowid, path in chunks:
            by_path.setdefault(str(path), []).append(int(rowid))
        return generation, {str(p): str(h) for p, h in files}, by_path

    def bm25_sources(self, rowids: Sequence[int]) -> dict[int, tuple[str, str, str]]:
        """(text, symbol, path) by rowid."""
        if not len(rowids):
            return {}
        rows = self._fetchall(
            "SELECT rowid, text, symbol, path FROM chunks WHERE rowid = ANY(%s)",
            ([int(r) for r in rowids],),
        )
        return {int(r[0]): (str(r[1]), str(r[2]), str(r[3])) for r in rows}

    # -- embeddings and vectors -----------------------------------------------------------
    def missing_embeddings(self, key: str, *, staged: bool = False) -> list[tuple[str, str]]:
        """(node hash, embedding text) of the repository's chunks with no vector, one per hash
        (the text of the smallest rowid sharing it, as the embedded store does). ``staged``:
        those whose text has no cached vector under ``key``, whatever vector the chunk holds
        (a model switch embeds them all beside the model in use)."""
        from ragloom.embed.document import embedding_text

        unembedded = "" if staged else "AND c.embedding IS NULL "
        rows = self._fetchall(
            "SELECT DISTINCT ON (c.node_hash) c.node_hash, c.path, c.kind, c.symbol, c.text "
            f"FROM chunks c WHERE c.repo_id = %s {unembedded}AND NOT EXISTS "
            "(SELECT 1 FROM embeddings e WHERE e.model_key = %s AND e.node_hash = c.node_hash) "
            "ORDER BY c.node_hash, c.rowid",
            (self.repo_id, key),
        )
        return [
            (str(r[0]), embedding_text(str(r[1]), str(r[2]), str(r[3]), str(r[4]))) for r in rows
        ]

    def put_embeddings(self, key: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        """Cache vectors by node hash and give them to this repository's chunks (one
        transaction, so an interrupted embedding run resumes where it stopped). Loaded with a
        binary COPY into a temporary table, then merged (a hash cached already is kept)."""
        from pgvector import Vector

        batch = [(h, np.asarray(v, dtype=np.float32)) for h, v in items]
        if not batch:
            return
        with self._lock, self._conn.transaction():
            self._conn.execute(
                "CREATE TEMP TABLE IF NOT EXISTS _rl_vectors (node_hash TEXT, vector vector) "
                "ON COMMIT DELETE ROWS"
            )
            with (
                self._conn.cursor() as cur,
                cur.copy("COPY _rl_vectors (node_hash, vector) FROM STDIN (FORMAT BINARY)") as copy,
            ):
                copy.set_types(["text", "vector"])
                for h, v in batch:
                    copy.write_row((h, Vector(v)))
            self._conn.execute(
                "INSERT INTO embeddings(model_key, node_hash, vector) "
                "SELECT DISTINCT ON (node_hash) %s, node_hash, vector FROM _rl_vectors "
                "ORDER BY node_hash ON CONFLICT DO NOTHING",
                (key,),
            )
            if key == self.info.embedding_key:
                _fill_vectors(self._conn, self.repo_id, key, [h for h, _ in batch])

    def finish_index(self, rows_written: int) -> None:
        """``ANALYZE chunks`` after a run that wrote at least :data:`ANALYZE_AFTER_ROWS` rows or
        a tenth of the repository's: without fresh statistics the planner takes a freshly
        loaded repository for a few rows and scans it whole for each vector query instead of
        using the HNSW index (docs/postgres.md, "Vectors in their rows"). Autovacuum would
        analyze it too, but only after its next pass (a minute or more), and every query in
        between pays. A role that may not analyze the table (not its owner) is logged and
        skipped: the statistics are an optimisation."""
        import psycopg

        if rows_written <= 0:
            return
        if rows_written < ANALYZE_AFTER_ROWS and rows_written * 10 < self.chunk_count():
            return
        try:
            with self._lock:
                self._conn.execute("ANALYZE chunks")
        except psycopg.Error as exc:
            log.warning("ANALYZE chunks skipped: %s", " ".join(str(exc).split()))

    def vectors_for_rowids(self, model_id: str, rowids: Sequence[int], dim: int) -> np.ndarray:
        out = np.zeros((len(rowids), dim), dtype=np.float32)
        if not len(rowids):
            return out
        pos: dict[int, list[int]] = {}
        for i, r in enumerate(rowids):
            pos.setdefault(int(r), []).append(i)
        rows = self._fetchall(
            "SELECT c.rowid, e.vector FROM chunks c JOIN embeddings e ON e.model_key = %s "
            "AND e.node_hash = c.node_hash WHERE c.rowid = ANY(%s)",
            (model_id, list(pos)),
        )
        for rowid, vec in rows:
            arr = np.asarray(vec.to_numpy() if hasattr(vec, "to_numpy") else vec, np.float32)
            if arr.shape == (dim,):
                for i in pos[int(rowid)]:
                    out[i] = arr
        return out

    def vector_search(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Top ``k`` (rowid, cosine similarity) through the HNSW index of the repository's
        dimension, ``hnsw.ef_search`` = max(ef_search, 2 k) (iterative scan, strict order,
        so filtering by repository does not shorten the list)."""
        dim = self.info.embedding_dim
        if k <= 0 or not dim:
            return []
        vec = np.asarray(vector, dtype=np.float32).reshape(-1)
        if vec.shape[0] != dim:
            raise ConfigError(f"query vector has {vec.shape[0]} dimensions, the index {dim}")
        ef = min(EF_SEARCH_MAX, max(self.ef_search, 2 * k))
        lit = _vec_literal(vec)
        with self._reader() as conn:
            if self._efs.get(id(conn)) != ef:
                # session settings of the read connection: the same effect as SET LOCAL in a
                # transaction, without its three extra round trips per query
                conn.execute(
                    "SELECT set_config('hnsw.ef_search', %s, false), "
                    "set_config('hnsw.iterative_scan', 'strict_order', false)",
                    (str(int(ef)),),
                )
                self._efs[id(conn)] = ef
            rows = conn.execute(
                f"SELECT rowid, 1 - (embedding::vector({dim}) <=> %s::vector({dim})) "
                f"FROM chunks WHERE repo_id = %s AND embedding_dim = {dim} "
                f"ORDER BY embedding::vector({dim}) <=> %s::vector({dim}) LIMIT %s",
                (lit, self.repo_id, lit, int(k)),
            ).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]

    def get_vectors(self, rowids: Sequence[int]) -> dict[int, np.ndarray]:
        """The unit-length vectors stored on these chunk rows (those that have one)."""
        if not len(rowids):
            return {}
        rows = self._fetchall(
            "SELECT rowid, embedding FROM chunks WHERE rowid = ANY(%s) AND embedding IS NOT NULL",
            ([int(r) for r in rowids],),
        )
        out: dict[int, np.ndarray] = {}
        for rowid, vec in rows:
            arr = np.asarray(vec.to_numpy() if hasattr(vec, "to_numpy") else vec, np.float32)
            norm = float(np.linalg.norm(arr))
            out[int(rowid)] = arr / norm if norm > 0 else arr
        return out


class PgVectors:
    """pgvector search as the retriever's :class:`~ragloom.index.backend.VectorIndex`."""

    def __init__(self, backend: PgSearchBackend) -> None:
        self._backend = backend

    def search(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        return self._backend.vector_search(vector, k)

    def get(self, rowids: Sequence[int]) -> dict[int, np.ndarray]:
        return self._backend.get_vectors(rowids)

    def count(self) -> int:
        """Chunks with a vector (as of the last :meth:`PostgresBackend.data_version`)."""
        return self._backend.info.n_embedded

    def refreshed(self) -> PgVectors:
        return self


_FILE_KEYS = "file-keys.json"
"""A generation folder's map of path to file key of its BM25 over whole files."""
_BUILD_ATTEMPTS = 3
"""Builds of a generation folder before one without the BM25 over whole files is made (the
database kept publishing between the chunk and the file snapshots)."""
BM25_KEEP_GENERATIONS = 2
"""BM25 folders a serving node keeps per repository (the current one and the one before, which
a query pinned to it may still read)."""


def bm25_cache_dir(dsn: str, repository: str, base: Path | None = None) -> Path:
    """Where a serving node keeps its BM25 engines for one repository of one database:
    ``$RAGLOOM_CACHE_DIR`` or ``~/.cache/ragloom``, then ``pg-<hash of the DSN's database
    address>/<repository>``."""
    from urllib.parse import urlsplit

    if base is None:
        env = os.environ.get("RAGLOOM_CACHE_DIR")
        base = Path(env) if env else Path.home() / ".cache" / "ragloom"
    parts = urlsplit(dsn)
    where = f"{parts.hostname or ''}:{parts.port or ''}{parts.path}?{parts.query}"
    digest = hashlib.sha256(where.encode()).hexdigest()[:12]
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in repository)[:80]
    return base / f"pg-{digest}" / safe


BM25_CATCH_UP_WAIT_S = 2.0
"""How long a query waits for its node's BM25 build of a newly published generation before it
searches the engine it has (:meth:`PgBm25.reload`)."""


class PgBm25:
    """ragloom's BM25 engine (tantivy) for one repository on a serving node, rebuilt from the
    database for its current generation (the seed's "Rebuild from DB").

    Each generation gets its own folder ``gen-<G>-<tokenizer version>`` under
    :func:`bm25_cache_dir`: built by copying the newest folder there and applying the rowid
    difference (unchanged chunks keep their rowids, so an update costs what it changed), in a
    temporary folder renamed into place, so several processes on one node share it safely.
    :meth:`reload` (the retriever calls it when the generation changed) moves to the
    published generation's folder."""

    def __init__(self, backend: PgSearchBackend, cache_dir: Path) -> None:
        self._backend = backend
        self.cache_dir = cache_dir
        self.generation = -1
        self._engine: Any = None
        self._files: tuple[Any, dict[str, int]] | None = None
        """The generation's BM25 over whole files and its keys by path (None: its folder has
        none, one built before it existed)."""
        self._lock = threading.Lock()
        self._building: threading.Thread | None = None
        self.builds = 0
        """Generations this object built (a test and the logs read it)."""
        self.reload()

    def _folder(self, generation: int) -> Path:
        from ragloom.index.tokenize import TOKENIZER_VERSION

        return self.cache_dir / f"gen-{generation}-{TOKENIZER_VERSION}"

    def reload(self) -> None:
        """Move to the published generation's engine.

        When its folder is not built yet on this node and an engine is open, one build runs
        in a background thread (however many queries ask at once: each concurrent query
        building its own copy is what made answers time out during a re-index), and the
        caller waits for it at most :data:`BM25_CATCH_UP_WAIT_S`. A small update is built
        within that and the answer is complete. A build that takes longer leaves the query on
        the engine it has (the previous generation's): rows the new generation deleted are
        dropped when hits are read from the database, so the answer still shows one
        generation, but chunks the update added are found only by vector until the switch.
        The first engine is built in the caller."""
        generation = self._backend.generation()
        with self._lock:
            if generation == self.generation and self._engine is not None:
                return
            folder = self._folder(generation)
            if (folder / "ready").exists():
                self._switch(generation, folder)
                return
            if self._engine is None:
                self._switch(*self._build())
                return
            if self._building is None or not self._building.is_alive():
                self._building = threading.Thread(
                    target=self._build_in_background, name="ragloom-bm25-build", daemon=True
                )
                self._building.start()
            building = self._building
        building.join(BM25_CATCH_UP_WAIT_S)
        if building.is_alive():
            log.info(
                "bm25 still catching up with generation %d; searching generation %d's",
                generation,
                self.generation,
            )

    def _switch(self, generation: int, folder: Path) -> None:
        from ragloom.index.bm25 import TantivyBm25
        from ragloom.index.file_bm25 import open_file_bm25

        self._engine = TantivyBm25(folder)
        self._files = None
        try:
            files = open_file_bm25(folder)
            keys = json.loads((folder / _FILE_KEYS).read_text(encoding="utf-8"))
            if files is not None and isinstance(keys, dict):
                self._files = (files, {str(p): int(k) for p, k in keys.items()})
        except (OSError, ValueError) as exc:
            log.warning("bm25 over whole files unavailable in %s: %s", folder, exc)
        self.generation = generation
        self._prune()

    def file_scores(
        self, query: str | Sequence[tuple[str, float]], paths: Sequence[str]
    ) -> dict[str, float] | None:
        """Whole-file BM25 score of ``query`` for each of ``paths`` in the generation this
        engine answers from (paths it does not show are left out); None when its folder has no
        BM25 over whole files."""
        files = self._files
        if files is None:
            return None
        engine, keys = files
        wanted = {p: keys[p] for p in paths if p in keys}
        got: dict[int, float] = engine.scores_of(query, list(wanted.values()))
        return {p: got.get(k, 0.0) for p, k in wanted.items()}

    def _build_in_background(self) -> None:
        try:
            generation, folder = self._build()
        except Exception as exc:  # the next reload tries again; queries keep the old engine
            log.warning("bm25 rebuild from PostgreSQL failed: %s", exc)
            return
        with self._lock:
            if generation > self.generation:
                self._switch(generation, folder)

    def wait_built(self, timeout: float | None = None) -> None:
        """Block until a background build finished (tests, benchmarks)."""
        thread = self._building
        if thread is not None:
            thread.join(timeout)

    def _build(self) -> tuple[int, Path]:
        """Build the published generation's folder (again when the database published another
        generation between the chunk and the file snapshots)."""
        for _ in range(_BUILD_ATTEMPTS - 1):
            built = self._build_once()
            if built is not None:
                return built
        built = self._build_once(files=False)
        assert built is not None
        return built

    def _build_once(self, files: bool = True) -> tuple[int, Path] | None:
        from ragloom.index.bm25 import TantivyBm25, bm25_document

        generation, rows = self._backend.bm25_snapshot()
        folder = self._folder(generation)
        if (folder / "ready").exists():
            return generation, folder
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=self.cache_dir, prefix=".build-"))
        try:
            base = self._newest()
            if base is not None:
                shutil.copytree(base, tmp, dirs_exist_ok=True)
                (tmp / "ready").unlink(missing_ok=True)
            engine = TantivyBm25(tmp, create=True)
            want = np.fromiter(rows, dtype=np.int64, count=len(rows))
            have = engine.held_rowids()
            add = np.setdiff1d(want, have).tolist()
            remove = np.setdiff1d(have, want).tolist()
            docs: list[tuple[int, str]] = []
            for start in range(0, len(add), 2000):
                part = add[start : start + 2000]
                sources = self._backend.bm25_sources(part)
                docs.extend((r, bm25_document(*sources[r])) for r in part if r in sources)
            engine.apply(docs, remove)
            if files and not self._build_files(tmp, generation):
                shutil.rmtree(tmp, ignore_errors=True)
                return None
            (tmp / "ready").write_text(str(generation))
            try:
                tmp.rename(folder)
            except OSError:  # another process built it first
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.builds += 1
        log.info(
            "bm25 rebuilt from PostgreSQL",
            extra={"generation": generation, "added": len(docs), "removed": len(remove)},
        )
        return generation, folder

    def _build_files(self, folder: Path, generation: int) -> bool:
        """The BM25 over whole files of ``generation`` in ``folder`` (a copy of the newest
        folder's, brought in line by the difference of file versions), and its keys by path in
        ``folder / _FILE_KEYS``. False when the database moved to another generation between
        the two snapshots (the build starts again)."""
        from ragloom.index.bm25 import TantivyBm25
        from ragloom.index.file_bm25 import FILE_BM25_DIR, FILE_FIELDS, file_document, file_key

        seen, hashes, by_path = self._backend.file_snapshot()
        if seen != generation:
            return False
        engine = TantivyBm25(folder / FILE_BM25_DIR, create=True, fields=FILE_FIELDS)
        keys = {p: file_key(p, h) for p, h in hashes.items()}
        want = np.fromiter(keys.values(), dtype=np.int64, count=len(keys))
        have = engine.held_rowids()
        add = set(np.setdiff1d(want, have).tolist())
        remove = np.setdiff1d(have, want).tolist()
        docs: list[tuple[int, str]] = []
        todo = [p for p, k in keys.items() if k in add]
        for start in range(0, len(todo), 200):
            part = todo[start : start + 200]
            rowids = [r for p in part for r in by_path.get(p, ())]
            sources = self._backend.bm25_sources(rowids)
            for p in part:
                texts = [sources[r][0] for r in by_path.get(p, ()) if r in sources]
                docs.append((keys[p], file_document(p, texts)))
        engine.apply(docs, remove)
        (folder / _FILE_KEYS).write_text(json.dumps(keys, sort_keys=True), encoding="utf-8")
        return True

    def _generations(self) -> list[tuple[int, Path]]:
        from ragloom.index.tokenize import TOKENIZER_VERSION

        out: list[tuple[int, Path]] = []
        if not self.cache_dir.is_dir():
            return out
        suffix = f"-{TOKENIZER_VERSION}"
        for p in self.cache_dir.iterdir():
            name = p.name
            if name.startswith("gen-") and name.endswith(suffix) and (p / "ready").exists():
                try:
                    out.append((int(name[4 : -len(suffix)]), p))
                except ValueError:
                    continue
        return sorted(out)

    def _newest(self) -> Path | None:
        gens = self._generations()
        return gens[-1][1] if gens else None

    def _prune(self) -> None:
        for gen, path in self._generations()[:-BM25_KEEP_GENERATIONS]:
            if gen != self.generation:
                shutil.rmtree(path, ignore_errors=True)

    def search(self, query: str | Sequence[tuple[str, float]], k: int) -> list[tuple[int, float]]:
        result: list[tuple[int, float]] = self._engine.search(query, k)
        return result

    def doc_count(self) -> int:
        return int(self._engine.doc_count())


class PgFileBm25:
    """A PostgreSQL retriever's BM25 over whole files: the one in the generation folder its
    :class:`PgBm25` answers from (built with it, so the two always show one generation)."""

    def __init__(self, bm25: PgBm25) -> None:
        self._bm25 = bm25

    def reload(self) -> None:
        """Nothing: :meth:`PgBm25.reload` moves both engines."""

    def scores(
        self, query: str | Sequence[tuple[str, float]], paths: Sequence[str], generation: object
    ) -> dict[str, float] | None:
        return self._bm25.file_scores(query, paths)
