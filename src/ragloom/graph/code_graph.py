"""The code graph of one generation: definitions, references, callers, callees, relevance.

Resolved by :func:`resolve_snapshot` from the index (one read snapshot, so it matches exactly
one published generation; any :class:`GraphSource`: the embedded store or PostgreSQL), or
loaded from the index folder (:func:`ragloom.graph.cache.load_graph`), and kept immutable: a
new generation gets a new graph. Queries return plain value types
(:class:`~ragloom.graph.model.Definition`, :class:`~ragloom.graph.model.Reference`).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ragloom.errors import DbError, IncompatibleIndexError
from ragloom.graph.build import Edges, resolve_graph
from ragloom.graph.model import Definition, EdgeKind, Reference
from ragloom.index.store import GraphDefRow
from ragloom.ingest.filegraph import FileGraph
from ragloom.ingest.refs import REF_KINDS

__all__ = [
    "CALL_KINDS",
    "DEFAULT_MIN_CONFIDENCE",
    "PPR_ALPHA",
    "PPR_ITERATIONS",
    "CodeGraph",
    "GraphSource",
    "resolve_snapshot",
]

DEFAULT_MIN_CONFIDENCE = 0.5
"""References at least this sure are reported by default: resolved through scope, imports or
``self``, or a name only one definition has (docs/graph.md has the agreement with jedi)."""
CALL_KINDS: frozenset[EdgeKind] = frozenset({"call", "read"})
"""Edges that make a caller (a use of the definition as a value counts: a callback)."""
PPR_ALPHA = 0.85
"""Personalised PageRank's damping (the probability of following an edge), the usual value."""
PPR_ITERATIONS = 30
"""Power iterations; the change per step falls below 1e-4 well before this on every
repository measured."""
_KIND_OF = {i: k for i, k in enumerate(REF_KINDS)}


@runtime_checkable
class GraphSource(Protocol):
    """Where a graph is read from: the embedded :class:`~ragloom.index.store.Store` and the
    :class:`~ragloom.index.postgres.PostgresBackend` both keep the per-file records."""

    def graph_snapshot(
        self, languages: Collection[str]
    ) -> tuple[int, list[GraphDefRow], list[tuple[str, str, bytes]]]:
        """(generation, the code chunks as definitions, (path, language, record or ``b""``)
        per file with a record or in ``languages``), read in one snapshot."""
        ...


