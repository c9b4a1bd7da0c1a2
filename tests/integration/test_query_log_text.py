"""Text that is not valid Unicode (a lone surrogate, as ``os.fsdecode`` makes of a non-UTF-8
command-line argument) never breaks the query log (a user trial: one such question killed the
serving engine's log writer, after which every rating waited 10 s and failed, and ``ragloom
search --json`` exited 70)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ragloom
from ragloom.errors import InputError
from ragloom.server.engine import ServingEngine
from ragloom.settings import Settings

pytestmark = pytest.mark.integration


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "tmpl.py").write_text("def render_template(name):\n    return name\n")
    with ragloom.Index(
        tmp_path / "repo", tmp_path / "repo" / ".ragloom", embedder="hashing"
    ) as idx:
        idx.index(history=False)
    return tmp_path / "repo"


def test_a_lone_surrogate_does_not_stop_the_query_log(root: Path) -> None:
    with ServingEngine.open(root, Settings()) as eng:
        bad = eng.search("render \udcff template", top_k=2)
        good = eng.search("render a template", top_k=2)
        t = time.perf_counter()
        rec = eng.record_feedback(good["query_id"], good["hits"][0]["id"], "helpful")
        assert rec["in_results"] and time.perf_counter() - t < 5.0
        assert eng.record_feedback(bad["query_id"], bad["hits"][0]["id"], "not_helpful")
        with pytest.raises(InputError, match="comment"):
            eng.record_feedback(good["query_id"], good["hits"][0]["id"], "helpful", "x\udcff")
        with pytest.raises(InputError, match="chunk"):
            eng.track_context_usage(good["query_id"], ["a\udcffb"])


def test_a_non_utf8_argument_with_json_output(root: Path) -> None:
    for cmd in (["search"], ["context", "--budget", "50", "--format", "json"]):
        out = subprocess.run(
            [sys.executable, "-m", "ragloom.cli", *cmd, b"render \xff template", "--json",
             "--index-dir", str(root / ".ragloom")],
            capture_output=True,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        json.loads(out.stdout)
