"""Fetch each hit's text from disk, fresh or not at all (ploke crucial notes sections 6 and 7).

For each hit the file is located under the indexed root (a path that is absolute, contains
``..``, or resolves through a symlink to outside the root is refused and never opened), read
once, and its tracking hash compared with the hit's ``file_hash``:

* equal: the hit's span is served from the current bytes;
* different (the file changed since indexing): the file is re-parsed with the chunker and the
  chunk with the same stable id (CanonId) is served from its new position ("re-resolved"); if
  the id no longer exists (symbol removed or renamed) the hit is dropped. Both are counted, so
  stale text is never served silently;
* missing file: dropped and counted as stale.

Reads go through a small process-wide cache (:data:`FILE_CACHE`) whose entries are valid only
while the file's ``stat`` is unchanged, so a changed file is always read afresh.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Protocol

from ragloom.ingest.ids import file_hash, text_hash
from ragloom.types import Hit

__all__ = [
    "ChunkLike",
    "FetchReport",
    "FileReader",
    "Resolver",
    "Snippet",
    "default_resolver",
    "fetch_snippets",
    "safe_path",
    "split_lines",
]

log = logging.getLogger(__name__)


class ChunkLike(Protocol):
    """What re-resolution needs from a chunk (``ragloom.types.Chunk`` satisfies it)."""

    @property
    def id(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def start_line(self) -> int: ...
    @property
    def end_line(self) -> int: ...


Resolver = Callable[[str, bytes, str], Sequence[ChunkLike]]
"""``(repo-relative path, file bytes, file hash) -> chunks of the current file``."""


def default_resolver(path: str, data: bytes, fhash: str) -> Sequence[ChunkLike]:
    """Re-parse a file with ragloom's chunker (imported lazily)."""
    from ragloom.ingest.chunker import chunk_file

    return chunk_file(path, data, fhash)


@dataclass(slots=True)
class Snippet:
    """A hit whose text was read (and verified fresh) from the current file."""

    hit: Hit
    start_line: int
    end_line: int
    node_hash: str
    reresolved: bool = False


@dataclass(slots=True)
class FetchReport:
    """Counters of what fetching saw."""

    stale_reresolved: int = 0
    stale_dropped: int = 0
    refused: int = 0
    refused_paths: list[str] = field(default_factory=list)


def split_lines(data: bytes) -> list[str]:
    """Split file bytes into lines numbered like the chunker (``\\n`` separated, ``\\r`` cut)."""
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if "\r" not in text:  # the common case: no per-line work
        return lines
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def safe_path(root_real: Path, rel: str) -> Path | None:
    """The real path of ``rel`` under ``root_real``, or None if it escapes or is not a file.

    Checks are done on the path string and on the fully resolved path (following symlinks)
    before anything is opened.
    """
    found = _safe_real(str(root_real), rel)
    return Path(found[0]) if found is not None else None


def _safe_real(root_real: str, rel: str) -> tuple[str, os.stat_result] | None:
    """:func:`safe_path` on strings, with the file's ``stat`` (the file cache's key).

    The same checks as ``Path.resolve(strict=True)`` / ``is_relative_to`` / ``is_file``
    (pathlib 3.11 resolves with ``os.path.realpath``), without building Path objects: at ~7
    files per query the pathlib layers cost more than the system calls.
    """
    if not rel or "\x00" in rel or "\\" in rel:
        return None
    pure = PurePosixPath(rel)
    if pure.is_absolute() or any(part == ".." for part in pure.parts) or os.path.isabs(rel):
        return None
    try:
        real, st = _resolve_under(root_real, pure.parts)
    except (OSError, RuntimeError, ValueError):
        return None
    prefix = root_real if root_real.endswith(os.sep) else root_real + os.sep
    if real != root_real and not real.startswith(prefix):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return real, st


