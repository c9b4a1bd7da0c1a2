"""Turn an embedder spec string into an :class:`~ragloom.embed.base.Embedder`.

Specs (what ``ragloom index --model SPEC`` and the index manifest hold):

- ``None`` or ``"default"``: the model shipped inside ragloom (all-MiniLM-L6-v2, ONNX). For
  ``None`` only, ``RAGLOOM_EMBEDDING_PROVIDER=openai`` selects the ``"openai"`` spec below
  instead (``default``/``local``/unset keep the shipped model); ``"default"`` never looks at it.
- ``"hashing"`` or ``"hashing:DIM"``: :class:`~ragloom.embed.base.HashingEmbedder` (tests,
  tiny machines).
- an OpenAI-compatible embeddings server
  (:class:`~ragloom.embed.openai_compat.OpenAICompatEmbedder`; Ollama, llama.cpp, vLLM,
  LM Studio, text-embeddings-inference, OpenAI)::

      openai[:MODEL[@BASE_URL]][#NAME=VALUE[&NAME=VALUE]...]

  ``MODEL`` is the server's model name (everything up to the first ``@`` that starts an
  ``http://`` or ``https://`` URL, so ``nomic-embed-text:latest`` and ``org/name`` are fine; no
  ``#``); ``BASE_URL`` the API root whose ``/embeddings`` route is called, e.g.
  ``http://localhost:11434/v1``. A missing model comes from ``RAGLOOM_EMBEDDING_MODEL``, a
  missing URL from ``RAGLOOM_EMBEDDING_BASE_URL``; there is no built-in URL, so code is never
  sent to a remote service unless a URL says so. The options after ``#`` are constructor
  arguments: ``dim``, ``batch_size``, ``max_chars``, ``timeout``, ``max_retries``,
  ``backoff``. Examples: ``openai:nomic-embed-text@http://localhost:11434/v1``,
  ``openai:bge-small@http://127.0.0.1:8080/v1#max_chars=1500``, ``openai`` (all from the
  environment). The API key is never part of a spec (``RAGLOOM_EMBEDDING_API_KEY``, else
  ``OPENAI_API_KEY``).
- a folder holding ``model.onnx`` and ``tokenizer.json``: :class:`~ragloom.embed.onnx.OnnxEmbedder`.
- anything else: a sentence-transformers model folder or cached model name
  (:class:`~ragloom.embed.st.SentenceTransformerEmbedder`, needs ``ragloom[st]``).
"""

from __future__ import annotations

import importlib.resources
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragloom.embed.base import Embedder, HashingEmbedder
from ragloom.errors import ConfigError, EmbeddingError

if TYPE_CHECKING:
    from ragloom.embed.openai_compat import OpenAICompatEmbedder

__all__ = [
    "DEFAULT_MODEL_NAME",
    "DEFAULT_SPEC",
    "HASHING_SPEC",
    "OPENAI_SPEC",
    "PROVIDER_ENV",
    "default_model_dir",
    "load_embedder",
    "openai_embedder",
]

DEFAULT_SPEC = "default"
HASHING_SPEC = "hashing"

OPENAI_SPEC = "openai"

PROVIDER_ENV = "RAGLOOM_EMBEDDING_PROVIDER"
"""Provider used when no spec is given (``load_embedder(None)``): ``openai`` or ``default``."""
MODEL_ENV = "RAGLOOM_EMBEDDING_MODEL"
"""Model name for an ``openai`` spec that names none."""
BASE_URL_ENV = "RAGLOOM_EMBEDDING_BASE_URL"
"""API root for an ``openai`` spec that names none."""

_LOCAL_PROVIDERS = ("default", "local")
"""``RAGLOOM_EMBEDDING_PROVIDER`` values meaning the shipped model."""

OPENAI_GRAMMAR = "openai[:MODEL[@http://HOST:PORT/v1]][#NAME=VALUE&...]"
"""The ``openai`` spec form, as error messages name it."""

_OPENAI_OPTIONS: dict[str, type] = {
    "dim": int,
    "batch_size": int,
    "max_chars": int,
    "timeout": float,
    "max_retries": int,
    "backoff": float,
}
"""Options allowed after ``#`` in an ``openai`` spec, with their types."""

# MODEL@URL: the model runs up to the first "@" that starts a scheme://
_MODEL_AT_URL = re.compile(r"(?P<model>.+?)@(?P<url>[A-Za-z][A-Za-z0-9+.-]*://.*)", re.DOTALL)

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


