"""The resolved code graph kept on disk with the index (docs/graph.md, "The graph on disk").

Resolving every reference of a large index takes seconds (2.3 s at 56k chunks), and a CLI
command is a new process each time: the graph of the published generation is therefore kept
in ``<index>/graph/graph.npz``, and a command on an unchanged index loads it (0.1 s) instead.

The file names what it was built from (``GraphCache.key``): the published generation's
meta state (:meth:`~ragloom.index.store.Store.graph_state`: generation, watermark, publish
time, chunker and graph-record versions, read in one statement) and a digest of the source of
the code that resolves and stores the graph (:func:`resolver_digest`), so a graph of another
generation, another database or other rules is never read. It holds numpy arrays and one JSON
document only, loaded with ``allow_pickle=False`` (an index folder can come from elsewhere),
and is checked before use: a file that cannot be read (missing, truncated, damaged, another
format) is ignored and the graph resolved again. It is written atomically (temporary file,
then rename), so a reader sees a whole file, the old or the new; a folder that cannot be
written (read-only) keeps none. The PostgreSQL backend keeps no file: its graph is resolved in
each process.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import io
import json
import logging
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ragloom._version import __version__
from ragloom.graph.build import Edges
from ragloom.graph.code_graph import CodeGraph, GraphSource, resolve_snapshot
from ragloom.graph.model import Definition
from ragloom.index.atomic import atomic_write_bytes
from ragloom.index.store import Store
from ragloom.ingest.refs import REF_KINDS

__all__ = [
    "GRAPH_CACHE_DIR",
    "GRAPH_CACHE_NAME",
    "GraphCache",
    "load_graph",
    "resolver_digest",
    "worth_storing",
]

log = logging.getLogger("ragloom")

GRAPH_CACHE_DIR = "graph"
"""The index's sub-folder of the stored graph (temporary files a killed writer left there are
removed by the next ``ragloom index``, as in ``bm25`` and ``vectors``)."""
GRAPH_CACHE_NAME = "graph.npz"
CACHE_FORMAT = 1
"""The file's layout (:meth:`GraphCache.write`); part of its key."""
_RESOLVER_SOURCES = (
    "graph/build.py",
    "graph/cache.py",
    "graph/code_graph.py",
    "graph/model.py",
    "graph/modules.py",
    "ingest/binds.py",
    "ingest/chunker.py",
    "ingest/filegraph.py",
    "ingest/languages.py",
    "ingest/refs.py",
)
"""The modules a graph's resolution depends on (besides the index's rows and records):
the resolver, the definition ids of split chunks, the record layout and the code languages."""
_ARRAYS: dict[str, np.dtype[Any]] = {
    "defs": np.dtype(np.int32),
    "chunk_node": np.dtype(np.int32),
    "rowid": np.dtype(np.int64),
    "rowid_node": np.dtype(np.int32),
    "src": np.dtype(np.int32),
    "dst": np.dtype(np.int32),
    "kind": np.dtype(np.int8),
    "line": np.dtype(np.int32),
    "conf": np.dtype(np.float32),
}
"""The file's arrays and their types (``defs``: path, kind and language by their place in the
document's tables, then start and end line, one row per definition)."""
RESOLVE_SECONDS_PER_CHUNK = 45e-6
"""About what resolving and storing a graph costs per chunk on the 2-core machine (2.3-2.9 s
at 56,601 chunks)."""
STORE_AFTER_INDEX_SHARE = 0.1
"""``ragloom index`` resolves and stores the new generation's graph when that costs at most
this share of the update (:func:`worth_storing`)."""
_UNREADABLE = (OSError, ValueError, KeyError, TypeError, IndexError, EOFError, zipfile.BadZipFile)
"""What reading a missing, truncated, damaged or foreign file raises (``np.load`` refuses
pickled data with ValueError; a damaged member fails its CRC with BadZipFile)."""


