"""References in one parsed file: calls, reads, imports, inheritance and type uses.

The raw material of the code graph (:mod:`ragloom.graph`): what each file *mentions*, by name,
with where. Resolving a name to the definition it means happens later, over the whole index
(a file alone cannot know which module ``from .util import send`` names).

CONTRACT (kept stable; the graph and the store depend on it):

- :func:`extract_refs` takes a language name (as :func:`ragloom.ingest.languages.detect_language`
  gives it: ``python``, ``javascript``, ``typescript``, ``tsx``, ``go``, ``rust``, ``java``, and
  best effort for the other code languages), the tree-sitter root node of the file and its
  bytes; it returns the references in source order. It never raises: a grammar surprise gives
  the references found so far (or none).
- A definition's own name is not a reference (``def send`` does not reference ``send``), nor
  are parameter names, keyword-argument names or the names an import binds; the import itself is
  one ``import`` record.

What each language gives (one reference per occurrence, nothing deduplicated):

- Everywhere: a read of every name used as a value, the root of ``a.b.c`` included (``a``, then
  ``b`` qualified ``a``), except ``self`` (Python) / ``Self`` (Rust), which only qualify;
  assignment targets (``x = ...``, ``x += ...``, ``obj.attr = ...``, at any depth) and loop,
  ``with`` and ``except`` targets are not references.
- python: calls (a name followed by ``(``; a decorator ``@foo``), imports (relative ones keep
  their dots: ``from ..a import b`` is module ``..a``), base classes (not ``metaclass=``), and
  annotations as ``type`` (string annotations give nothing; ``t.List`` is one type ``List``
  qualified ``t``).
- javascript / typescript / tsx: calls and ``new``, JSX elements as calls, ES imports and
  re-exports, ``const x = require('m')`` (and its destructured form), ``extends`` /
  ``implements`` as inherit, TypeScript types.
- go: calls, imports (``import . "x"`` is ``*``, the package name an alias), embedded struct
  fields and interfaces as inherit, declared types.
- rust: calls (not macros; names inside a macro's arguments are reads), ``use`` trees and
  ``extern crate``, ``impl Trait for T`` and supertraits as inherit, types. Names inside an
  attribute's arguments (``#[derive(Debug)]``, ``#[cfg(feature = "x")]``) are no reference.
- java: method calls and ``new``, imports (``static`` too), ``extends`` / ``implements``,
  types and annotations as ``type``.
- c, cpp, ruby, bash (best effort): calls, reads, ``#include`` / ``require`` / ``source`` as
  imports, C++ base classes and Ruby superclasses; C/C++ types.
"""

from __future__ import annotations

import dataclasses
import logging
import operator
import re
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import accumulate, chain, repeat
from typing import Any, Final, Literal

from tree_sitter import Query, QueryCursor

__all__ = ["REF_KINDS", "Ref", "RefKind", "extract_refs"]

log = logging.getLogger(__name__)

RefKind = Literal["call", "read", "import", "inherit", "type", "bind"]
REF_KINDS: tuple[RefKind, ...] = ("call", "read", "import", "inherit", "type", "bind")
"""``bind`` records come from :mod:`ragloom.ingest.binds` (what type a name holds), not from
:func:`extract_refs`."""


@dataclass(frozen=True, slots=True)
class Ref:
    """One mention of a name in a file.

    - ``call``: the name is called (``send(x)``, ``self.send(x)``, ``pkg.Send(x)``,
      ``new Foo()``, ``Foo::new()``, ``foo!()`` excluded: macros are not definitions here).
    - ``read``: the name is used as a value without being called (``callback=send``,
      ``x = obj.attr``).
    - ``inherit``: a base class, an implemented interface or trait (``class A(B)``,
      ``implements I``, ``impl Trait for T`` gives ``Trait``, Go embedded struct fields).
    - ``type``: a type annotation or declared type (``x: Foo``, ``List<Foo>``, ``fn f(a: Foo)``).
    - ``import``: an import statement; ``module`` and ``alias`` say what it binds.
    """

    name: str
    """The referenced identifier, its last component only (``send`` for ``a.b.send()``).
    For an ``import``: the imported member (``x`` in ``from m import x``), ``""`` for a whole
    module (``import a.b``), ``"*"`` for a wildcard, ``"default"`` for a JavaScript default."""
    kind: RefKind
    line: int
    """1-based line of the name token."""
    byte: int
    """Start byte of the name token in the file (0-based)."""
    qualifier: str | None = None
    """The text before the name, whitespace removed: ``self`` in ``self.send()``, ``a.b`` in
    ``a.b.send()``, ``pkg`` in ``pkg.Send()``, ``Foo`` in ``Foo::new()``; None for a bare name.
    A qualifier that is itself a call or an index is written as it reads (``get_x()``)."""
    module: str | None = None
    """For ``import``: the module as written (``os.path``, ``.util``, ``..pkg.mod``, ``./util``,
    ``github.com/x/y``, ``crate::a::b``, ``java.util``)."""
    alias: str | None = None
    """For ``import``: the local name bound when it differs from the default one (``np`` in
    ``import numpy as np``, ``y`` in ``from m import x as y``, the namespace of
    ``import * as ns``, the explicit Go package name)."""


