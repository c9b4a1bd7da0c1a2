"""Issue-text understanding (issue 21, part 3): detection, parsing, signals, and what the two
retrievers see of an issue; plus the bound on query processing of long questions.

The issues are synthetic (``tests/issue_texts.py``, about a fictional library).
"""

from __future__ import annotations

import timeit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragloom.retrieve.query import (
    MAX_PROCESSED_CHARS,
    IssueText,
    QueryConfig,
    bm25_terms,
    bm25_text,
    dense_text,
    issue_signals,
    looks_like_issue,
    parse_issue,
    process_query,
)
from ragloom.retrieve.query.issue import MAX_BM25_TERMS, MAX_SIGNALS_PER_KIND
from tests.fuzzing import fuzz_settings
from tests.issue_texts import (
    BUG_WITH_TRACEBACK,
    DOCTEST_ISSUE,
    FEATURE_REQUEST,
    PYTEST_FAILURE,
    QUOTED_REPLY,
    long_issue,
)

ISSUES = [BUG_WITH_TRACEBACK, PYTEST_FAILURE, DOCTEST_ISSUE, QUOTED_REPLY, FEATURE_REQUEST]

ORDINARY = [
    "how is the cache invalidated",
    "parse_header",
    "Fix crash when header is empty",
    "JSONDecoder.decode",
    "where are retries configured?",
    "how does `resolve_field` handle optional fields and where is the schema cached",
    "src/pondlib/core/schema.py",
    "parse header http",
    "Add support for custom serializers (#123)",
    "Fix crash when header is empty\n\nCloses #12",
    "Merge branch 'main' into feature/streams",
    "what does ValueError: invalid literal for int() with base 10 mean here",
    "create future base event loop",
    "Bump version to 0.9.1",
    "rust function that parses toml",
    "SchemaRegistry resolve_field KeyError",
    "Refactor: move the loader into pondlib/config/loader.py; also rename load_config",
    "why is merge_streams slow on windows? and where is normalize_clock defined",
    "x" * 150,
    "Update README.md",
    "   leading and trailing spaces   ",
    "def foo(): pass",
    "Traceback (most recent call last)",
    "1. first\n2. second",
]
"""Questions that are not issues: short questions, identifiers, commit subjects (one or two
lines) and code fragments."""


# -- detection ----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ISSUES)
def test_issues_are_recognised(text: str) -> None:
    assert looks_like_issue(text)


def test_long_issue_is_recognised() -> None:
    assert looks_like_issue(long_issue(25_000))


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_questions_are_not_issues(text: str) -> None:
    assert not looks_like_issue(text)


def test_long_single_line_prose_is_an_issue_only_with_sentences() -> None:
    prose = FEATURE_REQUEST.replace("\n", " ")
    assert len(prose) > 400 and looks_like_issue(prose)
    assert not looks_like_issue("parse header " * 40)  # long, but no sentence: keywords


def test_two_line_commit_messages_are_not_issues() -> None:
    for text in (
        "Fix crash when header is empty\nThe parser assumed at least one field.",
        "schema: resolve optional nested fields\n\nKeyError on `customer?` paths (#88)",
        "Speed up merge_streams\nUse a heap instead of sorting each batch.",
    ):
        assert not looks_like_issue(text), text


# -- parsing ------------------------------------------------------------------------------------


def test_parse_bug_with_traceback() -> None:
    issue = parse_issue(BUG_WITH_TRACEBACK)
    assert issue.title.startswith("`SchemaRegistry.resolve_field` raises KeyError")
    assert not issue.title.startswith("#")
    assert any("optional field inside a nested record" in p for p in issue.prose)
    assert not any("Describe the bug" in p or "Traceback" in p for p in issue.prose)
    assert len(issue.code_blocks) == 1 and "registry.resolve_field" in issue.code_blocks[0]
    (tb,) = issue.tracebacks
    assert [f.function for f in tb.frames] == ["<module>", "resolve_field", "_walk"]
    assert tb.frames[1].line == 214 and tb.frames[1].path.endswith("pondlib/core/schema.py")
    assert (tb.exception, tb.message) == ("KeyError", "'customer?'")
    assert "node = self._walk(path.parts)" in tb.source
    assert issue.quoted == ("None", "KeyError: 'customer?'")  # expected / actual output


