"""Embedding layer: texts to L2-normalised float32 vectors.

The default model (all-MiniLM-L6-v2, exported to ONNX by ``scripts/export_model.py``) ships
inside the package and runs on onnxruntime; see ``docs/embedding.md`` for how it was chosen.
Nothing heavy is imported here: onnxruntime, tokenizers and numpy load on first use.
"""

from __future__ import annotations

from ragloom.embed.base import Embedder, HashingEmbedder
from ragloom.embed.onnx import OnnxEmbedder
from ragloom.embed.registry import default_model_dir, load_embedder

__all__ = ["Embedder", "HashingEmbedder", "OnnxEmbedder", "default_model_dir", "load_embedder"]
