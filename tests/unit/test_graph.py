"""The code graph end to end on small repositories: extraction, storage, resolution, queries,
incremental exactness (issue 24)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import ragloom
from ragloom.cli import cli
from ragloom.graph import CodeGraph

PY_FILES = {
    "pkg/__init__.py": "",
    "pkg/util.py": (
        "def helper(x):\n"
        "    return x + 1\n"
        "\n"
        "\n"
        "class Base:\n"
        "    def run(self):\n"
        "        return helper(1)\n"
        "\n"
        "    def stop(self):\n"
        "        return 0\n"
    ),
    "pkg/core.py": (
        "from .util import Base, helper\n"
        "from . import util as u\n"
        "\n"
        "\n"
        "class Impl(Base):\n"
        "    def run(self):\n"
        "        helper(2)\n"
        "        self.step()\n"
        "        super().run()\n"
        "        return u.helper(3)\n"
        "\n"
        "    def step(self):\n"
        "        return self.stop()\n"
        "\n"
        "\n"
        "def make() -> Impl:\n"
        "    return Impl()\n"
    ),
    "main.py": (
        "import json\n"
        "from pkg.core import make\n"
        "\n"
        "\n"
        "def main():\n"
        "    obj = make()\n"
        "    print(json.dumps(obj.run()))\n"
        "\n"
        "\n"
        "main()\n"
    ),
}


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def build(root: Path) -> ragloom.Index:
    idx = ragloom.open(root, embedder="hashing")
    idx.index(embed=False, history=False)
    return idx


def edges(g: CodeGraph) -> set[tuple[str, str, str, int, float]]:
    """Every edge by the symbols it joins (rowids and node numbers differ between builds)."""
    e = g.edges
    out = set()
    for j in range(g.edge_count):
        s, d = g.defs[int(e.src[j])], g.defs[int(e.dst[j])]
        out.add(
            (f"{s.path}:{s.symbol}", f"{d.path}:{d.symbol}", str(int(e.kind[j])), int(e.line[j]),
             round(float(e.conf[j]), 4))
        )  # fmt: skip
    return out


@pytest.fixture
def pyrepo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write(root, PY_FILES)
    return root


def _one(g: CodeGraph, symbol: str, path: str | None = None) -> str:
    defs = g.definitions(symbol, path=path)
    assert len(defs) == 1, defs
    return defs[0].id


def test_python_resolution(pyrepo: Path) -> None:
    g = build(pyrepo).graph()
    helper = _one(g, "helper")
    callers = {(d.path, d.symbol): c for d, c in g.callers(helper)}
    # a name the file defines, one it imports, one reached through a module alias
    assert callers[("pkg/util.py", "Base.run")] == 1.0
    assert callers[("pkg/core.py", "Impl.run")] == 1.0
    lines = sorted(r.line for r in g.references(helper) if r.path == "pkg/core.py")
    assert lines == [1, 7, 10]  # the import, the bare call, the call through ``u``
    callees = {(d.path, d.symbol) for d, _ in g.callees(_one(g, "Impl.run"))}
    assert ("pkg/core.py", "Impl.step") in callees  # through self
    assert ("pkg/util.py", "Base.run") in callees  # through super()
    # self.stop() is found in the base class
    step_callees = {(d.symbol, c) for d, c in g.callees(_one(g, "Impl.step"))}
    assert ("Base.stop", 0.9) in step_callees
    # a return annotation is a type use; main's make() resolves through its import
    types = [r for r in g.references(_one(g, "Impl")) if r.kind == "type"]
    assert [r.line for r in types] == [16]
    assert ("main.py", "main") in {(d.path, d.symbol) for d, _ in g.callers(_one(g, "make"))}
    # a builtin and a third-party call resolve to nothing
    assert not g.definitions("dumps")


def test_instances_resolve_through_what_made_them(pyrepo: Path) -> None:
    g = build(pyrepo).graph()
    impl_run = _one(g, "Impl.run")
    base_run = _one(g, "Base.run")
    # obj = make() with ``def make() -> Impl``: obj.run() is Impl.run, by the return type
    assert ("main.py", "main", 0.9) in {(c.path, c.symbol, conf) for c, conf in g.callers(impl_run)}
    assert ("main.py", "main") not in {
        (c.path, c.symbol) for c, _ in g.callers(base_run, min_confidence=0.0)
    }


def test_unknown_receiver_is_not_a_certain_caller(tmp_path: Path) -> None:
    write(tmp_path, {**PY_FILES, "main.py": "def main(obj):\n    return obj.run()\n"})
    g = build(tmp_path).graph()
    for d in g.definitions("run"):
        assert ("main.py", "main") not in {(c.path, c.symbol) for c, _ in g.callers(d.id)}
        weak = g.callers(d.id, min_confidence=0.0)
        assert ("main.py", "main") in {(c.path, c.symbol) for c, _ in weak}


def test_definition_at_and_views(pyrepo: Path) -> None:
    from ragloom.errors import UnknownIdError
    from ragloom.graph.views import graph_answer, graph_text

    g = build(pyrepo).graph()
    d = g.definition_at("pkg/core.py", 8)
    assert d is not None and d.symbol == "Impl.run"
    assert g.definition_at("pkg/core.py", 1) is not None  # the module's remainder
    ans = graph_answer(g, "refs", "pkg/util.py:2")
    assert ans["definitions"][0]["symbol"] == "helper"  # type: ignore[index]
    assert ans["references_total"] == 4
    assert "pkg/core.py:7" in graph_text(ans, "refs")
    with pytest.raises(UnknownIdError):
        graph_answer(g, "callers", "no_such_function")


def test_one_file_update_keeps_the_graph_exact(pyrepo: Path, tmp_path: Path) -> None:
    idx = build(pyrepo)
    before = edges(idx.graph())
    core = pyrepo / "pkg/core.py"
    core.write_text(core.read_text().replace("        self.step()\n", "        make()\n"))
    (pyrepo / "pkg/extra.py").write_text("from .util import helper\n\ndef more():\n    helper(4)\n")
    idx.index(embed=False, history=False)
    after = edges(idx.graph())
    assert after != before
    fresh_root = tmp_path / "fresh"
    shutil.copytree(pyrepo, fresh_root, ignore=shutil.ignore_patterns(".ragloom"))
    assert edges(build(fresh_root).graph()) == after
    # and a file removed takes its references with it
    (pyrepo / "pkg/extra.py").unlink()
    idx.index(embed=False, history=False)
    assert not any("extra.py" in e[0] for e in edges(idx.graph()))


def test_records_are_made_again_for_an_index_without_them(pyrepo: Path) -> None:
    from ragloom.index.store import Store

    idx = build(pyrepo)
    n = idx.graph().edge_count
    idx.close()
    store = Store(pyrepo / ".ragloom" / "index.sqlite")
    store.clear_file_graphs()
    store.set_meta("graph_version", "0")
    store.close()
    idx = ragloom.open(pyrepo, embedder="hashing")
    assert idx.graph().edge_count == 0
    idx.index(embed=False, history=False)
    assert idx.graph().edge_count == n


def test_cli_graph_commands(pyrepo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build(pyrepo)
    monkeypatch.chdir(pyrepo)
    runner = CliRunner()
    out = runner.invoke(cli, ["callers", "helper", "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert {"symbol", "generation", "definitions", "callers", "callers_total"} <= set(doc)
    assert {c["symbol"] for c in doc["callers"]} >= {"Base.run", "Impl.run"}
    out = runner.invoke(cli, ["refs", "Impl.run"])
    assert out.exit_code == 0 and "definition" in out.output
    out = runner.invoke(cli, ["defs", "nothing_like_this"])
    assert out.exit_code == 4 and "no definition named" in out.output


GO_FILES = {
    "go.mod": "module example.com/app\n",
    "util/strings.go": (
        "package util\n\nfunc Clean(s string) string {\n\treturn trim(s)\n}\n\n"
        "func trim(s string) string {\n\treturn s\n}\n"
    ),
    "util/more.go": "package util\n\nfunc Twice(s string) string {\n\treturn Clean(Clean(s))\n}\n",
    "cmd/main.go": (
        'package main\n\nimport (\n\tu "example.com/app/util"\n\t"fmt"\n)\n\n'
        'type Server struct{}\n\nfunc (s *Server) Start() {\n\tfmt.Println(u.Clean("x"))\n'
        "\ts.stop()\n}\n\nfunc (s *Server) stop() {}\n"
    ),
}

JS_FILES = {
    "src/lib/http.ts": (
        "export function send(url: string): Response {\n  return fetchIt(url);\n}\n"
        "function fetchIt(url: string): Response {\n  return new Response();\n}\n"
        "export class Client {\n  get(url: string) {\n    return this.send(url);\n  }\n"
        "  send(url: string) {\n    return send(url);\n  }\n}\n"
    ),
    "src/app.ts": (
        "import { send as post, Client } from './lib/http';\n\n"
        "export function main() {\n  const c = new Client();\n  post('/x');\n  return c;\n}\n"
    ),
}


def test_go_packages_and_receivers(tmp_path: Path) -> None:
    write(tmp_path, GO_FILES)
    g = build(tmp_path).graph()
    callers = {(d.path, d.symbol) for d, _ in g.callers(_one(g, "Clean"))}
    assert ("util/more.go", "Twice") in callers  # same package, another file
    assert ("cmd/main.go", "Server.Start") in callers  # through the import alias
    start_callees = {d.symbol for d, _ in g.callees(_one(g, "Server.Start"))}
    assert "Server.stop" in start_callees


def test_typescript_imports_and_this(tmp_path: Path) -> None:
    write(tmp_path, JS_FILES)
    g = build(tmp_path).graph()
    send = g.definitions("send", path="src/lib/http.ts")
    fn = next(d for d in send if d.kind == "function")
    callers = {(d.path, d.symbol) for d, _ in g.callers(fn.id)}
    assert ("src/app.ts", "main") in callers  # imported under another name
    assert ("src/lib/http.ts", "Client.send") in callers
    method = next(d for d in send if d.kind == "method")
    assert ("src/lib/http.ts", "Client.get") in {
        (d.path, d.symbol) for d, _ in g.callers(method.id)
    }


def test_worker_process_makes_the_same_records(
    pyrepo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragloom.index import graphwork

    inline = edges(build(pyrepo).graph())
    other = tmp_path / "other"
    shutil.copytree(pyrepo, other, ignore=shutil.ignore_patterns(".ragloom"))
    monkeypatch.setattr(graphwork, "GRAPH_WORKER_MIN_FILES", 1)
    started: list[bool] = []
    real_start = graphwork.GraphWorker.start

    def start(self: graphwork.GraphWorker) -> bool:
        started.append(real_start(self))
        return started[-1]

    monkeypatch.setattr(graphwork.GraphWorker, "start", start)
    assert edges(build(other).graph()) == inline
    assert started == [True]
    # turned off by the environment: inline again, same records
    monkeypatch.setenv("RAGLOOM_GRAPH_WORKER", "0")
    third = tmp_path / "third"
    shutil.copytree(pyrepo, third, ignore=shutil.ignore_patterns(".ragloom"))
    assert edges(build(third).graph()) == inline
    assert started == [True]


def test_graph_stage_spreads_along_edges(pyrepo: Path) -> None:
    from ragloom.errors import ConfigError
    from ragloom.retrieve.stages.pipeline import parse_search_spec

    assert parse_search_spec("hybrid+graph=0.5").graph_weight == 0.5
    assert parse_search_spec("hybrid+graph").graph is True
    assert parse_search_spec("hybrid").runs_graph() is False  # off by default
    with pytest.raises(ConfigError):
        parse_search_spec("hybrid+graph=-1")
    idx = build(pyrepo)
    plain = idx.search("step then stop", top_k=10, strategy="hybrid")
    spread = idx.search("step then stop", top_k=10, strategy="hybrid+graph=1.0", explain=True)
    assert {h.id for h in spread.hits} >= {h.id for h in plain.hits[:3]}
    noted = [h for h in spread.hits if "graph" in h.explain]
    assert noted, "no hit gained from the graph"
    # the neighbours of the best hit gained in proportion to the weight
    weak = idx.search("step then stop", top_k=10, strategy="hybrid+graph=0.01", explain=True)
    gains = {h.id: h.explain["graph"] for h in weak.hits if "graph" in h.explain}
    strong = {h.id: h.explain["graph"] for h in noted}
    shared = set(gains) & set(strong)
    assert shared and all(strong[i] > gains[i] for i in shared)
