"""The graph's answers as the agent tools give them: one shape for the CLI's ``--json``, the
HTTP routes and the MCP tools (a stable contract: fields are only added)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from ragloom.errors import InputError, UnknownIdError
from ragloom.graph.code_graph import DEFAULT_MIN_CONFIDENCE, CodeGraph
from ragloom.graph.model import Definition, Reference

__all__ = [
    "GraphQuery",
    "definition_dict",
    "find_definitions",
    "graph_answer",
    "graph_text",
    "reference_dict",
]

GraphQuery = Literal["defs", "refs", "callers", "callees"]
MAX_DEFINITIONS = 50
"""Most definitions one symbol may name before the answer asks for a narrower one (``--path``
or a qualified ``Class.method``)."""


def definition_dict(d: Definition) -> dict[str, object]:
    return {
        "id": d.id,
        "path": d.path,
        "symbol": d.symbol,
        "kind": d.kind,
        "language": d.language,
        "start_line": d.start_line,
        "end_line": d.end_line,
    }


def reference_dict(r: Reference) -> dict[str, object]:
    return {
        "path": r.path,
        "line": r.line,
        "kind": r.kind,
        "confidence": r.confidence,
        "target_id": r.target_id,
        "caller": definition_dict(r.caller),
    }


def find_definitions(graph: CodeGraph, symbol: str, path: str | None = None) -> list[Definition]:
    """The definitions ``symbol`` names: a qualified or bare symbol, a chunk id, or
    ``path:line`` (the innermost definition there). Unknown: :class:`UnknownIdError`."""
    symbol = symbol.strip()
    if not symbol:
        raise InputError("a symbol is required (a name, Class.method, a chunk id or path:line)")
    found = graph.get(symbol)
    if found is not None:
        return [found]
    head, sep, tail = symbol.rpartition(":")
    if sep and tail.isdigit() and head:
        d = graph.definition_at(head, int(tail))
        if d is None:
            raise UnknownIdError(f"no definition at {symbol} in the index")
        return [d]
    defs = graph.definitions(symbol, path=path)
    if not defs:
        where = f" in {path}" if path else ""
        raise UnknownIdError(f"no definition named {symbol!r}{where} in the index")
    return defs


def graph_answer(
    graph: CodeGraph,
    query: GraphQuery,
    symbol: str,
    *,
    path: str | None = None,
    min_confidence: float = DEFAULT_MIN_CONFIDENCE,
    limit: int = 200,
) -> dict[str, object]:
    """One agent-tool answer: ``defs`` (the definitions), ``refs`` (every reference),
    ``callers`` and ``callees`` (definitions, strongest confidence first)."""
    if not 0.0 <= min_confidence <= 1.0:
        raise InputError(f"min_confidence must be within 0..1, got {min_confidence}")
    if limit < 1:
        raise InputError(f"limit must be at least 1, got {limit}")
    defs = find_definitions(graph, symbol, path)
    out: dict[str, object] = {
        "symbol": symbol,
        "generation": graph.generation,
        "definitions": [definition_dict(d) for d in defs[:MAX_DEFINITIONS]],
        "definitions_total": len(defs),
    }
    if query == "defs":
        return out
    if query == "refs":
        # one row per reference site: a call resolved to each of several definitions the
        # symbol names (Java overloads, ``add(String, int)`` and ``add(String, String)``)
        # is the same site, kept once with its best confidence
        best_ref: dict[tuple[str, int, str, str], Reference] = {}
        for d in defs:
            for r in graph.references(d.id, min_confidence=min_confidence):
                key = (r.path, r.line, r.kind, r.caller.id)
                kept = best_ref.get(key)
                if kept is None or (-r.confidence, r.target_id) < (
                    -kept.confidence,
                    kept.target_id,
                ):
                    best_ref[key] = r
        refs = sorted(best_ref.values(), key=lambda r: (r.path, r.line, r.target_id))
        out["references"] = [reference_dict(r) for r in refs[:limit]]
        out["references_total"] = len(refs)
        return out
    pick = graph.callers if query == "callers" else graph.callees
    best: dict[str, tuple[Definition, float]] = {}
    for d in defs:
        for other, conf in pick(d.id, min_confidence=min_confidence):
            if other.id not in best or conf > best[other.id][1]:
                best[other.id] = (other, conf)
    ranked = sorted(best.values(), key=lambda t: (-t[1], t[0].path, t[0].start_line))
    out[query] = [{**definition_dict(d), "confidence": round(c, 4)} for d, c in ranked[:limit]]
    out[f"{query}_total"] = len(ranked)
    return out


def _loc(d: Mapping[str, Any]) -> str:
    return f"{d['path']}:{d['start_line']}-{d['end_line']}  {d['kind']} {d['symbol']}"


def graph_text(answer: Mapping[str, Any], query: GraphQuery) -> str:
    """A :func:`graph_answer` as lines an agent or a person reads without parsing JSON."""
    defs = answer["definitions"]
    lines: list[str] = []
    if query == "defs":
        lines = [_loc(d) for d in defs]
        more = int(answer["definitions_total"]) - len(defs)
        return "\n".join(lines + ([f"... {more} more"] if more > 0 else []))
    where = ", ".join(f"{d['path']}:{d['start_line']}" for d in defs)
    lines.append(f"{answer['definitions_total']} definition(s) of {answer['symbol']}: {where}")
    if query == "refs":
        rows = answer["references"]
        for r in rows:
            c = r["caller"]
            lines.append(
                f"{r['path']}:{r['line']}  {r['kind']:<7} in {c['symbol']}  ({r['confidence']:.2f})"
            )
        total = int(answer["references_total"])
    else:
        rows = answer[query]
        lines.extend(f"{_loc(d)}  ({d['confidence']:.2f})" for d in rows)
        total = int(answer[f"{query}_total"])
    if not rows:
        lines.append(f"no {query} found")
    elif total > len(rows):
        lines.append(f"... {total - len(rows)} more (raise the limit)")
    return "\n".join(lines)
