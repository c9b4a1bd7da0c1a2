"""The issue reading (issue 21) reaches no question of the other evaluations.

A question is read as an issue only when ``looks_like_issue`` is True; for every other question
query processing and ranking are byte-identical to ``+no-issue`` (the ranking identity check,
tests/golden/test_ranking_identity.py). So the commit-message evaluation (docs/evaluation-git.md),
the standard-library docstring / identifier sets (``ragloom eval-data``) and the symbol sets
(docs/evaluation-symbols.md) keep their figures as long as none of their questions reads as an
issue. This checks it on what is at hand without a network: the committed golden questions, the
chi sample of the git evaluation (its test split, and every commit of its history cleaned the
way ``scripts/build_git_eval.py`` cleans it, subject-only and subject + body), and questions built
the way the stdlib and symbol sets build them from a few standard-library packages. Counts over
the full sets: docs/evaluation.md, "Issue reading and the other evaluations (issue 21)".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragloom.eval import symbolset
from ragloom.eval.datasets import (
    MAX_QUERY_CHARS,
    collect_functions,
    first_sentence,
    identifier_query,
    stdlib_root,
)
from ragloom.eval.gitdata import MAX_BODY_CHARS, clean_message
from ragloom.eval.gitrun import load_commits
from ragloom.retrieve.query import looks_like_issue
from ragloom.retrieve.query.issue import ISSUE_LONG_CHARS

TESTS = Path(__file__).resolve().parents[1]
CHI = TESTS / "data" / "git-sample" / "chi"
STDLIB_SAMPLE = ("json", "csv.py", "email", "logging", "textwrap.py", "concurrent")
"""Packages of ``ragloom.eval.datasets.DEFAULT_PACKAGES`` read for the docstring sample."""


def _queries(path: Path) -> list[str]:
    return [
        json.loads(line)["query"]
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def test_golden_questions_are_not_issues() -> None:
    queries = _queries(TESTS / "golden" / "ragloom_questions.jsonl")
    assert len(queries) >= 30
    assert [q for q in queries if looks_like_issue(q)] == []


def test_git_sample_questions_are_not_issues() -> None:
    queries = _queries(CHI / "test.jsonl")
    assert len(queries) == 100
    assert [q for q in queries if looks_like_issue(q)] == []


@pytest.mark.parametrize("body", [False, True], ids=["subject", "subject+body"])
def test_every_chi_commit_cleaned_is_not_an_issue(body: bool) -> None:
    # every commit of the history, not only the 200 chosen: a superset of questions.jsonl and
    # questions-body.jsonl of chi
    commits = load_commits(CHI / "history.jsonl")
    assert len(commits) > 700
    queries = [clean_message(c.message, body=body) for c in commits]
    assert all("\n" not in q for q in queries)
    assert [q for q in queries if looks_like_issue(q)] == []


def test_whole_commit_messages_would_be_issues() -> None:
    # the guard above is not vacuous: raw multi-paragraph messages do trip the detector, the
    # one-line cleaning is what keeps the git questions out
    commits = load_commits(CHI / "history.jsonl")
    assert sum(looks_like_issue(c.message) for c in commits) > 10


def _stdlib_docs() -> list[tuple[str, str]]:
    root = stdlib_root()
    out: list[tuple[str, str]] = []
    for name in STDLIB_SAMPLE:
        base = root / name
        files = sorted(base.rglob("*.py")) if base.is_dir() else [base]
        for f in files:
            rel = f.relative_to(root).as_posix()
            if "/test" in rel:
                continue
            for fd in collect_functions(f.read_bytes(), rel):
                out.append((fd.first_sentence, identifier_query(fd.qualname, name) or ""))
    return out


def test_stdlib_docstring_and_identifier_questions_are_not_issues() -> None:
    docs = _stdlib_docs()
    assert len(docs) > 200
    issues = [q for pair in docs for q in pair if q and looks_like_issue(q)]
    assert issues == []


def test_sentence_questions_are_one_short_line_by_construction() -> None:
    # the docstring and symbol sets ask first sentences: one line of at most MAX_QUERY_CHARS,
    # and a single line under ISSUE_LONG_CHARS is never an issue, whatever it contains
    assert symbolset.first_sentence is first_sentence
    assert MAX_QUERY_CHARS < ISSUE_LONG_CHARS
    assert first_sentence("word " * 100) is None  # a first sentence over MAX_QUERY_CHARS
    wrapped = first_sentence("Read the lines of a\n    traceback until the end.\n\nMore.")
    assert wrapped == "Read the lines of a traceback until the end"
    line = "Traceback (most recent call last) ```python E   x.py:1: >>> " + "x " * 200
    assert not looks_like_issue(line[: ISSUE_LONG_CHARS - 1])


def test_git_body_questions_stay_under_the_long_line_bound_for_short_subjects() -> None:
    # a body question is the subject, ". " and at most MAX_BODY_CHARS of one paragraph: below
    # ISSUE_LONG_CHARS (so never an issue) unless the subject alone is long
    assert MAX_BODY_CHARS + 2 < ISSUE_LONG_CHARS
    subject = "Fix the router when a pattern has a trailing slash"
    body = "The router matched the wrong handler. " * 20
    message = f"{subject}\n\n{body}\n\nSigned-off-by: someone"
    q = clean_message(message, body=True)
    assert "\n" not in q
    assert len(q) <= len(subject) + 2 + MAX_BODY_CHARS
    assert not looks_like_issue(q)
