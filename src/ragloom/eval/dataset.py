"""Evaluation datasets: JSON Lines of questions with their gold files and symbols.

One JSON object per line::

    {"id": "q1", "query": "decode a JSON document",
     "gold_files": ["json/decoder.py"], "gold_symbols": ["JSONDecoder.decode"]}

``id`` (string), ``query`` (non-empty string) and ``gold_files`` (non-empty list of
repo-relative paths) are required; ``gold_symbols`` (qualified names such as
``Class.method``) is optional. Unknown fields are ignored so datasets can carry notes. Blank
lines are skipped. A malformed line raises :class:`~ragloom.errors.InputError` naming the file
and the 1-based line number.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ragloom.errors import InputError

__all__ = ["EvalQuery", "dump_dataset", "load_dataset", "parse_dataset_line"]


@dataclass(frozen=True, slots=True)
class EvalQuery:
    """One evaluation question: the query text and what a good answer contains."""

    id: str
    query: str
    gold_files: tuple[str, ...]
    gold_symbols: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, object]:
        """The JSON Lines record of this query (``gold_symbols`` only when present)."""
        out: dict[str, object] = {
            "id": self.id,
            "query": self.query,
            "gold_files": list(self.gold_files),
        }
        if self.gold_symbols:
            out["gold_symbols"] = list(self.gold_symbols)
        return out


def _norm_path(p: str) -> str:
    """Gold paths compare with hit paths, which are POSIX and repo-relative."""
    p = p.replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    return p


def _str_list(obj: dict[str, object], key: str, *, required: bool) -> tuple[str, ...]:
    value = obj.get(key)
    if value is None:
        if required:
            raise ValueError(f"missing field {key!r}")
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"field {key!r} must be a list of non-empty strings")
    if required and not value:
        raise ValueError(f"field {key!r} must not be empty")
    return tuple(value)


def parse_dataset_line(line: str) -> EvalQuery:
    """Parse one JSON Lines record; raises ValueError with the reason when malformed."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    qid = obj.get("id")
    if isinstance(qid, int) and not isinstance(qid, bool):
        qid = str(qid)
    if not isinstance(qid, str) or not qid:
        raise ValueError("field 'id' must be a non-empty string")
    query = obj.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ValueError("field 'query' must be a non-empty string")
    gold_files = tuple(_norm_path(p) for p in _str_list(obj, "gold_files", required=True))
    gold_symbols = _str_list(obj, "gold_symbols", required=False)
    return EvalQuery(id=qid, query=query, gold_files=gold_files, gold_symbols=gold_symbols)


def load_dataset(path: str | os.PathLike[str]) -> list[EvalQuery]:
    """Read a JSON Lines dataset; duplicate ids and malformed lines raise InputError."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"dataset not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read dataset {p}: {exc}") from None
    queries: list[EvalQuery] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            q = parse_dataset_line(line)
        except ValueError as exc:
            raise InputError(f"{p}:{lineno}: {exc}") from None
        if q.id in seen:
            raise InputError(f"{p}:{lineno}: duplicate id {q.id!r} (first on line {seen[q.id]})")
        seen[q.id] = lineno
        queries.append(q)
    if not queries:
        raise InputError(f"dataset {p} has no queries")
    return queries


def dump_dataset(queries: Iterable[EvalQuery], path: str | os.PathLike[str]) -> int:
    """Write queries as JSON Lines (UTF-8, one object per line); returns the count."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with p.open("w", encoding="utf-8") as fh:
        for q in queries:
            fh.write(json.dumps(q.to_dict(), ensure_ascii=False) + "\n")
            n += 1
    return n
