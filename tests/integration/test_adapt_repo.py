"""``ragloom adapt`` on a real git repository: the learned ranking fitted to its own history,
reported by ``status``, used by ``+learned``, nudged by feedback, reset, removed; a stale
model is refused with a warning and ranking goes on with the global one."""

from __future__ import annotations

import datetime
import itertools
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import ragloom
from ragloom.cli import cli
from ragloom.learn.adapt import feedback_examples, history_examples, model_path
from ragloom.retrieve.adapt import (
    FEEDBACK_FULL,
    FEEDBACK_MAX_NORM,
    MIN_FEEDBACK,
    AdaptedModel,
    RepositoryRanker,
)
from ragloom.server.feedback import FeedbackStore, QueryLogEntry

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

TOPICS = {
    "router": ["route", "path", "slash", "method", "prefix"],
    "cookies": ["cookie", "header", "quote", "expiry", "domain"],
    "templates": ["template", "context", "escape", "filter", "block"],
    "sessions": ["session", "token", "expire", "secret", "store"],
    "forms": ["form", "field", "validate", "upload", "multipart"],
}
VERBS = ["Fix", "Handle", "Support", "Refactor", "Speed up"]


def _git(cwd: Path, *args: str, date: str = "") -> str:
    env = {**os.environ, "GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": date} if date else None
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_web_repo(tmp_path_factory.mktemp("adapt") / "web")


def make_web_repo(root: Path) -> Path:
    """A git repository of five topic files and 26 commits, each changing one file with a
    message that names its topic (enough history questions to adapt on)."""
    (root / "web").mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.email", "a@b.c")
    _git(root, "config", "user.name", "A")
    for name, words in TOPICS.items():
        body = "".join(f"def {w}_{name}(value):\n    return value  # {w}\n\n" for w in words)
        (root / "web" / f"{name}.py").write_text(body)
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "Initial import of the web toolkit", date="2021-01-01T00:00")
    n = 0
    for verb in VERBS:
        for name, words in TOPICS.items():
            n += 1
            with (root / "web" / f"{name}.py").open("a") as fh:
                fh.write(f"# change {n}\n")
            msg = f"{verb} {words[n % 5]} {name} handling of the {words[(n + 1) % 5]}"
            _git(root, "commit", "-q", "-am", msg, date=f"2021-02-{n:02d}T00:00")
    return root