class CodeGraph:
    """Definitions and resolved references of one generation (see the module docstring)."""

    def __init__(
        self,
        generation: int,
        defs: Sequence[Definition],
        node_of: Mapping[str, int],
        edges: Edges,
        rowid_node: Mapping[int, int] | None = None,
    ) -> None:
        self.generation = generation
        self.defs: tuple[Definition, ...] = tuple(defs)
        self._node_of = dict(node_of)
        self.rowid_node: dict[int, int] = dict(rowid_node or {})
        """Chunk rowid -> node (every part of a split symbol gives its head's node)."""
        self.head_rowid: dict[int, int] = {}
        """Node -> the rowid of its first part (the chunk a ranking stage adds)."""
        for rowid, n in sorted(self.rowid_node.items()):
            self.head_rowid.setdefault(n, rowid)
        self.edges = edges
        self._in_order = np.argsort(edges.dst, kind="stable")
        self._in_start = np.searchsorted(edges.dst[self._in_order], np.arange(len(defs) + 1))
        self._out_order = np.argsort(edges.src, kind="stable")
        self._out_start = np.searchsorted(edges.src[self._out_order], np.arange(len(defs) + 1))
        self._by_symbol: dict[str, list[int]] = defaultdict(list)
        self._by_name: dict[str, list[int]] = defaultdict(list)
        self._by_path: dict[str, list[int]] = defaultdict(list)
        for i, d in enumerate(self.defs):
            self._by_symbol[d.symbol].append(i)
            self._by_name[d.name].append(i)
            self._by_path[d.path].append(i)
        self._starts = {
            p: [self.defs[i].start_line for i in ids] for p, ids in self._by_path.items()
        }
        self._walk: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        """PageRank's (source, target, normalised weight, dangling) arrays, made once."""

    # -- nodes -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.defs)

    @property
    def edge_count(self) -> int:
        return int(self.edges.src.size)

    @property
    def chunk_nodes(self) -> Mapping[str, int]:
        """Chunk id -> node, every part of a split symbol included (what :meth:`node` reads)."""
        return self._node_of

    def node(self, chunk_id: str) -> int | None:
        """The node of a chunk id (a later part of a split symbol gives its head's node)."""
        return self._node_of.get(chunk_id)

    def get(self, chunk_id: str) -> Definition | None:
        n = self.node(chunk_id)
        return None if n is None else self.defs[n]

    def definitions(self, symbol: str, *, path: str | None = None) -> list[Definition]:
        """Definitions named ``symbol``: a qualified symbol (``Client.send``) matches exactly, a
        bare name (``send``) matches the last component; modules are left out unless named by
        their full module name. ``path`` keeps those of one file."""
        if "." in symbol or "/" in symbol:
            ids = self._by_symbol.get(symbol, [])
        else:
            ids = [i for i in self._by_name.get(symbol, ()) if self.defs[i].kind != "module"]
            ids = ids or self._by_symbol.get(symbol, [])
        out = [self.defs[i] for i in ids]
        if path is not None:
            out = [d for d in out if d.path == path]
        return sorted(out, key=lambda d: (d.path, d.start_line))

    def definition_at(self, path: str, line: int) -> Definition | None:
        """The innermost definition of ``path`` whose lines hold ``line`` (a module's
        remainder when no definition does and the file has one); None past the file's last
        indexed line (``command.go:99999`` used to answer the module)."""
        ids = self._by_path.get(path)
        if not ids or line < 1 or line > max(self.defs[i].end_line for i in ids):
            return None
        best: Definition | None = None
        k = bisect.bisect_right(self._starts[path], line)
        module: Definition | None = None
        for i in ids[:k]:
            d = self.defs[i]
            if d.kind == "module":
                module = module or d
                continue
            if d.start_line <= line <= d.end_line and (
                best is None or d.end_line - d.start_line <= best.end_line - best.start_line
            ):
                best = d
        return best or module

    # -- edges -------------------------------------------------------------------------------
    def _refs(
        self, rows: np.ndarray, target_of: np.ndarray, min_confidence: float
    ) -> list[Reference]:
        e = self.edges
        out: list[Reference] = []
        for j in rows:
            c = float(e.conf[j])
            if c + 1e-6 < min_confidence:
                continue
            caller = self.defs[int(e.src[j])]
            out.append(
                Reference(
                    path=caller.path,
                    line=int(e.line[j]),
                    kind=_KIND_OF[int(e.kind[j])],
                    caller=caller,
                    target_id=self.defs[int(target_of[j])].id,
                    confidence=round(c, 4),
                )
            )
        out.sort(key=lambda r: (r.path, r.line, r.target_id))
        return out

    def references(
        self,
        def_id: str,
        *,
        min_confidence: float = DEFAULT_MIN_CONFIDENCE,
        kinds: frozenset[EdgeKind] | None = None,
    ) -> list[Reference]:
        """Where the definition ``def_id`` is mentioned, by path and line."""
        n = self.node(def_id)
        if n is None:
            return []
        rows = self._in_order[self._in_start[n] : self._in_start[n + 1]]
        if kinds is not None:
            codes = [REF_KINDS.index(k) for k in kinds]
            rows = rows[np.isin(self.edges.kind[rows], codes)]
        return self._refs(rows, self.edges.dst, min_confidence)

    def callees_refs(
        self, def_id: str, *, min_confidence: float = DEFAULT_MIN_CONFIDENCE
    ) -> list[Reference]:
        """What the definition ``def_id`` mentions (each reference's ``target_id``)."""
        n = self.node(def_id)
        if n is None:
            return []
        rows = self._out_order[self._out_start[n] : self._out_start[n + 1]]
        return self._refs(rows, self.edges.dst, min_confidence)

    def callers(
        self,
        def_id: str,
        *,
        min_confidence: float = DEFAULT_MIN_CONFIDENCE,
        kinds: frozenset[EdgeKind] = CALL_KINDS,
    ) -> list[tuple[Definition, float]]:
        """The definitions that call (or use as a value) ``def_id``, with the strongest
        confidence of their references, most certain first."""
        best: dict[int, float] = {}
        for r in self.references(def_id, min_confidence=min_confidence, kinds=kinds):
            n = self._node_of[r.caller.id]
            best[n] = max(best.get(n, 0.0), r.confidence)
        return [
            (self.defs[n], c)
            for n, c in sorted(best.items(), key=lambda kv: (-kv[1], self.defs[kv[0]].path, kv[0]))
        ]

    def callees(
        self,
        def_id: str,
        *,
        min_confidence: float = DEFAULT_MIN_CONFIDENCE,
        kinds: frozenset[EdgeKind] = CALL_KINDS,
    ) -> list[tuple[Definition, float]]:
        """The definitions ``def_id`` calls (or uses as a value), most certain first."""
        best: dict[int, float] = {}
        for r in self.callees_refs(def_id, min_confidence=min_confidence):
            if r.kind not in kinds:
                continue
            n = self._node_of[r.target_id]
            best[n] = max(best.get(n, 0.0), r.confidence)
        return [
            (self.defs[n], c)
            for n, c in sorted(best.items(), key=lambda kv: (-kv[1], self.defs[kv[0]].path, kv[0]))
        ]

    def neighbours(
        self, node: int, min_confidence: float = DEFAULT_MIN_CONFIDENCE
    ) -> dict[int, float]:
        """Nodes one edge away from ``node`` either way (callees, callers, bases, types), each
        with the strongest confidence of the edges between them."""
        e = self.edges
        out: dict[int, float] = {}
        for order, start, other in (
            (self._out_order, self._out_start, e.dst),
            (self._in_order, self._in_start, e.src),
        ):
            rows = order[start[node] : start[node + 1]]
            for j in rows[e.conf[rows] + 1e-6 >= min_confidence]:
                o = int(other[j])
                if o != node:
                    c = float(e.conf[j])
                    if c > out.get(o, 0.0):
                        out[o] = c
        return out

    # -- relevance ---------------------------------------------------------------------------
    def pagerank(
        self,
        seeds: Mapping[int, float] | None = None,
        *,
        alpha: float = PPR_ALPHA,
        iterations: int = PPR_ITERATIONS,
    ) -> np.ndarray:
        """Personalised PageRank over the graph with edges both ways (a caller makes its
        callee relevant and a callee its caller), edge weight the reference's confidence.
        ``seeds``: node -> weight of the restart distribution (None: uniform, the plain
        PageRank of the repository map without a question)."""
        n = len(self.defs)
        if n == 0:
            return np.zeros(0)
        if self._walk is None:
            e = self.edges
            src = np.concatenate([e.src, e.dst]).astype(np.int64)
            dst = np.concatenate([e.dst, e.src]).astype(np.int64)
            w = np.concatenate([e.conf, e.conf]).astype(np.float64)
            keep = src != dst
            src, dst, w = src[keep], dst[keep], w[keep]
            out_w = np.bincount(src, weights=w, minlength=n)
            norm = np.where(out_w[src] > 0, w / np.maximum(out_w[src], 1e-12), 0.0)
            self._walk = (src, dst, norm, out_w == 0)
        src, dst, norm, dangling = self._walk
        restart = np.zeros(n)
        if seeds:
            for k, v in seeds.items():
                restart[k] += max(v, 0.0)
        if restart.sum() <= 0:
            restart[:] = 1.0
        restart /= restart.sum()
        x = restart.copy()
        for _ in range(iterations):
            spread = np.bincount(dst, weights=norm * x[src], minlength=n)
            lost = x[dangling].sum()
            nxt = alpha * (spread + lost * restart) + (1 - alpha) * restart
            if np.abs(nxt - x).sum() < 1e-6:
                x = nxt
                break
            x = nxt
        return x


