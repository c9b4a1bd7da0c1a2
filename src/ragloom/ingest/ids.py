"""Stable ids (CanonId) and tracking hashes.

The chunk id is a UUIDv5 over ``source kind + repo-relative path + qualified symbol path +
kind``: it does not depend on the chunk's position or text, so it survives edits elsewhere in
the file and moving the symbol within the file. Tracking hashes are BLAKE2b-128 digests.
"""

from __future__ import annotations

import hashlib
import uuid

__all__ = ["RAGLOOM_NAMESPACE", "chunk_id", "file_hash", "text_hash"]

RAGLOOM_NAMESPACE = uuid.UUID("6f1d9a52-3c1b-5b8e-9a43-7d0c2e5f8a11")
"""Fixed namespace so ids are identical across machines and runs."""


def chunk_id(source: str, path: str, symbol: str, kind: str) -> str:
    """Return the stable UUIDv5 of a chunk."""
    return str(uuid.uuid5(RAGLOOM_NAMESPACE, f"{source}\x1f{path}\x1f{symbol}\x1f{kind}"))


def file_hash(data: bytes) -> str:
    """Tracking hash of a file's bytes."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def text_hash(text: str) -> str:
    """Tracking hash of a chunk's text (node tracking hash)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