def test_parse_pytest_failure() -> None:
    issue = parse_issue(PYTEST_FAILURE)
    assert issue.title == "Flaky failure in test_merge_streams on Windows"
    (tb,) = issue.tracebacks
    assert tb.exception == "AssertionError"
    assert ("tests/test_streams.py", 88) in [(f.path, f.line) for f in tb.frames]
    assert "test_merge_streams" in [f.function for f in tb.frames]
    assert any("merge_streams(left, right" in line for line in tb.source)
    assert any("normalize_clock" in p for p in issue.prose)


def test_parse_doctest_and_output() -> None:
    issue = parse_issue(DOCTEST_ISSUE)
    assert issue.title == "Window.rolling gives wrong mean for the first rows"
    assert any(
        block.startswith(">>> from pondlib.window import Window") for block in issue.code_blocks
    )
    assert issue.quoted == ("[1.0, 1.5, 2.5, 3.5]",)  # the block under "Expected output:"


def test_parse_quoted_reply() -> None:
    issue = parse_issue(QUOTED_REPLY)
    assert issue.quoted[0].startswith("I set POND_CACHE_DIR")
    assert issue.code_blocks == ('[cache]\ndir = "/var/tmp/pond"',)
    assert not any(p.startswith(">") for p in issue.prose)


def test_parse_heading_and_plain_text() -> None:
    issue = parse_issue("## Loader crash\n\nIt crashes.\n")
    assert issue.title == "Loader crash" and issue.prose == ("It crashes.",)
    assert parse_issue("") == IssueText(title="")
    assert parse_issue("```\ncode\n```").title == ""  # opens with a block: no title


def test_stdlib_and_chained_tracebacks() -> None:
    text = (
        "Loader fails on a missing file\n\n"
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.11/json/decoder.py", line 337, in decode\n'
        "    obj, end = self.raw_decode(s, idx=_w(s, 0).end())\n"
        "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n"
        '  File "src/pondlib/config/loader.py", line 42, in load_config\n'
        "    raise ConfigError(path) from exc\n"
        "pondlib.errors.ConfigError: settings.json\n"
    )
    issue = parse_issue(text)
    assert [tb.exception for tb in issue.tracebacks] == [
        "json.decoder.JSONDecodeError",
        "pondlib.errors.ConfigError",
    ]
    sig = issue_signals(issue)
    assert [s.value for s in sig.external_paths] == ["json/decoder.py"]
    assert sig.paths[0].value == "src/pondlib/config/loader.py"
    assert sig.functions[0].value == "load_config"
    assert {s.value for s in sig.exceptions} == {"ConfigError", "JSONDecodeError"}
    assert "pondlib.errors" in [s.value for s in sig.modules]


# -- signals ------------------------------------------------------------------------------------


def test_signals_of_bug_with_traceback() -> None:
    sig = issue_signals(parse_issue(BUG_WITH_TRACEBACK))
    # site-packages frames are reduced to the package-relative path; the innermost counts most
    assert sig.paths[0].value == "pondlib/core/schema.py"
    assert "pondlib/core/paths.py" in [s.value for s in sig.paths]
    assert not any("site-packages" in s.value for s in sig.paths)
    assert sig.symbols[0].value == "resolve_field"  # title, prose, code and traceback
    assert set(sig.symbols[0].parts) >= {"title", "prose", "code", "traceback"}
    assert {"SchemaRegistry", "SchemaRegistry.resolve_field", "_walk"} <= {
        s.value for s in sig.symbols
    }
    assert [s.value for s in sig.functions] == ["_walk", "resolve_field"]  # innermost first
    assert [s.value for s in sig.exceptions] == ["KeyError"]
    assert [s.value for s in sig.modules] == ["pondlib.core.schema"]
    names = {s.value for kind in (sig.symbols, sig.modules) for s in kind}
    assert not names & {"order.customer", "print", "registry", "None"}  # literals, builtins


