"""BM25 over code-aware tokens, backed by tantivy.

Why tantivy (figures in docs/index-choices.md, measured on this machine): on 100k real code
chunks it built in 1.5 s, answered in 0.45 ms p50, opened in 1 ms and supports add/delete
without a rebuild; bm25s was 13x slower per query and cannot delete.

Documents are pre-tokenised by :func:`ragloom.index.tokenize.code_tokens` and fed to tantivy's
whitespace tokenizer, so documents and queries go through exactly the same tokenisation.
Scoring is tantivy's BM25 (k1=1.2, b=0.75). Each document carries the chunk ``rowid`` as a
fast field; the set of rowids the engine holds is kept beside it (``rowids.npy``) so the index
can be brought in line with the store by a set difference after any crash. ``state.json`` records
the engine commit (tantivy's ``opstamp``) the sidecar describes: when a crash fell between the
two, :meth:`TantivyBm25.held_rowids` reads the set from the engine itself.

Readers open their own searcher (a snapshot of the last commit) and :meth:`TantivyBm25.reload` it
when the index generation changes; the engine may hold rows of a generation not yet published or
no longer published, which readers filter out (docs/consistency.md).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Final, Protocol

import numpy as np

from ragloom.errors import DbError
from ragloom.index.atomic import atomic_save_npy, atomic_write_json, load_npy
from ragloom.index.tokenize import BM25_FIELDS, TOKENIZER_VERSION, code_tokens

__all__ = [
    "FIELDS",
    "FIELD_BOOSTS",
    "FIELD_SEP",
    "Bm25Backend",
    "TantivyBm25",
    "bm25_document",
    "bm25_source_document",
    "tokenise_document",
]

log = logging.getLogger("ragloom.index")

_WRITER_HEAP_BYTES = 64_000_000
"""tantivy writer heap: enough for ~100k chunks per commit without flushing many segments."""
_MAX_QUERY_TERMS = 64
"""Queries are capped to this many distinct terms: long pasted text should not stall search."""


FIELDS: Final = ("body", "path", "symbol", "signature", "doc")
"""Text fields of a document, in the order :data:`FIELD_SEP` joins them. ``body`` is the whole
chunk (symbol, path and text: the single-field document of ``code-v1``); the others repeat a
part of it so that a match there counts extra, each with its own BM25 length normalisation."""
FIELD_SEP: Final = "\x1f"
"""Joins the fields of one document string (ASCII unit separator: never inside a token)."""
FIELD_BOOSTS: dict[str, float] = {
    "body": 1.0,
    "path": 0.5,
    "symbol": 0.25,
    "signature": 0.5,
    "doc": 1.0,
}
"""Per-field multipliers of a query term's BM25 score (summed over fields); a field at 0 is not
queried. Chosen by coordinate ascent on the git-history evaluation's tune split (700 questions,
sparse strategy, file MRR@10; docs/index-choices.md "Field-aware BM25"): body only 0.500;
+symbol 0.25 0.508; +path 0.5 0.515; +signature 0.5 0.520; +doc 1.0 0.562 (doc 0.5: 0.552,
2.0: 0.545; symbol 0.5: 0.559; path 1.0: 0.562; signature 1.0: 0.554); a second pass moved
nothing."""

_MAX_SIGNATURE_LINES = 4
"""A declaration whose parentheses are still open continues on the next lines, up to this."""
_HASH_COMMENT = frozenset({".py", ".pyi", ".rb", ".sh", ".bash", ".yaml", ".yml", ".toml", ".r"})
_SLASH_COMMENT = frozenset(
    {
        ".go", ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts", ".rs", ".java",
        ".c", ".h", ".cc", ".cpp", ".hpp", ".cs", ".kt", ".swift", ".scala", ".php", ".dart",
    }
)  # fmt: skip
_CODE = _HASH_COMMENT | _SLASH_COMMENT
_PY_DOC = re.compile(r'"""(.*?)"""|\'\'\'(.*?)\'\'\'|#([^\n]*)', re.DOTALL)
_SLASH_DOC = re.compile(r"/\*(.*?)\*/|//([^\n]*)", re.DOTALL)
_HASH_DOC = re.compile(r"#([^\n]*)")
_NOT_DECLARATION = ("#", "//", "/*", "*", "@", '"""', "'''", "<!--", "--")


