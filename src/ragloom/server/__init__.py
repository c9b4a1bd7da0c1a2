"""The serving layer (issue 12): one warm index behind an HTTP API and an MCP server.

:class:`~ragloom.server.engine.ServingEngine` is the thread-safe core both servers call
(docs/serving.md); ``ragloom.server.http`` and ``ragloom.server.mcp`` are the transports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragloom.server.engine import ServingEngine

__all__ = ["ServingEngine"]


def __getattr__(name: str) -> Any:
    """``ServingEngine`` is imported when asked for: the CLI's feedback log imports
    :mod:`ragloom.server.feedback`, and a ``ragloom search`` need not import the engine."""
    if name == "ServingEngine":
        from ragloom.server.engine import ServingEngine

        return ServingEngine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