def extract_refs(language: str, root: Any, data: bytes) -> list[Ref]:
    """The references of one file, in source order (see the module's contract)."""
    found = _Found()
    try:
        spec = _spec(language)
        if spec is not None and root is not None and data:
            _collect(spec, QueryCursor(spec.query).captures(root), data, found)
    except Exception:  # a grammar surprise: keep what was found
        log.debug("extract_refs(%s) stopped early", language, exc_info=True)
    try:
        return found.refs(data)
    except Exception:  # pragma: no cover - plain lists of ints and strings; for the contract
        log.debug("extract_refs(%s) failed", language, exc_info=True)
        return []


# ---------------------------------------------------------------------------------------------
# implementation
#
# One compiled tree-sitter query per language finds every candidate node in one pass in C; a
# Python TreeCursor walk pays about as much just to move (~130 ns a node) before it looks at
# anything. Patterns are kept few and cheap: a ``supertype/node`` pattern such as
# ``(primary_expression/identifier)`` picks the names in value positions with no pattern per
# parent context (53 such patterns measured 2.5 times slower than the whole query is now), and
# a Python call is a read followed by ``(`` rather than a ``(call ...)`` pattern. The captures
# are read in one tight loop per capture class into plain lists of ints and strings (no tuple
# per reference for the garbage collector to walk); the Ref objects are then made column by
# column. Nothing recurses: deeply nested files are safe.

_Row = tuple[int, str, RefKind, str | None, str | None, str | None]
"""(byte, name, kind, qualifier, module, alias): an import before its line is known."""

_ImportFn = Callable[[Any, bytes, list[_Row]], None]

_WS: Final = b" \t\r\n\f\v\\"
"""Deleted from qualifiers and modules (a backslash is a line continuation)."""

_START: Final = operator.attrgetter("start_byte")
_END: Final = operator.attrgetter("end_byte")


def _text(data: bytes, node: Any) -> str:
    """``node``'s text with whitespace removed."""
    return data[node.start_byte : node.end_byte].translate(None, _WS).decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class _Lang:
    """What one language needs beyond its query."""

    query: str
    seps: bytes
    """The last byte of every separator between a qualifier and the name after it."""
    strip: bytes = b""
    """Bytes of a two-byte separator before its last one (``::``, ``->``, ``?.``, ``&.``), to
    strip from the end of a qualifier."""
    stop: frozenset[bytes] = frozenset({b""})
    """Tokens never reported as names (``self``, ``Self``; they stay in qualifiers), and
    ``b""``: the zero-width nodes error recovery inserts."""
    imports: _ImportFn | None = None
    paren_calls: bool = False
    """A read followed by ``(`` is a call (Python, where nothing else puts a name before a
    parenthesis): cheaper than a ``call`` pattern, which costs a pass over every call node."""


@dataclass(frozen=True, slots=True)
class _Spec:
    """One language's compiled query, with its :class:`_Lang`."""

    query: Query
    lang: _Lang


# Capture names of the queries. A bare capture (``call``, ``read``, ...) is the name token
# itself. A ``.q`` capture is a qualified node whose last identifier is the name (``a.b.c``,
# ``a::b``, ``p->f``: name ``c``, qualifier ``a.b``). A ``.n`` capture is a name token whose
# qualifier is its parent's text up to the separator in front of it (Java ``obj.m()``, Ruby
# ``obj.m``). ``x`` marks name tokens or qualified nodes that are no reference (definitions,
# parameters, keyword-argument names, assignment targets) where the patterns alone would catch
# them. ``tctx`` marks Python annotations: reads inside are type uses. ``import`` nodes go to
# the language's import reader, and nothing else inside them is a reference.
#
# Candidates are told apart by the end byte of their name token, which a qualified node shares
# with its last identifier: ``x`` beats everything, then the first class of _ORDER that captured
# the token wins, so a callee is not also a read, and ``a.b`` is one qualified read rather than
# that plus a bare read of ``b``.
_ORDER: Final[tuple[tuple[str, RefKind], ...]] = (
    ("call.q", "call"),
    ("call.n", "call"),
    ("call", "call"),
    ("inherit.q", "inherit"),
    ("inherit", "inherit"),
    ("type.q", "type"),
    ("type", "type"),
    ("read.q", "read"),
    ("read.n", "read"),
    ("read", "read"),
)


