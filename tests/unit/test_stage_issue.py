"""IssueStage: files and symbols an issue names rise; the priors read an issue's title."""

from __future__ import annotations

from typing import Any

from ragloom.retrieve.query import QueryConfig, process_query
from ragloom.retrieve.stages.base import ISSUE_WEIGHTS, IssueWeights, issue_reading
from ragloom.retrieve.stages.issue import IssueStage, module_paths, path_matches
from ragloom.retrieve.stages.priors import ROLE_PRIOR, PriorsStage
from tests.unit.stage_fixtures import row, state

ISSUE = """Reader.parse_header crashes on an empty header

When the header line is empty, parsing crashes:

```python
from acme.net import Reader
Reader().parse_header("")
```

Traceback (most recent call last):
  File "/home/me/repro.py", line 2, in <module>
    Reader().parse_header("")
  File "/usr/lib/python3/site-packages/acme/net/reader.py", line 40, in parse_header
    name, value = line.split(":", 1)
ValueError: not enough values to unpack (expected 2, got 1)

The tests in tests/test_reader.py do not cover it.
"""

ROWS = [
    row(1, "tests/test_reader.py", symbol="test_parse"),
    row(2, "acme/net/util.py", symbol="split_line"),
    row(3, "acme/net/reader.py", symbol="Reader.parse_header"),
    row(4, "acme/net/reader.py", symbol="Reader.close"),
    row(5, "docs/usage.md", symbol=""),
]


def _state(weights: IssueWeights | None = ISSUE_WEIGHTS, query: str = ISSUE) -> Any:
    pq = process_query(query)
    ranked = [(1, 0.15), (2, 0.14), (5, 0.13), (4, 0.1), (3, 0.05)]
    return state(ranked, ROWS, query=query, pq=pq, issue_weights=weights)


def test_paths_and_modules_match_on_folder_boundaries() -> None:
    assert path_matches("acme/net/reader.py", "/usr/lib/site-packages/acme/net/reader.py")
    assert path_matches("src/acme/net/reader.py", "acme/net/reader.py")
    assert not path_matches("acme/net/myreader.py", "reader.py")
    assert module_paths("acme.net") == ("acme/net.py", "acme/net/__init__.py")


def test_named_file_and_symbol_rise() -> None:
    st = _state()
    assert st.pq.issue is not None
    stage = IssueStage(IssueWeights(path=1.0, symbol=1.0))
    assert stage.applies(st)
    stage.apply(st)
    order = [r for r, _ in st.ranked]
    assert order[0] == 3  # the frame's file and the named method
    assert "issue" in st.notes[3]
    # only the best chunk of a named file gains the file bonus (the named method, once its
    # symbol bonus counts): rowid 4 of the same file gets none
    assert order.index(4) > order.index(3)
    assert st.notes.get(4, {}).get("issue") is None
    # a named test file rises less (the role prior: the title does not ask for tests)
    assert st.notes[1]["issue"] < st.notes[3]["issue"] * ROLE_PRIOR["test"] * 2


def test_nothing_for_a_plain_question_or_zero_weights() -> None:
    plain = _state(query="where is the header parsed")
    assert plain.pq.issue is None
    assert not IssueStage().applies(plain)
    st = _state()
    stage = IssueStage(IssueWeights(path=0.0, symbol=0.0))
    assert not stage.applies(st)


def test_priors_read_the_title_of_an_issue() -> None:
    # the body says "tests"; the title does not ask for tests, so they are demoted
    st = _state(IssueWeights(title_intent=True))
    assert issue_reading(st)[1].startswith("Reader.parse_header crashes")
    PriorsStage().apply(st)
    assert st.notes[1]["prior"] == ROLE_PRIOR["test"]
    # without the title reading, the whole text asks for tests: no demotion of rowid 1
    body = _state(IssueWeights(title_intent=False))
    PriorsStage().apply(body)
    assert "prior" not in body.notes.get(1, {})
    # +no-issue: the question is plain text
    off = state(
        [(1, 0.2)], ROWS, query=ISSUE, pq=process_query(ISSUE, QueryConfig(issue_text=False))
    )
    assert issue_reading(off) == (None, ISSUE)