@functools.cache
def resolver_digest() -> str:
    """A digest of :data:`_RESOLVER_SOURCES`: a change to the resolution rules invalidates
    every stored graph, with no version number to remember to bump (a copy of ragloom
    installed without its sources has its version alone, also in the key)."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.blake2b(digest_size=16)
    try:
        for rel in _RESOLVER_SOURCES:
            digest.update((root / rel).read_bytes())
    except OSError:
        return ""
    return digest.hexdigest()


def load_graph(store: GraphSource) -> CodeGraph:
    """The graph of the store's published generation. An embedded store keeps it in its
    folder: read from there while the generation it was resolved for is published, resolved
    (:func:`~ragloom.graph.code_graph.resolve_snapshot`) and written there otherwise."""
    with _gc_paused():
        cache = GraphCache.of(store)
        graph = cache.read() if cache is not None else None
        if graph is None:
            graph = resolve_snapshot(store)
            if cache is not None:
                cache.write(graph)
    return graph


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Python's cycle collector paused while a graph is made: its hundreds of thousands of
    new objects (definitions, dict entries, reference rows) set off full collections that
    find nothing to free, a third of the time of loading a stored graph at 56k chunks
    (0.23 -> 0.12 s) and 10-30 % of resolving one."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def worth_storing(index_seconds: float, chunks: int) -> bool:
    """Whether an update that took ``index_seconds`` should resolve and store the graph of an
    index of ``chunks`` chunks at once, so the first graph command finds it: after a first
    index or a large update (2.9 s after a first index of 59 s at 56k chunks), not after a few
    changed files, where it would more than double the update (1.6 s for one file at 56k
    chunks): the first graph command resolves and stores it then."""
    return chunks * RESOLVE_SECONDS_PER_CHUNK <= STORE_AFTER_INDEX_SHARE * index_seconds


class GraphCache:
    """The stored graph of one embedded store's folder, for the generation published when
    this was made (:meth:`read` answers only that generation, :meth:`write` writes only it)."""

    def __init__(self, store: Store) -> None:
        self.path = store.path.parent / GRAPH_CACHE_DIR / GRAPH_CACHE_NAME
        self._store = store
        self.key = _key(store.graph_state())

    @classmethod
    def of(cls, store: object) -> GraphCache | None:
        """The cache of ``store`` (None: a store with no folder, PostgreSQL)."""
        return cls(store) if isinstance(store, Store) else None

    def read(self) -> CodeGraph | None:
        """The stored graph when it was built from what the store publishes now, else None."""
        try:
            # opened here: np.load leaves a file it fails to read open
            with self.path.open("rb") as fh, np.load(fh, allow_pickle=False) as z:
                doc = json.loads(z["doc"].tobytes())
                if not isinstance(doc, dict) or doc.get("key") != self.key:
                    return None
                arrays = {name: z[name] for name in _ARRAYS}
            return _graph_of(doc, arrays)
        except FileNotFoundError:
            return None
        except _UNREADABLE as exc:
            log.info("stored code graph %s not used (%s): resolved again", self.path, exc)
            return None

    def write(self, graph: CodeGraph) -> bool:
        """Store ``graph`` when it is the graph of the generation still published (a graph
        resolved while another was published is not written); False when not written. A
        folder that cannot be written is not an error."""
        state = self._store.graph_state()
        if _key(state) != self.key or graph.generation != int(state.get("generation", 0)):
            return False
        try:
            atomic_write_bytes(self.path, _file_bytes(self.key, graph))
        except OSError as exc:  # a read-only folder, a full disk: resolved again next time
            log.info("code graph not stored in %s: %s", self.path.parent, exc)
            return False
        return True


def _key(state: dict[str, str]) -> str:
    """The key of a graph resolved from a store in ``state``
    (:meth:`~ragloom.index.store.Store.graph_state`) by this code."""
    doc = {"format": CACHE_FORMAT, "ragloom": __version__, "resolver": resolver_digest()}
    return json.dumps({**doc, **state}, sort_keys=True)


def _file_bytes(key: str, graph: CodeGraph) -> bytes:
    """The file's contents: a JSON document (the key and the strings; those many definitions
    share, paths, kinds and languages, once each in a table) and the arrays of :data:`_ARRAYS` (``np.savez``, uncompressed: loading is what
    counts)."""
    tables: dict[str, dict[str, int]] = {"paths": {}, "kinds": {}, "languages": {}}
    rows = [
        (
            tables["paths"].setdefault(d.path, len(tables["paths"])),
            tables["kinds"].setdefault(d.kind, len(tables["kinds"])),
            tables["languages"].setdefault(d.language, len(tables["languages"])),
            d.start_line,
            d.end_line,
        )
        for d in graph.defs
    ]
    doc = {
        "key": key,
        "generation": graph.generation,
        "ids": [d.id for d in graph.defs],
        "symbols": [d.symbol for d in graph.defs],
        "chunk_ids": list(graph.chunk_nodes),
        **{name: list(table) for name, table in tables.items()},
    }
    e = graph.edges
    arrays: dict[str, np.ndarray] = {
        "defs": np.asarray(rows, dtype=np.int32).reshape(len(rows), 5),
        "chunk_node": np.fromiter(graph.chunk_nodes.values(), np.int32, len(graph.chunk_nodes)),
        "rowid": np.fromiter(graph.rowid_node.keys(), np.int64, len(graph.rowid_node)),
        "rowid_node": np.fromiter(graph.rowid_node.values(), np.int32, len(graph.rowid_node)),
        "src": e.src,
        "dst": e.dst,
        "kind": e.kind,
        "line": e.line,
        "conf": e.conf,
    }
    typed = {name: np.asarray(a, dtype=_ARRAYS[name]) for name, a in arrays.items()}
    buf = io.BytesIO()
    np.savez(
        buf,
        allow_pickle=False,
        doc=np.frombuffer(json.dumps(doc).encode(), dtype=np.uint8),
        **typed,
    )
    return buf.getvalue()


def _graph_of(doc: dict[str, object], arrays: dict[str, np.ndarray]) -> CodeGraph:
    """The graph a file holds, checked (ValueError, TypeError: not a graph this module
    wrote)."""
    ids, symbols, chunk_ids = (
        _strings(doc, "ids"),
        _strings(doc, "symbols"),
        _strings(doc, "chunk_ids"),
    )
    paths, kinds, languages = (
        _strings(doc, "paths"),
        _strings(doc, "kinds"),
        _strings(doc, "languages"),
    )
    n = len(ids)
    for name, want in _ARRAYS.items():
        if arrays[name].dtype != want:
            raise ValueError(f"{name}: {arrays[name].dtype}, not {want}")
    d = arrays["defs"]
    e = Edges(arrays["src"], arrays["dst"], arrays["kind"], arrays["line"], arrays["conf"])
    if len(symbols) != n or d.shape != (n, 5) or len(arrays["chunk_node"]) != len(chunk_ids):
        raise ValueError("definitions and chunks disagree")
    if len(arrays["rowid"]) != len(arrays["rowid_node"]):
        raise ValueError("rowids and their nodes disagree")
    if len({len(e.src), len(e.dst), len(e.kind), len(e.line), len(e.conf)}) != 1:
        raise ValueError("edge columns disagree")
    for a, bound in (
        (d[:, 0], len(paths)),
        (d[:, 1], len(kinds)),
        (d[:, 2], len(languages)),
        (arrays["chunk_node"], n),
        (arrays["rowid_node"], n),
        (e.src, n),
        (e.dst, n),
        (e.kind, len(REF_KINDS)),
    ):
        if a.size and (int(a.min()) < 0 or int(a.max()) >= bound):
            raise ValueError("index out of range")
    generation = doc.get("generation")
    if not isinstance(generation, int):
        raise TypeError("no generation")
    defs = [
        Definition(i, paths[p], s, kinds[k], languages[lang], start, end)
        for i, s, (p, k, lang, start, end) in zip(ids, symbols, d.tolist(), strict=True)
    ]
    node_of = dict(zip(chunk_ids, arrays["chunk_node"].tolist(), strict=True))
    rowid_node = dict(zip(arrays["rowid"].tolist(), arrays["rowid_node"].tolist(), strict=True))
    return CodeGraph(generation, defs, node_of, e, rowid_node)


def _strings(doc: dict[str, object], name: str) -> list[str]:
    value = doc.get(name)
    if not isinstance(value, list) or set(map(type, value)) - {str}:
        raise TypeError(f"{name}: not a list of strings")
    return value