def _resolve_under(root_real: str, parts: Sequence[str]) -> tuple[str, os.stat_result]:
    """``os.path.realpath(root_real/parts, strict=True)`` and the stat of what it names.

    ``root_real`` is already resolved, so only the components below it are examined: each is
    ``lstat``-ed, and the first symlink hands the whole path to ``os.path.realpath`` (which
    then also follows the link). Without a symlink the joined path is its own real path and
    the last ``lstat`` is the file's ``stat``. Raises OSError like ``realpath(strict=True)``
    when a component is missing or not a directory.
    """
    path = root_real
    st: os.stat_result | None = None
    for part in parts:
        path = os.path.join(path, part)
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            real = os.path.realpath(os.path.join(root_real, *parts), strict=True)
            return real, os.stat(real)
    if st is None:
        st = os.stat(path)
    return path, st


FILE_CACHE_MAX_BYTES = 16 * 1024 * 1024
"""Bytes of file content the read cache keeps (its split lines take about twice that again)."""
FILE_CACHE_MAX_FILES = 1024
"""Files the read cache keeps, least recently used dropped first."""
FILE_CACHE_RACY_S = 2.0
"""A file changed less than this long ago is read but not cached: a filesystem with coarse
timestamps could otherwise let a second edit in the same tick, of the same size, keep the
same ``stat`` (git's "racily clean" rule)."""


class _FileCache:
    """Recently read files by real path: (bytes, tracking hash, split lines).

    An entry is used only while the file's ``stat`` (device, inode, size, mtime and ctime in
    nanoseconds) is unchanged, so an edit, a replacement or a touch re-reads the file; ctime
    cannot be set back by a writer. At 100k chunks a query's hits sit in ~7 files of ~300 KB
    together, read, hashed and split on every query before (docs/benchmarks.md, "Context
    latency at 100k"). Shared by threads: guarded by a lock; the lines lists handed out are
    shared and must not be modified.
    """

    def __init__(self, max_bytes: int, max_files: int) -> None:
        self.max_bytes = max_bytes
        self.max_files = max_files
        self._lock = threading.Lock()
        self._items: OrderedDict[str, tuple[tuple[int, ...], bytes, str, list[str]]] = OrderedDict()
        self._bytes = 0

    @staticmethod
    def _key(st: os.stat_result) -> tuple[int, ...]:
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def read(self, real: str, st: os.stat_result) -> tuple[bytes, str, list[str]]:
        """The file's bytes, ``file_hash`` and lines, from the cache when its stat matches."""
        key = self._key(st)
        with self._lock:
            got = self._items.get(real)
            if got is not None and got[0] == key:
                self._items.move_to_end(real)
                return got[1], got[2], got[3]
        with open(real, "rb") as fh:
            data = fh.read()
        fhash = file_hash(data)
        lines = split_lines(data)
        newest = max(st.st_mtime_ns, st.st_ctime_ns) / 1e9
        if len(data) != st.st_size or time.time() - newest < FILE_CACHE_RACY_S:
            return data, fhash, lines  # changed while read, or too recently to trust the stat
        if len(data) > self.max_bytes // 4:
            return data, fhash, lines
        with self._lock:
            old = self._items.pop(real, None)
            if old is not None:
                self._bytes -= len(old[1])
            self._items[real] = (key, data, fhash, lines)
            self._bytes += len(data)
            while self._items and (
                self._bytes > self.max_bytes or len(self._items) > self.max_files
            ):
                _, dropped = self._items.popitem(last=False)
                self._bytes -= len(dropped[1])
        return data, fhash, lines

    def clear(self) -> None:
        """Forget every file (tests and benchmarks of cold reads)."""
        with self._lock:
            self._items.clear()
            self._bytes = 0


FILE_CACHE = _FileCache(FILE_CACHE_MAX_BYTES, FILE_CACHE_MAX_FILES)
"""The process-wide read cache of :func:`fetch_snippets`."""


FileReader = Callable[[Sequence[str]], Mapping[str, bytes]]
"""Files' bytes by path, for a reader without the source tree (a PostgreSQL serving node
without a checkout: the bytes as they were indexed); a path left out is a missing file."""