class _Found:
    """The references found so far, column by column (plain lists of ints and strings, no
    tuple per reference for the garbage collector to walk), and the spans that change them."""

    __slots__ = ("byte", "imports", "kind", "name", "qual", "skip", "types")

    def __init__(self) -> None:
        self.byte: list[int] = []
        self.name: list[str] = []
        self.kind: list[RefKind] = []
        self.qual: list[str | None] = []
        self.types: list[tuple[int, int]] = []
        """Spans of Python annotations: a read inside is a type use."""
        self.skip: list[tuple[int, int]] = []
        """Spans of import statements: nothing inside is a reference but the imports."""
        self.imports: list[_Row] = []

    def add(self, byte: list[int], name: list[str], kind: RefKind, qual: list[str | None]) -> None:
        n = len(byte)
        if not n == len(name) == len(qual):  # pragma: no cover - a bug, not an input
            raise ValueError("columns differ in length")
        self.byte += byte
        self.name += name
        self.kind += repeat(kind, n)
        self.qual += qual

    def refs(self, data: bytes) -> list[Ref]:
        """The :class:`Ref` objects, in source order, with their line numbers."""
        n = len(self.byte)
        new = object.__new__
        if _SETTERS is None:  # pragma: no cover - only if Ref's fields change
            out = list(map(Ref, self.name, self.kind, repeat(0), self.byte, self.qual))
        else:
            out = list(map(new, repeat(Ref, n)))
            columns: tuple[Iterable[Any], ...] = (
                self.name,
                self.kind,
                (),  # the line: set once the references are in order
                self.byte,
                self.qual,
                repeat(None),
                repeat(None),
            )
            for setter, column in zip(_SETTERS, columns, strict=True):
                deque(map(setter, out, column), 0)
        out.sort(key=_REF_BYTE)
        for start, end in self.types:
            _as_types(out, start, end, data)
        for start, end in self.skip:
            del out[bisect_left(out, start, key=_REF_BYTE) : bisect_left(out, end, key=_REF_BYTE)]
        for row in sorted(self.imports, key=_BYTE):
            if not 0 <= row[0] < len(data):  # pragma: no cover - a reader's slip, not a ref
                continue
            at = bisect_right(out, row[0], key=_REF_BYTE)
            out.insert(at, Ref(row[1], row[2], 0, row[0], row[3], row[4], row[5]))
        if not out:
            return out
        starts: list[int] = list(map(_REF_BYTE, out))
        newlines = map(data.count, repeat(b"\n"), chain((0,), starts), starts)
        lines = accumulate(newlines, initial=1)
        next(lines)
        deque(map(_SET_LINE, out, lines), 0)
        return out


def _setters() -> tuple[Callable[[Ref, Any], None], ...] | None:
    """The slot setters of Ref's fields. Filling the slots directly makes a Ref in about half
    the time of the frozen dataclass's ``__init__`` (which goes through ``object.__setattr__``
    field by field), for every reference of every file. The line is set last, once the
    references are in order; a Ref never leaves this module half made."""
    names = tuple(f.name for f in dataclasses.fields(Ref))
    if names != ("name", "kind", "line", "byte", "qualifier", "module", "alias"):
        return None  # pragma: no cover
    return tuple(Ref.__dict__[n].__set__ for n in names)


_SETTERS: Final = _setters()
_REF_BYTE: Final = operator.attrgetter("byte")
_BYTE: Final = operator.itemgetter(0)


def _set_line(ref: Ref, line: int) -> None:  # pragma: no cover - only if Ref's fields change
    object.__setattr__(ref, "line", line)


def _set_kind(ref: Ref, kind: RefKind) -> None:  # pragma: no cover - only if Ref's fields change
    object.__setattr__(ref, "kind", kind)


_SET_LINE: Final = _SETTERS[2] if _SETTERS is not None else _set_line
_SET_KIND: Final = _SETTERS[1] if _SETTERS is not None else _set_kind


def _collect(spec: _Spec, caps: dict[str, list[Any]], data: bytes, found: _Found) -> None:
    get = caps.get
    taken = set(map(_END, get("x", ())))
    seen = taken.add
    lang = spec.lang
    stop = lang.stop
    seps = lang.seps
    padded = data + b"\0"  # padded[e]: the byte after a token, also at the end of the file
    for cap, kind in _ORDER:
        nodes = get(cap)
        if not nodes:
            continue
        # Two outputs: ``kind``, and ``call`` for a read followed by ``(`` where the language
        # says that makes a call (spec.paren_calls). Each: name bytes, names, qualifier bytes.
        out: tuple[list[int], list[bytes], list[bytes]] = ([], [], [])
        calls: tuple[list[int], list[bytes], list[bytes]] = ([], [], [])
        add_nb, add_tok, add_qb = out[0].append, out[1].append, out[2].append
        call_nb, call_tok, call_qb = calls[0].append, calls[1].append, calls[2].append
        paren = lang.paren_calls and kind == "read"
        mode = cap[-1]
        if mode == "q":
            rfind = data.rfind
            sep = seps[:1]
            more = [seps[i : i + 1] for i in range(1, len(seps))]
            for node in nodes:
                e = node.end_byte
                if e in taken:
                    continue
                seen(e)
                s = node.start_byte
                k = rfind(sep, s, e)
                for other in more:
                    k = max(k, rfind(other, s, e))
                if k < s:  # no separator (error recovery): the whole node is the name
                    k = s - 1
                tok = data[k + 1 : e].lstrip()
                if tok in stop:
                    continue
                if paren:
                    c = padded[e]
                    if c == 40 or ((c == 32 or c == 9) and _called(padded, e)):
                        call_nb(e - len(tok))
                        call_tok(tok)
                        call_qb(data[s:k])
                        continue
                add_nb(e - len(tok))
                add_tok(tok)
                add_qb(data[s:k])
        else:
            for node in nodes:
                e = node.end_byte
                if e in taken:
                    continue
                seen(e)
                s = node.start_byte
                tok = data[s:e]
                if tok in stop:
                    continue
                if paren:
                    c = padded[e]
                    if c == 40 or ((c == 32 or c == 9) and _called(padded, e)):
                        call_nb(s)
                        call_tok(tok)
                        continue
                add_nb(s)
                add_tok(tok)
        outputs: tuple[tuple[tuple[list[int], list[bytes], list[bytes]], RefKind], ...] = (
            (out, kind),
            (calls, "call"),
        )
        for (nbs, toks, qbs), as_kind in outputs:
            if mode == "q" and _odd_names(toks):
                _trim_names(nbs, toks, qbs, stop)
            if not nbs:
                continue
            quals: list[str | None]
            if mode == "q":
                quals = _qualifiers(qbs, lang.strip)
            elif mode == "n":
                node_at = dict(zip(map(_START, nodes), nodes, strict=True))
                quals = [_left_qualifier(data, node_at[b], seps, lang.strip) for b in nbs]
            else:
                quals = [None] * len(nbs)
            found.add(nbs, _decode(toks), as_kind, quals)
    types = get("tctx")
    if types:
        found.types = _spans(types)
    imports = get("import")
    if imports:
        found.skip = _spans(imports)
        if lang.imports is not None:
            for node in imports:
                try:
                    lang.imports(node, data, found.imports)
                except Exception:  # one odd import statement; the others still count
                    log.debug("import at byte %d not read", node.start_byte, exc_info=True)


