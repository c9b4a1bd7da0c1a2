from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ragloom
from ragloom.ingest import walker
from ragloom.ingest.walker import SourceFile, read_source, walk


def _write(root: Path, rel: str, data: bytes | str = "x = 1\n") -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data.encode() if isinstance(data, str) else data)


def _rels(root: Path, **kwargs: Any) -> set[str]:
    return {f.rel for f in walk(root, **kwargs).files}


def _patch_scandir(monkeypatch: pytest.MonkeyPatch, hook: Any) -> None:
    """Make the walker's folder listing call ``hook(directory, entries)`` before returning."""
    real = os.scandir

    @contextlib.contextmanager
    def fake(path: str) -> Iterator[list[os.DirEntry[str]]]:
        with real(path) as it:
            entries = list(it)
        yield hook(path, entries)

    monkeypatch.setattr(walker.os, "scandir", fake)


def test_walk_honours_ignores_and_counts_skips(tmp_path: Path) -> None:
    _write(tmp_path, "a.py")
    _write(tmp_path, ".gitignore", "*.log\nbuild_out/\n")
    _write(tmp_path, "x.log", "log")
    _write(tmp_path, "build_out/gen.py")
    _write(tmp_path, "pkg/.gitignore", "secret_dir/\n/local_only.py\n")
    _write(tmp_path, "pkg/mod.py")
    _write(tmp_path, "pkg/local_only.py")
    _write(tmp_path, "pkg/secret_dir/s.py")
    _write(tmp_path, "other/local_only.py")  # anchored pattern of pkg/ does not apply here
    _write(tmp_path, ".ragloomignore", "docs/*.txt\n")
    _write(tmp_path, "docs/notes.txt", "hello")
    _write(tmp_path, "docs/keep.md", "# hi")
    _write(tmp_path, "node_modules/lib/index.js", "x")
    _write(tmp_path, ".git/config", "x")
    _write(tmp_path, ".env", "TOKEN=1")
    _write(tmp_path, ".env.local", "TOKEN=1")
    _write(tmp_path, "keys/server.pem", "-----BEGIN")
    _write(tmp_path, "id_rsa", "k")
    _write(tmp_path, "img.png", b"\x89PNG")
    _write(tmp_path, "big.txt", "a" * 2000)
    res = walk(tmp_path, max_file_bytes=1000)
    rels = [f.rel for f in res.files]
    assert rels == sorted(rels)
    assert set(rels) == {
        ".gitignore",
        ".ragloomignore",
        "a.py",
        "pkg/.gitignore",
        "pkg/mod.py",
        "other/local_only.py",
        "docs/keep.md",
    }
    sk = res.skipped
    assert sk["gitignored"] == 4  # x.log, build_out/, secret_dir/, local_only.py
    assert sk["ragloomignored"] == 1
    assert sk["excluded_dir"] == 2  # node_modules, .git
    assert sk["secret"] == 4
    assert sk["binary"] == 1
    assert sk["too_large"] == 1


def test_walk_lists_files_sorted_by_path(tmp_path: Path) -> None:
    for rel in ("a/b.py", "a.py", "a-b.py", "z/y/x.py"):
        _write(tmp_path, rel)
    rels = [f.rel for f in walk(tmp_path).files]
    assert rels == sorted(rels) == ["a-b.py", "a.py", "a/b.py", "z/y/x.py"]