def _signature(text: str, suffix: str) -> str:
    """The declaration line(s) of a chunk of code: the first line that is not blank, a comment
    or a decorator (plus continuation lines while its parentheses are open); empty for prose
    and data files."""
    if suffix not in _CODE:
        return ""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith(_NOT_DECLARATION):
            continue
        out = [stripped]
        depth = stripped.count("(") - stripped.count(")")
        j = i + 1
        while depth > 0 and j < len(lines) and len(out) < _MAX_SIGNATURE_LINES:
            out.append(lines[j].strip())
            depth += lines[j].count("(") - lines[j].count(")")
            j += 1
        return " ".join(out)
    return ""


def _doc_text(text: str, suffix: str) -> str:
    """Docstrings and comments of a chunk, by regex on the file's suffix (empty for prose and
    data files, whose body is all text anyway)."""
    if suffix in (".py", ".pyi"):
        pattern = _PY_DOC
    elif suffix in _SLASH_COMMENT:
        pattern = _SLASH_DOC
    elif suffix in _HASH_COMMENT:
        pattern = _HASH_DOC
    else:
        return ""
    return "\n".join(g for m in pattern.finditer(text) for g in m.groups() if g)


def bm25_source_document(text: str, symbol: str, path: str) -> str:
    """The untokenised document of one chunk: ``"<symbol> <path>\\n<text>"`` for the body, then
    (with :data:`~ragloom.index.tokenize.BM25_FIELDS`) the path, symbol, signature and doc
    fields, joined by :data:`FIELD_SEP`. :func:`tokenise_document` makes it the indexed form."""
    body = f"{symbol} {path}\n{text}"
    if not BM25_FIELDS:
        return body
    if FIELD_SEP in body:  # cannot shift the fields
        text, symbol, path = (t.replace(FIELD_SEP, " ") for t in (text, symbol, path))
        body = f"{symbol} {path}\n{text}"
    suffix = PurePosixPath(path).suffix.lower()
    return FIELD_SEP.join(
        (
            body,
            path,
            symbol,
            _signature(text, suffix),
            _doc_text(text, suffix),
        )
    )


def tokenise_document(source: str) -> str:
    """Code tokens of each field of a document (fields stay apart, tokens space-separated)."""
    return FIELD_SEP.join(" ".join(code_tokens(part)) for part in source.split(FIELD_SEP))


def bm25_document(text: str, symbol: str, path: str) -> str:
    """The token string indexed for one chunk (fields joined by :data:`FIELD_SEP`)."""
    return tokenise_document(bm25_source_document(text, symbol, path))


class Bm25Backend(Protocol):
    """What the index needs from a BM25 engine."""

    def search(
        self, query: str | Sequence[tuple[str, float]], k: int
    ) -> list[tuple[int, float]]: ...

    def doc_count(self) -> int: ...


_COPY_PREFIX = "ragloom-ro-bm25-"
"""Name of a read-only engine's private copy: ``<prefix><pid>-<random>`` in the temporary
folder (:meth:`TantivyBm25._readable_copy`)."""