def _run(*args: str) -> dict[str, object]:
    res = CliRunner().invoke(cli, [*args, "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads(res.output)  # type: ignore[no-any-return]


def test_adapt_status_learned_feedback_reset(repo: Path) -> None:
    idx_dir = str(repo / ".ragloom")
    _run("index", str(repo), "--model", "hashing:64", "--no-progress")
    status = _run("status", "--index-dir", idx_dir)["ranking_model"]
    assert status == {"model": "global", "file_bm25": True}
    # each history question knows its age: the commits since it in the indexed tree's log
    mined = ragloom.Index.at(Path(idx_dir))
    try:
        examples, _, newest = history_examples(mined, repo / ".git", time_limit=60)
    finally:
        mined.close()
    log = _git(repo, "log", "--no-merges", "--format=%H").split()
    assert examples and newest in log
    assert [e.since for e in examples] == [log.index(e.id) for e in examples]
    assert all(a.since < b.since for a, b in itertools.pairwise(examples))

    served = ragloom.Index.at(Path(idx_dir))  # a server's index, open before the adaptation
    served_ranker = served.retriever.ranker
    assert isinstance(served_ranker, RepositoryRanker) and served_ranker.repository is None
    t0 = time.perf_counter()
    report = _run("adapt", "--index-dir", idx_dir, "--no-progress")
    assert report["status"] == "fitted", report
    assert int(report["examples"]) >= 20  # type: ignore[call-overload]
    assert report["feedback_used"] is False
    assert time.perf_counter() - t0 < 60
    # the open index ranks with the new model at its next question, without reopening
    assert served_ranker.repository is not None and served_ranker.digest == report["digest"]
    served.close()
    status = _run("status", "--index-dir", idx_dir)["ranking_model"]
    assert isinstance(status, dict)
    assert status["model"] == "repository" and status["digest"] == report["digest"]
    shown = CliRunner().invoke(cli, ["status", "--index-dir", idx_dir])
    assert f"ranking   repository model {report['digest']}" in shown.output

    index = ragloom.Index.at(Path(idx_dir))
    try:
        ranker = index.retriever.ranker
        assert isinstance(ranker, RepositoryRanker) and isinstance(ranker.repository, AdaptedModel)
        res = index.search("Fix cookie header quoting", top_k=5, strategy="hybrid+learned",
                           explain=True)  # fmt: skip
        assert res.hits and all("learned_features" in h.explain for h in res.hits)
        # ratings: every answer's router hit helpful (enough answers to count)
        store = FeedbackStore(Path(idx_dir))
        try:
            for i in range(MIN_FEEDBACK + 2):
                hits = index.search(f"change {i} of the route path", top_k=5).hits
                qid = f"q{i}"
                store.log_queries([QueryLogEntry(qid, "search", f"change {i} of the route path",
                                                 "hybrid", 0, tuple(h.id for h in hits),
                                                 time.time())])  # fmt: skip
                good = [h for h in hits if h.path == "web/router.py"]
                bad = [h for h in hits if h.path != "web/router.py"]
                if good:
                    store.record_feedback(qid, good[0].id, "helpful")
                if bad:
                    store.record_feedback(qid, bad[0].id, "not_helpful")
            assert store.rated_count() == len(store.rated_answers()) == MIN_FEEDBACK + 2
            assert store.rated_count(time.time() + 60) == 0
        finally:
            store.close()
    finally:
        index.close()

    again = _run("adapt", "--index-dir", idx_dir, "--no-progress")
    assert again["feedback_answers"] == MIN_FEEDBACK + 2 and again["feedback_used"] is True
    # the step grows with the ratings: a fraction of the whole cap with these few
    assert again["feedback_step"] == pytest.approx(
        FEEDBACK_MAX_NORM * (MIN_FEEDBACK + 2) / FEEDBACK_FULL
    )
    shown = _run("adapt", "--index-dir", idx_dir, "--show")
    changes = shown["feedback_changes"]
    assert isinstance(changes, dict) and any(changes.values())
    reset = _run("adapt", "--index-dir", idx_dir, "--reset-feedback")
    assert reset["ranking_model"]["feedback_used"] is False  # type: ignore[index]
    # ratings from before the reset no longer count
    after = _run("adapt", "--index-dir", idx_dir, "--no-progress")
    assert after["feedback_answers"] == 0 and after["examples"] == report["examples"]
    assert after["digest"] == report["digest"]  # same history: the same model
    first_bytes = Path(str(after["path"])).read_bytes()
    _run("adapt", "--index-dir", idx_dir, "--no-progress")
    assert Path(str(after["path"])).read_bytes() == first_bytes  # reproducible, byte for byte

    # the history grows: `ragloom index` fits the repository model again
    few = _run("index", str(repo), "--no-progress")
    assert "adapted" not in few  # no new commit
    for i in range(12):
        with (repo / "web" / "forms.py").open("a") as fh:
            fh.write(f"# later {i}\n")
        _git(repo, "commit", "-q", "-am", f"Validate multipart form upload size {i}",
             date=f"2021-03-{i + 1:02d}T00:00")  # fmt: skip
    grown = _run("index", str(repo), "--no-progress")
    refit = grown["adapted"]
    assert isinstance(refit, dict) and refit["status"] == "fitted"
    assert refit["examples"] > report["examples"]  # type: ignore[operator]

    # a model fitted over another global model is refused; ranking goes on with the global one
    path = model_path(ragloom.Index.at(Path(idx_dir)))
    data = json.loads(path.read_text())
    data["base_digest"] = "0" * 12
    path.write_text(json.dumps(data))
    set_aside = _run("status", "--index-dir", idx_dir)["ranking_model"]
    assert isinstance(set_aside, dict) and set_aside["model"] == "global"
    assert "000000000000" in str(set_aside["set_aside"]) and "ragloom adapt" in str(set_aside)
    shown = CliRunner().invoke(cli, ["status", "--index-dir", idx_dir])
    assert shown.exit_code == 0 and "repository model is set aside" in shown.output
    index = ragloom.Index.at(Path(idx_dir))
    try:
        ranker = index.retriever.ranker
        assert isinstance(ranker, RepositoryRanker) and ranker.repository is None
        assert index.search("Fix cookie header quoting", strategy="hybrid+learned").hits
    finally:
        index.close()
    removed = _run("adapt", "--index-dir", idx_dir, "--remove")
    assert removed["removed"] is True and not path.exists()


def test_outside_git_the_global_model_stays(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def route(path):\n    return path\n")
    _run("index", str(tmp_path), "--model", "hashing:64", "--no-progress")
    report = _run("adapt", "--index-dir", str(tmp_path / ".ragloom"), "--no-progress")
    assert report["status"] == "global" and "not a git work tree" in str(report["reason"])
    dry = CliRunner().invoke(cli, ["adapt", "--index-dir", str(tmp_path / ".ragloom"),
                                   "--dry-run", "--no-progress"])  # fmt: skip
    assert dry.exit_code == 0 and dry.output.startswith("would not be adapted: not a git")
    both = CliRunner().invoke(cli, ["adapt", "--index-dir", str(tmp_path / ".ragloom"),
                                    "--dry-run", "--remove"])  # fmt: skip
    assert both.exit_code != 0 and "one at a time" in both.output
    res = CliRunner().invoke(cli, ["adapt", "--index-dir", str(tmp_path / ".ragloom"), "--show"])
    assert res.exit_code == 0 and "global model" in res.output
    # a damaged model file: `--show` says it is set aside, as `status` does (it said "no
    # repository model")
    (tmp_path / ".ragloom" / "ranker-adapted.json").write_text('{"broken": ')
    res = CliRunner().invoke(cli, ["adapt", "--index-dir", str(tmp_path / ".ragloom"), "--show"])
    assert res.exit_code == 0 and "the repository model is set aside: cannot read" in res.output


def test_an_index_without_the_file_bm25_is_not_adapted_until_indexed(
    repo: Path, tmp_path: Path
) -> None:
    """An index made before its BM25 over whole files: adapting would learn from zeros where
    the model reads each file's score, so ``adapt`` says to index first; ``status`` says which
    model ranks, and ``index`` adds the engine."""
    copy = tmp_path / "web"
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".ragloom"))
    _run("index", str(copy), "--model", "hashing:64", "--no-progress")
    idx_dir = copy / ".ragloom"
    shutil.rmtree(idx_dir / "bm25-files")
    assert _run("status", "--index-dir", str(idx_dir))["ranking_model"] == {
        "model": "global",
        "file_bm25": False,
    }
    res = CliRunner().invoke(cli, ["status", "--index-dir", str(idx_dir)])
    assert "no BM25 over whole files" in res.output
    report = _run("adapt", "--index-dir", str(idx_dir), "--no-progress")
    assert report["status"] == "global" and "run `ragloom index` first" in str(report["reason"])
    _run("index", str(copy), "--model", "hashing:64", "--no-progress")
    assert (idx_dir / "bm25-files" / "engine").is_dir()
    assert _run("adapt", "--index-dir", str(idx_dir), "--no-progress")["status"] == "fitted"


def test_a_rated_answer_sees_the_history_of_when_it_was_served(repo: Path, tmp_path: Path) -> None:
    """Feedback is asked again with the change history as it stood when the answer was served:
    the commits made after it (here every one but the initial import: the answer is dated
    before them) are not in its history columns; an answer served today sees them."""
    copy = tmp_path / "web"
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".ragloom"))
    _run("index", str(copy), "--model", "hashing:64", "--no-progress")
    index = ragloom.Index.at(copy / ".ragloom")
    try:
        query = "Fix cookie header quoting"
        hits = index.search(query, top_k=5).hits
        cookie = [h.id for h in hits if h.path == "web/cookies.py"]
        assert cookie
        names = index.retriever.ranker.names  # type: ignore[union-attr]
        similar = names.index("hist_similar")

        def answer(ts: float) -> dict[str, object]:
            return {"query_id": f"q{ts}", "query": query, "ts": ts, "hit_ids": [],
                    "ratings": {cookie[0]: "helpful"}, "used": []}  # fmt: skip

        early = datetime.datetime(2021, 1, 15, tzinfo=datetime.UTC).timestamp()
        (then,) = feedback_examples(index, [answer(early)])
        (now,) = feedback_examples(index, [answer(time.time())])
        # served before every change: no commit like its question yet
        assert not then.x[:, similar].any() and now.x[:, similar].any()
        # the index's own history is left as it was
        assert index.search(query, top_k=5).hits[0].id == hits[0].id
    finally:
        index.close()


