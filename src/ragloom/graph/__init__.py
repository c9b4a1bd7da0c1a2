"""The code graph: definitions, references resolved by scope, import and name, callers, callees
and relevance spread along them (docs/graph.md).

The index keeps one reference record per file version (:mod:`ragloom.ingest.filegraph`); the
graph of a generation is resolved from them when first asked for, and kept in the index folder
for the next process (:func:`load_graph`, :mod:`ragloom.graph.cache`).
"""

from ragloom.graph.cache import load_graph
from ragloom.graph.code_graph import (
    CALL_KINDS,
    DEFAULT_MIN_CONFIDENCE,
    CodeGraph,
    GraphSource,
    graph_from_rows,
)
from ragloom.graph.model import Definition, EdgeKind, Reference

__all__ = [
    "CALL_KINDS",
    "DEFAULT_MIN_CONFIDENCE",
    "CodeGraph",
    "Definition",
    "EdgeKind",
    "GraphSource",
    "Reference",
    "graph_from_rows",
    "load_graph",
]
