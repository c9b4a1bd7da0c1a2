"""Split a file into chunks: tree-sitter symbols for code, heading sections for markdown,
line windows for everything else.

See docs/chunking.md for the rules (which text each chunk kind carries, how big symbols are
split, how ids stay stable). ``chunk_file`` never raises on bad input.
"""

from __future__ import annotations

import bisect
import logging
import re
import threading
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Final

from ragloom.ingest.binds import extract_binds
from ragloom.ingest.filegraph import FileGraph
from ragloom.ingest.ids import chunk_id, text_hash
from ragloom.ingest.languages import CODE_SPECS, LangSpec, detect_language
from ragloom.ingest.parts import head_id, is_part, part_id, part_label
from ragloom.ingest.refs import extract_refs
from ragloom.types import Chunk, ChunkKind, SourceKind

__all__ = [
    "CHUNKER_VERSION",
    "MAX_CHUNK_BYTES",
    "MAX_DESCEND_DEPTH",
    "MAX_HEADER_BYTES",
    "WINDOW_LINES",
    "chunk_file",
    "detect_language",
    "head_id",
    "is_part",
    "parse_file",
    "part_id",
    "part_label",
]

log = logging.getLogger(__name__)

CHUNKER_VERSION: Final = 2
"""The chunking rules' version: an index chunked by another version is parsed again at its
next update (every file, one generation, ``ragloom.index.indexer.update_index``). 2: JavaScript
and TypeScript functions assigned to members (``res.send = function ...``) are symbols."""
MAX_CHUNK_BYTES: Final = 6000
"""Largest chunk text before a symbol is split. ~6000 bytes of code is ~1500 BPE tokens:
MiniLM-class embedders read only their first 256 tokens, so a longer chunk's tail is
invisible to dense search anyway, and BM25 length normalisation penalises very long
documents. 6000 keeps most functions whole (the CPython stdlib median function is < 1 KB)
while bounding the worst case; see docs/chunking.md."""

WINDOW_LINES: Final = 60
"""Lines per window for plain text (and for splitting oversized markdown sections): about one
screen, and at typical 60-100 bytes per line it stays under MAX_CHUNK_BYTES."""

MAX_DESCEND_DEPTH: Final = 48
"""How deep the walk follows nested statements (``if``/``try``/preprocessor blocks) looking
for definitions; past this the text stays in the enclosing chunk. Bounds recursion on
pathological or error-recovered trees."""

MAX_HEADER_BYTES: Final = 1000
"""Longest signature repeated at the top of each part of a split symbol (a 10-15 line
multi-line signature fits); a longer "signature" means error recovery swallowed the body,
and only the first line is repeated."""

MAX_LABEL_SYMBOL: Final = 200
"""Longest symbol written into a part label (longer ones are cut and end with ``...``)."""

_MD_COMMENT: Final = ("<!--", " -->")


def _label_line(symbol: str, k: int, n: int, comment: tuple[str, str]) -> str:
    """The first line of part ``k`` of ``n``: ``# Foo.bar (part 3 of 64)`` (as a comment)."""
    name = " ".join(symbol.split())
    if len(name) > MAX_LABEL_SYMBOL:
        name = name[: MAX_LABEL_SYMBOL - 3] + "..."
    return f"{comment[0]} {name} (part {k} of {n}){comment[1]}"


def _label_reserve(symbol: str, comment: tuple[str, str], span: int) -> int:
    """Bytes a label line (with its newline) can take in a part of a ``span``-byte chunk."""
    most = max(span, 1)  # never more parts than bytes
    return len(_label_line(symbol, most, most, comment).encode("utf-8")) + 1


_Node = Any  # tree_sitter.Node; tree_sitter ships no type information mypy can use here

_local = threading.local()


def _parser(language: str) -> Any:
    """Return this thread's cached tree-sitter parser for ``language``."""
    cache: dict[str, Any] | None = getattr(_local, "parsers", None)
    if cache is None:
        cache = {}
        _local.parsers = cache
    parser = cache.get(language)
    if parser is None:
        from tree_sitter_language_pack import get_parser

        parser = get_parser(language)  # type: ignore[arg-type]
        cache[language] = parser
    return parser


# ---------------------------------------------------------------------------------------------
# text helpers