def test_a_shallow_clone_is_told_how_to_bring_its_history(repo: Path, tmp_path: Path) -> None:
    shallow = tmp_path / "shallow"
    _git(tmp_path, "clone", "-q", "--depth", "1", repo.as_uri(), str(shallow))
    _run("index", str(shallow), "--model", "hashing:64", "--no-progress")
    report = _run("adapt", "--index-dir", str(shallow / ".ragloom"), "--no-progress")
    assert report["status"] == "global"
    assert "shallow: `git fetch --unshallow`" in str(report["reason"])


def test_a_server_answers_afresh_once_the_repository_model_changes(tmp_path: Path) -> None:
    """The result cache keys answers by the ranking model too: ``ragloom adapt`` (or its
    removal) changes answers within one generation, and a cached answer of the old model is
    not served after it."""
    from ragloom.server.engine import ServingEngine

    repo = make_web_repo(tmp_path / "web")
    idx_dir = str(repo / ".ragloom")
    _run("index", str(repo), "--model", "hashing:64", "--no-progress")
    query = "Fix cookie header quoting"
    with ServingEngine.open(repo, warm=False) as engine:
        first = engine.search(query, strategy="hybrid+learned")
        assert engine.search(query, strategy="hybrid+learned")["cache_hit"] is True
        assert _run("adapt", "--index-dir", idx_dir, "--no-progress")["status"] == "fitted"
        adapted = engine.search(query, strategy="hybrid+learned")
        assert adapted["cache_hit"] is False and adapted["generation"] == first["generation"]
        assert engine.search(query, strategy="hybrid+learned")["cache_hit"] is True
        # back to the global model: its answer of this generation is the one to give again
        _run("adapt", "--index-dir", idx_dir, "--remove")
        again = engine.search(query, strategy="hybrid+learned")
        assert [h["id"] for h in again["hits"]] == [h["id"] for h in first["hits"]]


