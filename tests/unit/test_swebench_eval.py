"""The SWE-bench localisation evaluation: patch parsing, gold functions, the split, determinism
of the built questions, the embedding cache, scoring, and a whole run over a tiny repository."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragloom.embed.base import HashingEmbedder
from ragloom.eval.swebench import (
    EmbeddingCache,
    GoldFunction,
    Instance,
    Ranked,
    SweQuestion,
    build_questions,
    definitions,
    dump_questions,
    edited_lines,
    enclosing,
    is_test_path,
    load_instances,
    load_questions,
    reserved_ids,
    run_repo,
    score_run,
    summarize,
)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

SOURCE_V1 = '''"""A tiny module."""

LIMIT = 3


def parse(text):
    """Split text."""
    return text.split()


class Reader:
    mode = "r"

    def read(self, path):
        with open(path) as fh:
            return fh.read()

    def close(self):
        def inner():
            return None

        return inner()
'''

PATCH = """diff --git a/pkg/core.py b/pkg/core.py
--- a/pkg/core.py
+++ b/pkg/core.py
@@ -14,3 +14,4 @@ class Reader:
     def read(self, path):
-        with open(path) as fh:
+        with open(path, encoding="utf-8") as fh:
             return fh.read()
+
@@ -19,2 +20,2 @@ class Reader:
         def inner():