def test_weights_follow_where_a_name_was_found() -> None:
    text = (
        "Title mentions nothing\n\n"
        "Plain prose names plain_prose_name, backticks name `ticked_name`.\n\n"
        "```python\ncode_block_name(1)\n```\n\n"
        "Traceback (most recent call last):\n"
        '  File "pkg/mod.py", line 3, in frame_name\n'
        "    x()\n"
        "ValueError: no\n"
    )
    sig = issue_signals(parse_issue(text))
    weights = {s.value: s.weight for s in (*sig.symbols, *sig.functions)}
    assert (
        weights["frame_name"]
        > weights["code_block_name"]
        > weights["ticked_name"]
        > weights["plain_prose_name"]
    )


def test_title_and_repetition_count_more() -> None:
    sig = issue_signals(parse_issue("Crash in load_config\n\nAlso see merge_streams.\n"))
    weights = {s.value: s.weight for s in sig.symbols}
    assert weights["load_config"] > weights["merge_streams"]
    once = issue_signals(parse_issue("Title\n\n```\nfoo_bar()\n```\n"))
    many = issue_signals(parse_issue("Title\n\n```\n" + "foo_bar()\n" * 50 + "```\n"))
    assert once.symbols == many.symbols  # repeated in one part: no more weight
    parts = issue_signals(parse_issue("Title\n\nSee foo_bar.\n\n```\nfoo_bar()\n```\n"))
    assert parts.symbols[0].weight > once.symbols[0].weight  # seen in two parts


def test_custom_exceptions_outrank_builtins() -> None:
    sig = issue_signals(parse_issue("Errors\n\nIt raises `KeyError` and `SchemaMismatchError`.\n"))
    assert [s.value for s in sig.exceptions] == ["SchemaMismatchError", "KeyError"]


def test_modules_and_imports() -> None:
    text = (
        "Import problem\n\n"
        "Importing pondlib.streams.merge fails since 0.9; upgrading from 0.8 to 0.9 broke it.\n\n"
        "```python\nimport pondlib.window\nfrom pondlib.core.schema import Record\n"
        "@pondlib.task\ndef helper_func():\n    return Record()\n```\n"
    )
    sig = issue_signals(parse_issue(text))
    modules = [s.value for s in sig.modules]
    assert {"pondlib.streams.merge", "pondlib.window", "pondlib.core.schema"} <= set(modules)
    assert "to" not in modules and "0" not in modules
    symbols = {s.value: s.weight for s in sig.symbols}
    assert "Record" in symbols and "task" in symbols
    assert symbols["helper_func"] < symbols["Record"]  # defined by the repro: counts half


def test_frames_pasted_without_their_header() -> None:
    # a Windows traceback cut to its last frame: the frame still names the file and function
    text = (
        "`IndexError: pop from empty list` for an empty tuple annotation\n\n"
        "Building the docs I get\n"
        "```bash\n"
        '  File "\\path\\to\\site-packages\\pondlib\\core\\unparse.py", line 112, in unparse\n'
        "    result.pop()\n"
        "IndexError: pop from empty list\n"
        "```\n"
    )
    issue = parse_issue(text)
    assert len(issue.tracebacks) == 1
    assert issue.tracebacks[0].exception == "IndexError"
    sig = issue_signals(issue)
    assert sig.paths[0].value == "pondlib/core/unparse.py"
    assert [s.value for s in sig.functions] == ["unparse"]