_NAME_BYTES: Final = bytes(
    sorted(
        {
            *range(0x80, 0x100),
            *b"_$#?!0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
        }
    )
)
"""Bytes a name may hold: identifier characters of every grammar here, UTF-8 included."""

_NAME_TAIL: Final = re.compile(rb"[\w$#?!\x80-\xff]*\Z")


def _odd_names(toks: list[bytes]) -> bool:
    """Whether any name holds a byte no name may (one pass in C over all of them): error
    recovery can make a qualified node of ``a.<garbage> name``."""
    return bool(b"".join(toks).translate(None, _NAME_BYTES))


def _trim_names(
    nbs: list[int], toks: list[bytes], qbs: list[bytes], stop: frozenset[bytes]
) -> None:
    """Cut each name to its trailing identifier characters; drop those left with none."""
    keep = []
    for nb, tok, qb in zip(nbs, toks, qbs, strict=True):
        m = _NAME_TAIL.search(tok)
        name = m.group() if m is not None else b""
        if name not in stop:
            keep.append((nb + len(tok) - len(name), name, qb))
    nbs[:] = [k[0] for k in keep]
    toks[:] = [k[1] for k in keep]
    qbs[:] = [k[2] for k in keep]


def _called(padded: bytes, e: int) -> bool:
    """Whether the token ending at ``e`` is followed by ``(`` (spaces or tabs between)."""
    c = padded[e]
    while c == 32 or c == 9:
        e += 1
        c = padded[e]
    return c == 40


def _qualifiers(qbs: list[bytes], strip: bytes) -> list[str | None]:
    """Qualifier texts: whitespace removed, a two-byte separator's head stripped."""
    if _has_ws(qbs):
        qbs = [q.translate(None, _WS) for q in qbs]
    if strip:
        qbs = [q.rstrip(strip) for q in qbs]
    quals: list[str | None] = list(_decode(qbs))
    if "" in quals:
        quals = [q or None for q in quals]
    return quals


def _decode(toks: list[bytes]) -> list[str]:
    try:
        return list(map(bytes.decode, toks))
    except UnicodeDecodeError:
        return [t.decode("utf-8", "replace") for t in toks]


def _has_ws(chunks: list[bytes]) -> bool:
    """Whether any of ``chunks`` holds whitespace (two passes in C over all of them)."""
    joined = b"".join(chunks)
    return len(joined.translate(None, _WS)) != len(joined)


def _left_qualifier(data: bytes, node: Any, seps: bytes, strip: bytes) -> str | None:
    """The qualifier of a name token: its parent's text before the separator in front of it."""
    parent = node.parent
    if parent is None:
        return None
    s = parent.start_byte
    k = node.start_byte - 1
    while k > s and data[k] in _WS:
        k -= 1
    if k <= s or data[k] not in seps:
        return None
    q = data[s:k].translate(None, _WS).rstrip(strip)
    return q.decode("utf-8", "replace") or None


def _spans(nodes: list[Any]) -> list[tuple[int, int]]:
    """The byte spans of ``nodes``, sorted, nested and overlapping ones merged."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(zip(map(_START, nodes), map(_END, nodes), strict=True)):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def _as_types(refs: list[Ref], start: int, end: int, data: bytes) -> None:
    """Inside a Python annotation a read is a type use, and the module part of ``t.List`` (a
    bare name followed by ``.``) is no reference of its own."""
    i = bisect_left(refs, start, key=_REF_BYTE)
    j = bisect_left(refs, end, key=_REF_BYTE)
    kept: list[Ref] = []
    for ref in refs[i:j]:
        if ref.kind == "read":
            if ref.qualifier is None:
                after = ref.byte + len(ref.name.encode())
                if data[after : after + 1] == b".":
                    continue
            _SET_KIND(ref, "type")
        kept.append(ref)
    refs[i:j] = kept


# ---------------------------------------------------------------------------------------------
# import readers (few nodes per file: plain node navigation)


def _unquote(data: bytes, node: Any) -> str:
    text = _text(data, node)
    if len(text) >= 2 and text[0] in "\"'`<" and text[-1] in "\"'`>":
        return text[1:-1]
    return text


def _inside(data: bytes, node: Any) -> int:
    """Where a quoted module name's text starts: after its opening quote (if it has one)."""
    start: int = node.start_byte
    return start + 1 if data[start : start + 1] in (b'"', b"'", b"`", b"<") else start


