"""Tests for ragloom.ingest.chunker (tree-sitter symbols, markdown sections, text windows)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragloom.ingest.chunker import (
    MAX_CHUNK_BYTES,
    WINDOW_LINES,
    chunk_file,
    detect_language,
    head_id,
    is_part,
    part_label,
)
from ragloom.ingest.ids import chunk_id, file_hash, text_hash
from ragloom.types import Chunk

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "langs"


def _chunks(name: str, path: str | None = None) -> tuple[bytes, list[Chunk]]:
    data = (FIXTURES / name).read_bytes()
    return data, chunk_file(path or name, data, file_hash(data))


def _by_symbol(chunks: list[Chunk]) -> dict[tuple[str, str], Chunk]:
    return {(c.kind, c.symbol): c for c in chunks}


def _slice(data: bytes, c: Chunk) -> str:
    return data[c.start_byte : c.end_byte].decode("utf-8", "replace")


# --- language detection -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "language"),
    [
        ("a/b.py", "python"),
        ("x.pyi", "python"),
        ("web/app.js", "javascript"),
        ("web/app.mjs", "javascript"),
        ("web/app.ts", "typescript"),
        ("web/App.tsx", "tsx"),
        ("main.go", "go"),
        ("src/lib.rs", "rust"),
        ("A.java", "java"),
        ("x.c", "c"),
        ("x.h", "c"),
        ("x.cpp", "cpp"),
        ("x.HPP", "cpp"),
        ("lib/x.rb", "ruby"),
        ("Rakefile", "ruby"),
        ("README.md", "markdown"),
        ("doc.markdown", "markdown"),
        ("run.sh", "bash"),
        ("pyproject.toml", "toml"),
        ("ci.yml", "yaml"),
        ("Dockerfile", "dockerfile"),
        ("notes.txt", "text"),
        ("LICENSE", "text"),
    ],
)
def test_detect_language(path: str, language: str) -> None:
    assert detect_language(path) == language


# --- per-language symbols -----------------------------------------------------------------

EXPECTED: dict[str, set[tuple[str, str]]] = {
    "sample.go": {
        ("struct", "Rect"),
        ("interface", "Shape"),
        ("method", "Rect.Area"),
        ("method", "Rect.String"),
        ("function", "Largest"),
        ("module", "sample.go"),
    },
    "sample.rs": {
        ("struct", "Point"),
        ("enum", "Shape"),
        ("trait", "Area"),
        ("method", "Area.describe"),
        ("impl", "Point"),
        ("method", "Point.new"),
        ("method", "Point.norm"),
        ("impl", "fmt.Display for Point"),
        ("method", "Point.fmt"),
        ("function", "util.clamp"),
        ("function", "main"),
        ("module", "sample.rs"),
    },
    "sample.js": {
        ("class", "Loader"),
        ("method", "Loader.constructor"),
        ("method", "Loader.load"),
        ("method", "Loader.create"),
        ("function", "parse"),
        ("function", "double"),
        ("module", "sample.js"),
    },
    "sample.ts": {
        ("interface", "Store"),
        ("enum", "Mode"),
        ("function", "pick"),
        ("class", "Base"),
        ("method", "Base.describe"),
        ("function", "Util.clamp"),
        ("module", "sample.ts"),
    },
    "sample.tsx": {
        ("function", "Greeting"),
        ("function", "Farewell"),
        ("class", "Counter"),
        ("method", "Counter.render"),
        ("module", "sample.tsx"),
    },
    "Sample.java": {
        ("class", "Sample"),
        ("method", "Sample.Sample"),
        ("method", "Sample.size"),
        ("class", "Sample.Node"),
        ("method", "Sample.Node.twice"),
        ("interface", "Sample.Visitor"),
        ("enum", "Color"),
        ("method", "Color.next"),
        ("module", "Sample.java"),
    },
    "sample.c": {
        ("struct", "point"),
        ("struct", "user_t"),
        ("enum", "color"),
        ("function", "add"),
        ("function", "make"),
        ("function", "main"),
        ("module", "sample.c"),
    },
    "sample.cpp": {
        ("class", "geo.Shape"),
        ("method", "geo.Shape.name"),
        ("struct", "geo.Circle"),
        ("function", "geo.twice"),
        ("method", "geo.Circle.area"),
        ("function", "main"),
        ("module", "sample.cpp"),
    },
    "sample.rb": {
        ("class", "Shop.Cart"),
        ("method", "Shop.Cart.initialize"),
        ("method", "Shop.Cart.add"),
        ("method", "Shop.Cart.empty"),
        ("function", "helper"),
        ("module", "sample.rb"),
    },
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_symbols(name: str) -> None:
    data, chunks = _chunks(name)
    assert {(c.kind, c.symbol) for c in chunks} == EXPECTED[name]
    assert len({c.id for c in chunks}) == len(chunks)
    lang = detect_language(name)
    for c in chunks:
        assert c.source == "code"
        assert c.language == lang
        assert c.file_hash == file_hash(data)
        assert c.node_hash == text_hash(c.text)
        assert c.id == chunk_id("code", name, c.symbol, c.kind)  # no duplicates here
        assert 1 <= c.start_line <= c.end_line
        assert 0 <= c.start_byte < c.end_byte <= len(data)
        assert data[: c.start_byte].count(b"\n") + 1 == c.start_line


def _parent(chunks: list[Chunk], c: Chunk) -> Chunk | None:
    return next((p for p in chunks if p.id == c.parent_id), None)


def test_methods_point_at_their_container() -> None:
    for name in EXPECTED:
        _, chunks = _chunks(name)
        for c in chunks:
            parent = _parent(chunks, c)
            if c.kind == "method" and parent is not None:
                assert parent.kind in {"class", "struct", "impl", "trait", "interface", "enum"}
            if c.kind != "method":
                assert c.parent_id is None or parent is not None


def test_go_method_receiver_and_parent() -> None:
    _, chunks = _chunks("sample.go")
    syms = _by_symbol(chunks)
    area = syms[("method", "Rect.Area")]
    assert area.parent_id == syms[("struct", "Rect")].id
    assert area.text.startswith("// Area returns the area.\nfunc (r *Rect) Area()")
    assert syms[("function", "Largest")].parent_id is None


def test_rust_impl_and_attributes() -> None:
    _, chunks = _chunks("sample.rs")
    syms = _by_symbol(chunks)
    impl = syms[("impl", "Point")]
    assert syms[("method", "Point.new")].parent_id == impl.id
    assert syms[("method", "Point.fmt")].parent_id == syms[("impl", "fmt.Display for Point")].id
    # doc comment and attribute travel with the struct
    assert syms[("struct", "Point")].text.startswith("/// A point in the plane.\n#[derive(")
    # the impl chunk lists its methods by signature only
    assert "pub fn new(x: f64, y: f64) -> Self { ... }" in impl.text
    assert "Point { x, y }" not in impl.text


def test_python_classes_methods_duplicates() -> None:
    data, chunks = _chunks("sample.py", "pkg/sample.py")
    kinds = [(c.kind, c.symbol) for c in chunks]
    assert ("function", "top") in kinds
    assert ("class", "Decoder") in kinds
    assert kinds.count(("method", "Decoder.name")) == 2  # property getter and setter
    assert kinds.count(("function", "fallback")) == 2  # defined in if / else branches
    assert kinds.count(("function", "conv")) == 3  # two overloads and the implementation
    assert len({c.id for c in chunks}) == len(chunks)
    convs = [c for c in chunks if c.symbol == "conv"]
    assert [c.id for c in convs] == [
        chunk_id("code", "pkg/sample.py", s, "function") for s in ("conv", "conv#2", "conv#3")
    ]
    syms = _by_symbol(chunks)
    cls = syms[("class", "Decoder")]
    raw = syms[("method", "Decoder.raw_decode")]
    assert raw.parent_id == cls.id
    assert syms[("function", "top")].parent_id is None
    # nested functions stay in their parent
    assert not any(c.symbol.endswith("nested") for c in chunks)
    assert "def nested(x):" in syms[("function", "top")].text
    # leading comment and decorators travel with the symbol
    assert syms[("function", "top")].text.startswith("# Helper comment attached to top().\n")
    # the class chunk keeps its header, docstring and attributes, methods elided
    assert cls.text.startswith('class Decoder(json.JSONDecoder):\n    """A decoder."""')
    assert 'kind = "demo"' in cls.text
    assert "def raw_decode(self, s, idx=0): ..." in cls.text
    assert "super().raw_decode" not in cls.text
    assert "@property\n    def name(self): ..." in cls.text
    # module remainder: dotted module name, imports and top-level statements only
    mod = syms[("module", "pkg.sample")]
    assert "import json" in mod.text
    assert "print(top(1, 2))" in mod.text
    assert "def " not in mod.text
    assert mod.start_line == 1
    assert mod.end_line == data.count(b"\n")


def test_python_module_names() -> None:
    src = b"import os\n"
    assert chunk_file("json/decoder.py", src, "h")[0].symbol == "json.decoder"
    assert chunk_file("json/__init__.py", src, "h")[0].symbol == "json"
    assert chunk_file("src/pkg/mod.py", src, "h")[0].symbol == "pkg.mod"


def test_no_module_chunk_when_only_symbols() -> None:
    chunks = chunk_file("a.py", b"\n\ndef f():\n    return 1\n\n\n", "h")
    assert [(c.kind, c.symbol) for c in chunks] == [("function", "f")]


def test_text_equals_slice_except_containers_and_module() -> None:
    """Leaf symbols are exact slices; containers with members elide them (documented)."""
    for name in [*EXPECTED, "sample.py"]:
        data, chunks = _chunks(name)
        parents = {c.parent_id for c in chunks if c.parent_id}
        for c in chunks:
            if c.id in parents or c.kind == "module":
                continue
            assert c.text == _slice(data, c), (name, c.symbol)


# --- id stability -------------------------------------------------------------------------

BASE = b"""import os


