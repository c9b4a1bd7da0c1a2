import os
from pathlib import Path

from ragloom.ingest.walker import walk


def _write(root: Path, rel: str, data: bytes | str = "x = 1\n") -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data.encode() if isinstance(data, str) else data)


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


def test_walk_skips_symlink_escaping_root(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    root = tmp_path / "root"
    _write(outside, "secret.py")
    _write(root, "a.py")
    os.symlink(outside / "secret.py", root / "link.py")
    os.symlink(root / "a.py", root / "inner_link.py")
    res = walk(root)
    assert {f.rel for f in res.files} == {"a.py", "inner_link.py"}
    assert res.skipped["symlink"] == 1


def test_walk_skips_index_dir(tmp_path: Path) -> None:
    _write(tmp_path, "a.py")
    _write(tmp_path, "myindex/index.sqlite", "x")
    res = walk(tmp_path, index_dir=tmp_path / "myindex")
    assert [f.rel for f in res.files] == ["a.py"]
