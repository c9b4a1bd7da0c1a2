"""The code graph in a polyglot repository (a user trial's monorepo of Go, Rust, Java,
TypeScript, JavaScript and Python): names never resolve across languages, locals and fields
never resolve to methods of the same name, and a Rust ``use super::...`` inside ``mod tests``
does not hide the file's own types."""

from __future__ import annotations

from pathlib import Path

import ragloom
from ragloom.graph import CodeGraph

FILES = {
    # JavaScript: an unknown receiver's `send` (express's `res.send`)
    "web/app.js": "function handle(req, res) {\n  res.send('ok');\n  return res;\n}\n",
    # Rust: a method `send`, a top-level `args`, a field and a method both named `defaults`
    "core/src/worker.rs": (
        "pub struct Worker { defaults: u32 }\n\n"
        "impl Worker {\n"
        "    pub fn send(&self) -> u32 { self.defaults }\n"
        "    pub fn defaults(&self) -> u32 { 1 }\n"
        "    pub fn both(&self) -> u32 { self.defaults() + self.defaults }\n"
        "}\n\n"
        "pub fn args() -> u32 { 2 }\n"
    ),
    "core/src/main.rs": ("fn run(args: u32) -> u32 {\n    let total = args + 1;\n    total\n}\n"),
    # Rust: `use super::...` in the file's test module
    "glob/src/glob.rs": (
        "pub struct GlobBuilder { pat: u32 }\n\n"
        "impl GlobBuilder {\n"
        "    pub fn new(pat: u32) -> GlobBuilder { GlobBuilder { pat } }\n"
        "}\n\n"
        "pub fn build() -> GlobBuilder {\n    GlobBuilder::new(3)\n}\n\n"
        "#[cfg(test)]\n"
        "mod tests {\n"
        "    use super::{GlobBuilder};\n\n"
        "    #[test]\n"
        "    fn makes() {\n        let _ = GlobBuilder::new(1);\n    }\n"
        "}\n"
    ),
    # Java: a local variable named like a method of the class
    "java/src/ReaderTest.java": (
        "public class ReaderTest {\n"
        "  Object reader() { return null; }\n"
        "  int count() {\n"
        "    Object reader = reader();\n"
        "    return reader.hashCode();\n"
        "  }\n"
        "}\n"
    ),
    # Go: a parameter named like a Rust function
    "go/cmd/main.go": "package main\n\nfunc Run(args []string) int {\n\treturn len(args)\n}\n",
    # TypeScript: an unknown receiver's method is still found in JavaScript (one family)
    "web/lib.js": "function render(view) {\n  return view;\n}\nmodule.exports = { render };\n",
    "web/page.ts": "export function show(app: any) {\n  return app.render(1);\n}\n",
}


def _graph(tmp_path: Path, files: dict[str, str] = FILES) -> CodeGraph:
    """The code graph of ``files`` written under ``tmp_path`` and indexed."""
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    idx = ragloom.open(tmp_path, embedder="hashing")
    idx.index(embed=False, history=False)
    return idx.graph()


def _edges(g: CodeGraph) -> set[tuple[str, str, float]]:
    e = g.edges
    return {
        (
            f"{g.defs[int(e.src[j])].path}:{g.defs[int(e.src[j])].symbol}",
            f"{g.defs[int(e.dst[j])].path}:{g.defs[int(e.dst[j])].symbol}",
            round(float(e.conf[j]), 2),
        )
        for j in range(g.edge_count)
    }


