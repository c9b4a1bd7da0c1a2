"""Resolve the references of every file to the definitions they mean: the graph's edges.

Input: the code chunks of one generation (the definitions) and the per-file reference records
(:mod:`ragloom.ingest.filegraph`). Each reference is resolved by scope, import and name, and the
way it was resolved sets its confidence (named constants below, docs/graph.md):

1. a name the file defines or imports (``send``, ``from .util import send``, ``util.send`` with
   ``import util``, a Go package's ``pkg.Send``): :data:`CONF_EXACT`;
2. through ``self``/``this``/``super()`` or a class name: the method of the enclosing class or of
   a class it inherits from (:data:`CONF_MEMBER`);
3. a name no scope or import explains (``obj.send()`` with ``obj`` of unknown type): every
   definition of that name, sharing :data:`CONF_NAME` (``1 / candidates`` of it each), none
   when there are more than :data:`MAX_NAME_CANDIDATES`. In Python, whose names are lexical,
   a bare name the file neither defines nor imports is a builtin or a local: never matched by
   name alone.

An import that names no indexed file (a third-party package) binds nothing: its names are not
matched by name alone either, since they are known to come from outside.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ragloom.graph.model import Definition
from ragloom.graph.modules import ModuleMap
from ragloom.index.store import GraphDefRow
from ragloom.ingest.binds import RETURNS
from ragloom.ingest.filegraph import FileGraph, Row
from ragloom.ingest.refs import REF_KINDS, Ref

__all__ = [
    "COMMON_METHODS",
    "CONF_COMMON_NAME",
    "CONF_EXACT",
    "CONF_MEMBER",
    "CONF_NAME",
    "MAX_NAME_CANDIDATES",
    "Edges",
    "resolve_graph",
]

CONF_EXACT = 1.0
"""A name the file defines, imports, or reaches through an imported module."""
CONF_MEMBER = 0.9
"""A method found through ``self``/``this``/``super()`` or a class name, in the class or in
what it inherits from (a subclass may override it: not quite certain)."""
CONF_NAME = 0.5
"""A name matched by name alone, shared by its candidates."""
CONF_COMMON_NAME = 0.2
"""A method of a receiver of unknown type matched by name alone when the name is also a
well-known standard-library method of the language (:data:`COMMON_METHODS`: ``unwrap``,
``Error``, ``toString``), shared by its candidates: below the default cut, since the call is
far more often the library's method than the repository's one definition of that name."""
MAX_NAME_CANDIDATES = 8
"""More definitions of one name than this and a match by name alone says nothing."""
MAX_BASE_DEPTH = 6
"""How far up the inheritance chain a method is looked for."""

_SELF = frozenset({"self", "this", "cls", "Self"})
_SUPER = frozenset({"super()", "super"})
_TYPE_KINDS = frozenset({"class", "struct", "enum", "interface", "trait", "impl"})
_FOLDER_LANGS = frozenset({"go", "java"})  # a package is a folder: its files share names
_STRICT_LANGS = frozenset({"python", "go", "rust", "java"})
"""Languages whose bare names are lexical: a name the file neither defines nor imports (nor
its package shares, for Go and Java) is a builtin, a local or a parameter, never matched by
name alone. (Until 2026-11-28 only Python: in a monorepo, Rust and Go locals named ``args``
resolved to a function of that name in another crate or language.)"""
_IMPLICIT_THIS = frozenset({"java", "csharp", "cpp", "kotlin", "scala"})
"""Languages where a bare name inside a class can be one of its members (``foo()`` for
``this.foo()``). Not JavaScript or TypeScript (``this.`` is required), Rust or Go (no implicit
receiver), Python (``self.`` is required)."""
_CALL_ONLY_METHODS = frozenset({"java", "rust"})
"""Languages where a method is reached only by calling it: a read of a name (``reader``,
``self.defaults``) is a variable or a field, never a method of that name."""
_FAMILY = {"javascript": "js", "typescript": "js", "tsx": "js", "c": "c", "cpp": "c"}
"""Languages whose names can refer to each other's definitions (JavaScript is imported from
TypeScript; C headers from C++). Every other language is a family of its own: a name is never
resolved to a definition in another family (a user trial's monorepo had 9.7 % of its edges
crossing languages: JavaScript ``res.send`` to a Rust method, Go ``args`` to a Rust function)."""
_FUNCTION_KINDS = frozenset({"function", "method"})


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


COMMON_METHODS: dict[str, frozenset[str]] = {
    "rust": _words(
        "unwrap expect unwrap_or unwrap_or_else unwrap_or_default ok err ok_or ok_or_else map "
        "map_err and_then or_else is_some is_none is_ok is_err as_ref as_mut as_str as_slice "
        "as_bytes as_deref clone to_string to_owned into from len is_empty iter iter_mut "
        "into_iter next collect push pop insert remove get get_mut contains contains_key "
        "extend clear take replace join split trim starts_with ends_with borrow borrow_mut "
        "lock read write flush fmt eq cmp partial_cmp hash default drop"
    ),
    "go": _words(
        "Error String Len Less Swap Close Read Write WriteString Flush Bytes Lock Unlock "
        "RLock RUnlock Done Wait Reset Next Err Unwrap"
    ),
    "java": _words(
        "toString equals hashCode compareTo getClass clone get set put add remove size "
        "isEmpty contains containsKey iterator hasNext next close length charAt substring "
        "append trim split startsWith endsWith stream map filter collect forEach keySet "
        "values entrySet getMessage"
    ),
    "js": _words(
        "toString valueOf push pop shift unshift map filter reduce forEach find some every "
        "includes indexOf join split slice splice concat keys values entries get set has "
        "delete add clear then catch finally trim replace startsWith endsWith"
    ),
}
"""Per language family (:data:`_FAMILY`): method names of the standard library (and of its
core traits and interfaces: Rust ``Clone``/``Display``, Go ``error``/``fmt.Stringer``) that a
call on a receiver of unknown type most likely means; such a call matched by name alone gets
:data:`CONF_COMMON_NAME` (a user trial: ripgrep's one ``fn unwrap`` had 266 callers at 0.5,
every ``Option``/``Result`` ``.unwrap()``; cobra's test-only ``customMultiString.String``
had 66). Python is left out (its receivers of unknown type are measured against jedi)."""
_RUST_LOCAL_HEADS = frozenset({"crate", "self", "super", "Self"})
"""First segments of a Rust path that name this crate. A path whose first segment is none of
these, nor a name the file binds, a module or a workspace crate of the index, names another
crate's item (``std::fmt::Debug``) and resolves to nothing."""


