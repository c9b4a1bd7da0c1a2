"""Walk a repository root and decide, for every file, whether to index it and why not.

Honours ``.gitignore`` files at every level and the repository's ``.git/info/exclude`` (git's
own matching rules via ``pathspec``; a file git tracks is indexed even where a rule matches it,
as git never ignores one) and
``.ragloomignore`` files with the same syntax; skips vendored and build folders, the index
folder, binaries, files above the size cap, secret-looking files and symlinks. Every entry the
walk meets is either listed or counted under exactly one skip reason, and no single entry can
abort the walk (a symlink cycle, a file deleted mid-walk, a folder without permissions...).

Symlinks are never followed, to files or to folders, the way git stores them as links: a link
whose target lies inside the root is counted ``symlink`` and its target is indexed once, under
its own path, if it is indexable there. Other links are counted by what they point at:

=====================  =====================================================================
``symlink``            target inside the root (file or folder): indexed under its own path
``symlink_outside``    target outside the root
``symlink_loop``       a cycle (``x -> x``, ``a -> b -> a``) or a folder enclosing the link
``symlink_dangling``   target does not exist
=====================  =====================================================================

The other reasons: ``excluded_dir``, ``gitignored``, ``ragloomignored``, ``secret``,
``binary``, ``too_large``, ``special`` (FIFOs, sockets, devices), ``unreadable`` (no
permission, I/O error; an unreadable folder counts once), ``vanished`` (deleted between the
directory listing and the next look; the indexer counts files deleted between walk and read
the same way) and ``bad_name`` (a name that is not valid UTF-8: it could not be stored).
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import pathspec

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "EXCLUDED_DIRS",
    "SECRET_PATTERNS",
    "SourceFile",
    "WalkResult",
    "is_binary",
    "read_source",
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
_VCS_FILES = frozenset({".git"})
"""Files skipped like :data:`EXCLUDED_DIRS` folders: ``.git`` of a linked work tree (``git
worktree add``) or a submodule, a file that names the repository's folder."""

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
log = logging.getLogger(__name__)

_IGNORE_FILE_MAX_BYTES = 1_000_000
_MISSING = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG})
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
"""No following a link swapped in after the walk, no blocking on a FIFO swapped in."""


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
    examples: dict[str, list[str]] = field(default_factory=dict)
    """The first :data:`SKIP_EXAMPLES` paths skipped for each reason, in walk order (a user
    asks which files were skipped, not only how many)."""

    def skip(self, reason: str, rel: str) -> None:
        """Count ``rel`` as skipped for ``reason`` (and keep it as an example)."""
        self.skipped[reason] += 1
        shown = self.examples.setdefault(reason, [])
        if len(shown) < SKIP_EXAMPLES:
            shown.append(rel.encode("utf-8", "backslashreplace").decode("utf-8"))


SKIP_EXAMPLES = 20
"""Paths :attr:`WalkResult.examples` keeps per reason."""


def is_binary(head: bytes) -> bool:
    """A NUL byte in the first 8 KiB means binary (git's own heuristic)."""
    return b"\x00" in head[:_SNIFF_BYTES]


def _os_reason(exc: OSError) -> str:
    return "vanished" if isinstance(exc, FileNotFoundError) else "unreadable"


