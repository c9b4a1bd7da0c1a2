"""ragloom.eval.refs on a tiny synthetic repository: the sample, jedi's references, the
enclosing definitions, the scores (hand-computed), and the ragloom side through a fake graph."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ragloom.eval.refs import (
    MODULE_SCOPE,
    Agreement,
    RefSite,
    SymbolSite,
    callers_of,
    compare,
    jedi_references,
    ragloom_references,
    sample_symbols,
)

LIB = '''"""A library."""


def helper(x):
    return x + 1


def unused():
    return 0


class Greeter:
    def __init__(self, name):
        self.name = name

    def greet(self):
        return "hi " * helper(len(self.name))

    def shout(self):
        return self.greet().upper()
'''

APP = """import lib as L
from lib import Greeter


class Loud(Greeter):
    def shout(self):
        return self.greet() + "!"


def run(name):
    g = L.Greeter(name)
    return L.helper(1), g.greet()
"""

MAIN = """import app

RESULT = app.run("x")
"""

SITES = [
    SymbolSite("app.py", 5, 6, "Loud", "class"),
    SymbolSite("app.py", 6, 8, "Loud.shout", "method"),
    SymbolSite("app.py", 10, 4, "run", "function"),
    SymbolSite("lib.py", 4, 4, "helper", "function"),
    SymbolSite("lib.py", 8, 4, "unused", "function"),
    SymbolSite("lib.py", 12, 6, "Greeter", "class"),
    SymbolSite("lib.py", 16, 8, "Greeter.greet", "method"),
    SymbolSite("lib.py", 19, 8, "Greeter.shout", "method"),
]
"""Every definition of the repository but ``Greeter.__init__`` (a dunder), in order."""

JEDI = {
    "app.py:5:6": [],
    "app.py:6:8": [],
    "app.py:10:4": [("main.py", 3)],
    "lib.py:4:4": [("app.py", 12), ("lib.py", 17)],
    "lib.py:8:4": [],
    # line 2 of app.py (``from lib import Greeter``) is an import: dropped
    "lib.py:12:6": [("app.py", 5), ("app.py", 11)],
    # through ``self`` in the subclass, through a local of the inferred type, and in the class
    "lib.py:16:8": [("app.py", 7), ("app.py", 12), ("lib.py", 20)],
    "lib.py:19:8": [],
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "lib.py").write_text(LIB, encoding="utf-8")
    (tmp_path / "app.py").write_text(APP, encoding="utf-8")
    (tmp_path / "main.py").write_text(MAIN, encoding="utf-8")
    return tmp_path


def _refs(*pairs: tuple[str, int]) -> list[RefSite]:
    return [RefSite(p, ln) for p, ln in pairs]


def test_sample_symbols_finds_name_tokens_and_skips_dunders(repo: Path) -> None:
    assert sample_symbols(repo, 100, 0) == SITES
    assert sample_symbols(repo, 8, 0) == SITES
    three = sample_symbols(repo, 3, 7)
    assert len(three) == 3 and set(three) <= set(SITES)
    assert three == sample_symbols(repo, 3, 7)  # deterministic
    assert three == sorted(three, key=lambda s: (s.path, s.line, s.column))
    assert SITES[6].key == "lib.py:16:8" and SITES[6].name == "greet"


def test_sample_symbols_skips_tests_docs_and_hidden(tmp_path: Path) -> None:
    for rel in ("tests/util.py", "docs/conf.py", "pkg/test_x.py", ".venv/m.py", "pkg/docs/x.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("def f():\n    pass\n", encoding="utf-8")
    (tmp_path / "pkg" / "m.py").write_text(
        "import functools\n\n\n@functools.cache\nasync def \\\n        g(): ...\n"
        "if True:\n    class Ü:  # non-ASCII before the name\n        def h(self): ...\n",
        encoding="utf-8",
    )
    (tmp_path / "pkg" / "bad.py").write_text("def (:\n", encoding="utf-8")
    assert sample_symbols(tmp_path, 10, 0) == [
        SymbolSite("pkg/m.py", 6, 8, "g", "function"),
        SymbolSite("pkg/m.py", 8, 10, "Ü", "class"),
        SymbolSite("pkg/m.py", 9, 12, "Ü.h", "method"),
    ]


def test_jedi_references(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("jedi")
    cache = tmp_path / "cache" / "jedi.json"
    skipped: dict[str, str] = {}
    got = jedi_references(repo, SITES, cache=cache, progress=False, skipped=skipped)
    assert skipped == {}
    assert {k: [(r.path, r.line) for r in v] for k, v in got.items()} == JEDI
    assert cache.is_file()

    # a second run answers from the cache: the same, without asking jedi
    def _fail(*a: Any) -> Any:
        raise AssertionError("jedi asked again")

    monkeypatch.setattr("ragloom.eval.refs._jedi_refs_one", _fail)
    assert jedi_references(repo, SITES, cache=cache, progress=False) == got


def test_jedi_other_definitions(tmp_path: Path) -> None:
    pytest.importorskip("jedi")
    (tmp_path / "m.py").write_text(
        "class C:\n    @property\n    def x(self):\n        return 1\n\n"
        "    @x.setter\n    def x(self, v):\n        pass\n\n\nC().x = 2\nprint(C().x)\n",
        encoding="utf-8",
    )
    site = SymbolSite("m.py", 3, 8, "C.x", "method")
    cache = tmp_path / "jedi.json"
    kept = jedi_references(tmp_path, [site], cache=cache, progress=False)
    # the setter's decorator, the setter's own name, an assignment through it, a read
    assert kept == {site.key: _refs(("m.py", 6), ("m.py", 7), ("m.py", 11), ("m.py", 12))}
    dropped = jedi_references(
        tmp_path, [site], cache=cache, progress=False, other_definitions=False
    )
    assert dropped == {site.key: _refs(("m.py", 6), ("m.py", 12))}


def test_callers_of(repo: Path) -> None:
    assert callers_of(repo, _refs(("app.py", 12), ("lib.py", 17), ("lib.py", 17))) == {
        ("app.py", "run"),
        ("lib.py", "Greeter.greet"),
    }
    # a class's own lines (its base list), a method, the module (twice)
    refs = _refs(("app.py", 5), ("app.py", 7), ("main.py", 3), ("app.py", 1))
    assert callers_of(repo, refs) == {
        ("app.py", "Loud"),
        ("app.py", "Loud.shout"),
        ("main.py", MODULE_SCOPE),
        ("app.py", MODULE_SCOPE),
    }


def test_compare_hand_computed(repo: Path) -> None:
    truth = {
        "a": _refs(("lib.py", 17), ("app.py", 12)),  # callers Greeter.greet, run
        "b": [],
        "c": _refs(("main.py", 3)),
        "e": _refs(("app.py", 11)),  # run
    }
    predicted = {
        "a": _refs(("lib.py", 17), ("lib.py", 20)),  # Greeter.greet, Greeter.shout
        "b": [],
        # "c" missing: predicts nothing
        "e": _refs(("app.py", 12)),  # another line of run: the callers agree
        "only-predicted": _refs(("main.py", 3)),  # not in the truth: ignored
    }
    a = compare(truth, predicted, repo)
    assert a.symbols == 4 and a.missing == ("c",)

    lines = a.lines
    assert (lines.truth, lines.predicted, lines.tp, lines.fp, lines.fn) == (4, 3, 1, 2, 3)
    assert lines.precision == pytest.approx(1 / 3)
    assert lines.recall == pytest.approx(1 / 4)
    assert lines.f1 == pytest.approx(2 / 7)
    assert lines.macro_precision == pytest.approx((0.5 + 1 + 0) / 3)  # a, b, e
    assert lines.macro_recall == pytest.approx((0.5 + 1 + 0 + 0) / 4)  # a, b, c, e
    assert lines.macro_f1 == pytest.approx((0.5 + 1 + 0 + 0) / 4)
    assert (lines.exact, lines.both_empty) == (1, 1)

    callers = a.callers
    assert (callers.truth, callers.predicted, callers.tp) == (4, 3, 2)
    assert callers.precision == pytest.approx(2 / 3)
    assert callers.recall == pytest.approx(1 / 2)
    assert callers.f1 == pytest.approx(4 / 7)
    assert callers.macro_precision == pytest.approx((0.5 + 1 + 1) / 3)
    assert callers.macro_recall == pytest.approx((0.5 + 1 + 0 + 1) / 4)
    assert callers.macro_f1 == pytest.approx((0.5 + 1 + 0 + 1) / 4)
    assert (callers.exact, callers.both_empty) == (2, 1)

    both = Agreement.combine([a, a], ["x", "y"])
    assert both.symbols == 8 and both.missing == ("x/c", "y/c")
    assert both.lines.precision == pytest.approx(1 / 3)
    assert both.callers.as_dict()["tp"] == 4


def test_compare_all_empty_agrees(repo: Path) -> None:
    a = compare({"x": [], "y": []}, {"x": [], "y": []}, repo)
    for level in (a.lines, a.callers):
        assert (level.precision, level.recall, level.f1) == (1.0, 1.0, 1.0)
        assert (level.macro_precision, level.macro_recall, level.macro_f1) == (1.0, 1.0, 1.0)
        assert level.both_empty == level.exact == 2
    nothing = compare({"x": _refs(("main.py", 3))}, {"x": []}, repo)
    assert (nothing.lines.precision, nothing.lines.recall, nothing.lines.f1) == (0.0, 0.0, 0.0)


# ----------------------------------------------------------------------------- fake graph


@dataclass(frozen=True)
class FakeDef:
    id: int
    path: str
    symbol: str
    kind: str
    start_line: int
    end_line: int


@dataclass(frozen=True)
class FakeRef:
    path: str
    line: int
    kind: str
    caller: FakeDef | None
    confidence: float
    target_id: int


@dataclass
class FakeGraph:
    defs: list[FakeDef]
    refs: dict[int, list[FakeRef]]
    asked: list[float] = field(default_factory=list)

    def definition_at(self, path: str, line: int) -> FakeDef | None:
        inside = [d for d in self.defs if d.path == path and d.start_line <= line <= d.end_line]
        return max(inside, key=lambda d: d.start_line) if inside else None

    def references(self, definition_id: Any, *, min_confidence: float = 0.5) -> list[FakeRef]:
        self.asked.append(min_confidence)
        return [r for r in self.refs.get(definition_id, []) if r.confidence >= min_confidence]


@dataclass
class FakeIndex:
    g: FakeGraph

    def graph(self) -> FakeGraph:
        return self.g


def test_ragloom_references_through_the_graph_interface(repo: Path) -> None:
    module = FakeDef(0, "app.py", "app", "module", 1, 12)
    run = FakeDef(1, "app.py", "run", "function", 10, 12)
    loud = FakeDef(2, "app.py", "Loud", "class", 5, 7)
    greeter = FakeDef(3, "lib.py", "Greeter", "class", 11, 20)  # starts at a comment line
    greet = FakeDef(4, "lib.py", "Greeter.greet", "method", 16, 17)
    graph = FakeGraph(
        [module, run, loud, greeter, greet],
        {
            3: [
                FakeRef("app.py", 2, "import", module, 1.0, 3),
                FakeRef("app.py", 5, "inherit", loud, 0.9, 3),
                FakeRef("app.py", 11, "call", run, 0.8, 3),
                FakeRef("app.py", 11, "read", run, 0.8, 3),  # same line: one
                FakeRef("main.py", 3, "call", None, 0.3, 3),  # under min_confidence
            ],
            4: [FakeRef("app.py", 7, "call", loud, 0.6, 4)],
        },
    )
    unmatched: dict[str, str] = {}
    sites = [SITES[5], SITES[6], SITES[7], SITES[2], SITES[4]]
    got = ragloom_references(FakeIndex(graph), sites, 0.5, unmatched=unmatched)
    assert got == {
        "lib.py:12:6": _refs(("app.py", 5), ("app.py", 11)),
        "lib.py:16:8": _refs(("app.py", 7)),
        # Greeter.shout is not a definition of the graph: the innermost there is Greeter
        "lib.py:19:8": [],
        "app.py:10:4": [],  # run: no references
        "lib.py:8:4": [],  # no definition at all
    }
    assert [r.caller for r in got["lib.py:12:6"]] == ["Loud", "run"]
    assert unmatched == {"lib.py:19:8": "definition is 'Greeter'", "lib.py:8:4": "no definition"}
    assert set(graph.asked) == {0.5}

    # scored against jedi's answers for the same sites
    truth = {k: _refs(*JEDI[k]) for k in got}
    a = compare(truth, got, repo)
    assert (a.lines.tp, a.lines.truth, a.lines.predicted) == (3, 6, 3)
    assert a.lines.precision == 1.0 and a.lines.recall == pytest.approx(0.5)
