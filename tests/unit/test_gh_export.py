"""Checking a ``gh`` export field by field: a bad value is an InputError naming the element
and the field (a user trial found ``"updatedAt": "last tuesday"``, ``"number": "abc"``,
``"additions": "many"`` and a plain-string comment author each crashing ``ragloom index``
with exit 70, and ``"labels": "bug"`` stored as the labels b, u, g)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from ragloom.errors import InputError
from ragloom.sources.github import load_gh_export
from tests.sources_fixture import ISSUES_EXPORT, PRS_EXPORT


def _load(tmp_path: Path, data: Any, *, prs: bool = False) -> list[Any]:
    path = tmp_path / "export.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return load_gh_export(path, prs=prs)


def test_a_gh_export_loads_as_before(tmp_path: Path) -> None:
    issues = _load(tmp_path, ISSUES_EXPORT)
    assert [r.number for r in issues] == [12, 15]
    assert issues[0].labels == ["bug"] and issues[0].comments[0][0] == "bob"
    (pr,) = _load(tmp_path, PRS_EXPORT, prs=True)
    assert pr.files and pr.is_pr


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("updatedAt", "last tuesday", "updatedAt 'last tuesday' is not an ISO 8601 time"),
        ("createdAt", "2024-02-30T00:00:00Z", "is not an ISO 8601 time"),
        ("number", "abc", "number 'abc' is not a positive integer"),
        ("number", 9.7, "number 9.7 is not a positive integer"),
        ("number", -3, "is not a positive integer"),
        ("number", True, "is not a positive integer"),
        ("labels", "bug", "labels 'bug' is not a list"),
        ("labels", [7], "is not a name or"),
        ("title", {"x": 1}, "title {'x': 1} is not a string"),
        ("author", 5, "is not an author"),
        ("comments", [{"author": {"login": 3}}], "login 3 is not a string"),
        ("comments", ["hi"], "a comment 'hi' is not an object"),
    ],
)
def test_a_bad_value_names_its_element_and_field(
    tmp_path: Path, field: str, value: Any, says: str
) -> None:
    data = copy.deepcopy(ISSUES_EXPORT)
    data[1][field] = value
    with pytest.raises(InputError, match="element 1 ") as err:
        _load(tmp_path, data)
    assert says in str(err.value)


def test_bad_files_and_repeated_numbers(tmp_path: Path) -> None:
    data = copy.deepcopy(PRS_EXPORT)
    data[0]["files"] = [{"path": "a.py", "additions": "many"}]
    with pytest.raises(InputError, match="additions 'many' is not an integer of 0 or more"):
        _load(tmp_path, data, prs=True)
    twice = copy.deepcopy(ISSUES_EXPORT)
    twice[1]["number"] = twice[0]["number"]
    with pytest.raises(InputError, match="number 12 appears more than once"):
        _load(tmp_path, twice)


def test_lenient_where_gh_would_be_unambiguous(tmp_path: Path) -> None:
    data = copy.deepcopy(ISSUES_EXPORT)
    data[0]["author"] = "alice"  # a plain name is the login
    data[0]["comments"][0]["author"] = "bob"
    data[1]["labels"] = ["docs"]
    data[1]["updatedAt"] = None  # falls back to createdAt
    first, second = _load(tmp_path, data)
    assert first.author == "alice" and first.comments[0][0] == "bob"
    assert second.labels == ["docs"] and second.updated == second.created