def test_a_server_answers_afresh_once_new_commits_are_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commits synced by ``ragloom index`` when no file changed (the watcher had indexed the
    edit before it was committed) publish no generation but change the history evidence: the
    result cache keys answers by the history's version too."""
    import ragloom.server.readers as readers
    from ragloom.server.engine import ServingEngine

    repo = make_web_repo(tmp_path / "web")
    with (repo / "web" / "router.py").open("a") as fh:
        fh.write("def prefix_router(value):\n    return value  # prefix\n")
    first_index = _run("index", str(repo), "--model", "hashing:64", "--no-progress")
    assert first_index["history_commits"]
    monkeypatch.setattr(readers, "HISTORY_RECHECK_S", 0.0)
    query = "Support a router prefix"
    with ServingEngine.open(repo, warm=False) as engine:
        first = engine.search(query)
        assert engine.search(query)["cache_hit"] is True
        _git(repo, "commit", "-q", "-am", "Support a prefix on the router",
             date="2021-03-01T00:00")  # fmt: skip
        synced = _run("index", str(repo), "--no-progress")
        assert synced["files_changed"] == 0 and synced["history_commits"]
        after = engine.search(query)
        assert after["cache_hit"] is False and after["generation"] == first["generation"]


def test_a_folder_index_without_its_clone_adapts_from_the_commits_it_keeps(
    repo: Path, tmp_path: Path
) -> None:
    """An index whose tree is no longer a git work tree (a copied index, a checkout without
    ``.git``) mines the commits its ``commits`` source keeps: the same model as from git."""
    copy = tmp_path / "web"
    shutil.copytree(repo, copy)
    idx_dir = str(copy / ".ragloom")
    _run("index", str(copy), "--model", "hashing:64", "--no-progress")
    from_git = _run("adapt", "--index-dir", idx_dir, "--dry-run", "--no-progress")
    assert from_git["history_from"] == "git" and from_git["status"] == "fitted"
    shutil.move(str(copy / ".git"), str(tmp_path / "git-elsewhere"))
    from_index = _run("adapt", "--index-dir", idx_dir, "--dry-run", "--no-progress")
    assert from_index["history_from"] == "index"
    assert from_index["digest"] == from_git["digest"]
    assert from_index["examples"] == from_git["examples"]
    # an index that keeps no commits says why it cannot adapt
    shutil.rmtree(copy / ".ragloom")
    _run("index", str(copy), "--model", "hashing:64", "--no-progress")
    none = _run("adapt", "--index-dir", idx_dir, "--dry-run", "--no-progress")
    assert none["status"] == "global" and none["history_from"] == ""
    assert "keeps no commit history" in str(none["reason"])