def test_walk_skips_symlink_escaping_root(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    root = tmp_path / "root"
    _write(outside, "secret.py")
    _write(root, "a.py")
    os.symlink(outside / "secret.py", root / "link.py")
    os.symlink(outside, root / "linked_dir")
    res = walk(root)
    assert _rels(root) == {"a.py"}
    assert res.skipped["symlink_outside"] == 2
    assert "symlink" not in res.skipped


def test_walk_indexes_a_link_inside_the_root_once(tmp_path: Path) -> None:
    _write(tmp_path, "a.py")
    _write(tmp_path, "pkg/mod.py")
    os.symlink("a.py", tmp_path / "inner_link.py")
    os.symlink(tmp_path / "pkg" / "mod.py", tmp_path / "abs_link.py")
    os.symlink("pkg", tmp_path / "pkg_link")  # a folder link inside the root: not followed
    res = walk(tmp_path)
    assert [f.rel for f in res.files] == ["a.py", "pkg/mod.py"]
    assert res.skipped == {"symlink": 3}


def test_walk_counts_symlink_cycles(tmp_path: Path) -> None:
    _write(tmp_path, "a.py")
    _write(tmp_path, "sub/deep/b.py")
    os.symlink("self", tmp_path / "self")  # x -> x
    (tmp_path / "loops").mkdir()
    os.symlink("b", tmp_path / "loops" / "a")  # a -> b -> a
    os.symlink("a", tmp_path / "loops" / "b")
    os.symlink("..", tmp_path / "sub" / "deep" / "up")  # a folder enclosing the link
    os.symlink(".", tmp_path / "sub" / "here")
    os.symlink(tmp_path, tmp_path / "sub" / "root_link")
    os.symlink("/", tmp_path / "slash")
    res = walk(tmp_path)
    assert [f.rel for f in res.files] == ["a.py", "sub/deep/b.py"]
    assert res.skipped == {"symlink_loop": 7}


def test_walk_counts_dangling_links(tmp_path: Path) -> None:
    _write(tmp_path, "a.py")
    _write(tmp_path, "file.txt")
    os.symlink("missing.py", tmp_path / "dangling.py")
    os.symlink("file.txt/below", tmp_path / "through_a_file")  # ENOTDIR
    os.symlink("dangling.py", tmp_path / "chain_to_dangling")
    res = walk(tmp_path)
    assert [f.rel for f in res.files] == ["a.py", "file.txt"]
    assert res.skipped == {"symlink_dangling": 3}


def test_walk_ignore_rules_apply_to_links_first(tmp_path: Path) -> None:
    _write(tmp_path, ".gitignore", "loop\n")
    os.symlink("loop", tmp_path / "loop")
    assert walk(tmp_path).skipped == {"gitignored": 1}


def test_walk_does_not_follow_a_symlinked_ignore_file(tmp_path: Path) -> None:
    _write(tmp_path, "rules", "*.py\n")
    _write(tmp_path, "a.py")
    os.symlink("rules", tmp_path / ".gitignore")
    res = walk(tmp_path)
    assert _rels(tmp_path) == {"a.py", "rules"}
    assert res.skipped == {"symlink": 1}


def test_walk_passes_over_ignore_lines_git_cannot_read(tmp_path: Path) -> None:
    """A lone ``!`` or a trailing backslash (black's test data has such ``.gitignore``
    files): git passes over the line and keeps the others; the walk used to stop on it."""
    _write(tmp_path, "a.py")
    _write(tmp_path, "b.log")
    _write(tmp_path, "sub/c.py")
    _write(tmp_path, "sub/d.tmp")
    _write(tmp_path, "sub/.gitignore", "!\n*.tmp\nfoo\\\n")
    _write(tmp_path, ".ragloomignore", "!\n*.log\n")
    res = walk(tmp_path)
    assert _rels(tmp_path) == {"a.py", "sub/c.py", "sub/.gitignore", ".ragloomignore"}
    assert res.skipped == {"gitignored": 1, "ragloomignored": 1}


def test_walk_ignore_file_that_is_a_fifo_does_not_block(tmp_path: Path) -> None:
    _write(tmp_path, "a.py")
    os.mkfifo(tmp_path / ".ragloomignore")
    res = walk(tmp_path)
    assert _rels(tmp_path) == {"a.py"}
    assert res.skipped == {"special": 1}


def test_walk_counts_special_files(tmp_path: Path) -> None:
    _write(tmp_path, "a.py")
    os.mkfifo(tmp_path / "pipe.py")
    res = walk(tmp_path)
    assert _rels(tmp_path) == {"a.py"}
    assert res.skipped == {"special": 1}


def test_walk_mode_000_folder_and_file(tmp_path: Path) -> None:
    """Real permissions: skipped when they bite, listed when (as root) they do not."""
    _write(tmp_path, "a.py")
    _write(tmp_path, "locked/inner.py")
    _write(tmp_path, "closed.py")
    (tmp_path / "locked").chmod(0)
    (tmp_path / "closed.py").chmod(0)
    try:
        res = walk(tmp_path)
        folder_blocked = not os.access(tmp_path / "locked", os.R_OK)
        file_blocked = not os.access(tmp_path / "closed.py", os.R_OK)
    finally:
        (tmp_path / "locked").chmod(0o755)
        (tmp_path / "closed.py").chmod(0o644)
    expected = {"a.py"}
    if not folder_blocked:
        expected.add("locked/inner.py")
    if not file_blocked:
        expected.add("closed.py")
    assert {f.rel for f in res.files} == expected
    assert res.skipped["unreadable"] == int(folder_blocked) + int(file_blocked)


def test_walk_counts_unreadable_folder_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path, "a.py")
    _write(tmp_path, "locked/inner.py")
    _write(tmp_path, "locked/more/deeper.py")
    locked = str(tmp_path / "locked")

    def hook(path: str, entries: list[os.DirEntry[str]]) -> list[os.DirEntry[str]]:
        if path == locked:
            raise PermissionError(13, "Permission denied", path)
        return entries

    _patch_scandir(monkeypatch, hook)
    res = walk(tmp_path)
    assert _rels(tmp_path) == {"a.py"}
    assert res.skipped == {"unreadable": 1}


