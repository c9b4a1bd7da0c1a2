"""Property test: on any tree of files, folders, FIFOs, symlinks (cycles, parents, outside,
dangling) with strange names and permissions, ``walk`` never raises, lists every indexable
regular file exactly once and counts every other entry under some skip reason.

``RAGLOOM_FUZZ_EXAMPLES`` raises the number of examples (``make fuzz``); the default run is
kept short.
"""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragloom.ingest.walker import BINARY_EXTENSIONS, EXCLUDED_DIRS, SECRET_PATTERNS, walk

FUZZ = settings(
    max_examples=int(os.environ.get("RAGLOOM_FUZZ_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

CAP = 64
"""Size cap of the fuzzed walks: small, so that ``too_large`` files are cheap to make."""

KNOWN_REASONS = {
    "symlink",
    "symlink_outside",
    "symlink_loop",
    "symlink_dangling",
    "unreadable",
    "vanished",
    "special",
    "too_large",
    "binary",
    "secret",
    "excluded_dir",
    "bad_name",
}
LINK_REASONS = {"symlink", "symlink_outside", "symlink_loop", "symlink_dangling"}

_INTERESTING = [
    "-rf",
    "--help",
    "-",
    " ",
    "  lead and trail  ",
    "new\nline.py",
    "\n",
    "tab\there.py",
    "...",
    ".hidden.py",
    "Ünïcødé.py",
    "日本語.py",
    "🐍.py",
    "עברית.py",
    "e\u0301.py",  # combining accent: not normalised on Linux
    "x" * 255,
    "é" * 127,  # 254 bytes in UTF-8
    "a" * 251 + ".py",
    "node_modules",
    ".git",
    ".env",
    "id_rsa",
    "image.png",
    "a.py",
    "b.py",
    "pkg",
]

_names = st.one_of(
    st.sampled_from(_INTERESTING),
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"),
        min_size=1,
        max_size=12,
    ),
).filter(
    lambda s: s not in (".", "..", ".gitignore", ".ragloomignore") and len(s.encode("utf-8")) <= 255
)

_MODES = [0o644, 0o644, 0o755, 0o000, 0o444, 0o111, 0o200]


@dataclass
class Node:
    parent: int  # index of the parent folder, -1 for the root
    name: str
    kind: str  # file, dir, fifo, link, badname
    mode: int
    size: int = 0
    target: tuple[str, int] = ("missing", 0)
    absolute: bool = False


@st.composite
def _trees(draw: st.DrawFn) -> list[Node]:
    nodes: list[Node] = []
    taken: set[tuple[int, str]] = set()
    for _ in range(draw(st.integers(1, 14))):
        dirs = [-1] + [i for i, n in enumerate(nodes) if n.kind == "dir"]
        parent = draw(st.sampled_from(dirs))
        name = draw(_names)
        if (parent, name) in taken:
            continue
        taken.add((parent, name))
        kind = draw(st.sampled_from(["file", "file", "file", "dir", "dir", "link", "link", "fifo"]))
        if draw(st.integers(0, 20)) == 0:
            kind = "badname"
        nodes.append(
            Node(
                parent,
                name,
                kind,
                draw(st.sampled_from(_MODES)),
                size=draw(st.sampled_from([0, 1, 10, CAP, CAP + 1])),
                absolute=draw(st.booleans()),
            )
        )
    for node in nodes:
        if node.kind == "link":
            node.target = draw(
                st.one_of(
                    st.tuples(st.just("node"), st.integers(0, len(nodes) - 1)),
                    st.tuples(st.just("through"), st.integers(0, len(nodes) - 1)),
                    st.tuples(st.just("parent"), st.integers(1, 4)),
                    st.tuples(
                        st.sampled_from(
                            ["self", "root", "slash", "outside_file", "outside_dir", "missing"]
                        ),
                        st.just(0),
                    ),
                )
            )
    return nodes


def _path(nodes: list[Node], i: int) -> list[str]:
    parts: list[str] = []
    while i >= 0:
        parts.append(nodes[i].name)
        i = nodes[i].parent
    return parts[::-1]


def _build(base: Path, nodes: list[Node]) -> Path:
    root = base / "root"
    root.mkdir()
    (base / "outside").mkdir()
    (base / "outside" / "o.py").write_text("def outside():\n    pass\n")
    for i, node in enumerate(nodes):
        if node.kind == "link":
            continue
        path = root.joinpath(*_path(nodes, i))
        if node.kind == "dir":
            path.mkdir()
        elif node.kind == "fifo":
            os.mkfifo(path)
        elif node.kind == "badname":
            leaf = b"\xff" + os.fsencode(path.name)[:254]  # not UTF-8, still <= 255 bytes
            with open(os.path.join(os.fsencode(path.parent), leaf), "wb") as fh:
                fh.write(b"x = 1\n")
        else:
            path.write_bytes(b"x" * node.size)
    for i, node in enumerate(nodes):
        if node.kind != "link":
            continue
        parts = _path(nodes, i)
        where = root.joinpath(*parts[:-1])
        kind, arg = node.target
        target: str
        if kind in ("node", "through"):
            dest = root.joinpath(*_path(nodes, arg))
            if kind == "through":
                dest = dest / "below"
            target = str(dest) if node.absolute else os.path.relpath(dest, where)
        elif kind == "parent":
            target = "/".join([".."] * arg)
        elif kind == "self":
            target = parts[-1]
        else:
            target = {
                "root": str(root),
                "slash": "/",
                "outside_file": str(base / "outside" / "o.py"),
                "outside_dir": str(base / "outside"),
                "missing": "does-not-exist",
            }[kind]
        os.symlink(target, where / parts[-1])
    # Permissions last, deepest first (a closed folder would block its children's chmod).
    for i in sorted(range(len(nodes)), key=lambda i: -len(_path(nodes, i))):
        if nodes[i].kind in ("file", "dir"):
            os.chmod(root.joinpath(*_path(nodes, i)), nodes[i].mode)
    return root


def _reopen(base: Path) -> None:
    """Give back every permission so that the temporary folder can be removed."""
    for dirpath, dirnames, _ in os.walk(base):
        for d in dirnames:
            p = os.path.join(dirpath, d)
            if not os.path.islink(p):
                os.chmod(p, 0o755)


@dataclass
class Model:
    files: set[str]
    entries: int  # entries that must be listed or counted: each exactly once
    links: int
    full_access: bool  # every folder can be listed and traversed


def _model(root: Path) -> Model:
    """What the walker must see, by a plain lstat traversal of the real folders."""
    m = Model(set(), 0, 0, True)
    stack = [(str(root), "")]
    while stack:
        directory, rel_dir = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = list(it)
        except OSError:
            m.entries += 1
            m.full_access = False
            continue
        for e in entries:
            rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError:
                m.entries += 1
                continue
            try:
                st_ = os.lstat(e.path)
            except OSError:
                m.entries += 1
                m.full_access = False
                continue
            if stat.S_ISLNK(st_.st_mode):
                m.links += 1
                m.entries += 1
            elif stat.S_ISDIR(st_.st_mode) and e.name not in EXCLUDED_DIRS:
                stack.append((e.path, rel))
            else:
                m.entries += 1
                if (
                    stat.S_ISREG(st_.st_mode)
                    and e.name != ".git"  # a linked work tree's pointer: skipped like the folder
                    and not SECRET_PATTERNS.match_file(e.name)
                    and os.path.splitext(e.name)[1].lower() not in BINARY_EXTENSIONS
                    and st_.st_size <= CAP
                    and os.access(e.path, os.R_OK)
                ):
                    m.files.add(rel)
    # A folder that cannot be listed or traversed, even an excluded one, hides link targets.
    for dirpath, dirnames, _ in os.walk(root):
        for d in [dirpath, *(os.path.join(dirpath, n) for n in dirnames)]:
            if not os.path.islink(d) and not os.access(d, os.R_OK | os.X_OK):
                m.full_access = False
    return m


@FUZZ
@given(_trees())
def test_walk_never_raises_and_accounts_for_every_entry(nodes: list[Node]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        try:
            root = _build(base, nodes)
            res = walk(root, max_file_bytes=CAP)
            model = _model(root)
            for f in res.files:
                assert f.abs == root.joinpath(*f.rel.split("/"))
                assert stat.S_ISREG(os.lstat(f.abs).st_mode)
        finally:
            _reopen(base)
    rels = [f.rel for f in res.files]
    assert rels == sorted(set(rels)), "files listed once each, sorted"
    assert set(rels) == model.files
    assert len(rels) + sum(res.skipped.values()) == model.entries
    assert set(res.skipped) <= KNOWN_REASONS
    assert all(n > 0 for n in res.skipped.values())
    assert res.skipped["vanished"] == 0  # nothing is deleted here
    link_counts = sum(res.skipped[r] for r in LINK_REASONS)
    if model.full_access:
        assert link_counts == model.links
    else:
        assert link_counts <= model.links
    selfs = sum(
        1
        for i, n in enumerate(nodes)
        if n.kind == "link"
        and n.target[0] == "self"
        and not EXCLUDED_DIRS.intersection(_path(nodes, i)[:-1])
    )
    assert res.skipped["symlink_loop"] >= (selfs if model.full_access else 0)