class _Text:
    """The file's bytes with a line index (0-based lines internally)."""

    __slots__ = ("data", "starts")

    def __init__(self, data: bytes) -> None:
        self.data = data
        starts = [0]
        pos = data.find(b"\n")
        while pos != -1:
            starts.append(pos + 1)
            pos = data.find(b"\n", pos + 1)
        if starts[-1] == len(data) and len(starts) > 1:
            starts.pop()  # a final newline does not open a new line
        self.starts = starts

    @property
    def n_lines(self) -> int:
        return len(self.starts)

    def line_of(self, byte: int) -> int:
        """0-based line holding ``byte``."""
        return bisect.bisect_right(self.starts, byte) - 1

    def end_line_of(self, end_byte: int, start_byte: int) -> int:
        """0-based line holding the last byte of ``[start_byte, end_byte)``."""
        return self.line_of(max(start_byte, end_byte - 1))

    def line_end(self, line: int) -> int:
        """Byte offset just past ``line`` (including its newline)."""
        return self.starts[line + 1] if line + 1 < len(self.starts) else len(self.data)

    def decode(self, start: int, end: int) -> str:
        return self.data[start:end].decode("utf-8", "replace")


def _utf8_cut(data: bytes, pos: int, floor: int) -> int:
    """Move ``pos`` back to a UTF-8 character boundary (never below ``floor + 1``)."""
    p = pos
    while p > floor + 1 and p < len(data) and (data[p] & 0xC0) == 0x80:
        p -= 1
    return p


def _skip_ws(data: bytes, start: int, end: int) -> int:
    """First non-whitespace byte in ``[start, end)``, or ``end``."""
    i = start
    while i < end and data[i] in b" \t\r\n\f\v":
        i += 1
    return i


def _trim_end(data: bytes, start: int, end: int) -> int:
    """``end`` moved back over trailing whitespace (not below ``start``)."""
    while end > start and data[end - 1] in b" \t\r\n\f\v":
        end -= 1
    return end


def _line_spans(t: _Text, start: int, end: int, budget: int) -> list[tuple[int, int]]:
    """Cut ``[start, end)`` at line ends into pieces of at most ``budget`` bytes; a longer
    single line is cut at UTF-8 character boundaries."""
    out: list[tuple[int, int]] = []
    data = t.data
    cur = start
    while cur < end:
        if end - cur <= budget:
            out.append((cur, end))
            break
        limit = cur + budget
        nl = data.rfind(b"\n", cur, limit)
        cut = nl + 1 if nl >= cur else _utf8_cut(data, limit, cur)
        out.append((cur, cut))
        cur = cut
    return out


# ---------------------------------------------------------------------------------------------
# chunk assembly


@dataclass(slots=True)
class _Out:
    """Collects chunks for one file and makes their ids unique."""

    path: str
    source: SourceKind
    language: str
    file_hash: str
    chunks: list[Chunk] = field(default_factory=list)
    seen: dict[tuple[str, str], int] = field(default_factory=dict)

    def unique(self, symbol: str, kind: str) -> str:
        """Id symbol for ``symbol``: plain on first use, then ``#2``, ``#3`` in source order."""
        key = (symbol, kind)
        n = self.seen.get(key, 0) + 1
        self.seen[key] = n
        return symbol if n == 1 else f"{symbol}#{n}"

    def id_of(self, id_symbol: str, kind: str) -> str:
        return chunk_id(self.source, self.path, id_symbol, kind)

    def add(
        self,
        t: _Text,
        *,
        cid: str,
        symbol: str,
        kind: ChunkKind,
        parent_id: str | None,
        start: int,
        end: int,
        text: str,
    ) -> str:
        self.chunks.append(
            Chunk(
                id=cid,
                source=self.source,
                path=self.path,
                symbol=symbol,
                kind=kind,
                language=self.language,
                parent_id=parent_id,
                start_byte=start,
                end_byte=end,
                start_line=t.line_of(start) + 1,
                end_line=t.end_line_of(end, start) + 1,
                node_hash=text_hash(text),
                file_hash=self.file_hash,
                text=text,
            )
        )
        return cid