def _family(language: str) -> str:
    return _FAMILY.get(language, language)


_KIND_CODE = {k: i for i, k in enumerate(REF_KINDS)}
_IMPORT = _KIND_CODE["import"]
_INHERIT = _KIND_CODE["inherit"]
_BIND = _KIND_CODE["bind"]
_CALL = _KIND_CODE["call"]
_READ = _KIND_CODE["read"]
_TYPE_REFS = frozenset({_KIND_CODE["inherit"], _KIND_CODE["type"]})


@dataclass(slots=True)
class Edges:
    """The resolved references, one row each (parallel arrays)."""

    src: np.ndarray  # node holding the reference
    dst: np.ndarray  # node it resolves to
    kind: np.ndarray  # index into REF_KINDS
    line: np.ndarray
    conf: np.ndarray


@dataclass(slots=True)
class _Scope:
    """What one file binds at its top: its own names and its imports."""

    path: str
    language: str
    own: dict[str, int] = field(default_factory=dict)  # symbol (qualified in file) -> node
    modules: dict[str, str] = field(default_factory=dict)  # local name -> module key
    names: dict[str, tuple[str, str]] = field(default_factory=dict)  # local -> (module, member)
    external: set[str] = field(default_factory=set)  # local names bound by outside imports
    stars: list[str] = field(default_factory=list)


