"""The :class:`Embedder` protocol and a dependency-free :class:`HashingEmbedder`.

An embedder turns texts into L2-normalised float32 vectors. Documents (code chunks) and
queries go through :meth:`Embedder.embed_documents` and :meth:`Embedder.embed_query`; for the
symmetric models ragloom ships the two are the same computation, but the split lets an
asymmetric model (query prefixes, separate towers) plug in without changing callers.

This module imports nothing heavy at import time (numpy is imported on first use) so that
``ragloom --help`` stays fast.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ragloom.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "HASHING_MODEL_PREFIX",
    "Embedder",
    "HashingEmbedder",
    "ProgressCallback",
    "code_words",
]

DEFAULT_BATCH_SIZE = 32
"""Texts per forward pass. 32 length-sorted chunks of <= 256 tokens was the fastest setting
measured for MiniLM on 2 CPU cores (docs/embedding.md, ../shared/research/DEPENDENCIES.md)."""

HASHING_MODEL_PREFIX = "ragloom/hashing-v1"
"""``model_id`` stem of :class:`HashingEmbedder`; bump the ``v1`` whenever its tokenisation or
hashing changes, so stored vectors made by an older version are recognised as stale."""

ProgressCallback = Callable[[int], None]
"""Called after each batch with the number of texts embedded so far."""


@runtime_checkable
class Embedder(Protocol):
    """Anything that maps texts to L2-normalised float32 vectors of a fixed dimension."""

    @property
    def model_id(self) -> str:
        """Identifies the model *and* its numeric variant (stored in the index manifest)."""
        ...

    @property
    def dim(self) -> int:
        """Vector dimension."""
        ...

    def embed_documents(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        progress: ProgressCallback | None = None,
    ) -> np.ndarray:
        """Embed ``texts``: float32 array of shape ``(len(texts), dim)``, rows of unit norm,
        in input order. ``progress`` is called with the number of texts done after each batch.
        An empty ``texts`` gives shape ``(0, dim)``."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query: float32 array of shape ``(dim,)`` with unit norm."""
        ...


def check_batch_size(batch_size: int) -> None:
    """Raise :class:`ConfigError` unless ``batch_size`` is a positive integer."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")


def check_texts(texts: Sequence[str], batch_size: int) -> int:
    """Validate ``embed_documents`` arguments; return the number of texts.

    A single string is refused (it would be embedded character by character).
    """
    check_batch_size(batch_size)
    if isinstance(texts, str):
        raise ConfigError("embed_documents takes a sequence of texts, not one string")
    return len(texts)


# ---------------------------------------------------------------------------------------------
# HashingEmbedder

# A word: an identifier (letters, digits, underscores, not starting with a digit) or a number.
_WORD = re.compile(r"[^\W\d]\w*|\d+")
# Parts of one identifier piece: acronyms before a capitalised word (HTTPServer -> HTTP Server),
# capitalised or lowercase words, remaining capitals, digit runs, runs of non-ASCII letters.
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_A-Za-z]+")

_HASH_KEY = b"ragloom-hashing-v1"
"""Key of the blake2b feature hash: fixed, so vectors are identical across processes, machines
and Python versions (the builtin ``hash`` is randomised per process)."""

_EMPTY_TOKEN = "\x00empty"
"""Pseudo-token for a text with no words, so even an empty text gets a unit vector."""

_HASH_CACHE_SIZE = 1 << 16
"""Tokens whose (bucket, sign) are memoised; identifiers repeat a lot in code."""


def code_words(text: str) -> list[str]:
    """Code-aware word tokens, lowercased: each identifier whole *and* its parts.

    ``parseHTTPHeader`` gives ``parsehttpheader parse http header``; ``snake_case`` gives
    ``snake_case snake case``; a one-part identifier is emitted once. Numbers are kept.
    """
    out: list[str] = []
    for match in _WORD.finditer(text):
        word = match.group(0)
        lowered = word.lower()
        out.append(lowered)
        parts = [p.lower() for piece in word.split("_") if piece for p in _PART.findall(piece)]
        if len(parts) > 1:
            out.extend(parts)
    return out


@lru_cache(maxsize=_HASH_CACHE_SIZE)
def _bucket(token: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8, key=_HASH_KEY).digest()
    value = int.from_bytes(digest, "little")
    # Low bit picks the sign (signed feature hashing keeps inner products unbiased),
    # the remaining bits pick the bucket.
    return (value >> 1) % dim, (1.0 if value & 1 else -1.0)


class HashingEmbedder:
    """Signed feature hashing of :func:`code_words` tokens into ``dim`` buckets.

    Each distinct token adds ``1 + log(count)`` (sublinear term frequency) with a hashed sign to
    its bucket; the vector is then L2-normalised. It is deterministic, needs only numpy and
    embeds thousands of chunks per second, but it only captures shared vocabulary, not meaning:
    use it for tests of other layers and on machines too small for a neural model, never as the
    default. A text without words (or whose hashed features cancel exactly) maps to the vector
    of a fixed pseudo-token, so every row still has unit norm.
    """

    def __init__(self, dim: int = 64) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ConfigError(f"hashing embedder dimension must be a positive integer, got {dim!r}")
        self._dim = dim
        self.spec = f"hashing:{dim}"

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self._dim})"

    @property
    def model_id(self) -> str:
        """``ragloom/hashing-v1@<dim>d``."""
        return f"{HASHING_MODEL_PREFIX}@{self._dim}d"

    @property
    def dim(self) -> int:
        """Vector dimension given at construction."""
        return self._dim

    def _embed_one(self, text: str, out: np.ndarray) -> None:
        import math

        counts: dict[str, int] = {}
        for tok in code_words(text):
            counts[tok] = counts.get(tok, 0) + 1
        if not counts:
            counts[_EMPTY_TOKEN] = 1
        for tok, n in counts.items():
            idx, sign = _bucket(tok, self._dim)
            out[idx] += sign * (1.0 + math.log(n))
        norm = float(math.sqrt(float(out @ out)))
        if norm < 1e-12:  # every feature cancelled: fall back to the empty-text vector
            out[:] = 0.0
            idx, sign = _bucket(_EMPTY_TOKEN, self._dim)
            out[idx] = sign
        else:
            out /= norm

    def embed_documents(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        progress: ProgressCallback | None = None,
    ) -> np.ndarray:
        """Hash each text; see :meth:`Embedder.embed_documents`."""
        import numpy as np

        check_batch_size(batch_size)
        n = len(texts)
        # float64 accumulation, one rounding to float32 at the end.
        acc = np.zeros((n, self._dim), dtype=np.float64)
        for start in range(0, n, batch_size):
            stop = min(start + batch_size, n)
            for i in range(start, stop):
                self._embed_one(texts[i], acc[i])
            if progress is not None:
                progress(stop)
        return acc.astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        """Hash one query; see :meth:`Embedder.embed_query`."""
        result: np.ndarray = self.embed_documents([text])[0]
        return result
