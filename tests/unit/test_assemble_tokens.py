"""Token counters: exact offline cl100k / o200k, the approx estimate, and name lookup."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

from ragloom.assemble import ApproxCounter, TokenCounter, get_counter
from ragloom.assemble.tokens import _read_ranks
from ragloom.errors import ConfigError

STDLIB = Path(sysconfig.get_paths()["stdlib"])
SAMPLE_FILES = ["textwrap.py", "shlex.py", "fnmatch.py", "json/decoder.py", "csv.py", "heapq.py"]


def _samples() -> list[str]:
    texts = []
    for name in SAMPLE_FILES:
        src = (STDLIB / name).read_text(encoding="utf-8")
        texts.append(src)
        lines = src.split("\n")
        texts.extend("\n".join(lines[i : i + 40]) for i in range(0, len(lines), 40))
    texts += [
        "",
        " ",
        "\n\n",
        "<|endoftext|> def f(): pass",
        "naïve café — ünïcode 😀",
        "\t\tx  =  1\r\n",
    ]
    return texts


def test_counter_names_and_protocol() -> None:
    for name in ("cl100k", "o200k", "approx", "cl100k_base", " O200K "):
        c = get_counter(name)
        assert isinstance(c, TokenCounter)
        assert c.count("") == 0
        assert c.count_batch(["a b", "def f(x):\n    return x"]) == [
            c.count("a b"),
            c.count("def f(x):\n    return x"),
        ]
    with pytest.raises(ConfigError):
        get_counter("gpt2")
    with pytest.raises(ConfigError):
        get_counter("")


@pytest.mark.parametrize(("name", "ref_name"), [("cl100k", "cl100k_base"), ("o200k", "o200k_base")])
def test_exact_counter_matches_reference_tokenizer(name: str, ref_name: str) -> None:
    """Counts equal an independent implementation (the bpe-openai Rust crate) on real code."""
    bpe_openai = pytest.importorskip("bpe_openai")
    ref = bpe_openai.get_encoding(ref_name)
    counter = get_counter(name)
    texts = _samples()
    ours = counter.count_batch(texts)
    theirs = [len(ref.encode_ordinary(t)) for t in texts]
    assert ours == theirs
    assert sum(ours) > 20_000  # a real sample, not a handful of tokens


def test_exact_counter_is_tiktoken_on_official_ranks() -> None:
    """The encoder is tiktoken's own, over rank files whose SHA-256 equals tiktoken's pin."""
    tiktoken = pytest.importorskip("tiktoken")
    counter = get_counter("cl100k")
    enc = counter._enc  # type: ignore[attr-defined]
    assert isinstance(enc, tiktoken.Encoding)
    assert enc.n_vocab == 100277
    # known ids of the official cl100k_base vocabulary
    assert enc.encode_ordinary("hello world") == [15339, 1917]


def test_checksum_mismatch_is_refused() -> None:
    with pytest.raises(ConfigError, match="checksum"):
        _read_ranks("cl100k_base", "0" * 64)
    with pytest.raises(ConfigError, match="not installed"):
        _read_ranks("no_such_encoding", "0" * 64)


def test_approx_counter_error_on_real_code() -> None:
    """The documented bound (docs/assembly.md): mean |error| < 15% vs cl100k on 40-line chunks."""
    exact = get_counter("cl100k")
    approx = ApproxCounter()
    chunks = [t for t in _samples() if len(t) > 200]
    errs = [abs(approx.count(t) - exact.count(t)) / exact.count(t) for t in chunks]
    assert len(errs) > 50
    assert sum(errs) / len(errs) < 0.15