class _Resolver:
    def __init__(
        self,
        defs: Sequence[Definition],
        records: Sequence[tuple[str, str, FileGraph]],
        manifests: Sequence[tuple[str, str]] = (),
    ):
        self.defs = defs
        self.records = records
        self.mods = ModuleMap(((p, lang) for p, lang, _ in records), manifests)
        self.by_path: dict[str, dict[str, int]] = defaultdict(dict)
        self.by_name: dict[tuple[str, str], list[int]] = defaultdict(list)
        """(language family, name) -> definitions (:data:`_FAMILY`)."""
        self.modules_node: dict[str, int] = {}
        for i, d in enumerate(defs):
            if d.kind == "module":
                self.modules_node.setdefault(d.path, i)
                continue
            self.by_path[d.path].setdefault(d.symbol, i)
            self.by_name[(_family(d.language), d.name)].append(i)
        self.scopes: dict[str, _Scope] = {}
        self.bases: dict[int, list[int]] = defaultdict(list)
        # light type inference (ingest/binds.py): what type a name holds
        self.local_binds: dict[int, dict[str, str]] = defaultdict(dict)  # function node
        self.module_binds: dict[str, dict[str, str]] = defaultdict(dict)  # path
        self.attr_binds: dict[int, dict[str, tuple[str, str]]] = defaultdict(dict)  # class node
        self._by_name_memo: dict[tuple[str, str, bool], list[tuple[int, float]] | None] = {}

    def add_bind(self, path: str, name: str, typ: str | None, owner: int | None) -> None:
        """Remember that ``name`` holds a ``typ`` (the first binding wins)."""
        if not typ:
            return
        d = self.defs[owner] if owner is not None else None
        if "." in name:  # self.x / this.x
            cls = self.enclosing_class(owner) if owner is not None else None
            if cls is not None:
                self.attr_binds[cls].setdefault(name.split(".", 1)[1], (path, typ))
        elif owner is None or d is None or d.kind == "module":
            self.module_binds[path].setdefault(name, typ)
        elif d.kind in _TYPE_KINDS:
            self.attr_binds[owner].setdefault(name, (path, typ))
        else:
            self.local_binds[owner].setdefault(name, typ)

    def type_node(self, path: str, typ: str, depth: int = 0) -> int | None:
        """The class a type written in ``path`` names (through the file's own names and
        imports), or None. A function stands for what it returns (its declared result)."""
        s = self.scopes.get(path)
        if s is None or depth > 3:
            return None
        if "." not in typ:
            got = self.bare(s, typ, None)
        else:
            q, _, name = typ.rpartition(".")
            got = None
            if q in s.modules:
                found = self.member_of_module(s.modules[q], name)
                got = [(found, CONF_EXACT)] if found is not None else None
        if not got or len(got) != 1:
            return None
        node = got[0][0]
        if self.defs[node].kind in _TYPE_KINDS:
            return node
        result = self.local_binds.get(node, {}).get(RETURNS)
        if result is not None:  # ``x = make()`` with ``def make() -> Client``
            return self.type_node(self.defs[node].path, result, depth + 1)
        return None

    def type_of(self, s: _Scope, q: str, owner: int | None, depth: int = 0) -> int | None:
        """The class of the value the qualifier ``q`` names: a parameter or local with a
        declared or constructed type, a module-level instance (of this file or imported), or
        an attribute of ``self``/``this`` set in the class."""
        head, dot, attr = q.partition(".")
        if dot:
            if head not in _SELF or "." in attr or owner is None:
                return None
            cls = self.enclosing_class(owner)
            seen: set[int] = set()
            while cls is not None and cls not in seen:
                seen.add(cls)
                bound = self.attr_binds.get(cls, {}).get(attr)
                if bound is not None:
                    return self.type_node(*bound)
                bases = self.bases.get(cls)
                cls = bases[0] if bases else None
            return None
        if owner is not None:
            typ = self.local_binds.get(owner, {}).get(q)
            if typ is not None:
                return self.type_node(s.path, typ)
        typ = self.module_binds.get(s.path, {}).get(q)
        if typ is not None:
            return self.type_node(s.path, typ)
        if q in s.names and depth < 3:
            key, member = s.names[q]
            for path in self.files_of(key):
                typ = self.module_binds.get(path, {}).get(member)
                if typ is not None:
                    return self.type_node(path, typ)
                other = self.scopes.get(path)
                if other is not None and member in other.names:  # re-exported instance
                    return self.type_of(other, member, None, depth + 1)
        return None

    # -- scopes ----------------------------------------------------------------------------
    def module_key(self, importer: str, language: str, module: str) -> str | None:
        """A key naming the imported file or folder: ``py:<module>``, ``file:<path>``,
        ``pkg:<sep><import path>`` (a Go or Java package: its folders); None for an import
        this index does not hold."""
        if language == "python":
            full = self.mods.python_absolute(importer, module)
            return f"py:{full}" if full is not None else None
        if language in {"javascript", "typescript", "tsx"}:
            path = self.mods.js_file(importer, module)
            return f"file:{path}" if path else None
        if language in {"go", "java"}:
            sep = "." if language == "java" else "/"
            return f"pkg:{sep}{module}" if self.mods.package_files(module, sep) else None
        if language == "rust":
            files = self.mods.rust_files(importer, module)
            return f"file:{files[0]}" if files else None
        return None

    def scope(self, path: str, language: str, rows: Iterable[Row]) -> _Scope:
        s = _Scope(path, language, dict(self.by_path.get(path, {})))
        for row in rows:
            if row[1] != _IMPORT or row[5] is None:
                continue
            r = Ref(row[0], "import", row[2], row[3], row[4], row[5], row[6])
            assert r.module is not None
            key = self.module_key(path, language, r.module)
            if language == "python":
                self._python_import(s, r, key)
                continue
            if language == "go":
                local = r.alias or r.module.rstrip("/").rsplit("/", 1)[-1]
            elif r.name in {"", "*"}:
                local = r.alias or r.module.rsplit("/", 1)[-1].rsplit("::", 1)[-1]
            else:
                local = r.alias or r.name
            if key is None:
                if local not in s.own:  # `use super::{Glob}` in a Rust `mod tests`: the
                    s.external.add(local)  # file's own Glob is meant, not an outside one
            elif r.name == "*":
                s.stars.append(key)
            elif r.name == "" or language == "go":
                s.modules[local] = key
            else:
                s.names[local] = (key, r.name)
        return s

    def _python_import(self, s: _Scope, r: Ref, key: str | None) -> None:
        assert r.module is not None
        if r.name == "":  # import a.b [as c]
            local = r.alias or r.module
            if key is None:
                s.external.add(local.split(".")[0] if r.alias is None else local)
                return
            s.modules[local] = key
            if r.alias is None:  # ``import a.b`` binds ``a`` too
                head = r.module.split(".")[0]
                head_key = self.module_key(s.path, "python", head)
                if head_key is not None:
                    s.modules.setdefault(head, head_key)
            return
        if key is None:
            if r.name != "*":
                s.external.add(r.alias or r.name)
            return
        if r.name == "*":
            s.stars.append(key)
            return
        sub = f"{key}.{r.name}"
        if sub[3:] in self.mods.py:  # ``from pkg import mod`` imports a module
            s.modules[r.alias or r.name] = sub
        else:
            s.names[r.alias or r.name] = (key, r.name)

    # -- lookups -----------------------------------------------------------------------------
    def files_of(self, key: str) -> list[str]:
        kind, _, rest = key.partition(":")
        if kind == "py":
            path = self.mods.python_file(rest)
            return [path] if path else []
        if kind == "file":
            return [rest]
        return self.mods.package_files(rest[1:], rest[:1])

    def member_of_module(self, key: str, name: str, depth: int = 0) -> int | None:
        """The top-level definition ``name`` of the imported file(s), following re-exports
        (``from .impl import send`` in a package's ``__init__``)."""
        for path in self.files_of(key):
            node = self.by_path.get(path, {}).get(name)
            if node is not None:
                return node
        if depth < 3:
            for path in self.files_of(key):
                sc = self.scopes.get(path)
                if sc is None:
                    continue
                if name in sc.names:
                    mkey, member = sc.names[name]
                    return self.member_of_module(mkey, member, depth + 1)
        return None

    def member(self, cls: int, name: str) -> int | None:
        """Method ``name`` of class node ``cls`` or of a class it inherits from."""
        seen = {cls}
        frontier = [cls]
        for _ in range(MAX_BASE_DEPTH):
            nxt: list[int] = []
            for c in frontier:
                d = self.defs[c]
                node = self._package_symbol(d.path, d.language, f"{d.symbol}.{name}")
                if node is not None:
                    return node
                for b in self.bases.get(c, ()):
                    if b not in seen:
                        seen.add(b)
                        nxt.append(b)
            if not nxt:
                return None
            frontier = nxt
        return None

    def _package_symbol(self, path: str, language: str, symbol: str) -> int | None:
        node = self.by_path.get(path, {}).get(symbol)
        if node is None and language in _FOLDER_LANGS:
            for folder in self.mods.package_dirs(posixpath.dirname(path), language):
                for other in self.mods.dirs.get(folder, ()):
                    node = self.by_path.get(other, {}).get(symbol)
                    if node is not None:
                        return node
        return node

    def enclosing_class(self, owner: int) -> int | None:
        d = self.defs[owner]
        sym = d.symbol
        if d.kind in _TYPE_KINDS:
            return owner
        while "." in sym:
            sym = sym.rsplit(".", 1)[0]
            node = self._package_symbol(d.path, d.language, sym)
            if node is not None and self.defs[node].kind in _TYPE_KINDS:
                return node
        return None

    # -- resolution --------------------------------------------------------------------------
    def bare(self, s: _Scope, name: str, owner: int | None) -> list[tuple[int, float]] | None:
        """A bare name: its definitions with confidence; None when it is known to be outside
        (a builtin, a local or a third-party import) or unknown in a lexical language."""
        node = s.own.get(name)
        if node is not None:
            return [(node, CONF_EXACT)]
        if name in s.names:
            key, member = s.names[name]
            found = self.member_of_module(key, member)
            return [(found, CONF_EXACT)] if found is not None else None
        if name in s.external or name in s.modules:
            return None
        if owner is not None and s.language in _IMPLICIT_THIS:  # Java/C#-style implicit this
            cls = self.enclosing_class(owner)
            if cls is not None:
                found = self.member(cls, name)
                if found is not None:
                    return [(found, CONF_MEMBER)]
        if s.language in _FOLDER_LANGS:
            found = self._package_symbol(s.path, s.language, name)
            if found is not None:
                return [(found, CONF_EXACT)]
        for key in s.stars:
            found = self.member_of_module(key, name)
            if found is not None:
                return [(found, CONF_MEMBER)]
        if s.language in _STRICT_LANGS:
            return None
        return self.by_name_only(name, s.language, top_level=True)

    def by_name_only(
        self, name: str, language: str, *, top_level: bool
    ) -> list[tuple[int, float]] | None:
        """Every definition of ``name`` in ``language``'s family (:data:`_FAMILY`), sharing
        :data:`CONF_NAME`; None when there is none or more than :data:`MAX_NAME_CANDIDATES`."""
        family = _family(language)
        key = (family, name, top_level)
        if key in self._by_name_memo:
            return self._by_name_memo[key]
        cands = [
            i
            for i in self.by_name.get((family, name), ())
            if ("." not in self.defs[i].symbol) == top_level or not top_level
        ]
        got = None
        if cands and len(cands) <= MAX_NAME_CANDIDATES:
            share = CONF_NAME / len(cands)
            got = [(i, share) for i in cands]
        self._by_name_memo[key] = got
        return got

    def qualified(
        self, s: _Scope, qualifier: str, name: str, owner: int | None
    ) -> list[tuple[int, float]] | None:
        q = qualifier
        if q in _SELF or q in _SUPER:
            cls = self.enclosing_class(owner) if owner is not None else None
            if cls is None:
                return None
            if q in _SUPER:
                for b in self.bases.get(cls, ()):
                    found = self.member(b, name)
                    if found is not None:
                        return [(found, CONF_MEMBER)]
                return None
            found = self.member(cls, name)
            if found is not None:
                return [(found, CONF_MEMBER)]
            return self.method_by_name(name, s.language)
        if q in s.modules:
            found = self.member_of_module(s.modules[q], name)
            if found is not None:
                return [(found, CONF_EXACT)]
            return None  # a submodule, or a name the module does not define
        cls = self.type_of(s, q, owner)
        if cls is not None:  # an instance of a known class: its method, or nothing
            found = self.member(cls, name)
            return [(found, CONF_MEMBER)] if found is not None else None
        head = q.split(".", 1)[0].split("::", 1)[0]
        if head in s.external and head not in s.own:
            return None
        if (
            s.language == "rust"
            and "::" in q
            and head not in _RUST_LOCAL_HEADS
            and head not in s.own
            and head not in s.names
            and head not in s.modules
            and head not in self.mods.rust_modules
        ):  # ``std::fmt::Debug``, ``serde::Serialize``: another crate's item, never a local
            return None  # one of the same last name (ripgrep's flag ``struct Debug``)
        if "." not in q and "::" not in q and "(" not in q:
            target = self.bare(s, q, owner)
            if target is not None and len(target) == 1:
                node = target[0][0]
                if self.defs[node].kind in _TYPE_KINDS:
                    found = self.member(node, name)
                    if found is not None:
                        return [(found, CONF_MEMBER)]
        if q.replace("::", ".") in s.modules:
            found = self.member_of_module(s.modules[q.replace("::", ".")], name)
            if found is not None:
                return [(found, CONF_EXACT)]
        return self.method_by_name(name, s.language)

    def method_by_name(self, name: str, language: str) -> list[tuple[int, float]] | None:
        """A method of a receiver of unknown type, by name alone (:meth:`by_name_only`);
        a well-known library method name (:data:`COMMON_METHODS`) gets
        :data:`CONF_COMMON_NAME` instead of :data:`CONF_NAME`."""
        got = self.by_name_only(name, language, top_level=False)
        if got and name in COMMON_METHODS.get(_family(language), ()):
            return [(n, c * (CONF_COMMON_NAME / CONF_NAME)) for n, c in got]
        return got

    def resolve(self, s: _Scope, row: Row, owner: int | None) -> list[tuple[int, float]] | None:
        name, kind, qualifier, module = row[0], row[1], row[4], row[5]
        if kind == _IMPORT:
            if module is None or name in {"", "*"}:
                return None
            key = self.module_key(s.path, s.language, module)
            if key is None:
                return None
            found = self.member_of_module(key, name)
            return [(found, CONF_EXACT)] if found is not None else None
        if qualifier is None:
            got = self.bare(s, name, owner)
        else:
            got = self.qualified(s, qualifier, name, owner)
        if got and kind in _TYPE_REFS:
            got = [(n, c) for n, c in got if self.defs[n].kind in _TYPE_KINDS] or None
        elif got and kind == _READ and s.language in _CALL_ONLY_METHODS:
            got = [(n, c) for n, c in got if self.defs[n].kind not in _FUNCTION_KINDS] or None
        return got