def fetch_snippets(
    hits: Sequence[Hit],
    root: Path,
    *,
    resolver: Resolver | None = None,
    read_files: FileReader | None = None,
) -> tuple[list[Snippet], dict[str, list[str]], FetchReport]:
    """Read every hit from disk; return fresh snippets, current file lines by path, counters.

    ``resolver`` re-parses a changed file (default: ragloom's chunker). Hits keep their input
    order; dropped and refused hits are left out. ``read_files``: the files' bytes come from
    it, not from ``root`` (every path of a hit is asked for, once).
    """
    resolve = resolver or default_resolver
    root_real = root.resolve()
    root_str = str(root_real)
    report = FetchReport()
    files: dict[str, list[str]] = {}
    file_state: dict[str, tuple[bytes, str] | str] = {}
    chunks_by_path: dict[str, dict[str, ChunkLike] | None] = {}
    out: list[Snippet] = []
    if read_files is not None:
        paths = list(dict.fromkeys(h.path for h in hits))
        got = read_files(paths)
        for path in paths:
            data = got.get(path)
            if data is None:
                file_state[path] = "missing"
            else:
                file_state[path] = (data, file_hash(data))
                files[path] = split_lines(data)
    for hit in hits:
        if hit.path not in file_state:
            found = _safe_real(root_str, hit.path)
            if found is not None:
                data, fhash, lines = FILE_CACHE.read(*found)
                file_state[hit.path] = (data, fhash)
                files[hit.path] = lines
            elif _missing_inside(root_real, hit.path):
                file_state[hit.path] = "missing"
            else:
                file_state[hit.path] = "refused"
                report.refused_paths.append(hit.path)
                log.warning("refused to read %r: it escapes the indexed root", hit.path)
        state = file_state[hit.path]
        if state == "refused":
            report.refused += 1
            continue
        if isinstance(state, str):  # deleted since indexing
            report.stale_dropped += 1
            continue
        data, fhash = state
        lines = files[hit.path]
        if _is_fresh(hit, data, fhash, len(lines)):
            end = _remainder_end(hit.kind, hit.start_line, hit.end_line, hit.text, lines)
            out.append(Snippet(hit, hit.start_line, end, hit.node_hash or _span_hash(hit, lines)))
            continue
        if hit.path not in chunks_by_path:
            try:
                chunks_by_path[hit.path] = {c.id: c for c in resolve(hit.path, data, fhash)}
            except Exception as exc:  # the chunker may not support this file any more
                log.warning("re-parsing %r failed: %s", hit.path, exc)
                chunks_by_path[hit.path] = None
        by_id = chunks_by_path[hit.path]
        chunk = by_id.get(hit.id) if by_id is not None else None
        if chunk is None or not 1 <= chunk.start_line <= chunk.end_line <= len(lines):
            report.stale_dropped += 1
            continue
        report.stale_reresolved += 1
        end = _remainder_end(hit.kind, chunk.start_line, chunk.end_line, chunk.text, lines)
        out.append(Snippet(hit, chunk.start_line, end, text_hash(chunk.text), True))
    hashes = {path: st[1] for path, st in file_state.items() if not isinstance(st, str)}
    _window_long_lines(out, files, hashes)
    for path, lines in files.items():
        if lines and lines[0].startswith("\ufeff"):  # a UTF-8 byte order mark is not text
            files[path] = [lines[0][1:], *lines[1:]]
    return out, files, report


LONG_LINE_CHARS = 1000
"""A line longer than this (minified code, a data blob on one line) is shown as a window of
this many characters around where the file's best hit starts in it: context is cut at line
boundaries, so a 250 kB line fitted no budget at all, and every hit in it was left out."""


_LONGEST: OrderedDict[str, int] = OrderedDict()
"""Longest line of a file by its content hash (measured once per version: a large file's
lines cost about 0.1 ms an answer to measure again)."""
_LONGEST_MAX = 4096
_LONGEST_LOCK = threading.Lock()


def _longest_line(fhash: str | None, lines: list[str]) -> int:
    if fhash is None:
        return max(map(len, lines), default=0)
    with _LONGEST_LOCK:
        got = _LONGEST.get(fhash)
        if got is not None:
            _LONGEST.move_to_end(fhash)
            return got
    got = max(map(len, lines), default=0)
    with _LONGEST_LOCK:
        _LONGEST[fhash] = got
        if len(_LONGEST) > _LONGEST_MAX:
            _LONGEST.popitem(last=False)
    return got