def _read_regular(path: str | Path, max_bytes: int) -> tuple[bytes, os.stat_result] | str:
    """At most ``max_bytes`` of a regular file (never through a link), or why not."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        # ELOOP under O_NOFOLLOW: the walked file was replaced by a link since.
        return "vanished" if exc.errno == errno.ELOOP else _os_reason(exc)
    try:
        with open(fd, "rb", closefd=True) as fh:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return "special"
            if st.st_size > max_bytes:
                return "too_large"
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        return _os_reason(exc)
    if len(data) > max_bytes:
        return "too_large"
    return data, st


def read_source(sf: SourceFile, max_bytes: int) -> tuple[SourceFile, bytes] | str:
    """The bytes of a walked file with its size and mtime as read, or the skip reason.

    The file may have changed since the walk: it is read as it is now, and the returned
    ``SourceFile`` carries the size and mtime seen at open time (a later change shows as stale).
    A file deleted since the walk is ``vanished``, one that lost its permissions ``unreadable``,
    one that grew past the cap ``too_large``.
    """
    got = _read_regular(sf.abs, max_bytes)
    if isinstance(got, str):
        return got
    data, st = got
    if st.st_size != sf.size or st.st_mtime != sf.mtime:
        sf = replace(sf, size=st.st_size, mtime=st.st_mtime)
    return sf, data


def _load_spec(directory: str, name: str) -> pathspec.GitIgnoreSpec | None:
    # Like git (2.32+), an ignore file that is a symlink is not followed; nor is anything but
    # a regular file read (a FIFO named .gitignore would block the walk).
    got = _read_regular(os.path.join(directory, name), _IGNORE_FILE_MAX_BYTES)
    if isinstance(got, str):
        return None
    lines = got[0].decode("utf-8", errors="replace").splitlines()
    try:
        spec = pathspec.GitIgnoreSpec.from_lines(lines)
    except ValueError:
        # git passes over a line it cannot read (a lone "!", a trailing backslash) and keeps
        # the others; so does the walk, rather than stopping on one line of one ignore file
        good = [line for line in lines if _valid_pattern(line)]
        # info, not a warning: git itself passes over such lines without a word, and every
        # walk (status, search's freshness check) would repeat it
        log.info(
            "ignore file lines not understood, passed over",
            extra={"file": os.path.join(directory, name), "lines": len(lines) - len(good)},
        )
        spec = pathspec.GitIgnoreSpec.from_lines(good)
    return spec if len(spec.patterns) else None


def _valid_pattern(line: str) -> bool:
    try:
        pathspec.GitIgnoreSpec.from_lines([line])
    except ValueError:
        return False
    return True


def _within(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or below it (both absolute, normalised)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _link_reason(path: str, parent: str, root: str) -> str:
    """Why the symlink at ``path`` (in folder ``parent``) is not indexed."""
    try:
        st = os.stat(path)  # follows the chain: ELOOP on a cycle, ENOENT when dangling
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symlink_loop"
        if exc.errno in _MISSING:
            try:
                os.lstat(path)
            except OSError as gone:
                return _os_reason(gone)  # the link itself is gone
            return "symlink_dangling"
        return "unreadable"
    try:
        target = os.path.realpath(path)  # non-strict: never raises on a cycle
    except (OSError, RuntimeError, ValueError):
        return "unreadable"
    if stat.S_ISDIR(st.st_mode) and _within(parent, target):
        return "symlink_loop"  # a folder enclosing the link: following it would never end
    if not _within(target, root):
        return "symlink_outside"
    return "symlink"


_Spec = tuple[str, pathspec.GitIgnoreSpec, str]


def _tracked_but_ignored(root: str) -> tuple[frozenset[str], frozenset[str]]:
    """Files git tracks although an ignore rule matches them (``git add -f``, or a rule added
    later), relative to ``root``, and every folder above them: git never ignores a tracked
    file, and neither does the walk. One ``git ls-files`` (a few ms); empty sets outside a
    work tree or without git."""
    from ragloom.ingest.git import run_git

    code, out = run_git(
        ["ls-files", "-z", "--cached", "--ignored", "--exclude-standard"], Path(root)
    )
    if code != 0 or not out:
        return frozenset(), frozenset()
    files = frozenset(p for p in out.split("\0") if p and not p.startswith("../"))
    dirs = {p.rsplit("/", i)[0] for p in files for i in range(1, p.count("/") + 1)}
    return files, frozenset(dirs)


def walk(
    root: Path,
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    index_dir: Path | None = None,
) -> WalkResult:
    """Every indexable file under ``root`` (sorted by path) and the skip counts by reason.

    Never raises because of one entry: each entry of the tree is either listed in ``files`` or
    counted once in ``skipped``; a folder that cannot be listed is counted once.
    """
    root_real = os.path.realpath(root)
    index_real = os.path.realpath(index_dir) if index_dir is not None else None
    result = WalkResult()
    tracked, tracked_dirs = _tracked_but_ignored(root_real)

    def ignored(specs: tuple[_Spec, ...], rel: str, is_dir: bool) -> str | None:
        for base, spec, reason in specs:
            if base and not rel.startswith(base + "/"):
                continue
            sub = rel[len(base) + 1 :] if base else rel
            if spec.match_file(sub + "/" if is_dir else sub):
                return reason
        return None

    def file_reason(specs: tuple[_Spec, ...], path: str, name: str, rel: str) -> str | None:
        reason = ignored(specs, rel, False)
        if reason == "gitignored" and rel in tracked:
            reason = None  # git's rule: a tracked file is never ignored
        if reason:
            return reason
        if SECRET_PATTERNS.match_file(name):
            return "secret"
        if os.path.splitext(name)[1].lower() in BINARY_EXTENSIONS:
            return "binary"
        return None

    # Depth first with an explicit stack (no recursion limit on deep trees); folders hold
    # (absolute path, path relative to root, ignore specs of every folder above).
    stack: list[tuple[str, str, tuple[_Spec, ...]]] = [(root_real, "", ())]
    # the repository's own exclude file (`.git/info/exclude`), as git reads it at the top of
    # its work tree, after the root's .gitignore
    exclude = _load_spec(os.path.join(root_real, ".git", "info"), "exclude")
    while stack:
        directory, rel_dir, specs = stack.pop()
        for name, why in ((".gitignore", "gitignored"), (".ragloomignore", "ragloomignored")):
            spec = _load_spec(directory, name)
            if spec is not None:
                specs = (*specs, (rel_dir, spec, why))
        if exclude is not None and not rel_dir:
            specs = (*specs, ("", exclude, "gitignored"))
        try:
            with os.scandir(directory) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            result.skip(_os_reason(exc), rel_dir or ".")
            continue
        subdirs: list[tuple[str, str, tuple[_Spec, ...]]] = []
        for entry in entries:
            path, name = entry.path, entry.name
            rel = f"{rel_dir}/{name}" if rel_dir else name
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError:
                result.skip("bad_name", rel)  # undecodable bytes: the store holds UTF-8 text
                continue
            reason: str | None
            try:
                if entry.is_symlink():  # like git, a link is an entry of its own, not a folder
                    reason = ignored(specs, rel, False) or _link_reason(path, directory, root_real)
                    result.skip(reason, rel)
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if name in EXCLUDED_DIRS or path == index_real:
                        result.skip("excluded_dir", rel)
                        continue
                    reason = ignored(specs, rel, True)
                    if reason == "gitignored" and rel in tracked_dirs:
                        reason = None  # it holds tracked files (its others stay ignored)
                    if reason:
                        result.skip(reason, rel)
                        continue
                    subdirs.append((path, rel, specs))
                    continue
                if name in _VCS_FILES:
                    # git's own, as a folder is: a linked work tree's or a submodule's `.git`
                    # file points at the repository
                    result.skip("excluded_dir", rel)
                    continue
                reason = file_reason(specs, path, name, rel)
                if reason:
                    result.skip(reason, rel)
                    continue
                st = entry.stat(follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):
                    result.skip("special", rel)
                elif st.st_size > max_file_bytes:
                    result.skip("too_large", rel)
                elif not os.access(path, os.R_OK):
                    result.skip("unreadable", rel)
                else:
                    result.files.append(SourceFile(rel, Path(path), st.st_size, st.st_mtime))
            except OSError as exc:
                result.skip(_os_reason(exc), rel)
            except (RuntimeError, ValueError):
                result.skip("unreadable", rel)
        stack.extend(reversed(subdirs))
    result.files.sort(key=lambda f: f.rel)
    return result
