"""What the embedding model sees for a chunk, and the key its vectors are stored under.

A chunk is embedded as ``"{path} {kind} {symbol}\\n{text}"``: the qualified name and the file
say what a method body alone does not (``raw_decode`` inside ``JSONDecoder`` of
``json/decoder.py``). Measured on the evaluation datasets (docs/ranking.md, "Tuning"): dense
MRR@10 at file level 0.700 -> 0.722 on docstring-to-code queries and 0.659 -> 0.880 on
identifier-style queries.

Vectors are cached by the chunk's node tracking hash (so an unchanged chunk is never embedded
twice) under :func:`embedding_key`, the model id plus :data:`EMBED_TEXT_FORMAT`: changing the
format changes the key, so an index built with another format is re-embedded, never mixed.
A chunk that keeps its text but moves to another file keeps its vector (its header then names
the old path); the next edit of its text re-embeds it.
"""

from __future__ import annotations

__all__ = ["EMBED_TEXT_FORMAT", "embedding_key", "embedding_text"]

EMBED_TEXT_FORMAT = "ctx1"
"""Version of :func:`embedding_text`; part of the storage key of every vector."""


def embedding_text(path: str, kind: str, symbol: str, text: str) -> str:
    """The text the embedding model reads for one chunk."""
    return f"{path} {kind} {symbol}\n{text}"


def embedding_key(model_id: str) -> str:
    """Store key of a model's chunk vectors: ``model_id`` plus the embedding-text format."""
    return f"{model_id}+{EMBED_TEXT_FORMAT}"