def _py_imports(node: Any, data: bytes, rows: list[_Row]) -> None:
    """``import a.b as c``: ("", a.b, c); ``from ..m import x as y``: (x, ..m, y);
    ``from m import *``: ("*", m, None); ``from __future__ import x``: (x, __future__)."""
    whole = node.type == "import_statement"
    module = None
    if not whole:
        m = node.child_by_field_name("module_name")
        module = _text(data, m) if m is not None else "__future__"
        for child in node.named_children:
            if child.type == "wildcard_import":
                rows.append((child.start_byte, "*", "import", None, module, None))
    for child in node.children_by_field_name("name"):
        target, alias = child, None
        if child.type == "aliased_import":
            target = child.child_by_field_name("name")
            a = child.child_by_field_name("alias")
            alias = _text(data, a) if a is not None else None
        if target is None:
            continue
        if whole:
            rows.append((target.start_byte, "", "import", None, _text(data, target), alias))
        else:
            rows.append((target.start_byte, _text(data, target), "import", None, module, alias))


def _js_imports(node: Any, data: bytes, rows: list[_Row]) -> None:
    """ES imports and re-exports, TypeScript ``import x = require()``, and CommonJS
    ``const x = require('m')`` ("" aliased x) / ``const {a, b: c} = require('m')``."""
    alias: str | None
    if node.type == "variable_declarator":  # the query checked it is a require('...')
        call = node.child_by_field_name("value")
        args = call.child_by_field_name("arguments") if call is not None else None
        source = args.named_children[0] if args is not None and args.named_children else None
        target = node.child_by_field_name("name")
        if source is None or target is None:
            return
        module = _unquote(data, source)
        if target.type == "identifier":
            rows.append((_inside(data, source), "", "import", None, module, _text(data, target)))
            return
        for item in target.named_children:  # object_pattern
            if item.type == "shorthand_property_identifier_pattern":
                rows.append((item.start_byte, _text(data, item), "import", None, module, None))
            elif item.type == "pair_pattern":
                key = item.child_by_field_name("key")
                value = item.child_by_field_name("value")
                if key is not None and value is not None:
                    alias = _text(data, value)
                    rows.append((key.start_byte, _text(data, key), "import", None, module, alias))
        return
    source = node.child_by_field_name("source")
    if source is None:  # TypeScript ``import x = require('m')``
        for child in node.named_children:
            if child.type == "import_require_clause":
                a = child.named_children[0] if child.named_children else None
                source = child.child_by_field_name("source")
                if a is not None and source is not None:
                    module, alias = _unquote(data, source), _text(data, a)
                    rows.append((_inside(data, source), "", "import", None, module, alias))
        return
    module = _unquote(data, source)
    found = False
    for child in node.named_children:
        ctype = child.type
        if ctype == "import_clause":
            for part in child.named_children:
                ptype = part.type
                if ptype == "identifier":
                    rows.append(
                        (part.start_byte, "default", "import", None, module, _text(data, part))
                    )
                    found = True
                elif ptype == "namespace_import":
                    a = part.named_children[-1] if part.named_children else None
                    alias = _text(data, a) if a is not None else None
                    rows.append((part.start_byte, "*", "import", None, module, alias))
                    found = True
                elif ptype == "named_imports":
                    found |= _js_specifiers(part, data, module, rows)
        elif ctype == "export_clause":
            found |= _js_specifiers(child, data, module, rows)
        elif ctype == "namespace_export":
            a = child.named_children[-1] if child.named_children else None
            alias = _text(data, a) if a is not None else None
            rows.append((child.start_byte, "*", "import", None, module, alias))
            found = True
    if not found:
        if node.type == "export_statement":  # export * from 'm'
            star = data.find(b"*", node.start_byte, source.start_byte)
            if star >= 0:
                rows.append((star, "*", "import", None, module, None))
        else:  # import 'm' (for its side effects)
            rows.append((_inside(data, source), "", "import", None, module, None))


def _js_specifiers(node: Any, data: bytes, module: str, rows: list[_Row]) -> bool:
    found = False
    for spec in node.named_children:
        name = spec.child_by_field_name("name")
        if name is None:
            continue
        a = spec.child_by_field_name("alias")
        alias = _unquote(data, a) if a is not None else None
        rows.append((name.start_byte, _unquote(data, name), "import", None, module, alias))
        found = True
    return found


