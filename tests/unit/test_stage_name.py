"""NameStage: a question that is one symbol name puts that name's definitions first after the
learned stage (docs/ranking.md, "A question that is one name")."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ragloom.retrieve.config import Sparse
from ragloom.retrieve.query import ProcessedQuery
from ragloom.retrieve.query.entities import Entity
from ragloom.retrieve.query.lexer import lex
from ragloom.retrieve.stages.name import MAX_DEFINITIONS, NameStage, bare_name
from ragloom.retrieve.stages.pipeline import build_stages, parse_search_spec
from tests.unit.stage_fixtures import row, state

ROWS = [
    row(1, "src/cli.ts", cid="a", symbol="run"),
    row(2, "src/util.ts", cid="b", symbol="helpers"),
    row(3, "bench/args.ts", cid="c", symbol="parseArgsOrExit"),
    row(4, "tests/x.test.ts", cid="d", symbol="Suite.parseArgsOrExit"),
]


def _state(query: str, ids: tuple[str, ...], value: str | None = None):  # type: ignore[no-untyped-def]
    ent = Entity("symbol", value or query.strip("`?() "), 1.0, ids)
    pq = ProcessedQuery(query, query, query, entities=(ent,))
    return state([(1, 0.9), (2, 0.8), (3, 0.3), (4, 0.2)], ROWS, query=query, pq=pq)


def test_the_definitions_of_a_bare_name_come_first_in_their_order() -> None:
    st_ = _state("parseArgsOrExit", ("c", "d"))
    stage = NameStage()
    assert stage.applies(st_)
    stage.apply(st_)
    assert [r for r, _ in st_.ranked] == [3, 4, 1, 2]
    scores = [s for _, s in st_.ranked]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] > scores[1] > scores[2]  # no tie: assembly breaks ties by path
    assert st_.notes[3]["name"] is True and st_.notes[4]["name"] is True


def test_documentation_sections_are_not_definitions() -> None:
    """Markdown headings that end in the name (cobra's "... Your cobra.Command") are not
    definitions: they do not count toward the limit, and are not put first."""
    rows = [*ROWS] + [
        row(10 + i, f"site/page{i}.md", cid=f"s{i}", symbol="Guide.parseArgsOrExit", kind="section")
        for i in range(MAX_DEFINITIONS + 2)
    ]
    ent = Entity("symbol", "parseArgsOrExit", 1.0, ("c", *(f"s{i}" for i in range(5))))
    pq = ProcessedQuery("parseArgsOrExit", "parseArgsOrExit", "parseArgsOrExit", entities=(ent,))
    ranked = [(1, 0.9), (10, 0.85), (2, 0.8), (3, 0.3)]
    st_ = state(ranked, rows, query="parseArgsOrExit", pq=pq)
    NameStage().apply(st_)
    assert [r for r, _ in st_.ranked] == [3, 1, 10, 2]


def test_a_sentence_an_ambiguous_name_or_another_strategy_changes_nothing() -> None:
    sentence = _state("where is parseArgsOrExit", ("c",), value="parseArgsOrExit")
    assert not NameStage().applies(sentence)
    many = _state("run", tuple("abcd"[: MAX_DEFINITIONS + 1]))
    before = list(many.ranked)
    NameStage().apply(many)
    assert many.ranked == before
    other = _state("helpers", ("b",), value="other")  # the entity is another name
    NameStage().apply(other)
    assert [r for r, _ in other.ranked] == [1, 2, 3, 4]
    sparse = _state("parseArgsOrExit", ("c",))
    sparse.strategy = Sparse()
    assert not NameStage().applies(sparse)


def test_bare_names() -> None:
    for q, want in [
        ("parseArgsOrExit", "parseArgsOrExit"),
        ("  `JSONDecoder.decode` ", "JSONDecoder.decode"),
        ("decode()", "decode"),
        ("$ZodISOTime?", "$ZodISOTime"),
        ("where is decode", None),
        ("decode json", None),
        ("$5", None),
        ("расчёт_налога", "расчёт_налога"),
        ("", None),
    ]:
        assert bare_name(q) == want, q


@given(
    st.from_regex(
        r"\$*[A-Za-z_][A-Za-z0-9_$]{0,12}(\.[A-Za-z_][A-Za-z0-9_]{0,8}){0,2}", fullmatch=True
    )
)
def test_a_bare_name_is_one_word_of_the_lexer(name: str) -> None:
    """The stage and the entity lexer read the same identifier (an entity's value is a word)."""
    assert bare_name(name) == name
    assert [w.text for w in lex(name)] == [name]


def test_the_stage_runs_after_the_learned_stage_only() -> None:
    def names(spec: str) -> list[str]:
        s = parse_search_spec(spec)
        return [stage.name for stage in build_stages(s, s.strategy)]

    hybrid = names("hybrid")
    assert hybrid.index("name") == hybrid.index("learned") + 1
    for spec in ("hybrid+handset", "hybrid+no-name", "sparse", "dense", "hybrid+seed"):
        assert "name" not in names(spec), spec
