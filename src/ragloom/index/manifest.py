"""The index folder describes itself in ``manifest.json``.

It records the ragloom version that wrote it, the schema version, the BM25 tokenizer version,
the embedding model id and dimension and the indexed root. Opening checks each against what
this ragloom understands and refuses a mismatch with a message that says how to rebuild.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ragloom._version import __version__
from ragloom.errors import IncompatibleIndexError
from ragloom.index.atomic import atomic_write_bytes, atomic_write_json
from ragloom.index.store import SCHEMA_VERSION
from ragloom.index.tokenize import TOKENIZER_VERSION

__all__ = ["FORMAT_VERSION", "Manifest", "ensure_gitignore", "read_manifest", "write_manifest"]

FORMAT_VERSION = 1
"""Version of the folder layout (files beside the database)."""

MANIFEST_NAME = "manifest.json"


@dataclass(frozen=True, slots=True)
class Manifest:
    format_version: int
    ragloom_version: str
    schema_version: int
    tokenizer_version: str
    embedding_model: str
    embedding_dim: int
    embedding_spec: str
    root: str
    created_at: float

    @classmethod
    def new(cls, root: str, model_id: str, dim: int, spec: str) -> Manifest:
        """``root`` is stored relative to the index folder when it contains it."""
        return cls(
            FORMAT_VERSION,
            __version__,
            SCHEMA_VERSION,
            TOKENIZER_VERSION,
            model_id,
            dim,
            spec,
            root,
            time.time(),
        )


def read_manifest(index_dir: Path) -> Manifest | None:
    path = index_dir / MANIFEST_NAME
    if not path.exists():
        return None
    try:
        raw = json.loads(path.read_text())
        manifest = Manifest(**raw)
    except (ValueError, TypeError) as exc:
        raise IncompatibleIndexError(
            f"{path} is unreadable ({exc}); rebuild with `ragloom index PATH --rebuild`"
        ) from exc
    if manifest.format_version != FORMAT_VERSION:
        raise IncompatibleIndexError(
            f"index at {index_dir} has format version {manifest.format_version}, this ragloom "
            f"{__version__} reads version {FORMAT_VERSION}; rebuild with "
            "`ragloom index PATH --rebuild`"
        )
    if manifest.schema_version > SCHEMA_VERSION:
        raise IncompatibleIndexError(
            f"index at {index_dir} was written by ragloom {manifest.ragloom_version} "
            f"(schema {manifest.schema_version}); this ragloom {__version__} supports schema "
            f"{SCHEMA_VERSION}: upgrade ragloom or rebuild with `ragloom index PATH --rebuild`"
        )
    return manifest


def write_manifest(index_dir: Path, manifest: Manifest) -> None:
    index_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(index_dir / MANIFEST_NAME, asdict(manifest))
    ensure_gitignore(index_dir)


def ensure_gitignore(index_dir: Path) -> None:
    """A ``.gitignore`` of ``*`` in the index folder, so git never shows the index (written
    once; a read-only folder is left as it is)."""
    gitignore = index_dir / ".gitignore"
    if not gitignore.exists():
        try:
            atomic_write_bytes(gitignore, b"*\n")
        except OSError:
            return