def _go_imports(node: Any, data: bytes, rows: list[_Row]) -> None:
    """``import f "os"``: ("", os, f); ``import . "x"``: ("*", x); ``import _ "x"``: alias _."""
    path = node.child_by_field_name("path")
    if path is None:
        return
    module = _unquote(data, path)
    name = node.child_by_field_name("name")
    if name is not None and name.type == "dot":
        rows.append((_inside(data, path), "*", "import", None, module, None))
    else:
        alias = _text(data, name) if name is not None else None
        rows.append((_inside(data, path), "", "import", None, module, alias))


def _rust_imports(node: Any, data: bytes, rows: list[_Row]) -> None:
    """``use a::b::{C, D as E, f::*, self}``: (C, a::b), (D, a::b, E), (*, a::b::f), ("", a::b);
    ``extern crate x as y``: ("", x, y)."""
    alias: str | None
    if node.type == "extern_crate_declaration":
        name = node.child_by_field_name("name")
        if name is not None:
            a = node.child_by_field_name("alias")
            alias = _text(data, a) if a is not None else None
            rows.append((name.start_byte, "", "import", None, _text(data, name), alias))
        return
    arg = node.child_by_field_name("argument")
    stack: list[tuple[Any, str]] = [(arg, "")] if arg is not None else []
    while stack:
        item, prefix = stack.pop()
        itype = item.type
        if itype in ("scoped_use_list", "use_list"):
            path = item.child_by_field_name("path")
            inner = _join(prefix, _text(data, path)) if path is not None else prefix
            lst = item.child_by_field_name("list") if itype == "scoped_use_list" else item
            if lst is not None:
                stack.extend((child, inner) for child in reversed(lst.named_children))
            continue
        alias = None
        if itype == "use_as_clause":
            a = item.child_by_field_name("alias")
            alias = _text(data, a) if a is not None else None
            item = item.child_by_field_name("path")
            if item is None:
                continue
            itype = item.type
        if itype == "use_wildcard":
            path = item.named_children[0] if item.named_children else None
            module = _join(prefix, _text(data, path)) if path is not None else prefix
            rows.append((item.end_byte - 1, "*", "import", None, module, None))
        elif itype == "scoped_identifier":
            path = item.child_by_field_name("path")
            name = item.child_by_field_name("name")
            if name is None:
                continue
            module = _join(prefix, _text(data, path)) if path is not None else prefix
            rows.append((name.start_byte, _text(data, name), "import", None, module, alias))
        elif itype == "self":  # use a::b::{self}: the module a::b itself
            rows.append((item.start_byte, "", "import", None, prefix, alias))
        elif itype in ("identifier", "crate", "super"):
            if prefix:
                rows.append((item.start_byte, _text(data, item), "import", None, prefix, alias))
            else:  # use serde;
                rows.append((item.start_byte, "", "import", None, _text(data, item), alias))


def _join(prefix: str, path: str) -> str:
    return f"{prefix}::{path}" if prefix and path else prefix or path


def _java_imports(node: Any, data: bytes, rows: list[_Row]) -> None:
    """``import a.b.C;``: (C, a.b); ``import a.b.*;``: (*, a.b); ``import static a.B.m;``:
    (m, a.B)."""
    if node.type != "import_declaration":  # package a.b; (no reference inside)
        return
    target = None
    for child in node.named_children:
        ctype = child.type
        if ctype in ("scoped_identifier", "identifier"):
            target = child
        elif ctype == "asterisk" and target is not None:
            rows.append((child.start_byte, "*", "import", None, _text(data, target), None))
            return
    if target is None:
        return
    if target.type == "identifier":
        rows.append((target.start_byte, _text(data, target), "import", None, "", None))
        return
    scope = target.child_by_field_name("scope")
    name = target.child_by_field_name("name")
    if name is not None:
        module = _text(data, scope) if scope is not None else ""
        rows.append((name.start_byte, _text(data, name), "import", None, module, None))


def _path_import(node: Any, data: bytes, rows: list[_Row]) -> None:
    """C ``#include "x.h"``, Ruby ``require 'x'``, bash ``source x``: ("", x)."""
    path = node.child_by_field_name("path")  # preproc_include
    if path is None:
        arguments = node.child_by_field_name("arguments") or node.child_by_field_name("argument")
        if arguments is None:
            return
        path = arguments if arguments.type != "argument_list" else arguments.named_children[0]
    rows.append((_inside(data, path), "", "import", None, _unquote(data, path), None))


# ---------------------------------------------------------------------------------------------
# queries (node types of tree-sitter-language-pack 0.13.0)

_PYTHON: Final = """
(primary_expression/identifier) @read
(primary_expression/attribute) @read.q
(decorator (identifier) @call)
(decorator (attribute) @call.q)
(class_definition superclasses: (argument_list (identifier) @inherit))
(class_definition superclasses: (argument_list (attribute) @inherit.q))
(class_definition superclasses: (argument_list (subscript value: (identifier) @inherit)))
(class_definition superclasses: (argument_list (subscript value: (attribute) @inherit.q)))
(generic_type (identifier) @type)
(type) @tctx
[(import_statement) (import_from_statement) (future_import_statement)] @import
(as_pattern_target [(identifier) (attribute)] @x)
"""

