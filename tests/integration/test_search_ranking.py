"""The ranking pipeline on a real index: strategies, query processing, exact match, explain."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import ragloom
from ragloom.errors import ConfigError
from ragloom.retrieve.search import parse_search_spec
from tests.conftest import copy_stdlib_packages, run_cli

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> ragloom.Index:
    root = copy_stdlib_packages(tmp_path_factory.mktemp("rank"), ["json", "textwrap", "csv"])
    idx = ragloom.open(root)
    idx.index()
    return idx


@pytest.mark.parametrize(
    "strategy", ["sparse", "dense", "hybrid", "hybrid-mmr", "hybrid+raw", "hybrid+no-synonyms"]
)
def test_every_strategy_answers(index: ragloom.Index, strategy: str) -> None:
    result = index.search("decode a JSON document", top_k=5, strategy=strategy)
    assert 1 <= len(result.hits) <= 5
    assert len({h.id for h in result.hits}) == len(result.hits)
    assert any(h.path.startswith("json/") for h in result.hits[:3])


def test_named_function_comes_first(index: ragloom.Index) -> None:
    for strategy in ("hybrid", "hybrid-mmr", "sparse", "dense"):
        hits = index.search("JSONDecoder.raw_decode", top_k=5, strategy=strategy).hits
        assert hits[0].symbol == "JSONDecoder.raw_decode", strategy


def test_named_function_missed_by_retrieval_is_fetched(index: ragloom.Index) -> None:
    # "dedent" alone in prose: the symbol table knows it; exact match brings it first.
    hits = index.search("how does `dedent` treat tabs", top_k=3, strategy="dense").hits
    assert hits[0].symbol == "dedent"


def test_hybrid_keeps_modality_ranks(index: ragloom.Index) -> None:
    hits = index.search("wrap text to a width", top_k=10).hits
    assert all(set(h.ranks) <= {"bm25", "dense"} and h.ranks for h in hits)
    assert any(len(h.ranks) == 2 for h in hits)


@pytest.mark.parametrize("query", ["wrap text to a width", "decode a JSON document"])
def test_only_returned_rows_loaded_yet_same_ranking(
    index: ragloom.Index, query: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without boosts, hybrid loads rows for the returned hits only; --explain loads them all.
    store = index.retriever.store
    full = [h.id for h in index.search(query, top_k=5, explain=True).hits]
    asked: list[int] = []
    counted = store.chunks_by_rowids
    monkeypatch.setattr(
        store, "chunks_by_rowids", lambda ids: asked.append(len(ids)) or counted(ids)
    )
    assert [h.id for h in index.search(query, top_k=5).hits] == full
    assert asked == [5]
    monkeypatch.undo()
    # A row deleted since BM25/HNSW were loaded: both paths skip it and still return 5 hits.
    first = index.search(query, top_k=1).hits[0].id
    hidden = store.chunks_by_ids([first])[first].rowid
    real = store.chunks_by_rowids
    monkeypatch.setattr(
        store, "chunks_by_rowids", lambda ids: {r: c for r, c in real(ids).items() if r != hidden}
    )
    lazy = [h.id for h in index.search(query, top_k=5).hits]
    assert len(lazy) == 5 and first not in lazy
    assert lazy == [h.id for h in index.search(query, top_k=5, explain=True).hits]
    assert lazy == full[1:] + lazy[4:]


def test_explain_records_stages(index: ragloom.Index) -> None:
    result = index.search("JSONDecoder.raw_decode", top_k=3, strategy="hybrid-mmr", explain=True)
    first = result.hits[0]
    assert "exact_match" in first.explain and "rrf" in first.explain and "mmr" in first.explain
    assert result.query["entities"]


def test_mmr_diversifies_files(index: ragloom.Index) -> None:
    plain = index.search("parse", top_k=8, strategy="hybrid").hits
    mmr = index.search("parse", top_k=8, strategy="hybrid-mmr").hits
    assert {h.id for h in mmr} <= {h.id for h in plain} | {h.id for h in mmr}
    assert len(mmr) == len(plain)


def test_compound_question_is_decomposed(index: ragloom.Index) -> None:
    result = index.search("how is JSON decoded and where is text wrapped", top_k=10)
    assert len(result.query["sub_queries"]) == 2  # type: ignore[arg-type]
    paths = {h.path for h in result.hits}
    assert any(p.startswith("json/") for p in paths) and "textwrap.py" in paths


def test_language_mention_is_detected(index: ragloom.Index) -> None:
    result = index.search("python function that wraps text", top_k=5)
    assert result.query["language"] == "python"


def test_bad_strategy_is_a_config_error(index: ragloom.Index) -> None:
    with pytest.raises(ConfigError, match="unknown strategy"):
        index.search("x", strategy="bogus")
    with pytest.raises(ConfigError, match="modifier"):
        parse_search_spec("hybrid+no-bogus")
    with pytest.raises(ConfigError, match="top_k"):
        index.search("x", top_k=0)


def test_empty_query_has_no_hits(index: ragloom.Index) -> None:
    result = index.search("   ?? ", top_k=5)
    assert result.hits == [] and result.notes


def test_cli_explain_json(index: ragloom.Index) -> None:
    proc = run_cli(
        "search",
        "JSONDecoder.raw_decode",
        "--index-dir",
        str(index.index_dir),
        "--explain",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    hits = json.loads(proc.stdout)
    assert hits[0]["symbol"] == "JSONDecoder.raw_decode" and "explain" in hits[0]
    proc = run_cli("search", "x", "--index-dir", str(index.index_dir), "--strategy", "nope")
    assert proc.returncode == 2 and "unknown strategy" in proc.stderr


def test_index_dir_path(index: ragloom.Index) -> None:
    assert isinstance(index.index_dir, Path)


def test_search_emits_a_span_per_stage(index: ragloom.Index) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ragloom.telemetry import Telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    retriever = index.retriever
    saved = retriever.telemetry
    retriever.telemetry = Telemetry(tracer_provider=provider)
    try:
        index.get_context("decode a JSON document", top_k=5, budget=2000, strategy="hybrid-mmr")
    finally:
        retriever.telemetry = saved
    spans = {s.name: s for s in exporter.get_finished_spans()}
    for stage in ("request", "query", "bm25", "dense", "fusion", "mmr", "assembly"):
        assert f"ragloom.{stage}" in spans, stage
    req = spans["ragloom.request"].attributes or {}
    assert req["strategy"] == "hybrid-mmr" and req["top_k"] == 5 and req["rrf_k"] == 10.0
    assert req["mmr_lambda"] == 0.7 and req["query_len"] == len("decode a JSON document")
    bm25 = spans["ragloom.bm25"].attributes or {}
    assert bm25["bm25_results"] > 0 and "duration_ms" in bm25
    # the dense span runs on a worker thread but belongs to the same trace
    assert spans["ragloom.dense"].context.trace_id == spans["ragloom.request"].context.trace_id


@pytest.mark.parametrize("query", ["wrap text to a width", "decode a JSON document"])
def test_hits_vectors_from_memory_equal_the_stored_ones(index: ragloom.Index, query: str) -> None:
    # Context assembly takes the hits' vectors from the HNSW index when the search knows their
    # rows; they are the vectors the index stores (the dedup and MMR see the same numbers).
    result = index.search(query, top_k=10)
    assert set(result.rowids) == {h.id for h in result.hits}
    retriever = index.retriever
    memory = retriever.embeddings_for_hits(result.hits, result.rowids)
    stored = retriever.embeddings_for_hits(result.hits)
    assert memory.keys() == stored.keys() == set(result.rowids)
    for cid, vec in memory.items():
        assert np.allclose(vec, stored[cid], atol=1e-6)
