"""Context answers carry the search's notes (trial findings 8 and 9, 2026-11-28): an empty query
is refused by the CLI and the Python API as by HTTP and MCP, a blank one gets the "no searchable
words" note, and a query whose words match nothing says so instead of passing off dense's
nearest neighbours as the answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import ragloom
import ragloom.cli as cli_module
from ragloom.retrieve.search import NOTHING_MATCHED_NOTE

CODE = '''def parse_config(text):
    """Parse key=value lines into a dict."""
    return dict(line.split("=", 1) for line in text.splitlines())


def render_table(rows):
    return "\\n".join(" | ".join(r) for r in rows)
'''


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("notes") / "repo"
    root.mkdir()
    (root / "util.py").write_text(CODE)
    result = CliRunner().invoke(
        cli_module.cli, ["index", str(root), "--model", "hashing:32", "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    return root


def test_api_empty_or_blank_query_gets_a_note(repo: Path) -> None:
    """An empty or blank question is answered with an empty context and the search's note, as
    `search ""` answers (the CLI contract: exit 0; HTTP and MCP refuse it in their schemas)."""
    idx = ragloom.open(repo)
    for query in ("", "   "):
        blank = idx.get_context(query, budget=300)
        assert blank.parts == [] and "the query has no searchable words" in blank.notes
        assert blank.to_dict()["notes"] == blank.notes


def test_nothing_matched_is_noted_only_when_bm25_found_nothing(repo: Path) -> None:
    idx = ragloom.open(repo)
    none = idx.get_context("zqxjkvbw qwpfzz", budget=300)
    assert none.parts and NOTHING_MATCHED_NOTE in none.notes
    assert NOTHING_MATCHED_NOTE in idx.search("zqxjkvbw qwpfzz").notes
    found = idx.get_context("parse_config", budget=300)
    assert NOTHING_MATCHED_NOTE not in found.notes
    # dense alone was asked for: BM25 did not "find nothing"
    assert NOTHING_MATCHED_NOTE not in idx.search("zqxjkvbw", strategy="dense").notes


def test_cli_notes_an_empty_query_and_prints_notes(repo: Path) -> None:
    runner = CliRunner()
    index_dir = str(repo / ".ragloom")
    empty = runner.invoke(cli_module.cli, ["context", "", "--index-dir", index_dir])
    assert empty.exit_code == 0 and "note: the query has no searchable words" in empty.stderr
    blank = runner.invoke(cli_module.cli, ["context", "  ", "--index-dir", index_dir])
    assert blank.exit_code == 0 and "note: the query has no searchable words" in blank.stderr
    got = runner.invoke(
        cli_module.cli, ["context", "zqxjkvbw qwpfzz", "--index-dir", index_dir, "--json"]
    )
    assert got.exit_code == 0, got.stderr
    answer = json.loads(got.stdout)
    assert NOTHING_MATCHED_NOTE in answer["notes"]
    assert {"text", "parts", "stats", "query_id"} <= set(answer)  # the contract's fields stay