def _remove_orphan_copies() -> None:
    """Remove the read-only engine copies of processes that no longer run (a ``kill -9``
    leaves its copies behind: no exit handler runs)."""
    for path in Path(tempfile.gettempdir()).glob(f"{_COPY_PREFIX}*-*"):
        pid = path.name[len(_COPY_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:  # alive, under another user
            continue


class TantivyBm25:
    """A persistent tantivy index in ``directory`` plus its rowid sidecar."""

    def __init__(
        self, directory: Path, *, create: bool = False, fields: Sequence[str] | None = None
    ) -> None:
        """``fields``: the text fields of its documents (default :data:`FIELDS`, or the body
        alone without :data:`~ragloom.index.tokenize.BM25_FIELDS`); an index of whole files
        (:mod:`ragloom.index.file_bm25`) has the body alone."""
        import tantivy

        self.directory = directory
        self._tantivy = tantivy
        sb = tantivy.SchemaBuilder()
        sb.add_integer_field("rowid", stored=False, indexed=True, fast=True)
        if fields is not None:
            unknown = [f for f in fields if f not in FIELDS]
            if not fields or unknown:
                raise ValueError(f"fields must be a non-empty subset of {FIELDS}, got {fields}")
            self._fields: tuple[str, ...] = tuple(fields)
        else:
            self._fields = FIELDS if BM25_FIELDS else FIELDS[:1]
        for name in self._fields:
            sb.add_text_field(name, stored=False, tokenizer_name="whitespace", index_option="freq")
        self._schema = sb.build()
        engine_dir = directory / "engine"
        try:
            if create:
                engine_dir.mkdir(parents=True, exist_ok=True)
            elif not engine_dir.is_dir():
                raise DbError(f"bm25 index missing at {engine_dir}")
            if not os.access(engine_dir, os.W_OK):
                engine_dir = self._readable_copy(engine_dir)
            self._index = tantivy.Index(self._schema, path=str(engine_dir))
        except ValueError as exc:
            raise DbError(f"cannot open bm25 index at {engine_dir}: {exc}") from exc
        rowids = load_npy(directory / "rowids.npy")
        self._rowids: np.ndarray = rowids if rowids is not None else np.zeros(0, dtype=np.int64)

    def _readable_copy(self, engine_dir: Path) -> Path:
        """A private copy of a read-only engine folder (a read-only mount: a CI cache, a
        container image, an NFS export). tantivy takes a lock file beside its segments even to
        read, which such a folder refuses; nothing can change the folder, so the copy stays
        exact. It is removed with this object or at exit (15 MB and about 20 ms at 56k chunks,
        docs/index-choices.md "Disk, damage and read-only folders"); the copies of a process
        that was killed are removed by the next one that makes a copy."""
        _remove_orphan_copies()
        copy = Path(tempfile.mkdtemp(prefix=f"{_COPY_PREFIX}{os.getpid()}-")) / "engine"
        try:
            # the files' bytes only: copytree keeps a folder's mode, and a folder made read-only
            # by its permissions (not a mount) gave a read-only copy: tantivy's lock failed
            # again, and the copy could not be removed
            shutil.copytree(engine_dir, copy, copy_function=shutil.copyfile)
            for folder, _dirs, _files in os.walk(copy):
                os.chmod(folder, 0o700)
        except OSError as exc:
            shutil.rmtree(copy.parent, ignore_errors=True)
            raise DbError(f"cannot read the read-only bm25 index at {engine_dir}: {exc}") from exc
        weakref.finalize(self, shutil.rmtree, copy.parent, True)
        log.info("bm25 folder %s is read-only: read from a copy in %s", engine_dir, copy)
        return copy

    @classmethod
    def reset(cls, directory: Path, fields: Sequence[str] | None = None) -> TantivyBm25:
        """Delete whatever is in ``directory`` and start an empty index."""
        if directory.exists():
            shutil.rmtree(directory)
        return cls(directory, create=True, fields=fields)

    # -- reading ------------------------------------------------------------------------
    def rowids(self) -> np.ndarray:
        """The rowids the sidecar lists (see :meth:`held_rowids` for the verified set)."""
        return self._rowids

    def held_rowids(self) -> np.ndarray:
        """The rowids the engine holds: the sidecar when it describes the engine's last commit,
        else (a crash between the commit and the sidecar write) read from the engine (70 ms
        at 100k documents)."""
        try:
            state = json.loads((self.directory / "state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            state = {}
        recorded = state.get("opstamp") if isinstance(state, dict) else None
        if recorded is not None and recorded == self._engine_opstamp():
            return self._rowids
        legacy = recorded is None and isinstance(state, dict) and "doc_count" in state
        if legacy and state["doc_count"] == len(self._rowids) == self.doc_count():
            # a sidecar written before opstamps were recorded: trusted when the counts agree
            return self._rowids
        self._rowids = self._engine_rowids()
        return self._rowids

    def _engine_opstamp(self) -> int | None:
        try:
            meta = json.loads((self.directory / "engine" / "meta.json").read_text())
            return int(meta["opstamp"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _engine_rowids(self) -> np.ndarray:
        self._index.reload()
        searcher = self._index.searcher()
        n = int(searcher.num_docs)
        if not n:
            return np.zeros(0, dtype=np.int64)
        result = searcher.search(self._tantivy.Query.all_query(), n)
        values = searcher.fast_field_values("rowid", [addr for _, addr in result.hits])
        return np.unique(np.array([int(v or 0) for v in values], dtype=np.int64))

    def doc_count(self) -> int:
        self._index.reload()
        return int(self._index.searcher().num_docs)

    def search(self, query: str | Sequence[tuple[str, float]], k: int) -> list[tuple[int, float]]:
        """Top ``k`` (rowid, score); a query that tokenises to nothing has no hits.

        ``query`` is text, or weighted terms ``[(term, weight), ...]``: each term is tokenised
        like documents and each token's BM25 contribution is multiplied by its weight (the
        highest weight when tokens repeat), so expansion terms can count less than the words
        the user typed.
        """
        if k <= 0:
            return []
        clauses = self._term_clauses(query)
        if not clauses:
            return []
        tv = self._tantivy
        query_obj = clauses[0][1] if len(clauses) == 1 else tv.Query.boolean_query(clauses)
        return self._top(query_obj, k)

    def scores_of(
        self, query: str | Sequence[tuple[str, float]], rowids: Sequence[int]
    ) -> dict[int, float]:
        """The BM25 score of ``query`` for each of ``rowids`` the engine holds (0.0 for those it
        holds that match no term; rowids it does not hold are left out): one search, the
        rowids a filter that adds nothing to the scores."""
        wanted = list(dict.fromkeys(int(r) for r in rowids))
        if not wanted:
            return {}
        tv = self._tantivy
        only = tv.Query.const_score_query(
            tv.Query.term_set_query(self._schema, "rowid", wanted), 0.0
        )
        query_obj = tv.Query.boolean_query([(tv.Occur.Must, only), *self._term_clauses(query)])
        return dict(self._top(query_obj, len(wanted)))

    def _term_clauses(self, query: str | Sequence[tuple[str, float]]) -> list[tuple[Any, Any]]:
        """One ``Should`` clause per query token and field (the field's boost times the
        token's weight; see :meth:`search`)."""
        weights: dict[str, float] = {}
        if isinstance(query, str):  # one text: its first distinct tokens, read as far as needed
            weights = dict.fromkeys(_leading_tokens(query, _MAX_QUERY_TERMS), 1.0)
        for text, weight in () if isinstance(query, str) else query:
            if weight <= 0:
                continue
            for tok in code_tokens(text):
                if tok not in weights and len(weights) >= _MAX_QUERY_TERMS:
                    continue
                weights[tok] = max(weight, weights.get(tok, 0.0))
        tv = self._tantivy
        boosts = [(f, b) for f, b in FIELD_BOOSTS.items() if b > 0 and f in self._fields] or [
            ("body", 1.0)
        ]
        clauses = []
        for tok, weight in weights.items():
            for field, boost in boosts:
                q = tv.Query.term_query(self._schema, field, tok)
                if weight * boost != 1.0:
                    q = tv.Query.boost_query(q, weight * boost)
                clauses.append((tv.Occur.Should, q))
        return clauses

    def _top(self, query_obj: Any, k: int) -> list[tuple[int, float]]:
        searcher = self._index.searcher()
        result = searcher.search(query_obj, k)
        if not result.hits:
            return []
        addrs = [addr for _, addr in result.hits]
        rowids = searcher.fast_field_values("rowid", addrs)
        return [(int(r or 0), float(s)) for (s, _), r in zip(result.hits, rowids, strict=True)]

    def reload(self) -> None:
        self._index.reload()

    # -- writing ------------------------------------------------------------------------
    def apply(
        self,
        add: Iterable[tuple[int, str]],
        remove: Sequence[int],
        *,
        progress: object = None,
    ) -> int:
        """Add (rowid, token string) documents and delete rowids, then commit.

        A token string holds the fields of :data:`FIELDS` joined by :data:`FIELD_SEP`
        (:func:`bm25_document`); one without separators is the body alone.

        Idempotent: unless the engine is empty, every add first deletes its rowid, whatever the
        sidecar says, so replaying after a crash between the engine's commit and the sidecar
        write (the sidecar then lists the old set) cannot duplicate documents.

        A commit killed after tantivy wrote a file named by the commit's opstamp (a segment's
        ``<segment>.<opstamp>.del``) but before ``meta.json`` leaves that file behind, and the
        replay, doing the same operations, reaches the same opstamp: tantivy then refuses to
        create the file (``FileAlreadyExists``). So the files no committed segment uses are
        removed before anything is written. A failure of the engine is a :class:`DbError`.
        """
        tv = self._tantivy
        self._index.reload()
        engine_empty = int(self._index.searcher().num_docs) == 0
        have = self.held_rowids()
        removed: list[int] = []
        added: list[int] = []
        try:
            writer = self._index.writer(heap_size=_WRITER_HEAP_BYTES, num_threads=1)
            writer.garbage_collect_files()  # what a killed commit left (see above)
            for rowid in remove:
                writer.delete_documents_by_term("rowid", int(rowid))
                removed.append(int(rowid))
            n = 0
            for rowid, body in add:
                if not engine_empty:
                    writer.delete_documents_by_term("rowid", int(rowid))
                doc = tv.Document()
                doc.add_integer("rowid", int(rowid))
                # a document without separators (a caller's own text) is all body
                for name, part in zip(self._fields, body.split(FIELD_SEP), strict=False):
                    if part:
                        doc.add_text(name, part)
                writer.add_document(doc)
                added.append(int(rowid))
                n += 1
            opstamp = writer.commit()
            writer.wait_merging_threads()
        except ValueError as exc:  # tantivy's errors
            raise DbError(f"cannot write bm25 index at {self.directory}: {exc}") from exc
        self._index.reload()
        # numpy, not a Python set of every rowid: ~3 ms instead of ~25 ms at 100k documents
        self._rowids = _updated_ids(have, removed, added)
        atomic_save_npy(self.directory / "rowids.npy", self._rowids)
        atomic_write_json(
            self.directory / "state.json",
            {
                "tokenizer_version": TOKENIZER_VERSION,
                "doc_count": len(self._rowids),
                "opstamp": int(opstamp),
            },
        )
        return n


_WINDOW = 2048
"""Characters of a long text tokenised at a time by :func:`_leading_tokens`."""
_SPACE = re.compile(r"\s")


def _leading_tokens(text: str, limit: int) -> list[str]:
    """The first ``limit`` distinct :func:`~ragloom.index.tokenize.code_tokens` of ``text``, in
    order. A long text (a pasted issue with its tracebacks) is tokenised a window at a time,
    each cut at a whitespace character (no token spans one), and no further than needed: the
    same tokens as tokenising it whole, in a fraction of the time (0.8 ms for 6,000
    characters)."""
    out: dict[str, None] = {}
    start = 0
    while start < len(text) and len(out) < limit:
        cut = _SPACE.search(text, start + _WINDOW) if len(text) - start > _WINDOW else None
        end = cut.start() if cut is not None else len(text)
        for tok in code_tokens(text[start:end]):
            if tok not in out:
                out[tok] = None
                if len(out) >= limit:
                    break
        start = end
    return list(out)


def _updated_ids(have: np.ndarray, removed: Sequence[int], added: Sequence[int]) -> np.ndarray:
    """``have`` less ``removed`` plus ``added``, sorted and unique."""
    ids = np.asarray(have, dtype=np.int64)
    if len(removed):
        ids = ids[~np.isin(ids, np.asarray(removed, dtype=np.int64))]
    if len(added):
        return np.union1d(ids, np.asarray(added, dtype=np.int64))
    return np.unique(ids)