def _window_long_lines(
    snippets: Sequence[Snippet], files: dict[str, list[str]], hashes: Mapping[str, str]
) -> None:
    """Replace each over-long line of the hits' files (in ``files``, a copy: the file cache's
    lists stay as read) by its window around the best hit that covers it; ``hashes``: the
    files' content hashes, which key their longest line."""
    from ragloom.ingest.chunker import part_label

    for path, lines in list(files.items()):
        if _longest_line(hashes.get(path), lines) <= LONG_LINE_CHARS:
            continue
        long = [i for i, line in enumerate(lines) if len(line) > LONG_LINE_CHARS]
        shown = list(lines)
        for i in long:
            line, at = lines[i], 0
            for sn in snippets:  # best first
                if sn.hit.path != path or not sn.start_line <= i + 1 <= sn.end_line:
                    continue
                text = sn.hit.text
                if part_label(sn.hit.id, text) is not None:  # "# Foo (part 3 of 9)" first
                    text = text.partition("\n")[2]
                probe = text.strip()[:64]
                found = line.find(probe) if probe else -1
                if found >= 0:
                    at = found
                    break
            start = max(0, at - LONG_LINE_CHARS // 8)
            end = min(len(line), start + LONG_LINE_CHARS)
            start = max(0, end - LONG_LINE_CHARS)
            head = f"... [{start} characters] " if start else ""
            tail = f" [{len(line) - end} characters] ..." if end < len(line) else ""
            shown[i] = head + line[start:end] + tail
        files[path] = shown


def _remainder_end(kind: str, start: int, end: int, text: str, lines: list[str]) -> int:
    """Last line to show for a hit.

    A ``module`` chunk spans its whole file but holds only the code between the symbols
    (docstring, imports, constants, top-level statements). Its span read from disk would bring
    every function with it, so it is cut to its first contiguous block: the lines at the start
    of its span that its text repeats verbatim (the module header). Other chunks keep their
    span; so does a module chunk whose text is unknown or starts elsewhere.
    """
    if kind != "module" or not text:
        return end
    n = 0
    for i, chunk_line in enumerate(text.split("\n")):
        line_no = start + i
        if line_no > end or line_no > len(lines) or lines[line_no - 1] != chunk_line.rstrip("\r"):
            break
        n += 1
    return start + n - 1 if n else end


def _missing_inside(root_real: Path, rel: str) -> bool:
    """True when ``rel`` is a well-formed in-root path that simply does not exist (no escape)."""
    if not rel or "\x00" in rel or "\\" in rel:
        return False
    pure = PurePosixPath(rel)
    if pure.is_absolute() or any(part == ".." for part in pure.parts) or os.path.isabs(rel):
        return False
    candidate = root_real / pure
    if os.path.lexists(candidate):  # exists but resolves outside, or is not a regular file
        return False
    # missing: check that no existing ancestor is a symlink leading outside the root
    parent = candidate.parent
    while parent != root_real and not parent.exists():
        parent = parent.parent
    try:
        return parent.resolve().is_relative_to(root_real)
    except (OSError, RuntimeError):
        return False


def _span_hash(hit: Hit, lines: list[str]) -> str:
    return text_hash("\n".join(lines[hit.start_line - 1 : hit.end_line]))


def _is_fresh(hit: Hit, data: bytes, fhash: str, n_lines: int) -> bool:
    """The hit's recorded span is valid in the current bytes."""
    if not 1 <= hit.start_line <= hit.end_line <= n_lines:
        return False
    if hit.file_hash:
        return hit.file_hash == fhash
    if hit.node_hash and 0 <= hit.start_byte < hit.end_byte <= len(data):
        span = data[hit.start_byte : hit.end_byte].decode("utf-8", errors="surrogateescape")
        return text_hash(span) == hit.node_hash
    return False