def test_names_resolve_within_a_language_family_and_scope(tmp_path: Path) -> None:
    g = _graph(tmp_path)
    edges = _edges(g)
    by_src: dict[str, set[str]] = {}
    for src, dst, _ in edges:
        by_src.setdefault(src, set()).add(dst)
    lang = {d.path: d.language for d in g.defs}
    family = {"javascript": "js", "typescript": "js", "tsx": "js"}
    for src, dst, conf in edges:  # no edge crosses languages (JS and TS are one family)
        a, b = lang[src.split(":")[0]], lang[dst.split(":")[0]]
        assert family.get(a, a) == family.get(b, b), (src, dst, conf)
    # an unknown receiver's method, found by name in the same family
    assert "web/lib.js:render" in by_src.get("web/page.ts:show", set())
    # locals and parameters are not functions of that name elsewhere
    assert not by_src.get("core/src/main.rs:run")
    assert not by_src.get("go/cmd/main.go:Run")
    # Java: the local `reader` read is not the method; the call `reader()` is
    count = [dst for src, dst, _ in edges if src == "java/src/ReaderTest.java:ReaderTest.count"]
    assert count == ["java/src/ReaderTest.java:ReaderTest.reader"]
    # Rust: the field read `self.defaults` is not the method; the call `self.defaults()` is
    assert "core/src/worker.rs:Worker.defaults" not in by_src.get(
        "core/src/worker.rs:Worker.send", set()
    )
    assert "core/src/worker.rs:Worker.defaults" in by_src["core/src/worker.rs:Worker.both"]


def test_a_rust_test_module_import_does_not_hide_the_file_s_own_types(tmp_path: Path) -> None:
    g = _graph(tmp_path)
    (new,) = g.definitions("GlobBuilder.new")
    callers = {d.symbol for d, _ in g.callers(new.id)}
    assert {"build", "tests.makes"} <= callers or {"build", "makes"} <= callers, callers


def test_a_line_past_the_end_of_a_file_is_no_definition(tmp_path: Path) -> None:
    g = _graph(tmp_path)
    assert g.definition_at("go/cmd/main.go", 4) is not None
    assert g.definition_at("go/cmd/main.go", 99999) is None
    assert g.definition_at("go/cmd/main.go", 0) is None


def test_a_rust_workspace_crate_imports_another(tmp_path: Path) -> None:
    """``use globset::GlobBuilder`` in the ``ignore`` crate of ripgrep's workspace read as an
    outside import, so ``GlobBuilder::new`` there had no callee (a user trial)."""
    files = {
        "crates/globset/src/lib.rs": "pub use crate::glob::GlobBuilder;\nmod glob;\n",
        "crates/globset/src/glob.rs": (
            "pub struct GlobBuilder { n: u32 }\n\n"
            "impl GlobBuilder {\n    pub fn new(n: u32) -> GlobBuilder { GlobBuilder { n } }\n}\n"
        ),
        "crates/ignore/src/types.rs": (
            "use globset::GlobBuilder;\n\n"
            "pub fn build() -> GlobBuilder {\n    GlobBuilder::new(2)\n}\n"
        ),
    }
    g = _graph(tmp_path, files)
    (new,) = g.definitions("GlobBuilder.new")
    assert ("crates/ignore/src/types.rs", "build") in {
        (d.path, d.symbol) for d, _ in g.callers(new.id)
    }


def _refs(g: CodeGraph, symbol: str, **kw: float) -> set[tuple[str, str, float]]:
    """(path, caller symbol, confidence) of every reference to the one definition ``symbol``."""
    (d,) = g.definitions(symbol)
    return {(r.path, r.caller.symbol, round(r.confidence, 2)) for r in g.references(d.id, **kw)}


JAVA_SPLIT = {  # the Maven/Gradle layout: one package under src/main/java and src/test/java
    "src/main/java/com/ex/util/Streams.java": (
        "package com.ex.util;\n\npublic final class Streams {\n"
        "  public static String parse(String in) { return in.trim(); }\n}\n"
    ),
    "src/main/java/com/ex/app/Main.java": (
        "package com.ex.app;\n\nimport com.ex.util.Streams;\n\npublic class Main {\n"
        '  static String two() { return Streams.parse(" a "); }\n}\n'
    ),
    "src/test/java/com/ex/util/StreamsTest.java": (
        "package com.ex.util;\n\npublic class StreamsTest {\n"
        '  public void testParse() { Streams.parse("x"); }\n}\n'
    ),
}