def test_walk_counts_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path, "a.py")
    _write(tmp_path, "closed.py")
    real_access = os.access
    closed = str(tmp_path / "closed.py")

    def access(path: Any, mode: int, **kwargs: Any) -> bool:
        return False if str(path) == closed else real_access(path, mode, **kwargs)

    monkeypatch.setattr(walker.os, "access", access)
    res = walk(tmp_path)
    assert [f.rel for f in res.files] == ["a.py"]
    assert res.skipped == {"unreadable": 1}


def test_walk_counts_entries_vanishing_after_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path, "a.py")
    _write(tmp_path, "gone.py")
    _write(tmp_path, "gone_dir/x.py")
    os.symlink("a.py", tmp_path / "gone_link")
    root = str(tmp_path)

    def hook(path: str, entries: list[os.DirEntry[str]]) -> list[os.DirEntry[str]]:
        if path == root:  # deleted after the listing, before the walker looks closer
            (tmp_path / "gone.py").unlink()
            (tmp_path / "gone_dir" / "x.py").unlink()
            (tmp_path / "gone_dir").rmdir()
            (tmp_path / "gone_link").unlink()
        return entries

    _patch_scandir(monkeypatch, hook)
    res = walk(tmp_path)
    assert [f.rel for f in res.files] == ["a.py"]
    assert res.skipped == {"vanished": 3}


def test_walk_counts_names_that_are_not_utf8(tmp_path: Path) -> None:
    _write(tmp_path, "a.py")
    with open(os.path.join(os.fsencode(tmp_path), b"bad\xff.py"), "wb") as fh:
        fh.write(b"x = 1\n")
    res = walk(tmp_path)
    assert [f.rel for f in res.files] == ["a.py"]
    assert res.skipped == {"bad_name": 1}


def test_walk_a_root_given_through_a_link(tmp_path: Path) -> None:
    _write(tmp_path, "real/a.py")
    os.symlink(tmp_path / "real", tmp_path / "alias")
    res = walk(tmp_path / "alias")
    assert [f.rel for f in res.files] == ["a.py"]
    assert res.files[0].abs == tmp_path.resolve() / "real" / "a.py"


def test_walk_deep_tree_has_no_recursion_limit(tmp_path: Path) -> None:
    depth = 1200  # deeper than Python's default recursion limit
    chain = [str(tmp_path)]
    try:
        for _ in range(depth):  # not os.makedirs: it recurses
            chain.append(os.path.join(chain[-1], "d"))
            os.mkdir(chain[-1])
        _write(Path(chain[-1]), "leaf.py")
        assert [f.rel.count("/") for f in walk(tmp_path).files] == [depth]
    finally:  # removed here: shutil.rmtree (pytest's clean-up) recurses too
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(chain[-1], "leaf.py"))
        for path in reversed(chain[1:]):
            os.rmdir(path)


