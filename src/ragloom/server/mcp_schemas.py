"""What the MCP tools of ``ragloom.server.mcp`` return: the published output schemas of
``search_code`` and ``get_context``, the rating enum of ``record_feedback`` and the text an
agent reads (the ranked list of a search, the context answer without the parts' text).

This module does not use postponed annotations: the SDK evaluates the tools' signatures,
these models among them, to build the schemas.
"""

from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from ragloom.server.feedback import RATING_VALUES

__all__ = ["ContextOutput", "Rating", "SearchOutput"]

Rating = Literal["helpful", "not_helpful", "partially_helpful"]
if set(get_args(Rating)) != set(RATING_VALUES):  # the schema's enum is the store's
    raise ImportError(f"MCP ratings {get_args(Rating)} differ from the feedback store's")


# --- structured outputs: the published outputSchema of each tool ------------------------


class _Open(BaseModel):
    """Extra keys the engine adds later flow through unchanged (only adding is allowed)."""

    model_config = ConfigDict(extra="allow")


# The hits and parts are published as plain objects with their keys in the description:
# clients validate every result against the output schema (the SDK's client does, with
# jsonschema), and typed properties on each of 10 to 20 items cost ~5 ms per call there,
# more than the answer itself on a cache hit.


class SearchOutput(_Open):
    query_id: str = Field(description="Id of this answer, for record_feedback.")
    generation: int = Field(description="Index generation the answer was read from.")
    latency_ms: float
    cache_hit: bool
    strategy: str
    hits: list[dict[str, Any]] = Field(
        description=(
            "Best first. Each: id (chunk id, for record_feedback), path (relative to the "
            "repository root), start_line, end_line (1-based, inclusive), kind (function, "
            "class, method, module, doc, ...), symbol, part, language, score (fused, higher "
            "is better), ranks (rank per retriever), generation, stale (the file changed "
            "since indexing: its lines may have moved)."
        )
    )
    notes: list[str] = Field(default_factory=list, description="Warnings about this answer.")
    sources: list[dict[str, Any]] | None = Field(
        default=None,
        description=(
            "With sources in the call: each source's status (source, count, latency_ms, "
            "status ok | timeout | error | disabled). Hits of other sources carry source, "
            "title, date, url, attribution and paths instead of path and lines."
        ),
    )


class ContextOutput(_Open):
    query_id: str = Field(description="Id of this answer, for record_feedback.")
    generation: int = Field(description="Index generation the answer was read from.")
    latency_ms: float
    cache_hit: bool
    format: str
    context: str = Field(description="The rendered context text (also the first content block).")
    tokens_used: int = Field(description="Tokens the context uses (by the configured counter).")
    budget: int | None = Field(default=None, description="Token budget the context had to fit.")
    parts: list[dict[str, Any]] = Field(
        description=(
            "Parts in the order shown, without their text. Each: chunk_id (for "
            "record_feedback), path, start_line, end_line, ranges ([start, end] pairs shown), "
            "kind, symbol, symbols, language, score, tokens, trimmed, hit_ids."
        )
    )
    stats: dict[str, Any] = Field(
        default_factory=dict,
        description="Assembly statistics: tokens, budget, files, duplicates dropped, timings.",
    )
    sources: list[dict[str, Any]] | None = Field(
        default=None, description="With sources in the call: each source's status."
    )


def _search_text(result: Mapping[str, Any]) -> str:
    """A compact ranked list an agent can read without parsing JSON."""
    hits = result.get("hits", [])
    head = (
        f"query_id={result.get('query_id')} generation={result.get('generation')} "
        f"hits={len(hits)} strategy={result.get('strategy')}"
    )
    lines = [head]
    for i, h in enumerate(hits, 1):
        if "path" not in h:  # an item of another source: a doc section, commit, issue, PR
            where = h.get("url") or ", ".join(h.get("paths", [])[:5])
            lines.append(
                f"{i}. [{h.get('source')}] {h.get('title', '')} {where} "
                f"score={h['score']:.4f} id={h['id']}".replace("  ", " ")
            )
            continue
        label = h.get("part") or h.get("symbol") or ""
        lines.append(
            f"{i}. {h['path']}:{h['start_line']}-{h['end_line']} {h.get('kind', '')} "
            f"{label} score={h['score']:.4f} id={h['id']}".replace("  ", " ")
        )
    for st in result.get("sources") or []:
        lines.append(
            f"source {st.get('source')}: {st.get('status')}, {st.get('count')} hits, "
            f"{float(st.get('latency_ms', 0.0)):.0f} ms"
        )
    for note in result.get("notes", []):
        lines.append(f"note: {note}")
    if not hits:
        lines.append("no results")
    return "\n".join(lines)


def _context_output(result: Mapping[str, Any]) -> dict[str, Any]:
    """The engine's context answer plus ``tokens_used``, with the parts' text dropped (it is
    already in ``context``: sending it twice would double what an agent reads)."""
    stats = result.get("stats") or {}
    out = dict(result)
    out["tokens_used"] = int(stats.get("tokens_total", 0))
    if out.get("budget") is None:
        out["budget"] = (stats.get("budget") or {}).get("total")
    out["parts"] = [{k: v for k, v in p.items() if k != "text"} for p in result.get("parts", [])]
    return out