-            return None
+            return 0
diff --git a/pkg/new.py b/pkg/new.py
new file mode 100644
--- /dev/null
+++ b/pkg/new.py
@@ -0,0 +1 @@
+X = 1
"""


def test_edited_lines_maps_removals_and_insertions_to_old_lines() -> None:
    assert edited_lines(PATCH) == {"pkg/core.py": (15, 16, 20)}


def test_definitions_enter_classes_not_functions() -> None:
    names = [(d.name, d.kind, d.start, d.end) for d in definitions(SOURCE_V1)]
    assert names == [
        ("parse", "function", 6, 8),
        ("Reader", "class", 11, 22),
        ("Reader.read", "function", 14, 16),
        ("Reader.close", "function", 18, 22),
    ]
    defs = definitions(SOURCE_V1)
    assert enclosing(defs, 20, 20) is not None and enclosing(defs, 20, 20).name == "Reader.close"  # type: ignore[union-attr]
    assert enclosing(defs, 12, 12) is not None and enclosing(defs, 12, 12).name == "Reader"  # type: ignore[union-attr]
    assert enclosing(defs, 3, 3) is None
    assert definitions("def broken(:\n") == []


@given(st.text(max_size=300))
@settings(max_examples=60, deadline=None)
def test_patch_parsing_never_raises(text: str) -> None:
    out = edited_lines(text)
    assert all(all(n >= 1 for n in v) for v in out.values())


def test_test_paths() -> None:
    assert is_test_path("testing/test_x.py") and is_test_path("a/tests/util.py")
    assert is_test_path("conftest.py") and not is_test_path("src/_pytest/python.py")


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def _repo(tmp_path: Path) -> tuple[Path, list[str]]:
    """A mirror (bare clone) at ``<root>/acme+tiny/repo`` with three commits."""
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    _git(src, "init", "-q", "-b", "main")
    _git(src, "config", "user.email", "a@b.c")
    _git(src, "config", "user.name", "A")
    shas = []
    for i, body in enumerate([SOURCE_V1, SOURCE_V1 + "\n\ndef extra():\n    return 1\n"]):
        (src / "pkg" / "core.py").write_text(body)
        (src / "pkg" / "tests").mkdir(exist_ok=True)
        (src / "pkg" / "tests" / "test_core.py").write_text(f"def test_read():\n    pass  # {i}\n")
        _git(src, "add", "-A")
        _git(src, "commit", "-q", "-m", f"commit {i}", "--date", f"2020-01-0{i + 1}T00:00:00")
        shas.append(_git(src, "rev-parse", "HEAD"))
    mirror_root = tmp_path / "mirrors"
    (mirror_root / "acme+tiny").mkdir(parents=True)
    _git(tmp_path, "clone", "-q", "--bare", str(src), str(mirror_root / "acme+tiny" / "repo"))
    return mirror_root, shas


def _instances(shas: list[str]) -> list[Instance]:
    return [
        Instance("acme__tiny-2", "acme/tiny", shas[1], "Reader.read ignores the encoding", PATCH),
        Instance("acme__tiny-1", "acme/tiny", shas[0], "read a file with utf-8 encoding", PATCH),
        Instance("acme__tiny-3", "acme/tiny", shas[0], "reserved one", PATCH),
        Instance("psf__requests-1", "psf/requests", shas[0], "reserved repo", PATCH),
    ]


def test_build_questions_splits_by_time_and_is_byte_identical(tmp_path: Path) -> None:
    mirror_root, shas = _repo(tmp_path)
    qs = build_questions(_instances(shas), mirror_root, {"acme__tiny-3"})
    assert [(q.id, q.split) for q in qs] == [("acme__tiny-1", "tune"), ("acme__tiny-2", "test")]
    assert qs[0].gold_files == ("pkg/core.py",)
    assert [g.name for g in qs[0].gold_functions] == ["Reader.read", "Reader.close"]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    dump_questions(qs, a)
    dump_questions(build_questions(_instances(shas), mirror_root, {"acme__tiny-3"}), b)
    assert a.read_bytes() == b.read_bytes()
    assert load_questions(a) == qs


def test_load_instances_and_reserved_ids(tmp_path: Path) -> None:
    row = {"instance_id": "x-1", "repo": "o/r", "base_commit": "c", "problem_statement": "p"}
    (tmp_path / "a.json").write_text(json.dumps([{**row, "patch": ""}]))
    (tmp_path / "b.jsonl").write_text(json.dumps({**row, "patch": ""}) + "\n")
    assert load_instances(tmp_path / "a.json") == load_instances(tmp_path / "b.jsonl")
    assert reserved_ids(tmp_path / "b.jsonl") == {"x-1"}
    (tmp_path / "c.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match="lacks a field"):
        load_instances(tmp_path / "c.jsonl")


def test_embedding_cache_embeds_each_text_once(tmp_path: Path) -> None:
    inner = HashingEmbedder(32)
    cache = EmbeddingCache(inner, tmp_path / "e.sqlite")
    first = cache.embed_documents(["a b", "c d"])
    again = EmbeddingCache(inner, tmp_path / "e.sqlite").embed_documents(["c d", "e f", "a b"])
    assert np.array_equal(again[0], first[1]) and np.array_equal(again[2], first[0])
    assert np.array_equal(again[1], inner.embed_documents(["e f"])[0])
    assert (cache.hits, cache.misses) == (0, 2)


def test_score_run_definitions() -> None:
    g = GoldFunction("a.py", "f", 1, 10, (3, 4))
    q = SweQuestion("i", "o/r", "c", 0, "test", "q", ("a.py", "b.py"), (g,), {"a.py": (3, 4)})
    r = Ranked(
        ["a.py", "x.py", "b.py"], ["a.py::f"], {4000: [("a.py", 1, 3)], 8000: [("a.py", 2, 5)]}
    )
    m = score_run(q, "product", r)
    assert m["file_acc@1"] == 0.0 and m["file_acc@3"] == 1.0 and m["file_mrr@10"] == 1.0
    assert m["fn_acc@5"] == 1.0 and m["ctx@4k"] == 0.0 and m["ctx@8k"] == 1.0
    assert m["ctx@13k"] is None
    rows = [{"method": "m", "protocol": "product", "metrics": m}]
    assert summarize(rows)["m|product"]["file_acc@3"] == 1.0


def test_run_repo_end_to_end(tmp_path: Path) -> None:
    mirror_root, shas = _repo(tmp_path)
    qs = build_questions(_instances(shas), mirror_root, {"acme__tiny-3"})
    rows: list[dict[str, object]] = []
    run_repo(
        qs,
        mirror_root=mirror_root,
        work_dir=tmp_path / "work",
        strategies=["sparse", "hybrid"],
        embedder=EmbeddingCache(HashingEmbedder(64), tmp_path / "e.sqlite"),
        budgets=(4000,),
        on_result=rows.append,
    )
    assert {(r["id"], r["method"], r["protocol"]) for r in rows} == {
        (q, m, p)
        for q in ("acme__tiny-1", "acme__tiny-2")
        for m, p in [
            ("bm25", "papers"),
            ("sparse", "product"),
            ("sparse", "papers"),
            ("hybrid", "product"),
            ("hybrid", "papers"),
        ]
    }
    work = tmp_path / "work" / "acme+tiny"
    # the work tree holds the newest base commit and no ref that could show later history
    assert _git(work, "rev-parse", "HEAD") == shas[1]
    assert _git(work, "for-each-ref") == ""
    sparse = next(r for r in rows if r["method"] == "sparse" and r["id"] == "acme__tiny-2")
    assert sparse["files"][0] == "pkg/core.py"  # type: ignore[index]
    papers = next(r for r in rows if r["method"] == "sparse" and r["protocol"] == "papers")
    assert all("tests/" not in f for f in papers["files"])  # type: ignore[union-attr]
    assert papers["metrics"]["ctx@4k"] == 1.0  # type: ignore[index]
