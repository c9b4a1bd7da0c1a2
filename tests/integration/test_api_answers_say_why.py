"""The Python API and the serving engine answer a caller's slip with a typed error, and an
empty context says why (a user trial of an agent integrator)."""

from __future__ import annotations

from pathlib import Path

import pytest

import ragloom
from ragloom.errors import ConfigError, InputError
from ragloom.server.engine import ServingEngine
from ragloom.settings import Settings

pytestmark = pytest.mark.integration


@pytest.fixture
def root(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "quote.py").write_text(
        "def url_quote(value):\n    '''Quote a URL.'''\n    return value.replace(' ', '%20')\n"
    )
    with ragloom.Index(repo, repo / ".ragloom", embedder="hashing") as idx:
        idx.index(history=False)
    return repo


def test_the_index_api_names_the_slip(root: Path) -> None:
    with ragloom.open(root) as idx:
        assert idx.search("url quote", strategy=None).hits  # type: ignore[arg-type]
        with pytest.raises(InputError, match="the query must be a string, got bytes"):
            idx.search(b"url quote")  # type: ignore[arg-type]
        with pytest.raises(InputError, match="got NoneType"):
            idx.get_context(None)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="budget must be a positive number of tokens"):
            idx.get_context("url quote", budget=0)


def test_an_empty_served_context_says_why(root: Path) -> None:
    with ServingEngine.open(root, Settings()) as eng:
        tiny = eng.context("url quote", budget=5)
        assert tiny["parts"] == [] and any("fits the budget of" in n for n in tiny["notes"])
        (root / "quote.py").write_text("def renamed(value):\n    return value\n")
        gone = eng.context("url quote", budget=400)
        assert gone["stats"]["stale_dropped"] >= 1
        assert any("changed since indexing" in n for n in gone["notes"])
