"""Any sentence-transformers model, behind the optional extra ``ragloom[st]``.

The model is either a local folder or a name already in the local Hugging Face cache: ragloom
never downloads weights, so the load runs with ``HF_HUB_OFFLINE=1`` and ``local_files_only``.
sentence-transformers (and torch) are imported when the embedder is created, never at module
import.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragloom.embed.base import DEFAULT_BATCH_SIZE, ProgressCallback, check_texts
from ragloom.errors import ConfigError, EmbeddingError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["INSTALL_HINT", "SentenceTransformerEmbedder"]

INSTALL_HINT = "pip install 'ragloom[st]'"
"""How to get the optional dependency (the ``st`` extra in pyproject.toml)."""

_OFFLINE_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
"""Environment switches huggingface_hub / transformers read to stay off the network."""

_offline_lock = threading.Lock()


@contextlib.contextmanager
def _hub_offline() -> Iterator[None]:
    """Force Hugging Face offline mode for the duration of a load, then restore the state.

    huggingface_hub reads ``HF_HUB_OFFLINE`` once, at import, into
    ``huggingface_hub.constants.HF_HUB_OFFLINE``; set both the environment (for a first import)
    and the constant (if it was imported before).
    """
    with _offline_lock:
        saved_env = {k: os.environ.get(k) for k in _OFFLINE_ENV}
        for k in _OFFLINE_ENV:
            os.environ[k] = "1"
        constants: Any = None
        saved_const: Any = None
        try:
            import huggingface_hub.constants as constants

            saved_const = constants.HF_HUB_OFFLINE
            constants.HF_HUB_OFFLINE = True
        except ImportError:  # pragma: no cover - sentence-transformers depends on it
            constants = None
        try:
            yield
        finally:
            if constants is not None:
                constants.HF_HUB_OFFLINE = saved_const
            for k, v in saved_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


class SentenceTransformerEmbedder:
    """Embed with ``sentence_transformers.SentenceTransformer`` on the CPU.

    ``name_or_path`` is a local model folder or a Hugging Face model name present in the local
    cache. The model loads in the constructor, so a missing package or model fails at once with
    :class:`EmbeddingError`. ``model_id`` is ``<name>@st`` for a cached name and
    ``<absolute folder path>@st`` for a folder (a folder name alone is often generic, e.g.
    ``model``); the suffix keeps torch vectors apart from the slightly different ONNX ones.
    """

    def __init__(self, name_or_path: str | os.PathLike[str], *, device: str = "cpu") -> None:
        spec = os.fspath(name_or_path)
        if not spec.strip():
            raise ConfigError("empty sentence-transformers model name")
        self.spec = spec
        path = Path(spec).expanduser()
        self._is_path = path.is_dir()
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbeddingError(
                f"embedding model {spec!r} needs sentence-transformers, which is not installed: "
                f"{INSTALL_HINT}"
            ) from exc
        try:
            with _hub_offline():
                self._model: Any = SentenceTransformer(
                    str(path) if self._is_path else spec, device=device, local_files_only=True
                )
        except Exception as exc:  # OSError, ValueError, HF errors: all mean "cannot load"
            if self._is_path:
                raise EmbeddingError(
                    f"cannot load sentence-transformers model from {path}: {exc}"
                ) from exc
            raise EmbeddingError(
                f"embedding model {spec!r} is neither a local folder nor in the local Hugging "
                "Face cache, and ragloom never downloads models. Pass a model folder, or fetch "
                f"it once where there is network access (details: {exc})"
            ) from exc
        # Renamed in sentence-transformers 6 (the old name warns); 3.x-5.x have only the old.
        get_dim = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        dim = get_dim()
        if not isinstance(dim, int) or dim < 1:
            raise EmbeddingError(f"model {spec!r} does not report its embedding dimension")
        self._dim = dim
        name = str(path.resolve()) if self._is_path else spec
        self._model_id = f"{name}@st"

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.spec!r})"

    @property
    def model_id(self) -> str:
        """``<model name or absolute folder>@st``."""
        return self._model_id

    @property
    def dim(self) -> int:
        """The model's sentence embedding dimension."""
        return self._dim

    def embed_documents(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        progress: ProgressCallback | None = None,
    ) -> np.ndarray:
        """Embed with ``SentenceTransformer.encode`` in length-sorted batches, normalised."""
        import numpy as np

        n = check_texts(texts, batch_size)
        if n == 0:
            return np.zeros((0, self._dim), dtype=np.float32)
        # Sort by length globally (encode() only sorts within one call), batch, restore order.
        order = sorted(range(n), key=lambda i: -len(texts[i]))
        out = np.empty((n, self._dim), dtype=np.float32)
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            try:
                vecs = self._model.encode(
                    [texts[i] for i in idx],
                    batch_size=batch_size,
                    convert_to_numpy=True,
                    normalize_embeddings=True,
                    show_progress_bar=False,
                )
            except Exception as exc:
                raise EmbeddingError(f"embedding model {self._model_id} failed: {exc}") from exc
            out[idx] = np.asarray(vecs, dtype=np.float32)
            if progress is not None:
                progress(start + len(idx))
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query; see :meth:`Embedder.embed_query`."""
        result: np.ndarray = self.embed_documents([text])[0]
        return result
