"""The serving layer (issue 12): one warm index behind an HTTP API and an MCP server.

:class:`~ragloom.server.engine.ServingEngine` is the thread-safe core both servers call
(docs/serving.md); ``ragloom.server.http`` and ``ragloom.server.mcp`` are the transports.
"""

from ragloom.server.engine import ServingEngine

__all__ = ["ServingEngine"]