def test_dotted_module_function_in_prose() -> None:
    text = (
        "Mock file throws TypeError for generic classes\n\n"
        "A TypeError is thrown as `mock._make_subclass` concatenates a `str` to a `TypeVar`, "
        "and pondlib.streams.merge is fine.\n"
    )
    sig = issue_signals(parse_issue(text))
    modules = {s.value: s.weight for s in sig.modules}
    assert {"mock._make_subclass", "mock", "pondlib.streams.merge"} <= set(modules)
    assert modules["mock"] < modules["mock._make_subclass"]  # the reading as a module counts more
    assert "pondlib.streams" not in modules  # no underscore: a module path only
    assert "_make_subclass" in {s.value for s in sig.symbols}


def test_urls_are_not_paths_but_blob_urls_are() -> None:
    text = (
        "Link\n\nSee https://example.com/docs/pondlib/index.html and "
        "https://github.com/pond/pondlib/blob/main/src/pondlib/core/schema.py#L214 for details.\n"
    )
    sig = issue_signals(parse_issue(text))
    assert [s.value for s in sig.paths] == ["src/pondlib/core/schema.py"]
    assert not sig.modules


# -- what the retrievers see --------------------------------------------------------------------


def test_dense_text_leads_with_title_and_prose() -> None:
    issue = parse_issue(BUG_WITH_TRACEBACK)
    dense = dense_text(issue)
    assert dense.startswith(issue.title)
    assert "Traceback" not in dense and "File " not in dense
    assert "_walk" in dense  # a strong symbol from the traceback
    assert len(dense.split()) <= 256
    short = dense_text(issue, max_tokens=16)
    assert len(short.split()) <= 16 and short and dense.startswith(short.split()[0])


def test_bm25_terms_are_bounded_and_strongest_first() -> None:
    issue = parse_issue(BUG_WITH_TRACEBACK)
    terms = bm25_terms(issue)
    assert terms[0] == ("resolve_field", 1.0)
    weights = [w for _, w in terms]
    assert weights == sorted(weights, reverse=True)
    lowered = [t.lower() for t, _ in terms]
    assert len(lowered) == len(set(lowered))
    assert not {"the", "and", "when"} & set(lowered)
    assert "schema" in lowered  # the stem of a path
    assert bm25_text(issue).split()[:3] == [t for t, _ in terms[:3]]
    assert len(bm25_terms(issue, max_terms=5)) == 5


def test_long_issue_is_bounded() -> None:
    text = long_issue(25_000)
    assert len(text) == 25_000
    issue = parse_issue(text)
    sig = issue_signals(issue)
    assert len(bm25_terms(issue, signals=sig)) <= MAX_BM25_TERMS
    assert len(bm25_text(issue, signals=sig).split()) <= MAX_BM25_TERMS
    assert len(dense_text(issue, signals=sig).split()) <= 256
    assert "worker-3" not in bm25_text(issue, signals=sig)  # log noise: no prose words
    assert sig.symbols[0].value == "resolve_field"


def test_issue_processing_is_fast_and_about_linear() -> None:
    """Ratios, not absolute times: a 25 kB issue costs at most 12x a 2.5 kB one (10x the
    size; repeated lines are skipped), and the bound on process_query makes a 25 kB question
    cost at most 4x a 2 kB one (10x unbounded)."""

    def run(text: str) -> None:
        issue = parse_issue(text)
        sig = issue_signals(issue)
        dense_text(issue, signals=sig)
        bm25_text(issue, signals=sig)

    def best(fn: object, n: int = 15) -> float:
        return min(timeit.repeat(fn, number=1, repeat=n))  # type: ignore[arg-type]

    small = BUG_WITH_TRACEBACK + PYTEST_FAILURE
    big = long_issue(25_000)
    assert best(lambda: run(big)) < 12 * best(lambda: run(small))
    head = big[:MAX_PROCESSED_CHARS]
    assert best(lambda: process_query(big)) < 4 * best(lambda: process_query(head))


# -- process_query on long questions ------------------------------------------------------------


