"""Plain value types shared by every stage of the pipeline.

``Chunk`` is the chunk record (the seeds' EmbeddingData): a stable id (CanonId), the node
tracking hash (hash of the chunk text) and the file tracking hash (hash of the file bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Chunk", "ChunkKind", "Hit", "Modality", "SourceKind"]

SourceKind = Literal["code", "doc", "text"]
"""Where a chunk comes from: parsed source code, a markdown document, or any other text."""

ChunkKind = Literal[
    "function",
    "method",
    "class",
    "struct",
    "enum",
    "impl",
    "interface",
    "trait",
    "module",  # module-level remainder of a code file
    "section",  # markdown heading section
    "window",  # line window of a plain text file
]

Modality = Literal["bm25", "dense", "hybrid"]


@dataclass(frozen=True, slots=True)
class Chunk:
    """One indexed unit of text with its provenance.

    Lines are 1-based and inclusive; bytes are 0-based, end exclusive.
    """

    id: str
    source: SourceKind
    path: str
    symbol: str
    kind: ChunkKind
    language: str
    parent_id: str | None
    start_byte: int
    end_byte: int
    start_line: int
    end_line: int
    node_hash: str
    file_hash: str
    text: str


@dataclass(slots=True)
class Hit:
    """One search result, with the rank and score each modality gave it (1-based ranks)."""

    id: str
    path: str
    start_line: int
    end_line: int
    kind: str
    symbol: str
    language: str
    score: float
    ranks: dict[str, int] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    text: str = ""
    node_hash: str = ""
    file_hash: str = ""
    start_byte: int = 0
    end_byte: int = 0
    source: str = "code"
    explain: dict[str, object] = field(default_factory=dict)
    """What each ranking stage did to this hit (filled when searching with ``explain=True``)."""
    stages: list[dict[str, object]] = field(default_factory=list)
    """With ``explain=True``: one record per ranking stage that moved this hit or changed its
    score (``stage``, ``rank_before``, ``rank_after``, ``score_before``, ``score_after``; ranks
    1-based, None where it was not ranked), in pipeline order (docs/ranking.md "Stages")."""

    @property
    def part(self) -> str | None:
        """``"Foo.bar (part 3 of 64)"`` for a later part of a split symbol, None for any other
        chunk: the ``part`` field of ``ragloom search --json``."""
        from ragloom.ingest.parts import part_label

        return part_label(self.id, self.text)
