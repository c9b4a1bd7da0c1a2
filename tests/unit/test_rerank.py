"""Rerankers: the protocol, the no-op and lexical rerankers, and the cross-encoder adapter."""

from __future__ import annotations

import math
import os
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragloom.errors import RerankError
from ragloom.retrieve.rerank import (
    ST_INSTALL_HINT,
    CrossEncoderReranker,
    LexicalOverlapReranker,
    NoopReranker,
    Reranker,
)

CANDS = [
    ("c1", "def parse_header(raw): return raw.split(':')"),
    ("c2", "def parse_body(raw): return raw"),
    ("c3", "class Foo: pass"),
]

candidates = st.lists(
    st.tuples(st.sampled_from([f"id{i}" for i in range(12)]), st.text(max_size=40)), max_size=12
)


def test_protocol_is_satisfied() -> None:
    for rr in (NoopReranker(), LexicalOverlapReranker(), CrossEncoderReranker("/nonexistent")):
        assert isinstance(rr, Reranker)


def test_noop_keeps_order_with_descending_scores() -> None:
    out = NoopReranker().rerank("anything", [*CANDS, ("c1", "repeat")])
    assert out == [("c1", 1.0), ("c2", 2 / 3), ("c3", 1 / 3)]
    assert NoopReranker().rerank("q", []) == []


def test_lexical_worked_example() -> None:
    # Q = {parse, header}; N = 3; df(parse) = 2, df(header) = 1
    # idf(parse) = ln(1 + 1.5/2.5) = ln 1.6; idf(header) = ln(1 + 2.5/1.5) = ln(8/3)
    out = LexicalOverlapReranker().rerank("parse header", CANDS)
    ip, ih = math.log(1.6), math.log(8 / 3)
    assert [cid for cid, _ in out] == ["c1", "c2", "c3"]
    assert [s for _, s in out] == pytest.approx([1.0, ip / (ip + ih), 0.0])


def test_lexical_matches_across_identifier_styles() -> None:
    out = LexicalOverlapReranker().rerank("where is parseHeader", list(reversed(CANDS)))
    assert out[0][0] == "c1"


def test_lexical_filler_only_query_keeps_order() -> None:
    out = LexicalOverlapReranker().rerank("how is the", CANDS)
    assert out == [("c1", 0.0), ("c2", 0.0), ("c3", 0.0)]


@given(st.text(max_size=30), candidates)
def test_rerankers_return_a_sorted_permutation(query: str, cands: list[tuple[str, str]]) -> None:
    unique = list(dict.fromkeys(cid for cid, _ in cands))
    for rr in (NoopReranker(), LexicalOverlapReranker()):
        out = rr.rerank(query, cands)
        assert sorted(cid for cid, _ in out) == sorted(unique)
        scores = [s for _, s in out]
        assert scores == sorted(scores, reverse=True)
        assert all(0.0 <= s <= 1.0 for s in scores)
        assert out == rr.rerank(query, cands)


# ---------------------------------------------------------------------------------------------
# cross-encoder adapter
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def offline_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let load() set the offline switches without leaking them into other tests."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)


def test_cross_encoder_missing_library(
    monkeypatch: pytest.MonkeyPatch, offline_env: None, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    rr = CrossEncoderReranker(tmp_path)
    with pytest.raises(RerankError) as err:
        rr.rerank("q", CANDS)
    assert ST_INSTALL_HINT in str(err.value)
    assert rr.rerank("q", []) == []  # nothing to score: no load needed


class _FakeCrossEncoder:
    """Stands in for sentence_transformers.CrossEncoder: scores = text length mod 7."""

    instances: ClassVar[list[_FakeCrossEncoder]] = []

    def __init__(self, model: str, **kwargs: Any) -> None:
        self.model = model
        self.kwargs = kwargs
        _FakeCrossEncoder.instances.append(self)

    def predict(self, pairs: Sequence[tuple[str, str]], **kwargs: Any) -> np.ndarray:
        return np.asarray([float(len(text) % 7) for _, text in pairs], dtype=np.float32)


def _fake_module(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = types.ModuleType("sentence_transformers")
    mod.CrossEncoder = _FakeCrossEncoder  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", mod)
    _FakeCrossEncoder.instances.clear()


def test_cross_encoder_adapter_offline_and_ordering(
    monkeypatch: pytest.MonkeyPatch, offline_env: None, tmp_path: Path
) -> None:
    _fake_module(monkeypatch)
    rr = CrossEncoderReranker(tmp_path, batch_size=4)
    cands = [("a", "xx"), ("b", "xxxxx"), ("c", "xxxxx"), ("d", "x"), ("a", "ignored")]
    out = rr.rerank("q", cands)
    assert out == [("b", 5.0), ("c", 5.0), ("a", 2.0), ("d", 1.0)]  # tie keeps input order
    rr.rerank("q", cands)
    assert len(_FakeCrossEncoder.instances) == 1  # loaded once
    inst = _FakeCrossEncoder.instances[0]
    assert inst.model == str(tmp_path)
    assert inst.kwargs["local_files_only"] is True
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["TRANSFORMERS_OFFLINE"] == "1"


def test_cross_encoder_missing_path(monkeypatch: pytest.MonkeyPatch, offline_env: None) -> None:
    _fake_module(monkeypatch)
    with pytest.raises(RerankError, match="does not exist"):
        CrossEncoderReranker("/nonexistent/models/ce").load()
    with pytest.raises(RerankError):
        CrossEncoderReranker("x", batch_size=0)


def test_cross_encoder_load_failure_is_rerank_error(
    monkeypatch: pytest.MonkeyPatch, offline_env: None
) -> None:
    class Failing:
        def __init__(self, model: str, **kwargs: Any) -> None:
            raise OSError(f"{model} is not in the local cache")

    mod = types.ModuleType("sentence_transformers")
    mod.CrossEncoder = Failing  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", mod)
    with pytest.raises(RerankError, match="offline"):
        CrossEncoderReranker("cross-encoder/ms-marco-MiniLM-L-6-v2").load()


@pytest.mark.slow
def test_cross_encoder_real_tiny_model(tmp_path: Path, offline_env: None) -> None:
    """A real sentence-transformers CrossEncoder on a tiny random BERT built here (no weights
    downloaded): checks the adapter end to end, not ranking quality."""
    pytest.importorskip("sentence_transformers")
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    vocab = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        *["def", "parse", "header", "raw", "class", "foo"],
    ]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab))
    tok = transformers.BertTokenizerFast(vocab_file=str(tmp_path / "vocab.txt"))
    cfg = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=64,
        num_labels=1,
    )
    torch.manual_seed(0)
    transformers.BertForSequenceClassification(cfg).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    rr = CrossEncoderReranker(tmp_path)
    out = rr.rerank("parse header", CANDS)
    assert sorted(cid for cid, _ in out) == ["c1", "c2", "c3"]
    scores = [s for _, s in out]
    assert all(math.isfinite(s) for s in scores)
    assert scores == sorted(scores, reverse=True)
    assert rr.rerank("parse header", CANDS) == out
