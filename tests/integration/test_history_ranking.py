"""The ``history`` ranking step end to end: ``ragloom index`` in a git work tree syncs the
commit history by default, and a question like an earlier change's message lifts the file that
change touched; ``+no-history`` ranks as without it, ``--no-history`` does not sync, and a folder
that is not a repository, or that the repository ignores, indexes without one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragloom.api import Index
from ragloom.retrieve.history import CHANGE_WEIGHTS
from tests.conftest import run_cli
from tests.sources_fixture import commit, git


def _repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    # Two files say the same words; only history says which one changes for this kind of work.
    body = "def handle(request):\n    return render(request)\n"
    commit(
        path,
        {".gitignore": ".ragloom/\n", "app/views.py": body, "app/forms.py": body},
        "Initial import",
        date="2024-01-01T12:00:00Z",
    )
    for i, day in enumerate(("02", "03", "04")):
        commit(
            path,
            {"app/forms.py": body + f"# rev {i}\n"},
            f"Tighten the signup validation rules ({i})",
            date=f"2024-02-{day}T12:00:00Z",
        )
    return path


def _files(root: Path, strategy: str) -> list[str]:
    out = run_cli(
        "search", "tighten validation for signup", "--index-dir", str(root / ".ragloom"),
        "--strategy", strategy, "--json", "--explain", check=True,
    )  # fmt: skip
    hits = json.loads(out.stdout)
    return list(dict.fromkeys(h["path"] for h in hits))


def test_index_syncs_history_and_the_step_uses_it(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r")
    out = run_cli("index", str(root), "--model", "hashing", "--json", check=True)
    assert json.loads(out.stdout)["history_commits"] == 4
    assert (root / ".ragloom" / "sources" / "commits.db").is_file()
    text = run_cli("index", str(root), "--model", "hashing", check=True).stdout
    assert "history: 4 commits" in text
    status = json.loads(run_cli("status", "--index-dir", str(root / ".ragloom"), "--json").stdout)
    assert status["history"]["commits"] == 4 and status["history"]["ranking"] is True
    assert status["history"]["last_commit"] == git(root, "rev-parse", "HEAD")
    shown = run_cli("status", "--index-dir", str(root / ".ragloom"), check=True).stdout
    assert "history   4 commits (last " in shown
    assert _files(root, "hybrid")[0] == "app/forms.py"
    # without the step nothing tells the two files apart: forms.py does not lead the hand-set
    # order (the learned stage breaks the tie its own way)
    assert _files(root, "hybrid+handset+no-history")[0] != "app/forms.py"
    with Index.at(root) as idx:
        res = idx.search("tighten validation for signup", strategy="hybrid", explain=True)
        forms = [h for h in res.hits if h.path == "app/forms.py"]
        assert forms and forms[0].explain.get("history", 0) > 0
        plain = idx.search("tighten validation for signup", strategy="hybrid+no-history")
        assert all("history" not in (h.explain or {}) for h in plain.hits)
        # the same lists without the step: the history bonus is what moved forms.py up
        assert [h.score for h in plain.hits] != [h.score for h in res.hits]


def test_no_history_flag_and_plain_folders(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r")
    out = run_cli("index", str(root), "--model", "hashing", "--no-history", "--json", check=True)
    assert json.loads(out.stdout)["history_commits"] is None
    status = run_cli("status", "--index-dir", str(root / ".ragloom"), "--json", check=True)
    assert json.loads(status.stdout)["history"] == {}
    assert not (root / ".ragloom" / "sources" / "commits.db").exists()
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "m.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    out = run_cli("index", str(plain), "--model", "hashing", "--json", check=True)
    assert json.loads(out.stdout)["history_commits"] is None
    # a folder the repository ignores (build output, fetched data) is not its code: the
    # repository's history is not synced into its index, nor its git state reported
    commit(root, {".gitignore": ".ragloom/\nout/\n"}, "Ignore the output folder")
    data = root / "out" / "corpus"
    data.mkdir(parents=True)
    (data / "m.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    out = run_cli("index", str(data), "--model", "hashing", "--json", check=True)
    assert json.loads(out.stdout)["history_commits"] is None
    assert not (data / ".ragloom" / "sources" / "commits.db").exists()
    status = run_cli("status", "--index-dir", str(data / ".ragloom"), "--json", check=True)
    assert json.loads(status.stdout)["history"] == {}


def test_a_broken_history_never_fails_a_search(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r")
    run_cli("index", str(root), "--model", "hashing", check=True)
    with Index.at(root) as idx:
        assert idx.retriever.history is not None
        idx.retriever.history.close()  # type: ignore[attr-defined]
        res = idx.search("tighten validation for signup", strategy="hybrid")
        assert res.hits


@pytest.mark.parametrize("sources", ["code,commits"])
def test_sources_commits_still_reports_what_it_added(tmp_path: Path, sources: str) -> None:
    root = _repo(tmp_path / "r")
    out = run_cli(
        "index", str(root), "--model", "hashing", "--sources", sources, "--json", check=True
    )
    data = json.loads(out.stdout)
    by = {r["source"]: r for r in data["sources"]}
    assert by["commits"]["added"] == 4


def test_a_subfolder_index_reads_history_relative_to_itself(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r")
    sub = root / "app"
    run_cli("index", str(sub), "--model", "hashing", check=True)
    with Index.at(sub) as idx:
        hist = idx.retriever.history
        assert hist is not None and hist.prefix == "app/"  # type: ignore[attr-defined]
        res = idx.search("tighten validation for signup", strategy="hybrid", explain=True)
        assert res.hits[0].path == "forms.py" and res.hits[0].explain.get("history", 0) > 0


def test_history_yields_when_both_modalities_agree_on_the_file(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r")
    run_cli("index", str(root), "--model", "hashing", check=True)
    with Index.at(root) as idx:
        ret = idx.retriever
        forms = [c.rowid for c in ret.store.chunks_for_path("app/forms.py")]
        views = [c.rowid for c in ret.store.chunks_for_path("app/views.py")]
        assert ret.agree({"bm25": [(forms[0], 1.0)], "dense": [(forms[-1], 0.9)]}, None)
        assert not ret.agree({"bm25": [(forms[0], 1.0)], "dense": [(views[0], 0.9)]}, None)
        assert not ret.agree({"bm25": [], "dense": [(views[0], 0.9)]}, None)
        # a confident dense answer counts as agreement when the weights ask for it
        assert ret.agree({"bm25": [], "dense": [(views[0], 0.9)]}, 0.55)
        assert not ret.agree({"bm25": [], "dense": [(views[0], 0.5)]}, 0.55)
        # the rule is what the lookup weights consult: agreeing lists leave every hit as is
        q = "tighten validation for signup"
        ret.agree = lambda lists, confident=None: True  # type: ignore[method-assign]
        hits = idx.search(q, strategy="hybrid+lookup", explain=True).hits
        assert all("history" not in (h.explain or {}) for h in hits)
        ret.agree = lambda lists, confident=None: False  # type: ignore[method-assign]
        hits = idx.search(q, strategy="hybrid+lookup", explain=True).hits
        assert any("history" in (h.explain or {}) for h in hits)


def test_changes_profile_pins_on_agreement_and_weighs_more(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r")
    run_cli("index", str(root), "--model", "hashing", check=True)
    q = "tighten validation for signup"
    with Index.at(root) as idx:
        ret = idx.retriever
        # agreement: the first CHANGE_WEIGHTS.pin hits keep their places, without a bonus (the
        # hand-set order: the learned stage, after the pin, re-orders them with the rest)
        ret.agree = lambda lists, confident=None: True  # type: ignore[method-assign]
        pinned = idx.search(q, strategy="hybrid+handset+changes", explain=True).hits
        plain = idx.search(q, strategy="hybrid+handset+no-history").hits
        n = CHANGE_WEIGHTS.pin
        assert [h.id for h in pinned[:n]] == [h.id for h in plain[:n]]
        assert all("history" not in (h.explain or {}) for h in pinned[:n])
        ret.agree = lambda lists, confident=None: False  # type: ignore[method-assign]
        strong = idx.search(q, strategy="hybrid+changes", explain=True).hits
        weak = {h.id: h for h in idx.search(q, strategy="hybrid+lookup", explain=True).hits}
        forms = [h for h in strong if h.path == "app/forms.py"]
        assert forms and forms[0].explain["history"] > weak[forms[0].id].explain["history"]  # type: ignore[index,operator]
        assert strong[0].path == "app/forms.py"


def test_default_picks_the_weights_by_what_the_question_asks(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r")
    run_cli("index", str(root), "--model", "hashing", check=True)
    with Index.at(root) as idx:
        ret = idx.retriever
        ret.agree = lambda lists, confident=None: False  # type: ignore[method-assign]
        for q in ("tighten validation for signup", "signup validation rules"):
            default = {
                h.id: (h.explain or {}).get("history") for h in idx.search(q, explain=True).hits
            }
            profile = "changes" if q.startswith("tighten") else "lookup"
            forced = idx.search(q, strategy=f"hybrid+{profile}", explain=True).hits
            assert default == {h.id: (h.explain or {}).get("history") for h in forced}, q
