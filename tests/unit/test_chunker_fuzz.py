"""Fuzzing the chunker (hypothesis): random bytes, truncated and mutated fixtures of every
supported language, with the real size cap and with tiny ones that split nearly every symbol.

Properties: ``chunk_file`` never raises, and the symbol path never falls back to line windows
(that fallback hides a chunker bug); every chunk has ``1 <= start_line <= end_line <= lines``
and a byte span inside the file that starts on ``start_line``; texts are valid strings; ids are
unique within a file; the same input gives the same chunks; a later part of a split chunk
names its symbol and part, ``(part k of n)``.

The default run is small; ``RAGLOOM_FUZZ_EXAMPLES=10000`` (``make fuzz``) runs a campaign.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragloom.ingest import chunker
from ragloom.ingest.chunker import chunk_file, head_id, is_part, part_label
from ragloom.ingest.ids import file_hash
from ragloom.types import Chunk

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "langs"

FUZZ = settings(
    max_examples=int(os.environ.get("RAGLOOM_FUZZ_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_BASH = b"""#!/bin/bash
# Greets someone.
greet() {
  local name="$1"
  echo "hello $name"
}

if [ -n "$DEBUG" ]; then
  debug() { echo "debug: $*" >&2; }
fi

greet "world"
"""

SAMPLES: dict[str, bytes] = {
    **{p.name: p.read_bytes() for p in sorted(FIXTURES.iterdir()) if p.is_file()},
    "sample.sh": _BASH,
}
"""One sample per supported language: python, javascript, typescript, tsx, go, rust, java, c,
cpp, ruby, bash, markdown and plain text."""

PATHS = [
    *SAMPLES,
    "pkg/__init__.py",
    "x.h",
    "x.hpp",
    "a.mjs",
    "Rakefile",
    "doc.markdown",
    "data.json",
    "conf.yaml",
    "LICENSE",
]
"""File names for random bytes: every chunking path (symbols, sections, windows)."""

CAPS = [chunker.MAX_CHUNK_BYTES, 700, 150, 40]
"""Size caps: the real one, and smaller ones under which the fixtures' symbols, module
remainders and sections are split into parts (the splitting code is what big files reach)."""


@contextmanager
def _cap(max_bytes: int) -> Iterator[None]:
    with (
        mock.patch.object(chunker, "MAX_CHUNK_BYTES", max_bytes),
        mock.patch.object(chunker, "MAX_HEADER_BYTES", max(max_bytes // 6, 1)),
    ):
        yield


class _Fallbacks(logging.Handler):
    """Counts the warnings the chunker logs when its symbol path fails."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _n_lines(data: bytes) -> int:
    """Lines as the chunker counts them: a final newline does not open a new line."""
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def check(path: str, data: bytes, cap: int = chunker.MAX_CHUNK_BYTES) -> list[Chunk]:
    """Chunk ``data`` twice and assert every property; return the chunks."""
    handler = _Fallbacks()
    chunker.log.addHandler(handler)
    try:
        with _cap(cap):
            chunks = chunk_file(path, data, file_hash(data))
            again = chunk_file(path, data, file_hash(data))
    finally:
        chunker.log.removeHandler(handler)
    assert handler.messages == [], f"symbol chunking fell back to windows for {path}"
    assert chunks == again  # deterministic
    if not data.strip():
        assert chunks == []
    n = _n_lines(data)
    ids = [c.id for c in chunks]
    assert len(set(ids)) == len(ids), "duplicate id"
    for c in chunks:
        assert 1 <= c.start_line <= c.end_line <= n, (c.start_line, c.end_line, n)
        assert 0 <= c.start_byte < c.end_byte <= len(data), (c.start_byte, c.end_byte)
        assert data[: c.start_byte].count(b"\n") + 1 == c.start_line
        assert isinstance(c.text, str) and c.text
        c.text.encode("utf-8")  # no lone surrogates
        assert c.path == path
        if is_part(c.id):
            assert head_id(c.id) in ids  # the first part is there too
            if c.kind != "module":  # module remainder parts are plain file lines
                label = part_label(c.id, c.text)
                assert label is not None and " (part " in label, c.text[:200]
    return chunks


# --- random bytes -----------------------------------------------------------------------------


