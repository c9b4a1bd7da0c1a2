"""Value types of the code graph: definitions, references and edges."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Definition", "EdgeKind", "Reference"]

EdgeKind = Literal["call", "read", "import", "inherit", "type", "bind"]
"""``bind`` never labels an edge (it is type evidence); it is here so the kinds line up with
:data:`ragloom.ingest.refs.REF_KINDS`."""


@dataclass(frozen=True, slots=True)
class Definition:
    """A node of the graph: a code chunk (a split symbol's parts are one node, named by the id
    of its first part); a module's remainder is one too (``kind`` ``module``), so references at
    module level have an owner."""

    id: str
    path: str
    symbol: str
    kind: str
    language: str
    start_line: int
    end_line: int

    @property
    def name(self) -> str:
        """The last component of the symbol (``send`` for ``Client.send``)."""
        return self.symbol.rsplit(".", 1)[-1]


@dataclass(frozen=True, slots=True)
class Reference:
    """One resolved mention of a definition.

    ``confidence`` says how the name was resolved (docs/graph.md): 1.0 through the file's own
    definitions or its imports, 0.9 through ``self``/``this``/a class, lower for a match by name
    alone (shared by ``1 / candidates``)."""

    path: str
    line: int
    kind: EdgeKind
    caller: Definition
    """The innermost chunk holding the mention (a ``module`` one at module level)."""
    target_id: str
    confidence: float