def _emit_parts(
    out: _Out,
    t: _Text,
    parts: list[tuple[int, int, str]],
    *,
    id_symbol: str,
    symbol: str,
    kind: ChunkKind,
    parent_id: str | None,
    comment: tuple[str, str] | None,
) -> str | None:
    """Emit ``parts`` (span, text) as one chunk or numbered parts; return the first id.

    Parts 2.. get the id ``<first id>#part<k>`` and, unless ``comment`` is None, a first line
    naming the symbol and the part, ``# Foo.bar (part 3 of 64)``, written as a ``comment`` of
    the file's language."""
    if not parts:
        return None
    first = out.id_of(id_symbol, kind)
    n = len(parts)
    for i, (s, e, text) in enumerate(parts, 1):
        if i > 1 and comment is not None:
            text = _label_line(symbol, i, n, comment) + "\n" + text
        out.add(
            t,
            cid=first if i == 1 else part_id(first, i),
            symbol=symbol,
            kind=kind,
            parent_id=parent_id,
            start=s,
            end=e,
            text=text,
        )
    return first


# ---------------------------------------------------------------------------------------------
# plain text windows


def _windows(
    t: _Text, first_line: int, last_line: int, budget: int = MAX_CHUNK_BYTES
) -> list[tuple[int, int]]:
    """Byte spans of windows of WINDOW_LINES lines (fewer when over ``budget`` bytes) that
    tile lines ``first_line..last_line`` (0-based inclusive)."""
    spans: list[tuple[int, int]] = []
    line = first_line
    while line <= last_line:
        stop = min(line + WINDOW_LINES - 1, last_line)
        s = t.starts[line]
        e = t.line_end(stop)
        if e - s > budget:
            spans.extend(_line_spans(t, s, e, budget))
        else:
            spans.append((s, e))
        line = stop + 1
    return spans


def _chunk_text(out: _Out, t: _Text) -> None:
    if not t.data.strip():
        return
    for s, e in _windows(t, 0, t.n_lines - 1):
        a = t.line_of(s) + 1
        b = t.end_line_of(e, s) + 1
        sym = f"{out.path}:L{a}-{b}"
        out.add(
            t,
            cid=out.id_of(out.unique(sym, "window"), "window"),
            symbol=sym,
            kind="window",
            parent_id=None,
            start=s,
            end=e,
            text=t.decode(s, e),
        )


# ---------------------------------------------------------------------------------------------
# markdown

_FENCE_RE: Final = re.compile(rb"^ {0,3}(`{3,}|~{3,})")
_HEADING_RE: Final = re.compile(rb"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*\r?$")
_CLOSING_HASHES_RE: Final = re.compile(rb"(?:^|[ \t]+)#+$")