def resolve_snapshot(store: GraphSource) -> CodeGraph:
    """The graph of the store's published generation, resolved from one read snapshot."""
    from ragloom.ingest.languages import CODE_SPECS

    gen, rows, raw = store.graph_snapshot(list(CODE_SPECS))
    # go.mod / package.json: what imports of the repository's own packages name (read after
    # the snapshot; a source without them resolves those imports as before)
    read_manifests = getattr(store, "graph_manifests", None)
    manifests: list[tuple[str, str]] = read_manifests() if read_manifests is not None else []
    empty = FileGraph((), tuple([] for _ in range(8)))
    try:
        records = [
            (path, language, FileGraph.from_blob(blob) if blob else empty)
            for path, language, blob in raw
        ]
    except DbError as exc:  # records of another ragloom: the next index makes them again
        raise IncompatibleIndexError(
            f"the index's code graph was made by another version of ragloom ({exc}); run "
            "`ragloom index PATH` to make it again (only the graph records are rebuilt)"
        ) from exc
    return graph_from_rows(gen, rows, records, manifests)


def graph_from_rows(
    generation: int,
    rows: Sequence[GraphDefRow],
    records: Sequence[tuple[str, str, FileGraph]],
    manifests: Sequence[tuple[str, str]] = (),
) -> CodeGraph:
    defs, node_of, edges, rowid_node = resolve_graph(rows, records, manifests)
    return CodeGraph(generation, defs, node_of, edges, rowid_node)
