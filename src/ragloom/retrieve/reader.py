"""Open an index folder for reading: a :class:`~ragloom.retrieve.search.Retriever` over its
store, BM25 engine and vectors, with the embedder the index was built with (loaded on the
first query).

Both the API (:class:`ragloom.api.Index`) and the service's dense backend
(:class:`ragloom.service.dense.IndexDense`) open an index this way, so neither imports the other
and the compatibility checks (tokenizer version, embedding model and dimension) say the same
thing whichever way the index was opened.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ragloom.embed.document import embedding_key
from ragloom.errors import DbError, IncompatibleIndexError, IndexNotFoundError
from ragloom.index.bm25 import TantivyBm25
from ragloom.index.file_bm25 import FileBm25Reader, open_file_bm25
from ragloom.index.manifest import Manifest, read_manifest
from ragloom.index.store import Store
from ragloom.index.tokenize import TOKENIZER_VERSION

if TYPE_CHECKING:
    from ragloom.embed.base import Embedder
    from ragloom.index.postgres import PostgresBackend
    from ragloom.retrieve.search import Retriever

__all__ = [
    "DB_NAME",
    "index_manifest",
    "index_root",
    "open_postgres_retriever",
    "open_retriever",
    "postgres_manifest",
    "search_embedder",
]

DB_NAME: Final = "index.sqlite"
"""The store's file name inside an index folder."""

log = logging.getLogger("ragloom")


def index_root(index_dir: Path) -> Path:
    """The repository root an index folder was built for: the manifest's ``root`` (relative to
    the folder), or the folder's parent when there is no manifest."""
    manifest = read_manifest(index_dir)
    return (index_dir / manifest.root).resolve() if manifest else index_dir.parent


def index_manifest(index_dir: Path, root: Path) -> Manifest:
    """The manifest of an existing index; IndexNotFoundError (naming the command that creates
    one for ``root``) when the folder holds no index."""
    manifest = read_manifest(index_dir)
    if manifest is None or not (index_dir / DB_NAME).exists():
        raise IndexNotFoundError(f"no index at {index_dir}; create one with `ragloom index {root}`")
    return manifest


def search_embedder(embedder: str | Embedder | None, manifest: Manifest, root: Path) -> Embedder:
    """The query embedder: ``embedder`` (an object, or a spec to load) or the index's own model;
    IncompatibleIndexError when it is not the model the index was embedded with."""
    if embedder is not None and not isinstance(embedder, str):
        emb = embedder
    else:
        from ragloom.embed.registry import load_embedder

        emb = load_embedder(embedder if isinstance(embedder, str) else manifest.embedding_spec)
    if emb.model_id != manifest.embedding_model or emb.dim != manifest.embedding_dim:
        raise IncompatibleIndexError(
            f"index was embedded with {manifest.embedding_model} ({manifest.embedding_dim}-d) "
            f"but the query embedder is {emb.model_id} ({emb.dim}-d); run `ragloom index "
            f"{root}` to re-embed every chunk with it, or search with the model it was built "
            f"with"
        )
    return emb


def open_retriever(
    index_dir: Path,
    manifest: Manifest,
    store: Callable[[], Store],
    *,
    root: Path,
    embedder: str | Embedder | None = None,
) -> Retriever:
    """A Retriever over ``index_dir``: checks the BM25 tokenizer version, then opens the store
    (``store()``, called only once the check passed), the BM25 engine (searching without it,
    with a warning, when it cannot be opened) and the vectors. The embedder is resolved by
    :func:`search_embedder` on first use, so opening does not load the model."""
    # Imported here: the service imports this module for DB_NAME and should not pay for the
    # search pipeline and hnswlib until it opens an index.
    from ragloom.index.vectors import HnswVectors
    from ragloom.retrieve.search import Retriever

    if manifest.tokenizer_version != TOKENIZER_VERSION:
        raise IncompatibleIndexError(
            f"index BM25 tokenizer {manifest.tokenizer_version} differs from "
            f"{TOKENIZER_VERSION}; run `ragloom index {root}` to rebuild it"
        )
    opened = store()
    bm25: TantivyBm25 | None
    try:
        bm25 = TantivyBm25(index_dir / "bm25")
    except DbError as exc:
        log.warning("bm25 unavailable: %s", exc)
        bm25 = None
    vectors = HnswVectors(
        index_dir / "vectors", manifest.embedding_dim, embedding_key(manifest.embedding_model)
    )
    retriever = Retriever(opened, bm25, vectors, lambda: search_embedder(embedder, manifest, root))
    try:
        files = open_file_bm25(index_dir)
    except (DbError, ValueError) as exc:
        log.warning("file bm25 unavailable: %s", exc)
        files = None
    if files is not None:
        retriever.file_bm25 = FileBm25Reader(files, opened.file_hashes)
    return retriever


def postgres_manifest(backend: PostgresBackend) -> Manifest:
    """What a PostgreSQL repository was indexed with, as a manifest (the embedder check and
    the status read it like an index folder's ``manifest.json``)."""
    from ragloom.index.manifest import FORMAT_VERSION
    from ragloom.index.store import SCHEMA_VERSION

    info = backend.info
    return Manifest(
        FORMAT_VERSION,
        info.ragloom_version,
        SCHEMA_VERSION,
        info.tokenizer_version or TOKENIZER_VERSION,
        info.embedding_model,
        info.embedding_dim,
        info.embedding_spec,
        info.root,
        0.0,
    )


def open_postgres_retriever(
    backend: PostgresBackend,
    *,
    cache_dir: Path,
    root: Path,
    embedder: str | Embedder | None = None,
) -> Retriever:
    """A Retriever over one repository in PostgreSQL: chunks and vectors (pgvector) from the
    database, BM25 from a local engine rebuilt for the database's current generation under
    ``cache_dir`` (docs/postgres.md). The embedder is resolved on first use, as for a folder."""
    from ragloom.index.pg_search import PgFileBm25
    from ragloom.index.postgres import PgBm25, PgVectors
    from ragloom.retrieve.search import Retriever

    manifest = postgres_manifest(backend)
    vectors = PgVectors(backend) if manifest.embedding_dim else None
    bm25 = PgBm25(backend, cache_dir)
    retriever = Retriever(backend, bm25, vectors, lambda: search_embedder(embedder, manifest, root))
    retriever.file_bm25 = PgFileBm25(bm25)
    return retriever
