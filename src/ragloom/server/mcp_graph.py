"""The code-graph tools of the MCP server (``ragloom.server.mcp``): ``find_definitions``,
``find_references``, ``find_callers``, ``find_callees`` and ``repo_map``, over
:meth:`ServingEngine.graph <ragloom.server.engine.ServingEngine.graph>` and
:meth:`~ragloom.server.engine.ServingEngine.repo_map` (docs/graph.md).

No postponed annotations here: the SDK evaluates the signatures to build the schemas.
"""

from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from ragloom.server.engine import ServingEngine

__all__ = ["add_graph_tools"]


def add_graph_tools(
    server: MCPServer[Any], engine: ServingEngine, max_chars: int, max_budget: int
) -> None:
    """Register the graph tools and ``repo_map`` on ``server`` (``build_server`` calls this
    after ``get_context``; ``max_chars`` and ``max_budget`` are the server's limits)."""
    symbol_doc = (
        "The symbol: a name (send), a qualified name (Client.send), a chunk id from "
        "search_code, or path:line (the innermost definition there)."
    )
    graph_tools = {
        "find_definitions": (
            "defs",
            "Find definitions",
            "Where a symbol is defined: path, lines, kind and chunk id of every definition "
            "the name matches (a bare name matches methods and functions of that name).",
        ),
        "find_references": (
            "refs",
            "Find references",
            "Every reference to a symbol across the repository (calls, uses as a value, "
            "imports, inheritance, type uses): path, line, the definition it sits in and "
            "the confidence of its resolution (1.0 scope or import, 0.9 through self or a "
            "class, lower by name alone). Use it before changing a signature.",
        ),
        "find_callers": (
            "callers",
            "Find callers",
            "The functions and methods that call a symbol (or pass it as a value), most "
            "certain first.",
        ),
        "find_callees": (
            "callees",
            "Find callees",
            "The functions and methods a symbol calls (or uses as a value), most certain first.",
        ),
    }

    def _graph_tool(tool: str, query: str, title: str, description: str) -> None:
        def run(
            symbol: Annotated[str, Field(min_length=1, max_length=2000, description=symbol_doc)],
            path: Annotated[
                str | None, Field(max_length=4000, description="Only definitions in this file.")
            ] = None,
            min_confidence: Annotated[
                float | None,
                Field(ge=0.0, le=1.0, description="Leave out less certain references [0.5]."),
            ] = None,
            limit: Annotated[int, Field(ge=1, le=10_000, description="Most rows.")] = 200,
        ) -> CallToolResult:
            from ragloom.graph.views import graph_text

            result = engine.graph(
                query, symbol, path=path, min_confidence=min_confidence, limit=limit
            )
            return CallToolResult(
                content=[TextContent(type="text", text=graph_text(result, query))],  # type: ignore[arg-type]
                structured_content=result,
            )

        server.tool(
            name=tool,
            title=title,
            description=description,
            annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        )(run)

    for tool_name, (graph_query, tool_title, tool_doc) in graph_tools.items():
        _graph_tool(tool_name, graph_query, tool_title, tool_doc)

    @server.tool(
        name="repo_map",
        title="Repository map",
        description=(
            "An overview of the repository: files with the signatures of their most relevant "
            "functions, classes and methods, ranked by PageRank over the code graph "
            "(personalised to a question when you give one), filling a token budget exactly. "
            "Use it first on an unfamiliar repository, then get_context for the code."
        ),
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    def repo_map(
        query: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=max_chars,
                description="Rank for this question; omit for the whole repository.",
            ),
        ] = None,
        budget: Annotated[
            int | None,
            Field(
                ge=1,
                le=max_budget,
                description="Token budget of the map; omit for a quarter of the context budget.",
            ),
        ] = None,
    ) -> CallToolResult:
        result = engine.repo_map(query, budget=budget)
        return CallToolResult(
            content=[TextContent(type="text", text=str(result.get("text", "")))],
            structured_content=result,
        )
