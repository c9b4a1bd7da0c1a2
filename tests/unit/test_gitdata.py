"""The git-history dataset builder: message cleaning, filters, gold files, split, determinism."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragloom.eval.dataset import load_dataset
from ragloom.eval.gitdata import (
    Commit,
    RepoSpec,
    build_repo,
    clean_message,
    clean_subject,
    is_changelog,
    path_role,
    select_questions,
    skip_reason,
    word_count,
)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

# --- message cleaning ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("fix: handle empty headers in parser (#12)", "handle empty headers in parser"),
        ("feat(router)!: add host matching", "add host matching"),
        ("Fix KeyError on missing cookie. Fixes #12", "Fix KeyError on missing cookie"),
        ("Add streaming reader (closes #4, #5)", "Add streaming reader"),
        ("[WIP] :bug: Fix crash in gzip middleware gh-7", "Fix crash in gzip middleware"),
        ("Merge pull request #99 from someone/branch\n\nAdd retry support", "Add retry support"),
        ("Merge pull request #99 from someone/branch", ""),
        ("Support `Path` params\n\nSigned-off-by: A <a@b.c>", "Support `Path` params"),
        ("  Add   foo\tbar.  ", "Add foo bar"),
        ("refac(errors): Unify code structure", "Unify code structure"),
        ("Fix see https://github.com/o/r/issues/3 now", "Fix see now"),
        ("", ""),
        (
            "Make min inclusive; update snapshots\\n\\n- Set\\n\\nCloses",
            "Make min inclusive; update snapshots",
        ),
        ("Fix a critical Cross-Site Scrip\u2026", "Fix a critical Cross-Site Scrip"),
    ],
)
def test_clean_message_examples(message: str, expected: str) -> None:
    assert clean_message(message) == expected


def test_clean_message_body_paragraph() -> None:
    msg = (
        "Add retry support (#5)\n\n"
        "* squashed commit one\n* squashed commit two\n\n"
        "Retries idempotent requests when the connection drops before a response.\n\n"
        "Co-authored-by: X <x@y.z>\n"
    )
    assert clean_message(msg) == "Add retry support"
    assert clean_message(msg, body=True) == (
        "Add retry support. Retries idempotent requests when the connection drops before a response"
    )
    # no prose paragraph: the subject alone
    assert clean_message("Add x y z\n\nSigned-off-by: A <a@b>", body=True) == "Add x y z"


@given(st.text())
@settings(max_examples=400, deadline=None)
def test_clean_never_raises_and_is_one_stripped_line(text: str) -> None:
    for body in (False, True):
        out = clean_message(text, body=body)
        assert isinstance(out, str)
        assert "\n" not in out and "\r" not in out
        assert out == out.strip()
    assert isinstance(skip_reason(text, text, text), (str, type(None)))


@given(st.text())
@settings(max_examples=400, deadline=None)
def test_clean_is_idempotent(text: str) -> None:
    once = clean_message(text)
    assert clean_message(once) == once
    sub = clean_subject(text)
    assert clean_subject(sub) == sub


_WORDS = st.lists(
    st.sampled_from(
        ["add", "parser", "header", "Cache", "router", "timeout", "streaming", "JSON", "value"]
    ),
    min_size=1,
    max_size=8,
)
_PREFIXES = st.sampled_from(
    ["", "fix: ", "feat(core): ", "chore!: ", "[WIP] ", ":bug: ", "fix(io): feat: ", "- "]
)
_SUFFIXES = st.sampled_from(
    ["", " (#12)", " Fixes #3", " (closes #4, #5)", " gh-7", ".", " (fixes owner/repo#9)", " #1"]
)


@given(_PREFIXES, _WORDS, _SUFFIXES)
def test_clean_keeps_the_words_and_drops_decorations(
    prefix: str, words: list[str], suffix: str
) -> None:
    text = " ".join(words)
    assert clean_message(f"{prefix}{text}{suffix}\n\nbody text here") == text
    assert word_count(clean_message(prefix + text + suffix)) == len(words)


@pytest.mark.parametrize(
    ("message", "author", "reason"),
    [
        ("Bump certifi from 2023.5.7 to 2023.7.22", "dependabot[bot]", "bot"),
        ("Bump certifi from 2023.5.7 to 2023.7.22", "someone", "dependency"),
        ("chore(deps): update dependency x to v2", "someone", "dependency"),
        ("Version 0.47.3 (#2985)", "a", "release"),
        ("v1.2.0", "a", "release"),
        ("Bump version to 1.2.0", "a", "release"),
        ('Revert "Add foo"', "a", "revert"),
        ("Fix typo in router", "a", "format"),
        ("style: run black", "a", "format"),
        ("Fix lint errors", "a", "format"),
        ("docs: explain routing", "a", "docs"),
        ("Update README with examples", "a", "docs"),
        ("ci: run on 3.13", "a", "ci"),
        ("test: cover edge case", "a", "tests"),
        ("Merge branch 'master' into feature", "a", "merge"),
        ("v3 beta 1", "a", "release"),
        ("Update to hyper 1.0.0-rc.4", "a", "dependency"),
        ("fix stuff", "a", "short"),
        ("Address review comments", "a", "wip"),
        ("Add retry support to the HTTP adapter", "a", None),
        ("fix: handle empty headers in parser (#12)", "a", None),
    ],
)
def test_skip_reason(message: str, author: str, reason: str | None) -> None:
    assert skip_reason(message, author, "x@example.com") == reason


def test_is_changelog() -> None:
    for p in ("CHANGELOG.md", "docs/release-notes.md", "axum/CHANGELOG.md", "HISTORY.rst", "NEWS"):
        assert is_changelog(p), p
    for p in ("MIGRATION_GUIDE.md", "README.md", "src/changes.py", "history/model.py"):
        assert not is_changelog(p), p


@pytest.mark.parametrize(
    ("path", "role"),
    [
        ("starlette/routing.py", "source"),
        ("middleware/compress.go", "source"),
        ("lib/adapters/http.js", "source"),
        ("axum/src/routing/mod.rs", "source"),
        ("tests/test_routing.py", "test"),
        ("pkg/test_core.py", "test"),
        ("mux_test.go", "test"),
        ("src/foo.test.ts", "test"),
        ("axum/src/test_helpers/mod.rs", "test"),
        ("src/routing/tests.rs", "test"),
        ("docs/conf.py", "docs"),
        ("examples/hello/main.rs", "example"),
        ("_examples/custom/main.go", "example"),
        ("packages/zod/play.ts", "example"),
        ("benches/routing.rs", "bench"),
        (".github/scripts/x.py", "build"),
        ("scripts/release.py", "build"),
        ("setup.py", "build"),
        ("rollup.config.js", "build"),
        ("index.d.ts", "declaration"),
        ("README.md", "other"),
        ("package-lock.json", "other"),
        ("api.pb.go", "other"),
        ("install.sh", "other"),
    ],
)
def test_path_role(path: str, role: str) -> None:
    assert path_role(path) == role


# --- selection over synthetic commits ------------------------------------------------------------


def _commit(i: int, message: str, *changes: tuple[str, str]) -> Commit:
    return Commit(f"{i:040x}", 1_600_000_000 + i * 60, "dev", "dev@example.com", message, changes)


def test_selection_order_split_and_gold_rules() -> None:
    commits = [
        _commit(i, f"Add feature number {i} to core", ("M", "pkg/core.py")) for i in range(1, 11)
    ]
    commits += [
        _commit(20, "Add huge refactor of everything", *[("M", f"pkg/m{j}.py") for j in range(6)]),
        _commit(21, "Change legacy module behaviour", ("M", "pkg/legacy.py")),
        _commit(22, "Change tests of the parser", ("M", "tests/test_core.py")),
        _commit(23, "Add feature number 10 to core", ("M", "pkg/core.py")),
    ]
    eligible = {"pkg/core.py"} | {f"pkg/m{j}.py" for j in range(6)}
    sel = select_questions(list(reversed(commits)), eligible, repo="r", max_questions=4)
    assert [q.commit for q in sel.questions] == [f"{i:040x}" for i in (7, 8, 9, 23)]
    assert [q.split for q in sel.questions] == ["tune", "tune", "test", "test"]
    assert sel.skipped["too-many-files"] == 1
    assert sel.skipped["gold-gone"] == 1
    assert sel.skipped["no-source"] == 1
    assert sel.skipped["duplicate"] == 1  # commit 10 repeats commit 23's text: the newest wins
    assert sel.skipped["older-than-selection"] == 6
    assert sel.qualifying == 10


# --- the builder on a real git repository --------------------------------------------------------


class _Repo:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.tick = 0
        root.mkdir()
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        t = f"2024-01-01T00:{self.tick // 60:02d}:{self.tick % 60:02d}+00:00"
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
            "GIT_AUTHOR_NAME": "Dev",
            "GIT_AUTHOR_EMAIL": "dev@example.com",
            "GIT_COMMITTER_NAME": "Dev",
            "GIT_COMMITTER_EMAIL": "dev@example.com",
            "GIT_AUTHOR_DATE": t,
            "GIT_COMMITTER_DATE": t,
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": str(self.root),
        }
        out = subprocess.run(
            ["git", "-c", "commit.gpgsign=false", *args],
            cwd=self.root,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        return out.stdout.strip()

    def commit(self, message: str, files: dict[str, str | None]) -> str:
        self.tick += 1
        for rel, text in files.items():
            p = self.root / rel
            if text is None:
                self.git("rm", "-q", rel)
                continue
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
            self.git("add", rel)
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")


def _make_repo(root: Path) -> tuple[_Repo, dict[str, str]]:
    r = _Repo(root)
    shas: dict[str, str] = {}
    shas["init"] = r.commit(
        "Initial commit",
        {
            "pkg/__init__.py": "__version__ = '1.0'\n",
            "pkg/core.py": "def parse(x):\n    return x\n",
            "pkg/util.py": "def retry():\n    pass\n",
            "pkg/legacy.py": "def old():\n    pass\n",
            "tests/test_core.py": "def test_parse():\n    pass\n",
            "docs/index.md": "# Docs\n",
            "README.md": "# pkg\n",
            "CHANGELOG.md": "# Changes\n- Add parse_header helper to the core module\n",
        },
    )
    shas["code"] = r.commit(
        "Add parse_header helper to the core module",
        {"pkg/core.py": "def parse(x):\n    return x\n\ndef parse_header(h):\n    return h\n"},
    )
    shas["tests"] = r.commit(
        "Add more cases for the header parser", {"tests/test_core.py": "def test_h():\n    pass\n"}
    )
    shas["docs"] = r.commit("Describe the installation steps", {"docs/index.md": "# Install\n"})
    r.git("checkout", "-q", "-b", "feature")
    shas["branch"] = r.commit(
        "Add retry support to the util module", {"pkg/util.py": "def retry(n=3):\n    pass\n"}
    )
    r.git("checkout", "-q", "main")
    r.tick += 1
    r.git("merge", "-q", "--no-ff", "-m", "Merge branch 'feature'", "feature")
    shas["merge"] = r.git("rev-parse", "HEAD")
    shas["bump"] = r.commit("Bump version to 1.1.0", {"pkg/__init__.py": "__version__ = '1.1'\n"})
    shas["fix"] = r.commit(
        "fix: handle empty headers in parser (#12)\n\nSigned-off-by: Dev <dev@example.com>",
        {
            "pkg/core.py": "def parse(x):\n    return x or ''\n\ndef parse_header(h):\n    return h\n"
        },
    )
    shas["added"] = r.commit(
        "feat(io): add streaming reader for large files",
        {"pkg/stream.py": "def read_stream(f):\n    yield from f\n", "README.md": "# pkg!\n"},
    )
    shas["legacy"] = r.commit(
        "Make the legacy shim warn on use", {"pkg/legacy.py": "def old():\n    warn()\n"}
    )
    shas["delete"] = r.commit("Remove the legacy shim module", {"pkg/legacy.py": None})
    shas["pinned"] = r.commit(
        "Tighten parse_header input checks", {"pkg/core.py": "def parse_header(h):\n    return h\n"}
    )
    return r, shas


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_build_repo_end_to_end_and_byte_identical(tmp_path: Path) -> None:
    repo, shas = _make_repo(tmp_path / "src-repo")
    spec = RepoSpec(
        name="tiny", language="python", git_dir=str(repo.root / ".git"), commit=shas["pinned"]
    )
    out1, out2 = tmp_path / "out1", tmp_path / "out2"
    b1 = build_repo(spec, out1, tmp_path, max_questions=10)
    b2 = build_repo(spec, out2, tmp_path, max_questions=10)
    assert b1.to_dict() == b2.to_dict()

    qs = _read(out1 / "tiny" / "questions.jsonl")
    by_commit = {q["commit"]: q for q in qs}
    # oldest first: the code change, the branch commit (not the merge), the fix, the new file
    assert [q["commit"] for q in qs] == [shas["code"], shas["branch"], shas["fix"], shas["added"]]
    assert by_commit[shas["code"]]["query"] == "Add parse_header helper to the core module"
    assert by_commit[shas["code"]]["gold_files"] == ["pkg/core.py"]
    assert by_commit[shas["branch"]]["gold_files"] == ["pkg/util.py"]
    assert by_commit[shas["fix"]]["query"] == "handle empty headers in parser"
    assert by_commit[shas["added"]]["query"] == "add streaming reader for large files"
    assert by_commit[shas["added"]]["gold_files"] == ["pkg/stream.py"]  # README is not gold
    for name in ("init", "tests", "docs", "merge", "bump", "legacy", "delete", "pinned"):
        assert shas[name] not in by_commit, name
    assert [q["split"] for q in qs] == ["tune", "tune", "test", "test"]
    assert all(q["repo"] == "tiny" and q["id"] == f"tiny-{q['commit'][:12]}" for q in qs)
    assert all(str(q["date"]).startswith("2024-01-01T00:") for q in qs)
    skipped = b1.skipped
    assert skipped["short"] == 1  # "Initial commit"
    assert skipped["release"] == 1
    assert skipped["no-source"] == 2  # tests-only and docs-only
    assert skipped["gold-gone"] == 2  # legacy.py was deleted before the pinned commit
    assert "merge" not in skipped  # merges never reach the filters: git log --no-merges

    # the dataset loader of `ragloom eval` reads every file
    for name in ("questions.jsonl", "questions-body.jsonl", "tune.jsonl", "test.jsonl"):
        assert len(load_dataset(out1 / "tiny" / name)) == (4 if name.startswith("q") else 2)

    # corpus: the pinned tree without .git; the deleted file is gone
    corpus = out1 / "tiny" / "corpus"
    assert (corpus / "pkg" / "stream.py").exists()
    assert not (corpus / "pkg" / "legacy.py").exists()
    assert not (corpus / ".git").exists()
    assert not (corpus / "CHANGELOG.md").exists()  # it quotes the questions
    assert (corpus / "README.md").exists()
    meta = json.loads((out1 / "tiny" / "meta.json").read_text())
    assert meta["left_out_of_corpus"] == ["CHANGELOG.md"]
    assert (out1 / "tiny" / "corpus.commit").read_text().strip() == shas["pinned"]

    # byte for byte: every file of both runs, corpus included
    files1 = sorted(p.relative_to(out1) for p in out1.rglob("*") if p.is_file())
    files2 = sorted(p.relative_to(out2) for p in out2.rglob("*") if p.is_file())
    assert files1 == files2
    for rel in files1:
        assert (out1 / rel).read_bytes() == (out2 / rel).read_bytes(), rel
        if rel.parts[1] == "corpus":  # corpus files carry the commit time
            assert (out1 / rel).stat().st_mtime == (out2 / rel).stat().st_mtime, rel

    # a rebuild over an existing output keeps the corpus (and any index in it) and rewrites
    # the same bytes
    before = (out1 / "tiny" / "questions.jsonl").read_bytes()
    b3 = build_repo(spec, out1, tmp_path, max_questions=10)
    assert not b3.extracted and b1.extracted
    assert (out1 / "tiny" / "questions.jsonl").read_bytes() == before

    # a smaller cap keeps the newest questions
    b4 = build_repo(spec, tmp_path / "out3", tmp_path, max_questions=2)
    newest = _read(tmp_path / "out3" / "tiny" / "questions.jsonl")
    assert [q["commit"] for q in newest] == [shas["fix"], shas["added"]]
    assert [q["split"] for q in newest] == ["tune", "test"]
    assert b4.skipped["older-than-selection"] == 2


# --- the plain BM25 baseline (ragloom.eval.baseline) ---------------------------------------------


def test_baseline_tokenize_metrics_and_file_ranking(tmp_path: Path) -> None:
    import sqlite3

    from ragloom.eval.baseline import (
        Bm25Baseline,
        file_metrics,
        load_chunks,
        mean_metrics,
        simple_tokenize,
    )

    assert simple_tokenize("parse_header(HTTP/2) x-Forwarded") == [
        "parse",
        "header",
        "http",
        "2",
        "x",
        "forwarded",
    ]
    assert simple_tokenize("") == []
    m = file_metrics(["a.py", "b.py", "c.py"], ["b.py", "z.py"])
    assert m == {"R@1": 0.0, "R@5": 0.5, "R@10": 0.5, "MRR@10": 0.5}
    assert mean_metrics([m, {**m, "MRR@10": 1.0}])["MRR@10"] == 0.75

    db = tmp_path / "index.sqlite"
    con = sqlite3.connect(db)
    con.execute(
        "CREATE TABLE chunks (rowid INTEGER PRIMARY KEY, path TEXT, symbol TEXT, text TEXT)"
    )
    con.executemany(
        "INSERT INTO chunks (path, symbol, text) VALUES (?, ?, ?)",
        [
            ("pkg/headers.py", "parse_header", "def parse_header(raw): split the raw header"),
            ("pkg/headers.py", "Headers", "class Headers: a header mapping"),
            ("pkg/cookies.py", "parse_cookie", "def parse_cookie(raw): cookie jar"),
            ("docs/intro.md", "", "Welcome to the documentation"),
        ],
    )
    con.commit()
    con.close()
    chunks = load_chunks(tmp_path)
    assert [c.path for c in chunks][:2] == ["pkg/headers.py", "pkg/headers.py"]
    bm = Bm25Baseline(chunks)
    # no stop words: "the" matches the docs page, below both code files
    assert bm.rank_files("parse the raw header") == [
        "pkg/headers.py",
        "pkg/cookies.py",
        "docs/intro.md",
    ]
    assert bm.rank_files("cookie") == ["pkg/cookies.py"]
    assert bm.rank_files("zzz unknown") == []
    assert bm.rank_files("!!!") == []