def _env(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def _openai_options(spec: str, fragment: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in fragment.split("&"):
        name, eq, value = item.partition("=")
        name = name.strip()
        kind = _OPENAI_OPTIONS.get(name)
        if not eq or kind is None:
            raise ConfigError(
                f"bad embedder spec {spec!r}: unknown option {item!r} after '#'; expected "
                f"NAME=VALUE with NAME in {', '.join(_OPENAI_OPTIONS)}"
            )
        try:
            out[name] = kind(value.strip())
        except ValueError:
            raise ConfigError(
                f"bad embedder spec {spec!r}: option {name} needs {kind.__name__}, got {value!r}"
            ) from None
    return out


def openai_embedder(
    spec: str = OPENAI_SPEC, env: Mapping[str, str] | None = None, **kw: Any
) -> OpenAICompatEmbedder:
    """Build the :class:`~ragloom.embed.openai_compat.OpenAICompatEmbedder` an ``openai`` spec
    names (grammar in the module docstring), filling gaps from ``env`` (default
    ``os.environ``); keyword arguments override the ``#`` options."""
    from ragloom.embed.openai_compat import OpenAICompatEmbedder

    env = os.environ if env is None else env
    head, hash_, fragment = spec.strip().partition("#")
    options = _openai_options(spec, fragment) if hash_ else {}
    options.update(kw)
    head = head.strip()
    if head != OPENAI_SPEC and not head.startswith(OPENAI_SPEC + ":"):
        raise ConfigError(f"bad embedder spec {spec!r}: expected {OPENAI_GRAMMAR}")
    rest = head[len(OPENAI_SPEC) + 1 :].strip()
    model: str | None
    url: str | None
    match = _MODEL_AT_URL.fullmatch(rest)
    if match:
        model, url = match.group("model").strip(), match.group("url").strip()
    elif "://" in rest or rest.startswith("@"):
        raise ConfigError(
            f"bad embedder spec {spec!r}: expected {OPENAI_GRAMMAR} (model name, then @URL)"
        )
    else:
        model, url = rest or None, None
    if head != OPENAI_SPEC and not model:
        raise ConfigError(f"bad embedder spec {spec!r}: no model name; expected {OPENAI_GRAMMAR}")
    model = model or _env(env, MODEL_ENV)
    url = url or _env(env, BASE_URL_ENV)
    if not model or not url:
        missing = [n for n, v in ((MODEL_ENV, model), (BASE_URL_ENV, url)) if not v]
        raise ConfigError(
            f"embedder spec {spec!r} needs {' and '.join(missing)} set, or the full form "
            "openai:MODEL@http://HOST:PORT/v1 (e.g. openai:nomic-embed-text@http://localhost:11434/v1)"
        )
    try:
        return OpenAICompatEmbedder(model, url, **options)
    except TypeError as exc:  # an unknown keyword argument
        raise ConfigError(f"bad options for the openai embedder: {exc}") from None


def load_embedder(spec: str | None = None, **kw: Any) -> Embedder:
    """Build the embedder a spec names (see the module docstring).

    Keyword arguments go to the embedder's constructor (``threads``/``max_seq_length`` for
    ONNX, ``device`` for sentence-transformers, ``dim``/``batch_size``/``max_chars``/...
    for ``openai``); the hashing embedder takes none. ONNX models load lazily and the
    ``openai`` embedder makes no request until it embeds or its ``dim`` is read, so this is
    cheap for them. A malformed spec is a :class:`ConfigError` naming the expected form.
    """
    from ragloom.embed.onnx import MODEL_FILE, TOKENIZER_FILE, OnnxEmbedder

    if spec is None:
        provider = (_env(os.environ, PROVIDER_ENV) or DEFAULT_SPEC).lower()
        if provider == OPENAI_SPEC:
            return openai_embedder(OPENAI_SPEC, **kw)
        if provider not in _LOCAL_PROVIDERS:
            raise ConfigError(
                f"{PROVIDER_ENV}={provider!r} is not a provider; choose from "
                f"{', '.join((*_LOCAL_PROVIDERS, OPENAI_SPEC))}"
            )
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
    head, colon, rest = spec.partition(":")
    if colon and head.lower() in (OPENAI_SPEC, HASHING_SPEC) and head != head.lower():
        spec = f"{head.lower()}:{rest}"  # `OpenAI:...` is `openai:...`
    elif spec.lower() in (OPENAI_SPEC, HASHING_SPEC, DEFAULT_SPEC):
        spec = spec.lower()
    if spec == DEFAULT_SPEC:
        return load_embedder(DEFAULT_SPEC, **kw)
    if spec == HASHING_SPEC or spec.startswith(HASHING_SPEC + ":"):
        if kw:
            raise ConfigError(f"the hashing embedder takes no options, got {sorted(kw)}")
        return _hashing(spec)
    if spec == OPENAI_SPEC or spec.startswith((OPENAI_SPEC + ":", OPENAI_SPEC + "#")):
        return openai_embedder(spec, **kw)
    if spec.startswith("openai-compat:"):
        raise ConfigError(
            f"{spec!r} is a model id, not a spec; expected {OPENAI_GRAMMAR}, e.g. "
            "openai:nomic-embed-text@http://localhost:11434/v1"
        )
    path = Path(spec).expanduser()
    if (path / MODEL_FILE).is_file() and (path / TOKENIZER_FILE).is_file():
        # kept as an absolute path: the index names its model by it, and a relative one
        # would mean another folder (or none) from anywhere else
        emb_dir = path.resolve()
        onnx = OnnxEmbedder(emb_dir, **kw)
        onnx.spec = str(emb_dir)
        return onnx
    if (path / MODEL_FILE).is_file() or (path / TOKENIZER_FILE).is_file():
        missing = TOKENIZER_FILE if (path / MODEL_FILE).is_file() else MODEL_FILE
        raise EmbeddingError(f"the model folder {path} has no {missing}")
    looks_like_path = spec.startswith(("/", "./", "../", "~"))
    if looks_like_path and not path.exists():
        raise EmbeddingError(
            f"no model folder at {spec} (an ONNX model folder holds {MODEL_FILE} and "
            f"{TOKENIZER_FILE}; a sentence-transformers name has no leading / or ./)"
        )
    if (
        path.is_dir()
        and not (path / "modules.json").is_file()
        and not (path / "config.json").is_file()
    ):
        raise EmbeddingError(
            f"{path} is not a model folder: it has no {MODEL_FILE} and {TOKENIZER_FILE} (ONNX) "
            "nor a sentence-transformers model"
        )
    from ragloom.embed.st import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(spec, **kw)
