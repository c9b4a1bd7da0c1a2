"""Turn an embedder spec string into an :class:`~ragloom.embed.base.Embedder`.

Specs (what ``ragloom index --model SPEC`` and the index manifest hold):

- ``None`` or ``"default"``: the model shipped inside ragloom (all-MiniLM-L6-v2, ONNX).
- ``"hashing"`` or ``"hashing:DIM"``: :class:`~ragloom.embed.base.HashingEmbedder` (tests,
  tiny machines).
- a folder holding ``model.onnx`` and ``tokenizer.json``: :class:`~ragloom.embed.onnx.OnnxEmbedder`.
- anything else: a sentence-transformers model folder or cached model name
  (:class:`~ragloom.embed.st.SentenceTransformerEmbedder`, needs ``ragloom[st]``).
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path
from typing import Any

from ragloom.embed.base import Embedder, HashingEmbedder
from ragloom.errors import ConfigError, EmbeddingError

__all__ = [
    "DEFAULT_MODEL_NAME",
    "DEFAULT_SPEC",
    "HASHING_SPEC",
    "default_model_dir",
    "load_embedder",
]

DEFAULT_SPEC = "default"
HASHING_SPEC = "hashing"

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
"""Folder under ``ragloom/embed/models/`` of the shipped model (scripts/export_model.py)."""

DEFAULT_HASHING_DIM = 64
"""Dimension of ``"hashing"`` without ``:DIM`` (HashingEmbedder's default)."""


def default_model_dir() -> Path:
    """Folder of the model shipped with ragloom (inside the installed package)."""
    root = importlib.resources.files("ragloom.embed").joinpath("models", DEFAULT_MODEL_NAME)
    # ragloom installs as plain files (never zipped): the Traversable is a real path.
    return Path(str(root))


def _hashing(spec: str) -> HashingEmbedder:
    _, sep, rest = spec.partition(":")
    if not sep:
        return HashingEmbedder(DEFAULT_HASHING_DIM)
    try:
        dim = int(rest)
    except ValueError:
        raise ConfigError(
            f"bad embedder spec {spec!r}: expected hashing:DIM with DIM an integer"
        ) from None
    return HashingEmbedder(dim)


def load_embedder(spec: str | None = None, **kw: Any) -> Embedder:
    """Build the embedder a spec names (see the module docstring).

    Keyword arguments go to the embedder's constructor (``threads``/``max_seq_length`` for
    ONNX, ``device`` for sentence-transformers); the hashing embedder takes none. ONNX models
    load lazily, so this is cheap for them.
    """
    from ragloom.embed.onnx import MODEL_FILE, TOKENIZER_FILE, OnnxEmbedder

    if spec is None or spec.strip() == DEFAULT_SPEC:
        model_dir = default_model_dir()
        if not (model_dir / MODEL_FILE).is_file():
            raise EmbeddingError(
                f"the default embedding model is missing from this installation ({model_dir}); "
                "reinstall ragloom"
            )
        emb = OnnxEmbedder(model_dir, **kw)
        emb.spec = DEFAULT_SPEC
        return emb
    spec = spec.strip()
    if spec == HASHING_SPEC or spec.startswith(HASHING_SPEC + ":"):
        if kw:
            raise ConfigError(f"the hashing embedder takes no options, got {sorted(kw)}")
        return _hashing(spec)
    path = Path(spec).expanduser()
    if (path / MODEL_FILE).is_file() and (path / TOKENIZER_FILE).is_file():
        return OnnxEmbedder(path, **kw)
    from ragloom.embed.st import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(spec, **kw)