def test_walk_skips_index_dir(tmp_path: Path) -> None:
    _write(tmp_path, "a.py")
    _write(tmp_path, "myindex/index.sqlite", "x")
    res = walk(tmp_path, index_dir=tmp_path / "myindex")
    assert [f.rel for f in res.files] == ["a.py"]
    assert res.skipped == {"excluded_dir": 1}


# read_source: the indexer's read of a walked file


def _walked(root: Path, rel: str) -> SourceFile:
    (sf,) = [f for f in walk(root).files if f.rel == rel]
    return sf


def test_read_source_returns_bytes_and_fresh_stat(tmp_path: Path) -> None:
    _write(tmp_path, "a.py", "x = 1\n")
    sf = _walked(tmp_path, "a.py")
    (tmp_path / "a.py").write_text("x = 1\ny = 2\n")  # changed size after the walk
    got = read_source(sf, 1000)
    assert not isinstance(got, str)
    fresh, data = got
    assert data == b"x = 1\ny = 2\n"
    assert fresh.size == len(data) != sf.size and fresh.rel == sf.rel
    assert fresh.mtime == (tmp_path / "a.py").stat().st_mtime


def test_read_source_reasons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for rel in ("gone.py", "grown.py", "linked.py", "piped.py", "closed.py"):
        _write(tmp_path, rel)
    walked = {f.rel: f for f in walk(tmp_path).files}
    (tmp_path / "gone.py").unlink()
    (tmp_path / "grown.py").write_text("x" * 5000)
    (tmp_path / "linked.py").unlink()
    os.symlink("/etc/hostname", tmp_path / "linked.py")  # swapped for a link: never followed
    (tmp_path / "piped.py").unlink()
    os.mkfifo(tmp_path / "piped.py")  # swapped for a FIFO: must not block
    real_open = os.open
    closed = str(tmp_path / "closed.py")

    def fake_open(path: Any, flags: int, *args: Any) -> int:
        if str(path) == closed:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(walker.os, "open", fake_open)
    assert read_source(walked["gone.py"], 1000) == "vanished"
    assert read_source(walked["grown.py"], 1000) == "too_large"
    assert read_source(walked["linked.py"], 1000) == "vanished"
    assert read_source(walked["piped.py"], 1000) == "special"
    assert read_source(walked["closed.py"], 1000) == "unreadable"


# the indexer's scan loop


def test_index_counts_files_vanishing_between_walk_and_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragloom.index import indexer

    _write(tmp_path, "a.py", "def marker_kept():\n    return 1\n")
    _write(tmp_path, "gone.py", "def marker_gone():\n    return 2\n")
    _write(tmp_path, "closed.py", "def marker_closed():\n    return 3\n")
    real_walk = indexer.walk
    real_open = os.open
    closed = str(tmp_path / "closed.py")

    def walk_then_delete(*args: Any, **kwargs: Any) -> walker.WalkResult:
        res = real_walk(*args, **kwargs)
        (tmp_path / "gone.py").unlink()
        return res

    def fake_open(path: Any, flags: int, *args: Any) -> int:
        if str(path) == closed:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(indexer, "walk", walk_then_delete)
    monkeypatch.setattr(walker.os, "open", fake_open)
    idx = ragloom.open(tmp_path)
    try:
        stats = idx.index(embed=False)
    finally:
        idx.close()
    assert stats.files_scanned == 1
    assert stats.files_skipped["vanished"] == 1
    assert stats.files_skipped["unreadable"] == 1