def _rows_of(fg: FileGraph, kind: int) -> list[Row]:
    """The rows of one kind (few: imports, bases, binds), without making the others."""
    kinds = fg.cols[1]
    if kind not in kinds:
        return []
    cols = fg.cols
    return [tuple(c[i] for c in cols) for i, k in enumerate(kinds) if k == kind]


def resolve_graph(
    rows: Sequence[GraphDefRow],
    records: Sequence[tuple[str, str, FileGraph]],
    manifests: Sequence[tuple[str, str]] = (),
) -> tuple[list[Definition], dict[str, int], Edges, dict[int, int]]:
    """The graph's nodes (one per chunk head), the node of every chunk id (parts included),
    the resolved edges and the node of every chunk rowid. ``manifests``: (path, text) of the
    index's ``go.mod`` and ``package.json`` files (:data:`~ragloom.graph.modules.MANIFEST_NAMES`)."""
    from ragloom.ingest.chunker import head_id

    heads: dict[str, int] = {}
    defs: list[Definition] = []
    node_of: dict[str, int] = {}
    rowid_node: dict[int, int] = {}
    for r in sorted(rows, key=lambda r: (r.path, r.start_line, r.rowid)):
        h = head_id(r.id)
        i = heads.get(h)
        if i is None:
            i = heads[h] = len(defs)
            defs.append(
                Definition(h, r.path, r.symbol, r.kind, r.language, r.start_line, r.end_line)
            )
        else:
            d = defs[i]
            if r.end_line > d.end_line or r.start_line < d.start_line:
                defs[i] = Definition(
                    d.id,
                    d.path,
                    d.symbol,
                    d.kind,
                    d.language,
                    min(d.start_line, r.start_line),
                    max(d.end_line, r.end_line),
                )
        node_of[r.id] = i
        rowid_node[r.rowid] = i
    res = _Resolver(defs, records, manifests)
    for path, language, fg in records:
        kinds = fg.cols[1]
        if _IMPORT in kinds:
            res.scopes[path] = res.scope(path, language, _rows_of(fg, _IMPORT))
        else:
            res.scopes[path] = res.scope(path, language, ())
    src: list[int] = []
    dst: list[int] = []
    kind: list[int] = []
    line: list[int] = []
    conf: list[float] = []

    def owner_of(fg: FileGraph, row: Row) -> int | None:
        o = row[7]
        return node_of.get(fg.ids[o]) if o >= 0 else None

    # base classes first: method lookups through ``self`` climb them; then what names hold
    for path, _, fg in records:
        s = res.scopes[path]
        for row in _rows_of(fg, _INHERIT):
            owner = owner_of(fg, row)
            if owner is None:
                continue
            got = res.resolve(s, row, owner)
            if got:
                cls = res.enclosing_class(owner)
                for n, _c in got:
                    if cls is not None and n != cls:
                        res.bases[cls].append(n)
    for path, _, fg in records:
        for row in _rows_of(fg, _BIND):
            res.add_bind(path, row[0], row[4], owner_of(fg, row))
    for path, _, fg in records:
        s = res.scopes[path]
        module_node = res.modules_node.get(path)
        ids = fg.ids
        for row in fg.rows:
            k = row[1]
            if k == _BIND:
                continue
            o = row[7]
            owner = node_of.get(ids[o]) if o >= 0 else module_node
            if owner is None:
                continue
            got = res.resolve(s, row, owner)
            if not got:
                continue
            for n, c in got:
                if n == owner and k != _CALL:
                    continue
                src.append(owner)
                dst.append(n)
                kind.append(k)
                line.append(row[2])
                conf.append(c)
    edges = Edges(
        np.asarray(src, dtype=np.int32),
        np.asarray(dst, dtype=np.int32),
        np.asarray(kind, dtype=np.int8),
        np.asarray(line, dtype=np.int32),
        np.asarray(conf, dtype=np.float32),
    )
    return defs, node_of, edges, rowid_node