_JS_COMMON: Final = """
(primary_expression/identifier) @read
(primary_expression/member_expression) @read.q
(shorthand_property_identifier) @read
(call_expression function: (identifier) @call)
(call_expression function: (member_expression) @call.q)
(new_expression constructor: (identifier) @call)
(new_expression constructor: (member_expression) @call.q)
(decorator (identifier) @call)
(decorator (member_expression) @call.q)
(export_specifier name: (identifier) @read)
(assignment_expression left: [(identifier) (member_expression)] @x)
(import_statement) @import
(export_statement source: (string)) @import
((variable_declarator
   value: (call_expression function: (identifier) @_require arguments: (arguments . (string) .)))
 @import (#eq? @_require "require"))
"""

_JSX: Final = """
(jsx_opening_element name: (identifier) @call)
(jsx_opening_element name: (member_expression) @call.q)
(jsx_self_closing_element name: (identifier) @call)
(jsx_self_closing_element name: (member_expression) @call.q)
(jsx_closing_element name: (_) @x)
"""

_JS_ONLY: Final = """
(class_heritage (identifier) @inherit)
(class_heritage (member_expression) @inherit.q)
"""

_TS_ONLY: Final = """
(type_identifier) @type
(nested_type_identifier) @type.q
(extends_clause value: (identifier) @inherit)
(extends_clause value: (member_expression) @inherit.q)
(implements_clause (type_identifier) @inherit)
(implements_clause (nested_type_identifier) @inherit.q)
(implements_clause (generic_type name: (type_identifier) @inherit))
(implements_clause (generic_type name: (nested_type_identifier) @inherit.q))
(extends_type_clause type: (type_identifier) @inherit)
(extends_type_clause type: (nested_type_identifier) @inherit.q)
(extends_type_clause type: (generic_type name: (type_identifier) @inherit))
(extends_type_clause type: (generic_type name: (nested_type_identifier) @inherit.q))
(class_declaration name: (type_identifier) @x)
(abstract_class_declaration name: (type_identifier) @x)
(interface_declaration name: (type_identifier) @x)
(type_alias_declaration name: (type_identifier) @x)
(type_parameter name: (type_identifier) @x)
"""

_GO: Final = """
(_expression/identifier) @read
(selector_expression) @read.q
(call_expression function: (identifier) @call)
(call_expression function: (selector_expression) @call.q)
(type_identifier) @type
(qualified_type) @type.q
(field_declaration_list (field_declaration !name type: (type_identifier) @inherit))
(field_declaration_list (field_declaration !name type: (qualified_type) @inherit.q))
(interface_type (type_elem . (type_identifier) @inherit .))
(interface_type (type_elem . (qualified_type) @inherit.q .))
(import_spec) @import
(type_spec name: (type_identifier) @x)
(type_alias name: (type_identifier) @x)
(short_var_declaration left: (expression_list (identifier) @x))
(assignment_statement left: (expression_list [(identifier) (selector_expression)] @x))
(range_clause left: (expression_list (identifier) @x))
(keyed_element key: (literal_element (identifier) @x))
"""

_RUST: Final = """
(_expression/identifier) @read
(_expression/scoped_identifier) @read.q
(field_expression field: (field_identifier)) @read.q
(token_tree (identifier) @read)
(shorthand_field_initializer (identifier) @read)
(call_expression function: (identifier) @call)
(call_expression function: [(scoped_identifier) (field_expression)] @call.q)
(call_expression function: (generic_function function: (identifier) @call))
(call_expression
  function: (generic_function function: [(scoped_identifier) (field_expression)] @call.q))
(type_identifier) @type
(scoped_type_identifier) @type.q
(impl_item trait: (type_identifier) @inherit)
(impl_item trait: (scoped_type_identifier) @inherit.q)
(impl_item trait: (generic_type type: (type_identifier) @inherit))
(impl_item trait: (generic_type type: (scoped_type_identifier) @inherit.q))
(trait_item bounds: (trait_bounds (type_identifier) @inherit))
(trait_item bounds: (trait_bounds (scoped_type_identifier) @inherit.q))
(trait_item bounds: (trait_bounds (generic_type type: (type_identifier) @inherit)))
[(use_declaration) (extern_crate_declaration)] @import
(assignment_expression left: [(identifier) (field_expression)] @x)
(compound_assignment_expr left: [(identifier) (field_expression)] @x)
(struct_item name: (type_identifier) @x)
(enum_item name: (type_identifier) @x)
(union_item name: (type_identifier) @x)
(trait_item name: (type_identifier) @x)
(type_item name: (type_identifier) @x)
(associated_type name: (type_identifier) @x)
(type_parameter name: (type_identifier) @x)
(attribute (token_tree (identifier) @x))
(attribute (token_tree (token_tree (identifier) @x)))
"""

