"""Query processing: expansion, entities, exact-match boost, decomposition, language."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragloom.errors import ConfigError
from ragloom.retrieve.query import (
    CODE_SYNONYMS,
    ENTITY_CONFIDENCE,
    EXACT_MATCH_BONUS,
    EXACT_MATCH_MIN_CONFIDENCE,
    MAX_JOINED_PHRASES,
    Entity,
    InMemorySymbolTable,
    QueryConfig,
    SymbolTable,
    decompose_query,
    detect_language,
    exact_match_boost,
    expand_query,
    extract_entities,
    identifier_candidates,
    process_query,
)

ROWS = [
    ("JSONDecoder", "Lib/json/decoder.py", "c-decoder"),
    ("JSONDecoder.decode", "Lib/json/decoder.py", "c-decode"),
    ("parse_header", "Lib/email/feedparser.py", "c-parse-header"),
    ("py_scanstring", "Lib/json/decoder.py", "c-scan"),
    ("load_config", "src/app/settings.ts", "c-config"),
] + [("__init__", f"pkg/m{i}.py", f"c-init-{i}") for i in range(6)]


@pytest.fixture
def table() -> InMemorySymbolTable:
    return InMemorySymbolTable(ROWS)


# ---------------------------------------------------------------------------------------------
# symbol table
# ---------------------------------------------------------------------------------------------


def test_in_memory_symbol_table(table: InMemorySymbolTable) -> None:
    assert isinstance(table, SymbolTable)
    assert table.lookup("JSONDecoder.decode") == ["c-decode"]
    assert table.lookup("decode") == ["c-decode"]  # last dotted component
    assert table.lookup("JSONDecoder") == ["c-decoder"]
    assert table.lookup("jsondecoder") == []  # identifiers are case-sensitive
    assert table.lookup("nope") == []
    assert table.has_path("Lib/json/decoder.py")
    assert table.has_path("json/decoder.py")
    assert table.has_path("./decoder.py")
    assert not table.has_path("coder.py")  # suffixes are /-aligned
    assert not table.has_path("xml/decoder.py")


# ---------------------------------------------------------------------------------------------
# expansion
# ---------------------------------------------------------------------------------------------


def test_identifier_candidates_join_adjacent_words() -> None:
    assert identifier_candidates("parse header") == ["parse_header", "parseHeader", "ParseHeader"]
    assert identifier_candidates("fetch user name") == [
        "fetch_user",
        "fetchUser",
        "FetchUser",
        "user_name",
        "userName",
        "UserName",
        "fetch_user_name",
        "fetchUserName",
        "FetchUserName",
    ]
    # filler words and punctuation break runs; code-shaped words are not re-joined
    assert identifier_candidates("parse the header") == []
    assert identifier_candidates("parse, header") == []
    assert identifier_candidates("parse_header value") == []
    long = " ".join(f"word{c}" for c in "abcdefghijklmnop").replace("word", "w")
    assert len(identifier_candidates(long)) == 3 * MAX_JOINED_PHRASES


def test_expansion_splits_identifiers() -> None:
    terms, _, _ = expand_query("where is parseHTTPHeader used", synonyms=False)
    assert terms[0] == "parseHTTPHeader"
    assert {"parse", "http", "header"} <= set(terms)
    terms, _, _ = expand_query("json.decoder.JSONDecoder and raw_value", synonyms=False)
    assert {"json.decoder.JSONDecoder", "json", "decoder", "raw_value", "raw", "value"} <= set(
        terms
    )
    assert "and" not in terms  # filler


def test_synonyms() -> None:
    assert set(CODE_SYNONYMS["remove"]) >= {"delete", "del"}
    assert "remove" in CODE_SYNONYMS["delete"]  # symmetric
    assert {"constructor", "__init__"} <= set(CODE_SYNONYMS["init"])
    assert {"error", "exception"} <= set(CODE_SYNONYMS["err"])
    assert {"settings", "options"} <= set(CODE_SYNONYMS["config"])
    assert {"arguments", "params"} <= set(CODE_SYNONYMS["args"])
    terms, _, added = expand_query("removeItem error")
    assert {"delete", "exception", "err"} <= set(added)
    assert set(added) <= set(terms)
    _, _, none = expand_query("removeItem error", synonyms=False)
    assert none == []


def test_terms_unique_and_originals_first() -> None:
    terms, cands, _ = expand_query("parse header parse header")
    assert len({t.lower() for t in terms}) == len(terms)
    assert terms[:2] == ["parse", "header"]
    assert "parse_header" in terms and "parseHeader" in terms
    assert "ParseHeader" in cands and "ParseHeader" not in terms  # same as parseHeader for BM25


# ---------------------------------------------------------------------------------------------
# entities
# ---------------------------------------------------------------------------------------------


def test_paths_without_table() -> None:
    ents = extract_entities("compare json/decoder.py with src/x.ts and setup.cfg")
    got = {(e.kind, e.value): e.confidence for e in ents}
    assert got[("file", "json/decoder.py")] == ENTITY_CONFIDENCE["path_shaped"]
    assert got[("file", "src/x.ts")] == ENTITY_CONFIDENCE["path_shaped"]
    assert got[("file", "setup.cfg")] == ENTITY_CONFIDENCE["path_weak"]
    assert all(e.kind == "file" for e in ents)  # no symbols without a table
    assert extract_entities("JSONDecoder.decode is slow") == []


def test_paths_and_symbols_with_table(table: InMemorySymbolTable) -> None:
    q = "how does JSONDecoder.decode in json/decoder.py call `py_scanstring`? also parse header"
    ents = {(e.kind, e.value): e for e in extract_entities(q, table)}
    assert ents[("file", "json/decoder.py")].confidence == 1.0
    assert ents[("symbol", "JSONDecoder.decode")].confidence == 1.0
    assert ents[("symbol", "JSONDecoder.decode")].ids == ("c-decode",)
    assert ents[("symbol", "py_scanstring")].confidence == 1.0
    assert ents[("symbol", "parse_header")].confidence == ENTITY_CONFIDENCE["symbol_joined"]
    missing = extract_entities("see xml/decoder.py", table)
    assert missing == [Entity("file", "xml/decoder.py", ENTITY_CONFIDENCE["path_unknown"])]


def test_symbol_confidence_heuristic(table: InMemorySymbolTable) -> None:
    ents = {e.value: e for e in extract_entities("decode the payload", table)}
    assert ents["decode"].confidence == ENTITY_CONFIDENCE["symbol_word"]  # plain English word
    ents = {e.value: e for e in extract_entities("who calls __init__", table)}
    assert ents["__init__"].confidence == ENTITY_CONFIDENCE["symbol_typed"] / 2  # ambiguous
    assert len(ents["__init__"].ids) == 6
    ranked = extract_entities("decode JSONDecoder", table)
    assert [e.value for e in ranked] == ["JSONDecoder", "decode"]  # most confident first


# ---------------------------------------------------------------------------------------------
# exact-match boost
# ---------------------------------------------------------------------------------------------

HITS = [("h1", 0.9), ("h2", 0.7), ("h3", 0.5), ("h4", 0.3)]
PATHS = {"h1": "a/b.py", "h2": "Lib/json/decoder.py", "h3": "c.py", "h4": "Lib/json/decoder.py"}
SYMS = {"h1": "foo", "h2": "JSONDecoder", "h3": "JSONDecoder.decode", "h4": "scan"}


def test_exact_boost_symbol_to_top() -> None:
    ent = Entity("symbol", "decode", 1.0)
    out = exact_match_boost(HITS, [ent], id_paths=PATHS, id_symbols=SYMS)
    assert out[0] == ("h3", 0.9 + EXACT_MATCH_BONUS * 1.0)
    assert out[1:] == [("h1", 0.9), ("h2", 0.7), ("h4", 0.3)]
    by_id = exact_match_boost(HITS, [Entity("symbol", "zzz", 0.8, ("h4",))])
    assert by_id[0] == ("h4", 0.9 + 0.8)


def test_exact_boost_file_and_ordering() -> None:
    ents = [Entity("file", "json/decoder.py", 0.8), Entity("symbol", "scan", 1.0)]
    out = exact_match_boost(HITS, ents, id_paths=PATHS, id_symbols=SYMS)
    # h4 matches both (best confidence 1.0); h2 only the file (0.8)
    assert [uid for uid, _ in out] == ["h4", "h2", "h1", "h3"]
    assert [s for _, s in out] == pytest.approx([1.9, 1.7, 0.9, 0.5])


def test_exact_boost_switches() -> None:
    weak = [Entity("symbol", "scan", 0.45)]
    assert exact_match_boost(HITS, weak, id_symbols=SYMS) == HITS
    off = QueryConfig(exact_boost=False)
    assert exact_match_boost(HITS, [Entity("symbol", "scan", 1.0)], off, id_symbols=SYMS) == HITS
    assert exact_match_boost([], [Entity("symbol", "scan", 1.0)]) == []
    low = QueryConfig(exact_min_confidence=0.4)
    assert exact_match_boost(HITS, weak, low, id_symbols=SYMS)[0][0] == "h4"


@given(
    st.lists(st.floats(0.0, 10.0), max_size=12).map(
        lambda xs: [(f"h{i}", s) for i, s in enumerate(sorted(xs, reverse=True))]
    ),
    st.lists(st.tuples(st.integers(0, 11), st.floats(0.0, 1.0)), max_size=4),
)
def test_exact_boost_properties(
    hits: list[tuple[str, float]], named: list[tuple[int, float]]
) -> None:
    ents = [Entity("symbol", f"sym{i}", conf) for i, conf in named]
    syms = {uid: f"sym{i}" for i, (uid, _) in enumerate(hits)}
    out = exact_match_boost(hits, ents, id_symbols=syms)
    assert sorted(uid for uid, _ in out) == sorted(uid for uid, _ in hits)  # nothing added/lost
    scores = [s for _, s in out]
    assert scores == sorted(scores, reverse=True)  # still sorted
    boosted = {f"h{i}" for i, conf in named if conf >= EXACT_MATCH_MIN_CONFIDENCE and i < len(hits)}
    assert {uid for uid, _ in out[: len(boosted)]} == boosted


# ---------------------------------------------------------------------------------------------
# decomposition
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "parts"),
    [
        (
            "how is the header parsed and where is the config stored?",
            ["how is the header parsed", "where is the config stored"],
        ),
        ("json decoding; logging setup", ["json decoding", "logging setup"]),
        ("token refresh and also rate limiting", ["token refresh", "rate limiting"]),
        (
            "What parses headers? Where are cookies stored?",
            ["What parses headers", "Where are cookies stored"],
        ),
        ("retry logic as well as the backoff policy", ["retry logic", "the backoff policy"]),
        ("how is X parsed and where is Y stored", ["how is X parsed", "where is Y stored"]),
    ],
)
def test_decompose_splits(query: str, parts: list[str]) -> None:
    assert decompose_query(query) == parts


@pytest.mark.parametrize(
    "query",
    [
        "parse and serialize json",
        "how does the parser handle errors?",
        "read and write config files",
        "how is X parsed and how",
        "",
    ],
)
def test_decompose_leaves_single_questions(query: str) -> None:
    assert decompose_query(query) == []


# ---------------------------------------------------------------------------------------------
# language detection
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "lang"),
    [
        ("how are errors propagated in rust", "rust"),
        ("the python function that parses dates", "python"),
        ("what does the .ts file export", "typescript"),
        ("which .rs files define traits", "rust"),
        ("c++ class for the allocator", "cpp"),
        ("retry loop written in go", "go"),
        ("go to the definition", None),
        ("port this python function to rust", None),
        ("parse header", None),
        ("javascript module loader", "javascript"),
    ],
)
def test_detect_language(query: str, lang: str | None) -> None:
    assert detect_language(query)[0] == lang


def test_detect_language_spans() -> None:
    lang, spans = detect_language("errors in rust")
    assert lang == "rust" and spans == [(10, 14)]


# ---------------------------------------------------------------------------------------------
# process_query
# ---------------------------------------------------------------------------------------------


def test_process_query_all_steps(table: InMemorySymbolTable) -> None:
    pq = process_query(
        "  how is the   header parsed in python and where is load_config stored? ", symbols=table
    )
    assert pq.dense_text == "how is the header parsed in python and where is load_config stored?"
    assert pq.steps == (
        "detect_language",
        "extract_entities",
        "expand_identifiers",
        "synonyms",
        "decompose",
    )
    assert pq.language == "python"
    assert "python" not in pq.terms  # the language mention filters, it is not a term
    assert {"header", "parsed", "load_config", "load", "config", "settings"} <= set(pq.terms)
    assert pq.sparse_text == " ".join(pq.terms)
    assert [s.dense_text for s in pq.sub_queries] == [
        "how is the header parsed in python",
        "where is load_config stored",
    ]
    assert all(s.sub_queries == () and "decompose" not in s.steps for s in pq.sub_queries)
    assert ("symbol", "load_config") in {(e.kind, e.value) for e in pq.entities}


def test_process_query_steps_off(table: InMemorySymbolTable) -> None:
    off = QueryConfig(
        expand_identifiers=False,
        synonyms=False,
        extract_entities=False,
        exact_boost=False,
        decompose=False,
        detect_language=False,
    )
    pq = process_query("where is parseHeader in rust; delete items", off, table)
    assert pq.steps == ()
    assert pq.terms == ("parseHeader", "rust", "delete", "items")
    assert pq.entities == () and pq.language is None and pq.sub_queries == ()
    assert pq.exact_boost is False


def test_process_query_language_from_path(table: InMemorySymbolTable) -> None:
    pq = process_query("what does json/decoder.py import", symbols=table)
    assert pq.language == "python"
    assert pq.entities[0] == Entity("file", "json/decoder.py", 1.0)


def test_process_query_empty_and_filler_only() -> None:
    assert process_query("   ").is_empty
    assert process_query("").steps == ()
    pq = process_query("how is it")
    assert pq.terms == ("how", "is", "it")  # nothing else to search for
    # filler kept once each, first spelling wins (found by hypothesis: "I:I")
    assert process_query("I:I").terms == ("I",)
    assert process_query("it IT is It").terms == ("it", "is")


def test_query_config_validation() -> None:
    with pytest.raises(ConfigError):
        QueryConfig(exact_min_confidence=1.5)
    with pytest.raises(ConfigError):
        QueryConfig(decompose="yes")  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        QueryConfig().synonyms = False  # type: ignore[misc]


@given(st.text(max_size=120))
def test_process_query_total_and_deterministic(text: str) -> None:
    table = InMemorySymbolTable(ROWS)
    pq = process_query(text, symbols=table)
    assert pq == process_query(text, symbols=table)
    assert pq.dense_text == " ".join(text.split())
    assert len({t.lower() for t in pq.terms}) == len(pq.terms)
    for e in pq.entities:
        assert 0.0 <= e.confidence <= 1.0
    for sub in pq.sub_queries:
        assert sub.dense_text and sub.dense_text in pq.dense_text