def test_a_file_git_tracks_is_walked_even_where_a_rule_ignores_it(tmp_path: Path) -> None:
    """git never ignores a tracked file (``git add -f``, or a rule added after the file): a
    user trial's zod ``package.json`` was skipped as ``gitignored`` under ``**/package.json``."""
    import subprocess

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=tmp_path, check=True, capture_output=True,
        )  # fmt: skip

    (tmp_path / "gen.py").write_text("def tracked_but_ignored():\n    return 1\n")
    (tmp_path / "out" / "sub").mkdir(parents=True)
    (tmp_path / "out" / "sub" / "kept.py").write_text("KEPT = 1\n")
    (tmp_path / "out" / "sub" / "other.py").write_text("OTHER = 1\n")
    (tmp_path / "loose.py").write_text("LOOSE = 1\n")
    (tmp_path / ".gitignore").write_text("gen.py\nout/\nloose.py\n")
    git("init", "-q")
    git("add", "-f", "gen.py", "out/sub/kept.py", ".gitignore")
    git("commit", "-qm", "x")
    result = walk(tmp_path)
    assert [f.rel for f in result.files] == [".gitignore", "gen.py", "out/sub/kept.py"]
    assert result.skipped["gitignored"] == 2  # out/sub/other.py, loose.py: not tracked
    plain = tmp_path.parent / "plain"  # the same tree outside git: the rules alone decide
    plain.mkdir()
    (plain / "gen.py").write_text("x = 1\n")
    (plain / ".gitignore").write_text("gen.py\n")
    assert [f.rel for f in walk(plain).files] == [".gitignore"]


def test_skipped_files_are_named_per_reason(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text("x = 1\n")
    (tmp_path / ".env").write_text("SECRET=1\n")
    (tmp_path / "logo.png").write_bytes(b"\x89PNG")
    (tmp_path / "node_modules").mkdir()
    for i in range(25):
        (tmp_path / f"big{i:02}.py").write_text("x" * 200)
    result = walk(tmp_path, max_file_bytes=100)
    assert result.examples["secret"] == [".env"] and result.examples["binary"] == ["logo.png"]
    assert result.examples["excluded_dir"] == ["node_modules"]
    assert result.skipped["too_large"] == 25 and len(result.examples["too_large"]) == 20
    assert result.examples["too_large"][0] == "big00.py"


def test_ignore_rules_are_matched_with_re2() -> None:
    """pathspec matches ignore rules with google-re2 when it is installed (a dependency):
    a walk of 7,670 files took 0.41 s with its pattern-by-pattern matcher and 0.22 s with re2,
    with the same files kept (docs/index-choices.md, "Ignore rules")."""
    import pathspec

    from ragloom.ingest import walker

    spec = pathspec.GitIgnoreSpec.from_lines(["*.log", "!keep.log", "build/"])
    assert type(spec._backend).__module__.startswith("pathspec._backends.re2")
    assert type(walker.SECRET_PATTERNS._backend).__module__.startswith("pathspec._backends.re2")
    assert spec.match_file("a/b.log") and not spec.match_file("keep.log")
    assert spec.match_file("build/x.py") and not spec.match_file("src/build.py")


def test_the_repositorys_exclude_file_is_honoured(tmp_path: Path) -> None:
    """``.git/info/exclude`` ignores as a root ``.gitignore`` does (a live-index trial excluded
    a generated folder there; every walk kept its 1,500 files), and never a tracked file."""
    import subprocess

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=tmp_path, check=True, capture_output=True,
        )  # fmt: skip

    _write(tmp_path, "src/app.py")
    _write(tmp_path, "gen2/k1.py")
    _write(tmp_path, "gen2/k2.py")
    _write(tmp_path, "notes/local.py")
    _write(tmp_path, "pinned.py")
    git("init", "-q")
    git("add", "pinned.py")
    git("commit", "-qm", "x")
    (tmp_path / ".git" / "info").mkdir(exist_ok=True)
    (tmp_path / ".git" / "info" / "exclude").write_text("# local\ngen2/\nlocal.py\npinned.py\n")
    result = walk(tmp_path)
    assert [f.rel for f in result.files] == ["pinned.py", "src/app.py"]
    assert result.skipped["gitignored"] == 2  # gen2/ (one folder), notes/local.py
