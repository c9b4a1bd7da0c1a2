"""Walk a repository root and decide, for every file, whether to index it and why not.

Honours ``.gitignore`` files at every level (git's own matching rules via ``pathspec``) and
``.ragloomignore`` files with the same syntax; skips vendored and build folders, the index
folder, binaries, files above the size cap, secret-looking files and symlinks that leave the
root. Every skip is counted by reason.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "EXCLUDED_DIRS",
    "SECRET_PATTERNS",
    "SourceFile",
    "WalkResult",
    "is_binary",
    "walk",
]

DEFAULT_MAX_FILE_BYTES = 1_000_000
"""Size cap: 1 MB holds any hand-written source file; larger ones are data or generated."""

EXCLUDED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        ".venv",
        "venv",
        "dist",
        "build",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
        ".ragloom",
        "target",
        ".gradle",
        ".idea",
        ".eggs",
        "vendor",
        "third_party",
        "bower_components",
        ".next",
        ".cache",
    }
)
"""Vendored, build and tool folders that never hold the project's own source."""

SECRET_PATTERNS = pathspec.GitIgnoreSpec.from_lines(
    [
        ".env",
        ".env.*",
        "*.pem",
        "*.key",
        "*.p12",
        "*.pfx",
        "*.jks",
        "*.keystore",
        "id_rsa*",
        "id_dsa*",
        "id_ecdsa*",
        "id_ed25519*",
        ".netrc",
        ".npmrc",
        ".pypirc",
        "*.secret",
        "*.secrets",
        "credentials.json",
        "secrets.json",
        "secrets.yml",
        "secrets.yaml",
        "*.tfstate",
    ],
)
"""Secret-looking file names: never read, never indexed."""

BINARY_EXTENSIONS = frozenset(
    [
        ".png",
        ".jpg",
        ".jpeg",
        ".gif",
        ".bmp",
        ".ico",
        ".webp",
        ".tif",
        ".tiff",
        ".pdf",
        ".zip",
        ".gz",
        ".tgz",
        ".bz2",
        ".xz",
        ".7z",
        ".rar",
        ".tar",
        ".jar",
        ".war",
        ".class",
        ".so",
        ".dylib",
        ".dll",
        ".exe",
        ".o",
        ".a",
        ".lib",
        ".obj",
        ".pyc",
        ".pyo",
        ".pyd",
        ".whl",
        ".egg",
        ".woff",
        ".woff2",
        ".ttf",
        ".otf",
        ".eot",
        ".mp3",
        ".mp4",
        ".wav",
        ".ogg",
        ".flac",
        ".avi",
        ".mov",
        ".mkv",
        ".webm",
        ".db",
        ".sqlite",
        ".sqlite3",
        ".bin",
        ".dat",
        ".npy",
        ".npz",
        ".pkl",
        ".pickle",
        ".onnx",
        ".pt",
        ".safetensors",
        ".parquet",
        ".wasm",
    ]
)
"""Extensions treated as binary without reading the file."""

_SNIFF_BYTES = 8192


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A file that will be indexed."""

    rel: str
    abs: Path
    size: int
    mtime: float


@dataclass(slots=True)
class WalkResult:
    files: list[SourceFile] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)


def is_binary(head: bytes) -> bool:
    """A NUL byte in the first 8 KiB means binary (git's own heuristic)."""
    return b"\x00" in head[:_SNIFF_BYTES]


def _load_spec(directory: Path, name: str) -> pathspec.GitIgnoreSpec | None:
    path = directory / name
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    spec = pathspec.GitIgnoreSpec.from_lines(lines)
    return spec if len(spec.patterns) else None


def walk(
    root: Path,
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    index_dir: Path | None = None,
) -> WalkResult:
    """Every indexable file under ``root`` (sorted by path) and the skip counts by reason."""
    root = root.resolve()
    result = WalkResult()
    index_real = index_dir.resolve() if index_dir is not None else None
    # Stack of (directory relative to root, spec, reason) from every ignore file above.
    specs: list[tuple[str, pathspec.GitIgnoreSpec, str]] = []

    def ignored(rel: str, is_dir: bool) -> str | None:
        for base, spec, reason in specs:
            if base and not rel.startswith(base + "/"):
                continue
            sub = rel[len(base) + 1 :] if base else rel
            if spec.match_file(sub + "/" if is_dir else sub):
                return reason
        return None

    def visit(directory: Path, rel_dir: str) -> Iterator[None]:
        pushed = 0
        for name, why in ((".gitignore", "gitignored"), (".ragloomignore", "ragloomignored")):
            spec = _load_spec(directory, name)
            if spec is not None:
                specs.append((rel_dir, spec, why))
                pushed += 1
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            result.skipped["unreadable"] += 1
            entries = []
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                result.skipped["unreadable"] += 1
                continue
            if is_dir:
                if entry.name in EXCLUDED_DIRS:
                    result.skipped["excluded_dir"] += 1
                    continue
                if index_real is not None and Path(entry.path).resolve() == index_real:
                    result.skipped["excluded_dir"] += 1
                    continue
                dir_reason = ignored(rel, True)
                if dir_reason:
                    result.skipped[dir_reason] += 1
                    continue
                yield from visit(Path(entry.path), rel)
                continue
            if is_link:
                target = Path(entry.path).resolve()
                if not target.is_relative_to(root) or target.is_dir():
                    result.skipped["symlink"] += 1
                    continue
            file_reason = ignored(rel, False)
            if file_reason:
                result.skipped[file_reason] += 1
                continue
            if SECRET_PATTERNS.match_file(entry.name):
                result.skipped["secret"] += 1
                continue
            if Path(entry.name).suffix.lower() in BINARY_EXTENSIONS:
                result.skipped["binary"] += 1
                continue
            try:
                st = entry.stat()
            except OSError:
                result.skipped["unreadable"] += 1
                continue
            if not os.path.isfile(entry.path):
                result.skipped["special"] += 1
                continue
            if st.st_size > max_file_bytes:
                result.skipped["too_large"] += 1
                continue
            result.files.append(SourceFile(rel, Path(entry.path), st.st_size, st.st_mtime))
        del specs[len(specs) - pushed :]
        yield None

    for _ in visit(root, ""):
        pass
    return result
