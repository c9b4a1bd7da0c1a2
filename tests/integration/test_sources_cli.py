"""End to end through the command line: ``ragloom index PATH --sources code,docs,commits`` on a
small git repository, then a question matching a commit message returns that commit with its
changed files, ``--explain`` shows the recency boost, ``context`` renders the commit with its
attribution, ``status`` shows each source's freshness, and without ``--sources`` the output is
what it always was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ragloom.cli import cli
from tests.sources_fixture import commit, git, make_repo, write_exports


def run_cli(*args: str, check: bool = False) -> Result:
    """The command line in process (a subprocess per call cost ~2 s of start-up each)."""
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    if check and result.exit_code != 0:
        raise AssertionError(f"ragloom {' '.join(args)} failed: {result.stderr}")
    return result


def search_hits(index_dir: Path, query: str, *args: str) -> list[dict[str, Any]]:
    """``ragloom search QUERY --index-dir DIR ARGS --json`` (with ``--sources``): its hits."""
    out = run_cli("search", query, "--index-dir", str(index_dir), *args, "--json", check=True)
    hits: list[dict[str, Any]] = json.loads(out.stdout)["hits"]
    return hits


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_repo(tmp_path_factory.mktemp("cli") / "repo")
    issues, _ = write_exports(root.parent / "exports")
    out = run_cli(
        "index", str(root), "--model", "hashing", "--sources", "code,docs,commits",
        "--issues-json", str(issues), "--json", check=True,
    )  # fmt: skip
    stats = json.loads(out.stdout)
    assert stats["chunks_total"] > 0
    by = {r["source"]: r for r in stats["sources"]}
    assert set(by) == {"docs", "commits", "issues"}
    assert by["commits"]["added"] == 3 and by["issues"]["total"] == 2
    assert stats["history_commits"] == 3  # the commits source's sync (it was null)
    assert all(r["status"] == "ok" for r in by.values())
    return root


def test_a_commit_question_returns_the_commit_with_its_files(repo: Path) -> None:
    out = run_cli(
        "search", "retry failed uploads with exponential backoff", "--index-dir",
        str(repo / ".ragloom"), "--sources", "code,docs,commits", "--json", "--explain",
        check=True,
    )  # fmt: skip
    data = json.loads(out.stdout)
    assert [s["source"] for s in data["sources"]] == ["code", "docs", "commits"]
    assert all(s["status"] == "ok" and s["latency_ms"] >= 0 for s in data["sources"])
    commits = [h for h in data["hits"] if h["source"] == "commits"]
    assert commits, data["hits"]
    top = commits[0]
    assert top["title"] == "Retry failed uploads with exponential backoff"
    assert top["paths"] == ["pkg/upload.py"]
    assert top["attribution"]["commit"] == git(repo, "rev-parse", "HEAD~1")
    assert top["explain"]["recency"]["max_boost"] == 0.1
    assert top["explain"]["rrf"]["weight"] == 0.1
    code = [h for h in data["hits"] if h["source"] == "code"]
    assert code and {"path", "start_line", "symbol", "ranks"} <= set(code[0])
    # the code hits keep what `search --json` gives them, and the answer can be rated
    assert all(h["stale"] is False and h["generation"] == data["generation"] for h in code)
    assert len(data["query_id"]) == 32
    # the guide is a docs section now, not also a code hit
    assert not any(h.get("path") == "docs/guide.md" for h in code)

    text = run_cli(
        "search", "retry failed uploads", "--index-dir", str(repo / ".ragloom"),
        "--sources", "commits", "--explain", check=True,
    )  # fmt: skip
    assert "[commits] commit " in text.stdout and "recency: {'boost'" in text.stdout


def test_context_attributes_non_code_items(repo: Path) -> None:
    out = run_cli(
        "context", "upload hangs on flaky networks", "--index-dir", str(repo / ".ragloom"),
        "--sources", "code,issues,commits", "--json", "--budget", "1500", check=True,
    )  # fmt: skip
    data = json.loads(out.stdout)
    assert data["stats"]["tokens_total"] <= 1500
    issue = next(p for p in data["parts"] if p["source"] == "issues")
    assert issue["file_path"] == "https://github.com/acme/widget/issues/12"
    assert issue["text"].startswith("issue #12 https://github.com/acme/widget/issues/12")
    assert 'source="issues" path="https://github.com/acme/widget/issues/12"' in data["text"]
    assert [s["source"] for s in data["sources"]] == ["code", "issues", "commits"]
    assert len(data["query_id"]) == 32


def test_status_freshness_and_incremental_reindex(repo: Path) -> None:
    new = commit(repo, {"pkg/cache.py": "CACHE = {}\n"}, "Cache parsed headers per session")
    out = run_cli("index", str(repo), "--sources", "code,docs,commits", "--json", check=True)
    by = {r["source"]: r for r in json.loads(out.stdout)["sources"]}
    assert by["commits"]["added"] == 1 and by["docs"]["added"] == 0
    st = json.loads(run_cli("status", "--index-dir", str(repo / ".ragloom"), "--json").stdout)
    fresh = {s["source"]: s for s in st["sources"]}
    assert fresh["commits"]["last_commit"] == new
    assert fresh["issues"]["last_update"] == "2024-02-07T10:00:00Z"
    assert fresh["docs"]["documents"] == 2
    # a server's status says the same (GET /status had no sources)
    from ragloom.server import ServingEngine

    with ServingEngine.open(repo, warm=False) as engine:
        served = {s["source"]: s for s in engine.status()["sources"]}
    assert served == fresh


def test_without_sources_nothing_changes(repo: Path) -> None:
    out = run_cli("search", "parse header", "--index-dir", str(repo / ".ragloom"), "--json")
    hits = json.loads(out.stdout)
    assert isinstance(hits, list) and hits and "source" not in hits[0]


def test_weights_and_filters_from_the_command_line(repo: Path) -> None:
    idx = str(repo / ".ragloom")
    out = run_cli(
        "search", "retry failed uploads", "--index-dir", idx, "--sources", "code,commits",
        "--source-weight", "commits=5", "--json", check=True,
    )  # fmt: skip
    data = json.loads(out.stdout)
    assert data["hits"][0]["source"] == "commits", "weight 5 puts the commit above the code"
    out = run_cli(
        "search", "install the package", "--index-dir", idx, "--sources", "code,commits,docs",
        "--language", "markdown", "--json", check=True,
    )  # fmt: skip
    found = json.loads(out.stdout)
    counts = {s["source"]: s["count"] for s in found["sources"]}
    # commits have no language; the code index's Markdown chunks are the docs source's sections
    # (left to it); what is left is Markdown sections only
    assert counts["commits"] == 0 and counts["docs"] >= 1
    assert found["hits"] and {h["source"] for h in found["hits"]} == {"docs"}
    assert all(h["paths"] == ["docs/guide.md"] for h in found["hits"])
    bad = run_cli("search", "x", "--index-dir", idx, "--sources", "code",
                  "--source-weight", "code")  # fmt: skip
    assert bad.exit_code == 2 and "NAME=WEIGHT" in bad.stderr


def test_a_plain_index_keeps_the_named_sources_up_to_date(tmp_path: Path) -> None:
    """A user trial: after ``index --sources code,docs``, a new docs section stayed out of
    ``--sources docs`` answers (and a deleted page stayed in) until ``--sources`` was named
    again, while ``status`` said nothing was stale. A plain ``ragloom index`` now syncs the
    sources the last ``--sources`` named."""
    root = make_repo(tmp_path / "repo")
    run_cli("index", str(root), "--model", "hashing", "--sources", "code,docs", check=True)
    guide = root / "docs" / "guide.md"
    guide.write_text(guide.read_text() + "\n## Xylophone tuning\n\nTune the xylophone.\n")
    out = run_cli("index", str(root), "--model", "hashing", "--json", check=True)
    (docs,) = json.loads(out.stdout)["sources"]
    assert docs["source"] == "docs" and docs["status"] == "ok" and docs["added"] >= 1
    found = search_hits(root / ".ragloom", "xylophone tuning", "--sources", "docs")
    assert found[0]["title"].endswith("Xylophone tuning")


def test_a_named_source_that_fails_exits_24_and_keeps_what_it_held(tmp_path: Path) -> None:
    """A bad export used to exit 0 (or 70 for a bad value inside it), report 0 items although
    the source still held its items, and save the bad path for the next sync."""
    root = make_repo(tmp_path / "repo")
    issues, _ = write_exports(tmp_path / "exports")
    run_cli("index", str(root), "--model", "hashing", "--issues-json", str(issues), check=True)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"number": 6, "title": "x", "updatedAt": "last tuesday"}]))
    out = run_cli("index", str(root), "--model", "hashing", "--issues-json", str(bad), "--json")
    assert out.exit_code == 24, out.stderr
    assert "element 0 (number 6): updatedAt 'last tuesday'" in out.stderr
    (rep,) = json.loads(out.stdout)["sources"]
    assert rep["status"] == "error" and rep["total"] == 2
    config = json.loads((root / ".ragloom" / "sources" / "config.json").read_text())
    assert config["sources"]["issues"]["issues_json"] == str(issues.resolve())
    again = run_cli("index", str(root), "--model", "hashing", "--json", check=True)
    (rep,) = json.loads(again.stdout)["sources"]  # the good export, synced again
    assert rep["source"] == "issues" and rep["status"] == "ok" and rep["total"] == 2


def test_filters_are_never_ignored_quietly(repo: Path) -> None:
    """A user trial: ``--path``, ``--language``, ``--since`` and ``--author`` without
    ``--sources`` were ignored (``--path 'docs/*'`` answered Python files), an unknown
    ``--language`` answered "no results", and ``--sources ""`` meant the code alone."""
    idx = str(repo / ".ragloom")
    out = run_cli("search", "upload", "--index-dir", idx, "--path", "pkg/up*", "--json")
    hits = json.loads(out.stdout)
    assert out.exit_code == 0 and hits and {h["path"] for h in hits} == {"pkg/upload.py"}
    out = run_cli("search", "install", "--index-dir", idx, "--language", "Markdown", "--json")
    assert {h["language"] for h in json.loads(out.stdout)} == {"markdown"}
    ctx = run_cli(
        "context", "parse a header", "--index-dir", idx, "--path", "pkg/*", "--json", check=True
    )
    paths = [p["file_path"] for p in json.loads(ctx.stdout)["parts"]]
    assert "pkg/http.py" in paths and all(p.startswith("pkg/") for p in paths)
    for bad, says in [
        (["--since", "2024-01-01"], "--since only applies with --sources"),
        (["--author", "bob", "--history-weight", "1"], "--author, --history-weight only apply"),
        (["--sources", ""], "--sources names no source"),
        (["--sources", "code", "--language", "klingon"], "unknown --language klingon"),
        (["--sources", "issues", "--since", "2024-03-02", "--until", "2024-03-01"], "is after"),
        (["--sources", "code", "--source-weight", "code=-1"], "a finite weight of 0 or more"),
        (["--sources", "code", "--source-timeout-ms", "0"], "not in the range"),
    ]:
        res = run_cli("search", "upload", "--index-dir", idx, *bad)
        assert res.exit_code == 2 and says in res.stderr, (bad, res.stderr)


def test_until_a_date_keeps_that_day_and_weight_0_leaves_a_source_out(repo: Path) -> None:
    idx = repo / ".ragloom"
    hits = search_hits(
        idx, "document the session API", "--sources", "commits", "--until", "2024-03-01"
    )
    titles = [h["title"] for h in hits]
    assert "Document the session API" in titles, "a commit of 2024-03-01 12:00 is on that day"
    hits = search_hits(idx, "upload", "--sources", "code,commits", "--source-weight", "code=0")
    assert {h["source"] for h in hits} == {"commits"}


def test_a_docs_section_is_dated_by_its_file_s_last_commit(tmp_path: Path) -> None:
    """A fresh clone gave every docs section the clone time (file mtime): ``--until`` found
    nothing and every section got the full recency boost. Committed files now carry their
    newest commit's time; a file with changes not committed keeps its modification time."""
    from datetime import UTC, datetime

    root = make_repo(tmp_path / "repo")
    guide = root / "docs" / "guide.md"
    guide.touch()  # as a clone leaves it: modified now, committed long ago
    edited = root / "docs" / "api.rst"
    edited.write_text(edited.read_text() + "\nMore about sessions.\n")
    run_cli("index", str(root), "--model", "hashing", "--sources", "code,docs", check=True)
    hits = search_hits(root / ".ragloom", "install the package sessions", "--sources", "docs",
                       "-k", "10")  # fmt: skip
    dates = {h["paths"][0]: h["date"] for h in hits}
    assert dates["docs/guide.md"] == datetime(2024, 1, 1, 12, tzinfo=UTC).timestamp()
    assert dates["docs/api.rst"] > datetime(2025, 1, 1, tzinfo=UTC).timestamp()