def _chunk_markdown(out: _Out, t: _Text) -> None:
    """Sections between ATX headings (headings inside fenced code are ignored)."""
    data = t.data
    heads: list[tuple[int, int, str]] = []  # (line, level, title)
    fence: bytes | None = None
    for ln, s in enumerate(t.starts):
        line = data[s : t.line_end(ln)].rstrip(b"\n")
        m = _FENCE_RE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                rest = line[m.end() :].strip()
                if not rest:
                    fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        if line[:4].lstrip(b" ")[:1] != b"#":
            continue
        h = _HEADING_RE.match(line)
        if h:
            raw = _CLOSING_HASHES_RE.sub(b"", (h.group(2) or b"").strip()).strip()
            heads.append((ln, len(h.group(1)), raw.decode("utf-8", "replace")))
    bounds = [(0, 0, "")] if not heads or heads[0][0] > 0 else []
    bounds.extend(heads)
    stack: list[tuple[int, str]] = []
    for i, (ln, level, title) in enumerate(bounds):
        last = bounds[i + 1][0] - 1 if i + 1 < len(bounds) else t.n_lines - 1
        if level == 0:
            symbol = out.path
            header = ""
        else:
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            symbol = " > ".join(x[1] for x in stack)
            header = t.decode(t.starts[ln], t.line_end(ln)).rstrip("\r\n")
        s = t.starts[ln]
        e = _trim_end(data, s, t.line_end(last))
        if e <= s or not data[s:e].strip():
            continue
        if e - s <= MAX_CHUNK_BYTES:
            parts = [(s, e, t.decode(s, e))]
        else:
            # room for the heading line and the part label repeated in parts 2..
            extra = len(header.encode("utf-8")) + 1 + _label_reserve(symbol, _MD_COMMENT, e - s)
            budget = max(MAX_CHUNK_BYTES - extra, MAX_CHUNK_BYTES // 2)
            parts = []
            for j, (ws, we) in enumerate(_windows(t, ln, t.end_line_of(e, s), budget)):
                we = min(we, e)
                text = t.decode(ws, we)
                if j and header:
                    text = header + "\n" + text
                if text.strip():
                    parts.append((ws, we, text))
        _emit_parts(
            out,
            t,
            parts,
            id_symbol=out.unique(symbol, "section"),
            symbol=symbol,
            kind="section",
            parent_id=None,
            comment=_MD_COMMENT,
        )


# ---------------------------------------------------------------------------------------------
# code symbols


@dataclass(slots=True)
class _Sym:
    """One symbol found in the tree, before it becomes chunk(s)."""

    name: str  # qualified symbol
    kind: ChunkKind
    start: int  # span incl. attached comments / decorators
    end: int
    outer: _Node  # wrapper node (decorated_definition, export_statement) or the definition
    node: _Node  # the definition node itself
    container: bool
    parent: _Sym | None = None
    receiver: str | None = None  # qualified type a Go / out-of-class C++ method belongs to
    children: list[_Sym] = field(default_factory=list)
    id_symbol: str = ""
    chunk_id: str | None = None


_C_NAME_TYPES: Final = frozenset(
    {
        "identifier",
        "field_identifier",
        "qualified_identifier",
        "destructor_name",
        "operator_name",
        "type_identifier",
    }
)
_TEMPLATE_ARGS_RE: Final = re.compile(r"<[^<>]*>")
_BODY_FALLBACK: Final = frozenset(
    {
        "block",
        "body_statement",
        "class_body",
        "declaration_list",
        "field_declaration_list",
        "statement_block",
        "compound_statement",
        "interface_body",
        "enum_body",
    }
)
_JS_FUNC_VALUES: Final = frozenset(
    {"arrow_function", "function_expression", "function", "generator_function"}
)


def _txt(node: _Node) -> str:
    raw: bytes = node.text or b""
    return raw.decode("utf-8", "replace")


def _strip_generics(name: str) -> str:
    prev = None
    while prev != name:
        prev = name
        name = _TEMPLATE_ARGS_RE.sub("", name)
    return name.strip()


def _body(node: _Node) -> _Node | None:
    body = node.child_by_field_name("body")
    if body is not None:
        return body
    for child in reversed(node.named_children):
        if child.type in _BODY_FALLBACK:
            return child
    return None


def _statements(body: _Node) -> list[_Node]:
    kids: list[_Node] = body.named_children
    if len(kids) == 1 and kids[0].type in ("statement_list", "body_statement"):
        kids = kids[0].named_children
    return kids


class _Walker:
    """Collects the symbols of one parsed file."""

    def __init__(self, spec: LangSpec, t: _Text) -> None:
        self.spec = spec
        self.t = t
        self.syms: list[_Sym] = []

    # -- naming ---------------------------------------------------------------------------

    def _c_name(self, node: _Node) -> str | None:
        decl = node.child_by_field_name("declarator")
        while decl is not None and decl.type not in _C_NAME_TYPES:
            decl = decl.child_by_field_name("declarator")
        if decl is None:
            return None
        return _strip_generics(_txt(decl)).replace("::", ".")

    def _go_receiver(self, node: _Node) -> str | None:
        recv = node.child_by_field_name("receiver")
        if recv is None:
            return None
        stack = [recv]
        while stack:
            n = stack.pop()
            if n.type == "type_identifier":
                return _txt(n)
            stack.extend(reversed(n.named_children))
        return None

    def _assigned_function(self, node: _Node, scope: list[str]) -> tuple[str, str | None] | None:
        """A function assigned to a member, CommonJS style: ``res.send = function send() {}``
        (``res.send``), ``View.prototype.lookup = function () {}`` (``View.lookup``, a method
        of ``View``), ``exports.parse = ...`` and ``module.exports.parse = ...`` (``parse``),
        ``module.exports = function createApplication() {}`` (its own name). None for any
        other assignment, a computed member (``a[b] = ...``) or ``this.x = ...``."""
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        if left is None or right is None or right.type not in _JS_FUNC_VALUES:
            return None
        parts: list[str] = []
        cur: _Node | None = left
        while cur is not None and cur.type == "member_expression":
            prop = cur.child_by_field_name("property")
            if prop is None or prop.type != "property_identifier":
                return None
            parts.append(_txt(prop))
            cur = cur.child_by_field_name("object")
        if cur is None or cur.type != "identifier" or not parts:
            return None
        parts.append(_txt(cur))
        parts.reverse()
        if parts[:2] == ["module", "exports"]:
            parts = parts[2:]
        elif parts[0] == "exports":
            parts = parts[1:]
        parts = [x for x in parts if x != "prototype"]
        if not parts:
            own = right.child_by_field_name("name")
            if own is None:
                return None
            parts = [_txt(own)]
        name = ".".join([*scope, *parts])
        return name, ".".join([*scope, *parts[:-1]]) if len(parts) > 1 else None

    def _function(self, node: _Node, scope: list[str]) -> tuple[str, str | None] | None:
        """(qualified name, receiver) of a function node, or None when it is no symbol."""
        lang = self.spec.name
        if node.type == "assignment_expression":
            return self._assigned_function(node, scope)
        if node.type in ("lexical_declaration", "variable_declaration"):
            decls = [c for c in node.named_children if c.type == "variable_declarator"]
            if len(decls) != 1:
                return None
            value = decls[0].child_by_field_name("value")
            name_node = decls[0].child_by_field_name("name")
            if value is None or name_node is None or value.type not in _JS_FUNC_VALUES:
                return None
            return ".".join([*scope, _txt(name_node)]), None
        if _body(node) is None:
            return None
        if lang in ("c", "cpp"):
            name = self._c_name(node)
            if name is None:
                return None
            full = ".".join([*scope, name])
            receiver = full.rpartition(".")[0] if "." in name else None
            return full, receiver
        name_node = node.child_by_field_name("name")
        if name_node is None:
            return None
        name = _txt(name_node)
        if lang == "go" and node.type == "method_declaration":
            receiver = self._go_receiver(node)
            if receiver is not None:
                return ".".join([*scope, receiver, name]), ".".join([*scope, receiver])
        return ".".join([*scope, name]), None

    def _container(self, node: _Node, scope: list[str]) -> tuple[str, str, ChunkKind] | None:
        """(own symbol, scope name for members, kind) of a container node, or None."""
        lang = self.spec.name
        kind = self.spec.containers[node.type]
        if lang == "go":  # type_declaration: only a single struct / interface spec
            specs = [c for c in node.named_children if c.type == "type_spec"]
            if len(specs) != 1:
                return None
            typ = specs[0].child_by_field_name("type")
            name_node = specs[0].child_by_field_name("name")
            if typ is None or name_node is None:
                return None
            if typ.type == "struct_type":
                kind = "struct"
            elif typ.type == "interface_type":
                kind = "interface"
            else:
                return None
            name = ".".join([*scope, _txt(name_node)])
            return name, name, kind
        if node.type == "type_definition":  # C typedef struct { ... } T;
            inner = node.child_by_field_name("type")
            decl = node.child_by_field_name("declarator")
            if inner is None or decl is None or inner.child_by_field_name("body") is None:
                return None
            if inner.type == "enum_specifier":
                kind = "enum"
            elif inner.type not in ("struct_specifier", "union_specifier", "class_specifier"):
                return None
            name = ".".join([*scope, _txt(decl)])
            return name, name, kind
        if lang == "rust" and node.type == "impl_item":
            typ = node.child_by_field_name("type")
            if typ is None:
                return None
            tname = _strip_generics(_txt(typ)).replace("::", ".")
            member_scope = ".".join([*scope, tname])
            trait = node.child_by_field_name("trait")
            own = member_scope
            if trait is not None:
                own = f"{_strip_generics(_txt(trait)).replace('::', '.')} for {member_scope}"
            return own, member_scope, kind
        if lang in ("c", "cpp") and node.child_by_field_name("body") is None:
            return None  # forward declaration / use of a struct type
        name_node = node.child_by_field_name("name")
        if name_node is None:
            return None
        name = _strip_generics(_txt(name_node)).replace("::", ".")
        full = ".".join([*scope, name])
        return full, full, kind

    def _namespace_name(self, node: _Node) -> str:
        name_node = node.child_by_field_name("name")
        if name_node is None:
            return ""
        return _strip_generics(_txt(name_node)).replace("::", ".")

    # -- walking --------------------------------------------------------------------------

    def walk(self, node: _Node, scope: list[str], parent: _Sym | None, depth: int) -> None:
        """Find definitions among ``node``'s children (and inside descend-able statements)."""
        spec = self.spec
        t = self.t
        attach_start: int | None = None  # start of the comment run right above the next node
        attach_end_line = -1
        prev_end_line = -1
        for child in node.named_children:
            ctype = child.type
            start_line = t.line_of(child.start_byte)
            if ctype in spec.comments:
                end_line = t.end_line_of(child.end_byte, child.start_byte)
                if attach_start is not None and start_line <= attach_end_line + 1:
                    attach_end_line = end_line
                elif start_line > prev_end_line:
                    attach_start = child.start_byte
                    attach_end_line = end_line
                else:
                    attach_start = None  # trailing comment of the previous statement
                prev_end_line = end_line
                continue
            lead = (
                attach_start
                if attach_start is not None and start_line <= attach_end_line + 1
                else None
            )
            attach_start = None
            prev_end_line = t.end_line_of(child.end_byte, child.start_byte)
            self._visit(child, scope, parent, depth, lead)

    def _visit(
        self, child: _Node, scope: list[str], parent: _Sym | None, depth: int, lead: int | None
    ) -> None:
        spec = self.spec
        outer = child
        node = child
        if node.type in spec.wrappers:
            inner = node.child_by_field_name("definition") or node.child_by_field_name(
                "declaration"
            )
            if inner is None:
                named = node.named_children
                inner = named[-1] if named else None
            if inner is None:
                return
            node = inner
        if (
            node.type == "expression_statement"
            and "assignment_expression" in spec.functions
            and len(node.named_children) == 1
            and node.named_children[0].type == "assignment_expression"
        ):  # `a.b = function ...;`: the statement is the chunk, with the comment above it
            node = node.named_children[0]
        ntype = node.type
        start = min(lead if lead is not None else outer.start_byte, outer.start_byte)
        if ntype in spec.functions:
            found = self._function(node, scope)
            if found is None:
                return
            name, receiver = found
            in_container = parent is not None and parent.container
            kind: ChunkKind = "method" if in_container or receiver is not None else "function"
            sym = _Sym(name, kind, start, outer.end_byte, outer, node, False, parent, receiver)
            self._add(sym)
            return
        if ntype in spec.containers:
            found_c = self._container(node, scope)
            if found_c is None:
                return
            own, member_scope, ckind = found_c
            sym = _Sym(own, ckind, start, outer.end_byte, outer, node, True, parent)
            self._add(sym)
            body = _body(node)
            if body is not None and depth < MAX_DESCEND_DEPTH:
                self.walk(body, member_scope.split("."), sym, depth + 1)
            return
        if depth >= MAX_DESCEND_DEPTH:
            return
        if ntype in spec.namespaces:
            name = self._namespace_name(node)
            body = _body(node)
            if body is not None:
                self.walk(body, [*scope, name] if name else scope, parent, depth + 1)
            return
        if ntype in spec.descend:
            self.walk(node, scope, parent, depth + 1)

    def _add(self, sym: _Sym) -> None:
        self.syms.append(sym)
        if sym.parent is not None:
            sym.parent.children.append(sym)


def _stub(t: _Text, sym: _Sym, brace: bool) -> str:
    """A one-line stand-in for a member inside its container's chunk text."""
    body = _body(sym.node)
    if body is None:
        return t.decode(sym.outer.start_byte, sym.outer.end_byte)
    head = t.decode(sym.outer.start_byte, body.start_byte).rstrip()
    if brace and t.data[body.start_byte : body.start_byte + 1] == b"{":
        return head + " { ... }"
    return head + " ..."


def _render(t: _Text, start: int, end: int, subs: list[tuple[int, int, str]]) -> str:
    """Text of ``[start, end)`` with each sub span fully inside replaced by its stub."""
    if not subs:
        return t.decode(start, end)
    pieces: list[str] = []
    cur = start
    for s, e, stub in subs:
        if s >= cur and e <= end:
            pieces.append(t.decode(cur, s))
            pieces.append(stub)
            cur = e
    pieces.append(t.decode(cur, end))
    return "".join(pieces)


def _symbol_parts(
    t: _Text, sym: _Sym, brace: bool, comment: tuple[str, str]
) -> list[tuple[int, int, str]]:
    """The chunk(s) of one symbol: (start, end, text). Members of a container are elided to
    their signature; a symbol over MAX_CHUNK_BYTES is split at statement boundaries with its
    signature repeated at the top of every part after the first (below the part label that
    :func:`_emit_parts` adds, whose size is reserved here)."""
    subs = sorted(((c.start, c.end, _stub(t, c, brace)) for c in sym.children), key=lambda x: x[0])
    whole = _render(t, sym.start, sym.end, subs)
    if len(whole) <= MAX_CHUNK_BYTES and (
        sym.end - sym.start <= MAX_CHUNK_BYTES or len(whole.encode("utf-8")) <= MAX_CHUNK_BYTES
    ):
        return [(sym.start, sym.end, whole)]
    data = t.data
    body = _body(sym.node)
    stmts = _statements(body) if body is not None else []
    header = ""
    if stmts:
        header = t.decode(sym.node.start_byte, stmts[0].start_byte).rstrip()
    if not header or len(header.encode("utf-8")) > MAX_HEADER_BYTES:  # error recovery ate it
        hs = sym.node.start_byte
        he = min(_trim_end(data, hs, t.line_end(t.line_of(hs))), hs + MAX_HEADER_BYTES)
        header = t.decode(hs, _utf8_cut(data, he, hs) if he < len(data) else he).rstrip()
    # cut points: statement ends that do not fall inside an elided member
    cuts = [
        s.end_byte
        for s in stmts
        if sym.start < s.end_byte < sym.end and not any(a < s.end_byte < b for a, b, _ in subs)
    ]
    cuts.append(sym.end)
    units: list[tuple[int, int, bool]] = []  # (start, end, has_subs)
    prev = sym.start
    for c in cuts:
        if c <= prev:
            continue
        has = any(prev <= a and b <= c for a, b, _ in subs)
        units.append((prev, c, has))
        prev = c
    reserve = (
        len(header.encode("utf-8")) + 1 + _label_reserve(sym.name, comment, sym.end - sym.start)
    )
    budget_rest = max(MAX_CHUNK_BYTES - reserve, MAX_CHUNK_BYTES // 2)
    expanded: list[tuple[int, int, bool]] = []
    for s, e, has in units:
        if e - s <= budget_rest:
            expanded.append((s, e, has))
            continue
        # too big: cut around the elided members inside, then at line ends
        cur = s
        for a, b, _ in subs:
            if cur <= a and b <= e:
                expanded.extend((x, y, False) for x, y in _line_spans(t, cur, a, budget_rest))
                expanded.append((a, b, True))
                cur = b
        expanded.extend((x, y, False) for x, y in _line_spans(t, cur, e, budget_rest))
    groups: list[list[tuple[int, int, bool]]] = []
    size = 0
    for u in expanded:
        usize = u[1] - u[0]
        budget = MAX_CHUNK_BYTES if not groups else budget_rest
        if groups and groups[-1] and size + usize > budget:
            groups.append([])
            size = 0
        if not groups:
            groups.append([])
        groups[-1].append(u)
        size += usize
    parts: list[tuple[int, int, str]] = []
    for gi, g in enumerate(groups):
        gs, ge = g[0][0], g[-1][1]
        if gi == 0:
            parts.append((gs, ge, _render(t, gs, ge, subs)))
            continue
        first = _skip_ws(data, gs, ge)
        if first >= ge:
            continue
        line_start = t.starts[t.line_of(first)]
        body_text = _render(t, max(line_start, gs), ge, subs)
        parts.append((first, ge, header + "\n" + body_text))
    return parts


def _module_name(path: str, language: str) -> str:
    if language != "python":
        return path
    p = PurePosixPath(path)
    parts = list(p.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    if len(parts) > 1 and parts[0] == "src":
        parts.pop(0)
    return ".".join(parts) or path


def _chunk_code(out: _Out, t: _Text, spec: LangSpec, tree: Any = None) -> None:
    if tree is None:
        tree = _parser(spec.name).parse(t.data)
    walker = _Walker(spec, t)
    walker.walk(tree.root_node, [], None, 0)
    syms = walker.syms
    # Go methods / out-of-class C++ definitions: attach to the type defined in this file
    by_name: dict[str, _Sym] = {}
    for s in syms:
        if s.container and s.name not in by_name:
            by_name[s.name] = s
    for s in syms:
        if s.receiver is not None and s.parent is None:
            s.parent = by_name.get(s.receiver)
    for s in syms:  # source order (pre-order walk): "#2" goes to the later duplicate
        s.id_symbol = out.unique(s.name, s.kind)
    comment = (spec.line_comment, "")
    covered = bytearray(t.n_lines)
    for s in syms:
        parts = _symbol_parts(t, s, spec.brace, comment)
        parent_id = s.parent.chunk_id if s.parent is not None else None
        s.chunk_id = _emit_parts(
            out,
            t,
            parts,
            id_symbol=s.id_symbol,
            symbol=s.name,
            kind=s.kind,
            parent_id=parent_id,
            comment=comment,
        )
        if s.parent is None or s.receiver is not None:
            a = t.line_of(s.start)
            b = t.end_line_of(s.end, s.start)
            covered[a : b + 1] = b"\x01" * (b - a + 1)
    _module_remainder(out, t, covered)


def _module_remainder(out: _Out, t: _Text, covered: bytearray) -> None:
    """One chunk (or parts) with the lines no symbol covers: imports, constants, statements.

    Its parts carry no label: their text stays the file's lines (context assembly matches a
    module chunk's text against the file to cut it to its first block)."""
    data = t.data
    ranges: list[tuple[int, int]] = []  # byte ranges of runs of uncovered lines
    line = 0
    n = t.n_lines
    while line < n:
        if covered[line]:
            nxt = covered.find(b"\x00", line)
            if nxt == -1:
                break
            line = nxt
            continue
        stop = covered.find(b"\x01", line)
        stop = n if stop == -1 else stop
        s = t.starts[line]
        e = t.line_end(stop - 1)
        first = _skip_ws(data, s, e)
        if first < e:  # drop the run's leading and trailing blank lines
            last = _trim_end(data, s, e)
            ranges.append((t.starts[t.line_of(first)], t.line_end(t.line_of(last - 1))))
        line = stop
    if not ranges:
        return
    ranges[-1] = (ranges[-1][0], _trim_end(data, ranges[-1][0], ranges[-1][1]))
    pieces: list[tuple[int, int]] = []
    for s, e in ranges:
        pieces.extend(_line_spans(t, s, e, MAX_CHUNK_BYTES))
    parts: list[tuple[int, int, str]] = []
    group: list[tuple[int, int]] = []
    size = 0
    for p in pieces:
        if group and size + (p[1] - p[0]) > MAX_CHUNK_BYTES:
            parts.append((group[0][0], group[-1][1], "".join(t.decode(a, b) for a, b in group)))
            group, size = [], 0
        group.append(p)
        size += p[1] - p[0]
    if group:
        parts.append((group[0][0], group[-1][1], "".join(t.decode(a, b) for a, b in group)))
    symbol = _module_name(out.path, out.language)
    _emit_parts(
        out,
        t,
        parts,
        id_symbol=out.unique(symbol, "module"),
        symbol=symbol,
        kind="module",
        parent_id=None,
        comment=None,
    )


# ---------------------------------------------------------------------------------------------
# entry point


def chunk_file(path: str, data: bytes, file_hash: str) -> list[Chunk]:
    """Chunk one file. ``path`` is repo-relative posix; ``file_hash`` is passed through.

    Never raises on bad input: invalid UTF-8 is decoded with replacement characters (spans
    stay byte offsets into ``data``), syntax errors go through tree-sitter's error recovery,
    and an unexpected failure in the code path falls back to line windows.
    """
    return parse_file(path, data, file_hash, refs=False)[0]


def parse_file(
    path: str, data: bytes, file_hash: str, *, refs: bool = True
) -> tuple[list[Chunk], FileGraph | None]:
    """Chunk one file and, for code with ``refs``, find its references on the same tree.

    The chunks are :func:`chunk_file`'s. The graph record is None for a file that is not code
    (or whose chunking fell back to windows), and holds no references when their extraction
    failed: the chunks never depend on it."""
    if not data:
        return [], None
    language = detect_language(path)
    spec = CODE_SPECS.get(language)
    source: SourceKind = "code" if spec is not None else "doc" if language == "markdown" else "text"
    t = _Text(data)
    out = _Out(path=path, source=source, language=language, file_hash=file_hash)
    if spec is not None:
        try:
            tree = _parser(spec.name).parse(t.data)
            _chunk_code(out, t, spec, tree)
        except Exception:  # a grammar or walker surprise must not lose the file
            log.warning("symbol chunking failed, using windows", extra={"path": path})
            out = _Out(path=path, source=source, language=language, file_hash=file_hash)
            _chunk_text(out, t)
            return out.chunks, None
        if not refs:
            return out.chunks, None
        try:
            found = extract_refs(language, tree.root_node, data)
            binds = extract_binds(language, tree.root_node)
            if binds:
                found = sorted([*found, *binds], key=lambda r: r.byte)
        except Exception:  # references are extra evidence: never lose the chunks for them
            log.warning("reference extraction failed", extra={"path": path})
            found = []
        return out.chunks, FileGraph.build(out.chunks, found)
    if language == "markdown":
        _chunk_markdown(out, t)
    else:
        _chunk_text(out, t)
    return out.chunks, None