def test_a_java_package_split_over_source_roots_is_one_package(tmp_path: Path) -> None:
    """A package folder under both ``src/main/java`` and ``src/test/java`` made every import of
    the package resolve to nothing (gson: ``GsonBuilder.create`` had no callers; a user trial)."""
    g = _graph(tmp_path, JAVA_SPLIT)
    refs = _refs(g, "Streams.parse", min_confidence=0.0)
    assert ("src/main/java/com/ex/app/Main.java", "Main.two", 0.9) in refs, refs
    # the test class of the same package names the class without an import
    assert ("src/test/java/com/ex/util/StreamsTest.java", "StreamsTest.testParse", 0.9) in refs


GO_MODULE = {
    "go.mod": "module github.com/acme/tool\n\ngo 1.21\n",
    "command.go": (
        "package tool\n\ntype Command struct{ Use string }\n\n"
        "func (c *Command) Name() string { return c.Use }\n\nfunc CheckErr(err error) {}\n"
    ),
    "doc/gen.go": (
        'package doc\n\nimport (\n\t"github.com/acme/tool"\n)\n\n'
        "func GenDocs(cmd *tool.Command) string {\n\ttool.CheckErr(nil)\n\treturn Title(cmd)\n}\n"
    ),
    "doc/title.go": (
        'package doc\n\nimport "github.com/acme/tool"\n\n'
        "func Title(cmd *tool.Command) string { return cmd.Name() }\n"
    ),
    "cmd/main.go": (
        'package main\n\nimport "github.com/acme/tool/doc"\n\n'
        "func main() {\n\tdoc.GenDocs(nil)\n}\n"
    ),
    # a nested module: its own go.mod and path
    "plugins/go.mod": "module example.org/plugins\n",
    "plugins/util/util.go": "package util\n\nfunc Helper() int { return 1 }\n",
    "plugins/main.go": (
        'package main\n\nimport "example.org/plugins/util"\n\nfunc main() {\n\tutil.Helper()\n}\n'
    ),
}


def test_go_imports_resolve_through_the_go_mod_module_path(tmp_path: Path) -> None:
    """``import "github.com/spf13/cobra"`` from ``cobra/doc`` resolved to nothing: the module's
    root folder has no tail to match (a user trial). ``go.mod`` names the module."""
    g = _graph(tmp_path, GO_MODULE)
    assert ("doc/gen.go", "GenDocs", 1.0) in _refs(g, "CheckErr")
    command = _refs(g, "Command")
    assert {("doc/gen.go", "GenDocs", 1.0), ("doc/title.go", "Title", 1.0)} <= command
    assert ("doc/title.go", "Title", 0.9) in _refs(g, "Command.Name")
    assert ("cmd/main.go", "main", 1.0) in _refs(g, "GenDocs")
    assert ("plugins/main.go", "main", 1.0) in _refs(g, "Helper")


TS_WORKSPACE = {
    "package.json": '{"name": "mono", "private": true, "workspaces": ["packages/*"]}\n',
    "packages/zod/package.json": (
        '{"name": "zod", "exports": {".": {"types": "./src/index.ts", '
        '"import": "./dist/index.js"}}}\n'
    ),
    "packages/zod/src/index.ts": 'export { toJSONSchema } from "./schema.js";\n',
    "packages/zod/src/schema.ts": "export function toJSONSchema(s: any) {\n  return s;\n}\n",
    "packages/zod/src/tests/schema.test.ts": (
        'import { toJSONSchema } from "zod";\n\n'
        "export function checks() {\n  return toJSONSchema(1);\n}\n"
    ),
    "packages/lib/package.json": '{"name": "@acme/lib", "main": "lib/main.js"}\n',
    "packages/lib/lib/main.js": "function libHelper() {\n  return 1;\n}\nexports.libHelper = libHelper;\n",
    "packages/app/index.ts": (
        'import { libHelper } from "@acme/lib";\n\nexport function run() {\n  return libHelper();\n}\n'
    ),
}


def test_typescript_imports_of_the_repository_s_own_packages(tmp_path: Path) -> None:
    """zod's tests import ``"zod"`` (a workspace package's own name): that was read as a
    third-party import, so 261 calls of ``toJSONSchema`` had no edge (a user trial)."""
    g = _graph(tmp_path, TS_WORKSPACE)
    assert ("packages/zod/src/tests/schema.test.ts", "checks", 1.0) in _refs(g, "toJSONSchema")
    assert ("packages/app/index.ts", "run", 1.0) in _refs(g, "libHelper")


