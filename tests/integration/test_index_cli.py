"""Index, search and status on real code through the CLI and the API."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import ragloom
from tests.conftest import copy_stdlib_packages, run_cli

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def json_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    copy_stdlib_packages(root, ["json", "csv", "textwrap"])
    (root / "README.md").write_text("# Demo\n\nSome docs.\n\n## Usage\n\nCall json.loads.\n")
    proc = run_cli("index", str(root), "--json")
    assert proc.returncode == 0, proc.stderr
    return root


def test_index_stats_contract(json_repo: Path) -> None:
    proc = run_cli("index", str(json_repo), "--json")
    stats = json.loads(proc.stdout)
    for key in (
        "files_scanned",
        "files_changed",
        "files_removed",
        "files_skipped",
        "files_skipped_examples",
        "chunks_total",
        "chunks_added",
        "chunks_removed",
        "chunks_embedded",
        "seconds",
    ):
        assert key in stats
    assert stats["files_changed"] == 0 and stats["chunks_embedded"] == 0
    assert stats["chunks_total"] > 50
    examples = stats["files_skipped_examples"]  # which files, not only how many
    assert set(examples) == set(stats["files_skipped"])
    assert all(0 < len(examples[k]) <= min(20, n) for k, n in stats["files_skipped"].items())


def test_search_json_contract_and_quality(json_repo: Path) -> None:
    proc = run_cli(
        "search", "decode a JSON document", "--index-dir", str(json_repo / ".ragloom"), "--json"
    )
    assert proc.returncode == 0, proc.stderr
    hits = json.loads(proc.stdout)
    assert isinstance(hits, list) and hits
    for key in (
        "id",
        "path",
        "start_line",
        "end_line",
        "kind",
        "symbol",
        "language",
        "score",
        "ranks",
    ):
        assert key in hits[0]
    assert any(h["path"] in ("json/decoder.py", "json/__init__.py") for h in hits[:3])
    for strategy in ("dense", "sparse"):
        proc = run_cli(
            "search",
            "decode a JSON document",
            "--index-dir",
            str(json_repo / ".ragloom"),
            "--strategy",
            strategy,
            "--json",
        )
        hits = json.loads(proc.stdout)
        assert hits and all(strategy.replace("sparse", "bm25") in h["ranks"] for h in hits)


def test_status_reports_fresh_then_stale(json_repo: Path, tmp_path: Path) -> None:
    proc = run_cli("status", "--index-dir", str(json_repo / ".ragloom"), "--json")
    st = json.loads(proc.stdout)
    assert st["stale_files"] == 0 and st["vectors_ready"] and st["bm25_status"] == "ready"
    assert st["chunks"] == st["bm25_docs"] == st["vectors"]


def test_incremental_edit_reembeds_only_changed_chunks(tmp_path: Path) -> None:
    root = copy_stdlib_packages(tmp_path / "r", ["json"])
    idx = ragloom.open(root)
    first = idx.index()
    assert first.chunks_embedded > 0
    target = root / "json" / "decoder.py"
    text = target.read_text()
    target.write_text(text.replace("def py_scanstring(", "def py_scanstring(  # edited\n", 1))
    (root / "json" / "tool.py").unlink()
    (root / "json" / "newmod.py").write_text("def brand_new_function(x):\n    return x * 2\n")
    assert idx.status().stale_files == 3
    second = idx.index()
    assert second.files_changed == 2 and second.files_removed == 1
    assert 1 <= second.chunks_embedded <= 3
    assert second.chunks_added >= 1 and second.chunks_removed >= 1
    hits = idx.search("brand new function", top_k=3).hits
    assert hits[0].path == "json/newmod.py"
    st = idx.status()
    assert st.stale_files == 0 and st.chunks == st.bm25_docs == st.vectors
    idx.close()


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    proc = run_cli("index", str(tmp_path / "missing"))
    assert proc.returncode == 3 and proc.stderr.strip().startswith("error: path not found")
    f = tmp_path / "file.txt"
    f.write_text("x")
    proc = run_cli("index", str(f))
    assert proc.returncode == 3 and "not a directory" in proc.stderr
    proc = run_cli("search", "x", cwd=tmp_path)
    assert proc.returncode == 21 and "no ragloom index" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_incompatible_index_is_refused(tmp_path: Path) -> None:
    root = copy_stdlib_packages(tmp_path / "r", ["textwrap"])
    assert run_cli("index", str(root), "--model", "hashing").returncode == 0
    manifest = root / ".ragloom" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["format_version"] = 999
    manifest.write_text(json.dumps(data))
    proc = run_cli("search", "wrap text", "--index-dir", str(root / ".ragloom"))
    assert proc.returncode == 23 and "--rebuild" in proc.stderr
    assert run_cli("index", str(root), "--rebuild", "--model", "hashing").returncode == 0
    assert run_cli("search", "wrap text", "--index-dir", str(root / ".ragloom")).returncode == 0


def test_model_change_reembeds_everything(tmp_path: Path) -> None:
    root = copy_stdlib_packages(tmp_path / "r", ["textwrap"])
    with ragloom.open(root, embedder="hashing:64") as idx:
        idx.index()
    with ragloom.open(root, embedder="hashing:32") as idx:
        stats = idx.index()
        assert stats.model_changed and stats.chunks_embedded > 0
        assert idx.status().dim == 32


def test_a_search_with_another_model_says_how_to_re_embed(tmp_path: Path) -> None:
    """An index embedded with another model (an older ragloom's vectors, say) is not searched
    with mixed vectors: the error names both models and the command that re-embeds it."""
    from ragloom.errors import IncompatibleIndexError

    root = copy_stdlib_packages(tmp_path / "r", ["textwrap"])
    with ragloom.open(root, embedder="hashing:64") as idx:
        idx.index()
    with (
        ragloom.open(root, embedder="hashing:32") as idx,
        pytest.raises(IncompatibleIndexError) as err,
    ):
        idx.search("wrap paragraphs")
    text = str(err.value)
    assert "ragloom/hashing-v1@64d" in text and "ragloom/hashing-v1@32d" in text
    assert f"run `ragloom index {root}` to re-embed every chunk" in text


def test_search_before_vectors_is_partial(tmp_path: Path) -> None:
    root = copy_stdlib_packages(tmp_path / "r", ["textwrap"])
    proc = run_cli("index", str(root), "--no-embed", "--model", "hashing", "--json")
    assert json.loads(proc.stdout)["embeddings_pending"] > 0
    proc = run_cli("search", "wrap paragraphs", "--index-dir", str(root / ".ragloom"), "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)
    assert "embeddings incomplete" in proc.stderr
    shutil.rmtree(root / ".ragloom")


def test_vectors_rebuilt_when_the_embedding_key_changes(tmp_path: Path) -> None:
    """Vectors made under another model or embedding-text format are never mixed in: the
    HNSW index is rebuilt from the store when its recorded key differs."""
    root = copy_stdlib_packages(tmp_path / "r", ["textwrap"])
    with ragloom.open(root, embedder="hashing") as idx:
        idx.index()
    state = root / ".ragloom" / "vectors" / "state.json"
    data = json.loads(state.read_text())
    assert data["key"].endswith("+ctx1")
    data["key"] = "some-old-format"
    state.write_text(json.dumps(data))
    with ragloom.open(root, embedder="hashing") as idx:
        assert not idx.status(freshness=False).vectors_ready
        idx.index()
        st = idx.status(freshness=False)
        assert st.vectors_ready and st.vectors == st.chunks
    assert json.loads(state.read_text())["key"].endswith("+ctx1")


def test_bad_arguments_are_usage_errors_and_an_index_folder_is_not_indexed(tmp_path: Path) -> None:
    """From a new user's trial: ``--max-file-bytes -1`` emptied the index quietly, graph
    options out of range exited 3 (a path not found), and indexing the index folder made
    ``.ragloom/.ragloom``."""
    root = copy_stdlib_packages(tmp_path / "r", ["textwrap"])
    assert run_cli("index", str(root), "--model", "hashing").returncode == 0
    proc = run_cli("index", str(root), "--max-file-bytes", "-1")
    assert proc.returncode == 2 and "--max-file-bytes" in proc.stderr
    for args in (
        ["refs", "wrap", "--min-confidence", "2"],
        ["refs", "wrap", "--limit", "-1"],
        ["defs", " "],
    ):
        proc = run_cli(*args, cwd=root)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
    proc = run_cli("index", str(root / ".ragloom"))
    assert proc.returncode == 3 and "index folder" in proc.stderr
    assert not (root / ".ragloom" / ".ragloom").exists()
    assert run_cli("search", "wrap text", cwd=root).returncode == 0


def test_search_says_which_hits_are_in_files_changed_since_indexing(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    (root / "a.py").write_text("def alpha_fn():\n    return 1\n\n\ndef beta_fn():\n    return 2\n")
    (root / "b.py").write_text("def gamma_fn():\n    return 3\n")
    assert run_cli("index", str(root), "--model", "hashing").returncode == 0
    fresh = run_cli("search", "beta_fn gamma_fn", "--json", cwd=root)
    assert fresh.returncode == 0 and "changed since indexing" not in fresh.stderr
    assert {h["stale"] for h in json.loads(fresh.stdout)} == {False}
    (root / "a.py").write_text("# two new\n# lines\n" + (root / "a.py").read_text())
    got = run_cli("search", "beta_fn gamma_fn", "--json", cwd=root)
    stale = {h["path"]: h["stale"] for h in json.loads(got.stdout)}
    assert stale == {"a.py": True, "b.py": False}
    assert "1 of the hits' files changed since indexing" in got.stderr
    # touched but the same bytes: not stale
    (root / "b.py").write_text((root / "b.py").read_text())
    again = run_cli("search", "gamma_fn", "--json", cwd=root)
    assert all(not h["stale"] for h in json.loads(again.stdout) if h["path"] == "b.py")


def test_ctrl_c_while_the_command_starts_is_quiet(tmp_path: Path) -> None:
    """Ctrl-C in the first moments of a command (while its modules load) printed the
    interpreter's traceback; it ends as a later one does: "interrupted", exit 130."""
    import signal
    import subprocess
    import sys

    script = Path(sys.executable).parent / "ragloom"
    if not script.exists():
        pytest.skip("the console script is not installed next to this interpreter")
    # the signal is sent once the commands' import has begun under the guard (click's first
    # module is imported): the interpreter's start-up and the package's first imports come
    # before any guard, and a fixed 50 ms sleep landed there on a loaded machine. -X
    # importtime reports each module as its import ends
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    proc = subprocess.Popen(
        [str(script), "status", "--index-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stderr is not None
    seen = after = b""
    while b" click" not in after:  # the entry point imported, then a click module
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
        after = seen.partition(b"| ragloom.entry\n")[2]
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=30)
    err = (seen + rest).decode()
    assert "Traceback" not in err, err[-1500:]
    assert proc.returncode == 130 and "interrupted" in err


def test_an_index_chunked_by_older_rules_is_parsed_again(tmp_path: Path) -> None:
    """The chunking rules changed (``CHUNKER_VERSION`` 2: JavaScript functions assigned to
    members are symbols). An index made before would keep its old chunks for every file that
    does not change; its next update parses every file again, once, in one generation."""
    from ragloom.index.indexer import CHUNKER_VERSION_META
    from ragloom.index.store import Store
    from ragloom.ingest.chunker import CHUNKER_VERSION

    root = tmp_path / "repo"
    root.mkdir()
    (root / "res.js").write_text(
        "var res = {};\nres.send = function send(body) {\n  return body;\n};\n"
    )
    (root / "a.py").write_text("def f():\n    return 1\n")
    with ragloom.Index(root, root / ".ragloom", embedder="hashing") as idx:
        idx.index(history=False)
        assert idx.status(freshness=False).chunks_by_kind.get("method") == 1
    store = Store(root / ".ragloom" / "index.sqlite")
    assert store.get_meta(CHUNKER_VERSION_META) == str(CHUNKER_VERSION)
    store.set_meta(CHUNKER_VERSION_META, "1")  # as an index of the older rules says
    store.close()
    with ragloom.Index(root, root / ".ragloom", embedder="hashing") as idx:
        again = idx.index(history=False)  # every file parsed and written anew
        assert again.files_changed == 2 and again.chunks_removed == again.chunks_added == 3
        quiet = idx.index(history=False)
    assert quiet.files_changed == 0 and quiet.chunks_added == 0
    store = Store(root / ".ragloom" / "index.sqlite")
    assert store.get_meta(CHUNKER_VERSION_META) == str(CHUNKER_VERSION)
    store.close()


def test_a_reader_that_stops_reading_is_no_internal_error(json_repo: Path) -> None:
    """``ragloom search ... | head -1``: the reader closes the pipe and the rest of the output
    has nowhere to go. That was "internal error: BrokenPipeError" and exit 70; it is now quiet,
    with the status a shell gives a program SIGPIPE ended (141)."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "ragloom.cli", "search", "json", "-k", "500",
         "--index-dir", str(json_repo / ".ragloom")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # as `head -1` does
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=60) in (0, 141) and "error" not in err, err


def test_a_damaged_index_says_rebuild_and_the_rebuild_keeps_the_model(tmp_path: Path) -> None:
    """``--rebuild`` of an index it could not read deleted the manifest first and re-embedded
    everything with the default model (a user trial: a hashing index came back as MiniLM);
    the error did not name ``--rebuild``. New databases use 8 KiB pages (vector rows inline)."""
    import sqlite3

    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.py").write_text("def parse_header(line):\n    return line.split(':')\n")
    run_cli("index", str(root), "--model", "hashing:64")
    db = root / ".ragloom" / "index.sqlite"
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA page_size").fetchone()[0] == 8192
    conn.close()
    for extra in ("-wal", "-shm"):
        Path(str(db) + extra).unlink(missing_ok=True)
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 2])
    broken = run_cli("index", str(root))
    assert broken.returncode != 0 and "--rebuild" in broken.stderr
    assert run_cli("index", str(root), "--rebuild").returncode == 0
    status = json.loads(run_cli("status", "--index-dir", str(root / ".ragloom"), "--json").stdout)
    assert status["model"] == "ragloom/hashing-v1@64d"


def test_status_takes_the_path_index_takes(json_repo: Path) -> None:
    """``ragloom status big`` was "unexpected extra argument", although ``index`` and ``watch``
    take PATH."""
    for where in (json_repo, json_repo / ".ragloom"):
        out = run_cli("status", str(where), "--no-freshness", "--json")
        assert out.returncode == 0 and json.loads(out.stdout)["chunks"] > 0
    both = run_cli("status", str(json_repo), "--index-dir", str(json_repo / ".ragloom"))
    assert both.returncode == 2 and "not both" in both.stderr


def test_index_waits_for_another_writer_when_asked(tmp_path: Path) -> None:
    """A hand-run ``ragloom index`` beside a watcher met its batch and exited 22 (a user
    trial: 1 try in 5); ``--wait S`` waits for the lock instead."""
    import threading
    import time

    from ragloom.index.lock import WriteLock

    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.py").write_text("def f():\n    return 1\n")
    assert run_cli("index", str(root), "--model", "hashing:32").returncode == 0
    held = WriteLock(root / ".ragloom")
    held.acquire()
    release = threading.Timer(1.5, held.release)
    try:
        refused = run_cli("index", str(root))  # the lock is held all along
        assert refused.returncode == 22 and "--wait" in refused.stderr
        release.start()  # released 1.5 s into the waiting run
        t = time.perf_counter()
        waited = run_cli("index", str(root), "--wait", "30")
        assert waited.returncode == 0, waited.stderr
        assert time.perf_counter() - t < 30
    finally:
        if release.is_alive() or not release.finished.is_set():
            release.cancel()
        held.release()
