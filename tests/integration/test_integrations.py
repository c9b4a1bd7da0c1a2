"""The LangChain and LlamaIndex retrievers, against the real packages and a real index.

Both adapters must return what ``Index.search`` / ``Index.get_context`` return (same ids,
order, texts and scores), in the framework's own document types, sync and async.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ragloom.api import Index
from ragloom.errors import InputError
from ragloom.integrations.records import RecordSource
from tests.conftest import copy_stdlib_packages

langchain_core = pytest.importorskip("langchain_core")
llama_index_core = pytest.importorskip("llama_index.core")

from langchain_core.documents import Document  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle  # noqa: E402

from ragloom.integrations.langchain import RagloomRetriever as LcRetriever  # noqa: E402
from ragloom.integrations.llamaindex import RagloomRetriever as LiRetriever  # noqa: E402

QUERY = "parse a comma separated values file into rows"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_stdlib_packages(tmp_path_factory.mktemp("integ"), ["csv", "json", "shlex"])
    with Index.at(root) as idx:
        idx.index()
    return root


def test_langchain_returns_the_search_hits(repo: Path) -> None:
    with Index.at(repo) as idx:
        expected = idx.search(QUERY, top_k=5).hits
    retriever = LcRetriever.from_path(repo, top_k=5)
    docs = retriever.invoke(QUERY)
    assert all(isinstance(d, Document) for d in docs)
    assert [d.metadata["id"] for d in docs] == [h.id for h in expected]
    assert [d.page_content for d in docs] == [h.text for h in expected]
    assert [d.metadata["score"] for d in docs] == pytest.approx([h.score for h in expected])
    assert docs[0].metadata["path"] == "csv.py"
    assert {"start_line", "end_line", "symbol", "language", "generation"} <= set(docs[0].metadata)
    assert [d.id for d in asyncio.run(retriever.ainvoke(QUERY))] == [d.id for d in docs]
    retriever.source.close()


def test_llamaindex_returns_the_search_hits(repo: Path) -> None:
    with Index.at(repo) as idx:
        expected = idx.search(QUERY, top_k=5).hits
    retriever = LiRetriever.from_path(repo, top_k=5)
    nodes = retriever.retrieve(QUERY)
    assert all(isinstance(n, NodeWithScore) for n in nodes)
    assert [n.node.node_id for n in nodes] == [h.id for h in expected]
    assert [n.node.get_content() for n in nodes] == [h.text for h in expected]
    assert [n.score for n in nodes] == pytest.approx([h.score for h in expected])
    again = asyncio.run(retriever.aretrieve(QueryBundle(QUERY)))
    assert [n.node.node_id for n in again] == [n.node.node_id for n in nodes]
    retriever.source.close()


def test_budget_returns_context_parts_inside_the_budget(repo: Path) -> None:
    budget = 600
    with Index.at(repo) as idx:
        ctx = idx.get_context(QUERY, top_k=10, budget=budget)
    docs = LcRetriever.from_path(repo, top_k=10, budget=budget).invoke(QUERY)
    nodes = LiRetriever.from_path(repo, top_k=10, budget=budget).retrieve(QUERY)
    assert [d.metadata["id"] for d in docs] == [p.id for p in ctx.parts]
    assert [n.node.node_id for n in nodes] == [p.id for p in ctx.parts]
    assert sum(d.metadata["tokens"] for d in docs) <= budget
    assert len({d.metadata["id"] for d in docs}) == len(docs)  # deduplicated


def test_bad_input_is_a_typed_error(repo: Path) -> None:
    with pytest.raises(InputError, match="top_k"):
        RecordSource.at(repo, top_k=0)
    with pytest.raises(InputError, match="budget"):
        RecordSource.at(repo, budget=-5)
    retriever = LcRetriever.from_path(repo)
    with pytest.raises(InputError, match="empty"):
        retriever.invoke("   ")
    retriever.source.close()