_JAVA: Final = """
(primary_expression/identifier) @read
(field_access field: (identifier)) @read.q
(method_reference (_) (identifier) @read.n)
(method_invocation name: (identifier) @call.n)
(object_creation_expression type: (type_identifier) @call)
(object_creation_expression type: (scoped_type_identifier) @call.q)
(object_creation_expression type: (generic_type (type_identifier) @call))
(object_creation_expression type: (generic_type (scoped_type_identifier) @call.q))
(type_identifier) @type
(scoped_type_identifier) @type.q
(marker_annotation name: (identifier) @type)
(annotation name: (identifier) @type)
(superclass (type_identifier) @inherit)
(superclass (scoped_type_identifier) @inherit.q)
(superclass (generic_type (type_identifier) @inherit))
(superclass (generic_type (scoped_type_identifier) @inherit.q))
(type_list (type_identifier) @inherit)
(type_list (scoped_type_identifier) @inherit.q)
(type_list (generic_type (type_identifier) @inherit))
(type_list (generic_type (scoped_type_identifier) @inherit.q))
[(import_declaration) (package_declaration)] @import
(assignment_expression left: [(identifier) (field_access)] @x)
(type_parameter (type_identifier) @x)
(scoped_type_identifier . (type_identifier) @x)
(scoped_type_identifier (scoped_type_identifier) @x)
"""

_C: Final = """
(expression/identifier) @read
(field_expression) @read.q
(call_expression function: (identifier) @call)
(call_expression function: (field_expression) @call.q)
(type_identifier) @type
(preproc_include) @import
(assignment_expression left: [(identifier) (field_expression)] @x)
(struct_specifier name: (type_identifier) @x body: (_))
(union_specifier name: (type_identifier) @x body: (_))
(enum_specifier name: (type_identifier) @x body: (_))
(type_definition declarator: (type_identifier) @x)
"""

_CPP_ONLY: Final = """
(qualified_identifier) @read.q
(call_expression function: (qualified_identifier) @call.q)
(call_expression function: (template_function name: (identifier) @call))
(base_class_clause (type_identifier) @inherit)
(base_class_clause (qualified_identifier) @inherit.q)
(class_specifier name: (type_identifier) @x body: (_))
(function_declarator declarator: (qualified_identifier) @x)
"""

_RUBY: Final = """
(identifier) @read
(constant) @read
(scope_resolution) @read.q
(call method: [(identifier) (constant)] @call.n)
(superclass (constant) @inherit)
(superclass (scope_resolution) @inherit.q)
((call method: (identifier) @_require arguments: (argument_list . (string) .)) @import
 (#any-of? @_require "require" "require_relative" "load"))
(method name: (_) @x)
(singleton_method name: (_) @x)
(class name: (_) @x)
(module name: (_) @x)
(method_parameters (identifier) @x)
(lambda_parameters (identifier) @x)
(block_parameters (identifier) @x)
(optional_parameter name: (identifier) @x)
(keyword_parameter name: (identifier) @x)
(splat_parameter name: (identifier) @x)
(hash_splat_parameter name: (identifier) @x)
(block_parameter name: (identifier) @x)
(assignment left: [(identifier) (constant) (call)] @x)
(left_assignment_list (identifier) @x)
(pair key: (hash_key_symbol) @x)
"""

_BASH: Final = """
(command name: (command_name (word) @call))
(variable_name) @read
(variable_assignment name: (variable_name) @x)
((command name: (command_name (word) @_source) . argument: (word) .) @import
 (#any-of? @_source "source" "."))
"""

_SPECS: dict[str, _Spec | None] = {}


def _spec(language: str) -> _Spec | None:
    """The compiled query of ``language`` (None for a language without one), compiled once."""
    if language in _SPECS:
        return _SPECS[language]
    spec = _compile(language)
    _SPECS[language] = spec
    return spec


_LANGS: Final[dict[str, _Lang]] = {
    "python": _Lang(
        _PYTHON, b".", stop=frozenset({b"", b"self"}), imports=_py_imports, paren_calls=True
    ),
    "javascript": _Lang(_JS_COMMON + _JSX + _JS_ONLY, b".", b"?", imports=_js_imports),
    "typescript": _Lang(_JS_COMMON + _TS_ONLY, b".", b"?", imports=_js_imports),
    "tsx": _Lang(_JS_COMMON + _JSX + _TS_ONLY, b".", b"?", imports=_js_imports),
    "go": _Lang(_GO, b".", imports=_go_imports),
    "rust": _Lang(_RUST, b":.", b":", frozenset({b"", b"Self"}), _rust_imports),
    "java": _Lang(_JAVA, b".:", b":", imports=_java_imports),
    "c": _Lang(_C, b".>", b"-", imports=_path_import),
    "cpp": _Lang(_C + _CPP_ONLY, b".>:", b"-:", frozenset({b"", b"this"}), _path_import),
    "ruby": _Lang(_RUBY, b".:", b"&:", imports=_path_import),
    "bash": _Lang(
        _BASH,
        b"",
        stop=frozenset({b"", *(str(d).encode() for d in range(10))}),
        imports=_path_import,
    ),
}


def _compile(language: str) -> _Spec | None:
    lang = _LANGS.get(language)
    if lang is None:
        return None
    from tree_sitter_language_pack import get_language

    try:
        return _Spec(Query(get_language(language), lang.query), lang)  # type: ignore[arg-type]
    except Exception:  # a grammar that changed under the query: no references, said once
        log.warning("reference query for %s does not compile", language, exc_info=True)
        return None