@FUZZ
@given(st.sampled_from(PATHS), st.binary(max_size=3000), st.sampled_from(CAPS))
def test_random_bytes(path: str, data: bytes, cap: int) -> None:
    check(path, data, cap)


_SOUP = [
    *(
        b"def ",
        b"class ",
        b"func ",
        b"fn ",
        b"impl ",
        b"struct ",
        b"interface ",
        b"namespace ",
        b"module ",
        b"export ",
        b"template<T> ",
        b"@decorator\n",
        b"async ",
        b"const f = () => ",
        b"function ",
        b"end\n",
        b"#ifdef X\n",
        b"#endif\n",
        b"# ",
        b"## Heading\n",
        b"```\n",
        b"// c\n",
        b"/* ",
        b"*/",
        b"'''",
        b'"',
    ),
    *(b"name", b"A.b", b"x", b"(", b")", b"{", b"}", b"[", b"]", b"<", b">", b":", b";", b","),
    *(b" = ", b"return 1", b"\n", b"\n    ", b"\n\t", b"\r\n", b"\xe9", b"\xff", "é".encode()),
]


@FUZZ
@given(
    st.sampled_from(list(SAMPLES)),
    st.lists(st.sampled_from(_SOUP), max_size=400),
    st.sampled_from(CAPS),
)
def test_token_soup(path: str, tokens: list[bytes], cap: int) -> None:
    """Random sequences of code tokens: deeper into the grammars than random bytes get."""
    check(path, b"".join(tokens), cap)


# --- truncated fixtures -----------------------------------------------------------------------


@st.composite
def _prefix(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(list(SAMPLES)))
    data = SAMPLES[name]
    return name, data[: draw(st.integers(0, len(data)))]


@FUZZ
@given(_prefix(), st.sampled_from(CAPS))
def test_truncated_fixtures(sample: tuple[str, bytes], cap: int) -> None:
    check(*sample, cap)


def test_every_fixture_whole_and_at_every_cap() -> None:
    for name, data in SAMPLES.items():
        for cap in CAPS:
            chunks = check(name, data, cap)
            assert chunks, name
            if cap == chunker.MAX_CHUNK_BYTES:
                assert not any(is_part(c.id) for c in chunks), name  # small files stay whole
            elif cap == min(CAPS) and name != "notes.txt":
                assert any(is_part(c.id) for c in chunks), (name, cap)


# --- mutated fixtures -------------------------------------------------------------------------

_OP = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 1 << 16), st.integers(0, 255)),
    st.tuples(st.just("insert"), st.integers(0, 1 << 16), st.binary(min_size=1, max_size=12)),
    st.tuples(st.just("soup"), st.integers(0, 1 << 16), st.sampled_from(_SOUP)),
    st.tuples(st.just("delete"), st.integers(0, 1 << 16), st.integers(1, 40)),
    st.tuples(st.just("repeat"), st.integers(0, 1 << 16), st.integers(1, 200)),
)


def _mutate(data: bytes, ops: list[tuple[str, int, object]]) -> bytes:
    buf = bytearray(data)
    for op, where, arg in ops:
        pos = where % (len(buf) + 1)
        if op == "flip" and buf:
            assert isinstance(arg, int)
            buf[min(pos, len(buf) - 1)] = arg
        elif op in ("insert", "soup"):
            assert isinstance(arg, bytes)
            buf[pos:pos] = arg
        elif op == "delete":
            assert isinstance(arg, int)
            del buf[pos : pos + arg]
        elif op == "repeat":  # a line repeated: makes symbols big enough to be split
            assert isinstance(arg, int)
            start = buf.rfind(b"\n", 0, pos) + 1
            end = buf.find(b"\n", pos)
            line = bytes(buf[start : len(buf) if end == -1 else end + 1])
            buf[start:start] = line * min(arg, 4000 // max(len(line), 1))
    return bytes(buf)


@FUZZ
@given(
    st.sampled_from(list(SAMPLES)),
    st.lists(_OP, min_size=1, max_size=8),
    st.sampled_from(CAPS),
)
def test_mutated_fixtures(name: str, ops: list[tuple[str, int, object]], cap: int) -> None:
    check(name, _mutate(SAMPLES[name], ops), cap)