RUST_DEBUG = {
    "src/flags.rs": (
        "#[derive(Debug)]\npub struct Debug { on: bool }\n\n"
        "#[derive(Debug, Clone)]\npub struct Other { n: u32 }\n\n"
        "pub struct Glob { n: u32 }\n\n"
        "impl std::fmt::Debug for Glob {\n"
        "    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result { Ok(()) }\n"
        "}\n\n"
        "pub fn flags() -> Vec<&'static Debug> { vec![] }\n\n"
        "pub fn show(x: &dyn std::fmt::Debug) -> u32 { 1 }\n"
    ),
}


def test_rust_derive_and_std_paths_are_not_local_items(tmp_path: Path) -> None:
    """``#[derive(Debug)]`` and ``impl std::fmt::Debug for X`` resolved to ripgrep's flag
    ``struct Debug`` (112 reads at 1.0, 7 inherits; a user trial)."""
    g = _graph(tmp_path, RUST_DEBUG)
    refs = _refs(g, "Debug", min_confidence=0.0)
    assert refs == {("src/flags.rs", "flags", 1.0)}, refs


def test_a_call_to_an_overloaded_method_is_one_reference_row(tmp_path: Path) -> None:
    """``refs Reader.add`` printed ``Main.java:6`` once per overload, identical rows (gson's
    ``JsonObject.addProperty``: 3 times; a user trial): a call on a receiver of unknown type
    resolves by name to both overloads."""
    from ragloom.graph.views import graph_answer

    files = {
        "src/main/java/com/ex/Reader.java": (
            "package com.ex;\n\npublic class Reader {\n"
            "  public void add(String k, int v) {}\n"
            "  public void add(String k, String v) {}\n}\n"
        ),
        "src/main/java/com/ex/Main.java": (
            "package com.ex;\n\npublic class Main {\n  static void three(Object r) {\n"
            '    r = null;\n    r.add("a", 1);\n  }\n}\n'
        ),
    }
    g = _graph(tmp_path, files)
    assert len(g.definitions("Reader.add")) == 2
    answer = graph_answer(g, "refs", "Reader.add", min_confidence=0.0)
    rows = [(r["path"], r["line"], r["kind"]) for r in answer["references"]]  # type: ignore[attr-defined]
    assert rows == [("src/main/java/com/ex/Main.java", 6, "call")]
    assert answer["references_total"] == 1


COMMON_NAMES = {
    "src/query.rs": (
        "pub struct GramQuery { n: u32 }\n\n"
        "impl GramQuery {\n    pub fn unwrap(self) -> u32 { self.n }\n"
        "    pub fn shrink(self) -> u32 { self.n }\n}\n\n"
        "pub fn parse(s: Option<u32>, q: Thing) -> u32 { s.unwrap() + q.shrink() }\n"
    ),
    "flag.go": (
        "package flag\n\ntype flagError struct{ msg string }\n\n"
        'func (e *flagError) Error() string { return e.msg }\n\nfunc (e *flagError) Kind() string { return "" }\n\n'
        "func Check(err error, f Thing) string {\n\treturn err.Error() + f.Kind()\n}\n"
    ),
}


def test_well_known_method_names_by_name_alone_fall_below_the_default_cut(
    tmp_path: Path,
) -> None:
    """``s.unwrap()`` on an ``Option`` and ``err.Error()`` on an ``error`` matched the one user
    definition of that name at 0.5 (ripgrep's ``GramQuery.unwrap``: 266 callers; a user
    trial). A name the standard library does not use keeps 0.5."""
    g = _graph(tmp_path, COMMON_NAMES)
    assert _refs(g, "GramQuery.unwrap") == set()
    assert _refs(g, "GramQuery.unwrap", min_confidence=0.0) == {("src/query.rs", "parse", 0.2)}
    assert _refs(g, "GramQuery.shrink") == {("src/query.rs", "parse", 0.5)}
    assert _refs(g, "flagError.Error") == set()
    assert _refs(g, "flagError.Kind") == {("flag.go", "Check", 0.5)}
