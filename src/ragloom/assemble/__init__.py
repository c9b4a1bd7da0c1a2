"""Context assembly: the right code, stitched, deduplicated, fresh, and inside the token budget.

Entry point :func:`assemble_context`; see docs/assembly.md for the pipeline and figures.
"""

from __future__ import annotations

from ragloom.assemble.budget import AssemblyPolicy, TokenBudget
from ragloom.assemble.context import (
    AssembledContext,
    AssemblyStats,
    ContextPart,
    assemble_context,
)
from ragloom.assemble.tokens import (
    COUNTER_NAMES,
    ApproxCounter,
    TiktokenCounter,
    TokenCounter,
    get_counter,
)

__all__ = [
    "COUNTER_NAMES",
    "ApproxCounter",
    "AssembledContext",
    "AssemblyPolicy",
    "AssemblyStats",
    "ContextPart",
    "TiktokenCounter",
    "TokenBudget",
    "TokenCounter",
    "assemble_context",
    "get_counter",
]