def alpha(x):
    return x + 1


class Box:
    def get(self):
        return 1


def omega():
    return 2
"""


def _ids(data: bytes) -> dict[tuple[str, str], str]:
    return {(c.kind, c.symbol): c.id for c in chunk_file("m.py", data, "h")}


def test_ids_stable_when_unrelated_code_changes() -> None:
    before = _ids(BASE)
    edited = BASE.replace(b"return x + 1", b"y = x * 3\n    z = y - 1\n    return z")
    after = _ids(edited)
    assert before == after
    # and the edited chunk's text hash changes while others keep theirs
    old = {c.symbol: c.node_hash for c in chunk_file("m.py", BASE, "h")}
    new = {c.symbol: c.node_hash for c in chunk_file("m.py", edited, "h")}
    assert old["alpha"] != new["alpha"]
    assert old["omega"] == new["omega"]
    assert old["Box.get"] == new["Box.get"]


def test_ids_stable_when_function_moves() -> None:
    moved = BASE.replace(b"def omega():\n    return 2\n", b"")
    moved = moved.replace(b"def alpha", b"def omega():\n    return 2\n\n\ndef alpha")
    assert _ids(moved) == _ids(BASE)


# --- splitting big symbols ----------------------------------------------------------------


def _big_python(n: int) -> bytes:
    body = "".join(f"    value_{i} = compute({i}, 'some padding text here')\n" for i in range(n))
    return f"import x\n\n\ndef big(a, b):\n    '''Doc.'''\n{body}    return a\n".encode()


def test_large_function_is_split_with_signature() -> None:
    data = _big_python(400)
    chunks = [c for c in chunk_file("big.py", data, "h") if c.kind == "function"]
    assert len(chunks) >= 3
    assert all(c.symbol == "big" for c in chunks)
    head = chunk_id("code", "big.py", "big", "function")
    assert chunks[0].id == head
    assert not is_part(head) and head_id(head) == head
    assert part_label(head, chunks[0].text) is None
    n = len(chunks)
    for i, c in enumerate(chunks[1:], 2):
        # later parts: id "<first part's id>#part<k>", a label line, then the signature
        assert c.id == f"{head}#part{i}"
        assert is_part(c.id) and head_id(c.id) == head
        label = f"# big (part {i} of {n})\n"
        assert part_label(c.id, c.text) == f"big (part {i} of {n})"
        assert c.text.startswith(label + "def big(a, b):\n    value_")
        # the rest is the part's own statements, which is what the span points at
        assert (
            c.text.removeprefix(label + "def big(a, b):\n")
            == data[data.rfind(b"\n", 0, c.start_byte) + 1 : c.end_byte].decode()
        )
    assert chunks[0].text == _slice(data, chunks[0])
    assert chunks[0].text.startswith("def big(a, b):\n    '''Doc.'''")
    for c in chunks:
        assert len(c.text.encode()) <= MAX_CHUNK_BYTES
    # parts tile the function: consecutive, no overlap, ends at the last statement
    for a, b in itertools.pairwise(chunks):
        assert a.end_byte <= b.start_byte
        assert b.start_line == a.end_line + 1
    assert chunks[-1].end_byte == data.rstrip().__len__()
    assert chunks[-1].text.endswith("return a")


def test_large_go_function_repeats_signature() -> None:
    stmts = "".join(f'\tfmt.Println("line {i} with some padding text")\n' for i in range(300))
    data = f"package p\n\nfunc (s *S) Run(n int) error {{\n{stmts}\treturn nil\n}}\n".encode()
    parts = [c for c in chunk_file("p.go", data, "h") if c.kind == "method"]
    assert len(parts) >= 2
    assert {c.symbol for c in parts} == {"S.Run"}
    for k, c in enumerate(parts[1:], 2):
        assert c.text.startswith(
            f"// S.Run (part {k} of {len(parts)})\nfunc (s *S) Run(n int) error {{\n\tfmt.Println("
        )
    assert parts[-1].text.endswith("return nil\n}")


def test_huge_single_statement_is_split_into_line_windows() -> None:
    items = "".join(f"        'item number {i} with padding',\n" for i in range(600))
    data = f"def table():\n    return [\n{items}    ]\n".encode()
    parts = chunk_file("t.py", data, "h")
    assert len(parts) >= 3
    assert all(len(c.text.encode()) <= MAX_CHUNK_BYTES for c in parts)
    assert len({c.id for c in parts}) == len(parts)
    covered = "".join(_slice(data, c) for c in parts)
    assert covered.replace("\n", "").replace(" ", "") == data.decode().replace("\n", "").replace(
        " ", ""
    )


def test_large_class_splits_with_header() -> None:
    attrs = "".join(f"    FIELD_{i} = 'constant value number {i}'\n" for i in range(300))
    data = f"class Big(Base):\n{attrs}\n    def m(self):\n        return 1\n".encode()
    chunks = chunk_file("c.py", data, "h")
    classes = [c for c in chunks if c.kind == "class"]
    assert len(classes) >= 2
    for k, c in enumerate(classes[1:], 2):
        assert c.text.startswith(f"# Big (part {k} of {len(classes)})\nclass Big(Base):\n    ")
    method = next(c for c in chunks if c.kind == "method")
    assert method.parent_id == classes[0].id
    assert all(len(c.text.encode()) <= MAX_CHUNK_BYTES for c in chunks)


def test_split_module_remainder_parts_are_file_lines_without_label() -> None:
    table = "".join(f"NAME_{i} = 'constant value number {i}'\n" for i in range(400))
    data = f"import os\n{table}\n\ndef f():\n    return 1\n".encode()
    mods = [c for c in chunk_file("consts.py", data, "h") if c.kind == "module"]
    assert len(mods) >= 2
    for k, c in enumerate(mods[1:], 2):
        assert c.id == f"{mods[0].id}#part{k}" and part_label(c.id, c.text) is None
    for c in mods:
        assert c.text == _slice(data, c).rstrip("\n") or c.text == _slice(data, c)
        assert len(c.text.encode()) <= MAX_CHUNK_BYTES


def test_part_label_needs_a_part_id() -> None:
    # a comment that looks like a label is just text in a chunk that is not a later part
    data = b"# helper (part 2 of 3)\ndef helper():\n    return 1\n"
    (c,) = chunk_file("h.py", data, "h")
    assert c.text.startswith("# helper (part 2 of 3)") and part_label(c.id, c.text) is None


# --- robustness ---------------------------------------------------------------------------


def test_empty_and_whitespace_files() -> None:
    for path in ("a.py", "a.md", "a.txt", "a.go"):
        assert chunk_file(path, b"", "h") == []
        assert chunk_file(path, b"  \n\n\t\n", "h") == []


def test_invalid_utf8_keeps_byte_spans() -> None:
    data = b"# caf\xe9\n\ndef f():\n    return '\xff\xfe'\n\n\ndef g():\n    return 1\n"
    chunks = chunk_file("bad.py", data, "h")
    syms = _by_symbol(chunks)
    assert set(syms) == {("function", "f"), ("function", "g"), ("module", "bad")}
    for c in chunks:
        assert c.text == _slice(data, c)
    assert "\ufffd" in syms[("function", "f")].text
    g = syms[("function", "g")]
    assert data[g.start_byte : g.end_byte] == b"def g():\n    return 1"
    # and in text / markdown files
    for path in ("bad.txt", "bad.md"):
        for c in chunk_file(path, b"# t\xe9\n\xff\xfe text\n", "h"):
            assert c.text == _slice(b"# t\xe9\n\xff\xfe text\n", c)


@pytest.mark.parametrize(
    ("path", "data"),
    [
        ("broken.py", b"def ok():\n    return 1\n\nclass (:\n  def\n\ndef after():\n    pass\n"),
        ("broken.go", b"package p\nfunc ok() {}\nfunc (x { }\nfunc after() int { return 1 }\n"),
        ("broken.rs", b"fn ok() {}\nimpl { fn \nfn after() -> u8 { 1 }\n"),
        ("broken.js", b"function ok() {}\nclass { ((( \nfunction after() { return 1 }\n"),
        ("broken.java", b"class A { void ok() {} \n void bad( { }\n"),
        ("broken.c", b"int ok(void) { return 0; }\nstruct { int\nint after(void) { return 1; }\n"),
        ("binaryish.rb", bytes(range(256)) * 4),
        ("deep.py", b"x = " + b"(" * 3000 + b"1" + b")" * 3000 + b"\n"),
        ("deep.js", b"f(" * 2000 + b")" * 2000 + b"\n"),
    ],
)
def test_syntax_errors_do_not_crash(path: str, data: bytes) -> None:
    chunks = chunk_file(path, data, "h")
    assert chunks
    assert len({c.id for c in chunks}) == len(chunks)
    for c in chunks:
        assert 0 <= c.start_byte < c.end_byte <= len(data)
        assert c.start_line <= c.end_line


def test_syntax_error_still_emits_what_parses() -> None:
    data = b"def ok():\n    return 1\n\nclass (:\n  def\n\ndef after():\n    pass\n"
    symbols = {c.symbol for c in chunk_file("broken.py", data, "h")}
    assert "ok" in symbols


# --- markdown -----------------------------------------------------------------------------


def test_markdown_sections_and_fences() -> None:
    data, chunks = _chunks("sample.md", "docs/sample.md")
    assert [c.symbol for c in chunks] == [
        "docs/sample.md",
        "Guide",
        "Guide > Install",
        "Guide > Usage",
        "Guide > Usage > Advanced",
        "Appendix",
    ]
    for c in chunks:
        assert c.kind == "section"
        assert c.source == "doc"
        assert c.language == "markdown"
        assert c.text == _slice(data, c)
    install = chunks[2]
    assert "# not a heading" in install.text
    assert "## also not a heading" in chunks[4].text


def test_big_markdown_section_is_windowed_with_heading() -> None:
    body = "".join(f"Paragraph line {i} with enough words to be long.\n" for i in range(400))
    data = f"# Title\n\n## Big\n\n{body}\n## Next\n\nshort\n".encode()
    chunks = chunk_file("r.md", data, "h")
    big = [c for c in chunks if c.symbol == "Title > Big"]
    assert len(big) >= 2
    assert big[0].text.startswith("## Big\n")
    for k, c in enumerate(big[1:], 2):
        assert c.text.startswith(f"<!-- Title > Big (part {k} of {len(big)}) -->\n## Big\n")
        assert part_label(c.id, c.text) == f"Title > Big (part {k} of {len(big)})"
    # the heading and the label repeated in parts 2.. fit in the cap
    assert all(len(c.text.encode()) <= MAX_CHUNK_BYTES for c in big)
    assert len({c.id for c in chunks}) == len(chunks)
    assert chunks[-1].symbol == "Title > Next"


# --- plain text windows -------------------------------------------------------------------


def test_text_windows_symbols() -> None:
    data = "".join(f"line {i}\n" for i in range(1, 131)).encode()
    chunks = chunk_file("notes/log.txt", data, "h")
    assert [c.symbol for c in chunks] == [
        f"notes/log.txt:L1-{WINDOW_LINES}",
        f"notes/log.txt:L{WINDOW_LINES + 1}-{2 * WINDOW_LINES}",
        f"notes/log.txt:L{2 * WINDOW_LINES + 1}-130",
    ]
    assert all(c.kind == "window" and c.source == "text" for c in chunks)
    assert all(c.text == _slice(data, c) for c in chunks)


def test_minified_line_is_cut_at_character_boundaries() -> None:
    data = ("é" * 20000 + "\n").encode()
    chunks = chunk_file("min.json", data, "h")
    assert len(chunks) >= 7
    assert "".join(c.text for c in chunks) == data.decode()
    assert all(len(c.text.encode()) <= MAX_CHUNK_BYTES for c in chunks)
    assert len({c.id for c in chunks}) == len(chunks)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.text(alphabet=st.characters(blacklist_characters="\n\r"), max_size=120),
        min_size=1,
        max_size=300,
    ),
    st.booleans(),
)
def test_windows_cover_every_line_once(lines: list[str], trailing_newline: bool) -> None:
    text = "\n".join(lines) + ("\n" if trailing_newline else "")
    data = text.encode("utf-8", "surrogatepass")
    chunks = chunk_file("random.txt", data, "h")
    if not data.strip():
        assert chunks == []
        return
    # byte spans tile the file
    assert chunks[0].start_byte == 0
    assert chunks[-1].end_byte == len(data)
    for a, b in itertools.pairwise(chunks):
        assert a.end_byte == b.start_byte
    # each line is in exactly one window (lines are short, so no line is cut)
    # a line ends at "\n"; a final "\n" does not open an extra empty line
    n_lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    seen = [0] * n_lines
    for c in chunks:
        assert c.end_line - c.start_line + 1 <= WINDOW_LINES
        for ln in range(c.start_line, c.end_line + 1):
            seen[ln - 1] += 1
    assert seen == [1] * n_lines
    assert len({c.id for c in chunks}) == len(chunks)


def test_javascript_functions_assigned_to_members() -> None:
    """CommonJS defines its API by assignment: express's ``res.send = function send()`` and
    ``View.prototype.lookup = function lookup()`` stayed in the module remainder, where
    ``defs``, ``callers``, the map and symbol search could not see them (a user trial)."""
    src = (
        b"'use strict';\n"
        b"var res = Object.create(proto);\n"
        b"module.exports = res;\n"
        b"\n"
        b"/**\n * Send a response.\n */\n"
        b"res.send = function send(body) {\n  return this;\n};\n"
        b"\n"
        b"View.prototype.lookup = function lookup(name) {\n  return name;\n};\n"
        b"exports.parse = function (s) { return s; };\n"
        b"module.exports.format = (x) => x;\n"
        b"a[b] = function () {};\n"
        b"x = 5;\n"
    )
    got = [(c.kind, c.symbol, c.start_line, c.end_line) for c in chunk_file("r.js", src, "h")]
    assert got == [
        ("method", "res.send", 5, 10),
        ("method", "View.lookup", 12, 14),
        ("function", "parse", 15, 15),
        ("function", "format", 16, 16),
        ("module", "r.js", 1, 18),
    ]
    named = chunk_file("app.js", b"module.exports = function createApplication() {\n};\n", "h")
    assert [(c.kind, c.symbol) for c in named] == [("function", "createApplication")]