@pytest.mark.parametrize("query", [*ORDINARY, *ISSUES[2:]])
def test_ordinary_questions_are_processed_exactly_as_before(query: str) -> None:
    """Questions under the bound: byte-identical to processing without it."""
    assert len(" ".join(query.split())) <= MAX_PROCESSED_CHARS
    before = process_query(query, QueryConfig(max_processed_chars=None))
    assert repr(process_query(query)) == repr(before)


def test_long_question_processing_is_bounded() -> None:
    text = long_issue(25_000)
    plain = QueryConfig(issue_text=False)
    pq = process_query(text, plain)
    assert pq.steps[0] == "truncate"
    assert pq.dense_text == " ".join(text.split())  # the embedding model truncates itself
    unbounded = process_query(text, QueryConfig(max_processed_chars=None, issue_text=False))
    assert len(pq.terms) < len(unbounded.terms)
    # BM25 keeps the first terms only: they are the same
    assert pq.terms[:20] == unbounded.terms[:20]
    assert process_query(text, QueryConfig(max_processed_chars=50)).terms


def test_an_issue_is_read_by_its_parts() -> None:
    text = long_issue(25_000)
    pq = process_query(text)
    assert pq.steps[0] == "issue" and pq.issue is not None
    assert not pq.sub_queries  # no decomposition of an issue
    assert pq.dense_text == dense_text(pq.issue.text, signals=pq.issue.signals)
    assert 0 < len(pq.issue.terms) <= 400
    assert process_query(BUG_WITH_TRACEBACK, QueryConfig(issue_text=False)).issue is None
    assert process_query("how is the cache invalidated").issue is None


def test_max_processed_chars_is_validated() -> None:
    from ragloom.errors import ConfigError

    for bad in (0, -1, True, 2.5, "10"):
        with pytest.raises(ConfigError, match="max_processed_chars"):
            QueryConfig(max_processed_chars=bad)  # type: ignore[arg-type]


# -- properties ---------------------------------------------------------------------------------

TEXT = st.one_of(
    st.text(max_size=600),
    st.lists(
        st.sampled_from(
            [
                "```",
                "~~~python",
                "Traceback (most recent call last):",
                '  File "a/b.py", line 1, in f',
                '  File "<stdin>", line',
                "ValueError: x",
                "E   AssertionError",
                "x.py:1: in f",
                "____ test_x ____",
                ">>> f()",
                "> quoted",
                "    indented()",
                "## Expected behavior",
                "**Actual output:**",
                "<!-- comment",
                "-->",
                "- item",
                "plain prose with snake_case and CamelCase.",
                "`ticked.name()`",
                "https://github.com/o/r/blob/m/x.py",
                "",
            ]
        ),
        max_size=40,
    ).map("\n".join),
)


@fuzz_settings(60)
@given(TEXT)
def test_never_raises_and_is_bounded(text: str) -> None:
    looks_like_issue(text)
    issue = parse_issue(text)
    assert len(issue.title) <= 300
    sig = issue_signals(issue)
    for kind in (sig.paths, sig.external_paths, sig.modules, sig.symbols, sig.exceptions):
        assert len(kind) <= MAX_SIGNALS_PER_KIND
        assert all(s.weight > 0 for s in kind)
    assert len(bm25_terms(issue, signals=sig)) <= MAX_BM25_TERMS
    dense = dense_text(issue, max_tokens=32, signals=sig)
    assert len(dense.split()) <= 32
    # pure: the same input gives the same output
    assert parse_issue(text) == issue and issue_signals(issue) == sig


@fuzz_settings(60)
@given(st.text(alphabet=st.characters(blacklist_characters="\n\r"), max_size=199))
def test_single_short_lines_are_never_issues(text: str) -> None:
    assert not looks_like_issue(text)


@fuzz_settings(60)
@given(st.text(max_size=300))
def test_title_parsing_is_idempotent(text: str) -> None:
    title = parse_issue(text).title
    assert parse_issue(title).title == title.strip()
