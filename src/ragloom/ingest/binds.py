"""Which names hold an instance of which type: the graph's light type inference.

``logger = Logger(...)`` at the top of a module, ``def handle(request: Request)``, ``c :=
&Client{}``, ``const c = new Client()``, ``Foo x = new Foo()``, ``let x: Foo``, ``self.client
= Client()`` in a constructor: each says that a name (a variable, a parameter, an attribute of
``self``/``this``) holds a value of a named type. The graph then resolves ``logger.add()`` or
``request.url`` to the method of that type instead of guessing by name (docs/graph.md).

:func:`extract_binds` returns one :class:`~ragloom.ingest.refs.Ref` of kind ``bind`` per such
declaration: ``name`` is the bound name (``logger``, ``request``, ``self.client``,
``this.client``), ``qualifier`` the type as written, reduced to a name or a dotted name
(pointers, references, generics' arguments, ``Optional[...]`` and ``| None`` removed). A type
the rules cannot reduce to a name (a list, a function type) gives no record. Never raises.
"""

from __future__ import annotations

from typing import Any

from ragloom.ingest.refs import Ref

__all__ = ["RETURNS", "extract_binds"]

_Node = Any
_SELF = {
    "python": "self",
    "java": "this",
    "javascript": "this",
    "typescript": "this",
    "tsx": "this",
}
_PY_WRAPPERS = frozenset({"Optional", "Final", "ClassVar", "Annotated", "Type", "type"})
_NULLS = frozenset({"None", "null", "undefined", "nil"})


def _text(n: _Node) -> str:
    raw: bytes = n.text or b""
    return raw.decode("utf-8", "replace")


def _dotted(n: _Node | None) -> str | None:
    """``a.b.C`` for a name or a chain of attribute / selector / scoped names."""
    if n is None:
        return None
    t = n.type
    if t in {
        "identifier",
        "type_identifier",
        "attribute",
        "qualified_type",
        "nested_type_identifier",
        "scoped_type_identifier",
        "scoped_identifier",
        "member_expression",
        "selector_expression",
        "field_access",
        "package_identifier",
    }:
        norm = "".join(_text(n).split()).replace("::", ".")
        return norm if norm and all(p.isidentifier() for p in norm.split(".")) else None
    return None


def _type_name(n: _Node | None, language: str) -> str | None:
    """The named type a type node stands for, or None."""
    seen = 0
    while n is not None and seen < 8:
        seen += 1
        t = n.type
        got = _dotted(n)
        if got is not None:
            return None if got in _NULLS else got
        if t in {
            "type",
            "type_annotation",
            "type_parameter",
            "type_arguments",
            "pointer_type",
            "reference_type",
            "parenthesized_type",
        }:
            n = next((c for c in n.named_children if c.type != "lifetime"), None)
            continue
        if t == "string" and language == "python":  # a forward reference: "Client"
            inner = _text(n).strip("\"'")
            return inner if inner and all(p.isidentifier() for p in inner.split(".")) else None
        if t in {"generic_type", "subscript"}:
            head = n.child_by_field_name("value") or n.child_by_field_name("type")
            if head is None and n.named_children:
                head = n.named_children[0]
            name = _dotted(head)
            if language == "python" and name in _PY_WRAPPERS:
                args = [c for c in n.named_children[1:]]
                n = args[0] if args else None
                continue
            return name
        if t in {"union_type", "binary_operator"}:  # X | None
            parts = [c for c in n.named_children if _dotted(c) not in _NULLS]
            n = parts[0] if parts else None
            continue
        return None
    return None


def _bind(name_node: _Node, name: str, type_name: str | None) -> Ref | None:
    if not name or type_name is None:
        return None
    return Ref(
        name=name,
        kind="bind",
        line=name_node.start_point[0] + 1,
        byte=name_node.start_byte,
        qualifier=type_name,
    )


def _python(n: _Node) -> Ref | None:
    t = n.type
    if t == "assignment":
        left = n.child_by_field_name("left")
        if left is None:
            return None
        name = _dotted(left)
        if name is None or (left.type == "attribute" and not name.startswith("self.")):
            return None
        if name.count(".") > 1:
            return None
        typ = n.child_by_field_name("type")
        if typ is not None:
            return _bind(left, name, _type_name(typ, "python"))
        right = n.child_by_field_name("right")
        if right is not None and right.type == "call":
            return _bind(left, name, _dotted(right.child_by_field_name("function")))
        return None
    if t in {"typed_parameter", "typed_default_parameter"}:
        ident = n.child_by_field_name("name")
        if ident is None:
            ident = next((c for c in n.named_children if c.type == "identifier"), None)
        typ = n.child_by_field_name("type")
        if ident is None or ident.type != "identifier":
            return None
        return _bind(ident, _text(ident), _type_name(typ, "python"))
    return None


def _go(n: _Node) -> list[Ref]:
    t = n.type
    out: list[Ref] = []
    if t in {"parameter_declaration", "var_spec"}:
        typ = _type_name(n.child_by_field_name("type"), "go")
        value = n.child_by_field_name("value")
        if typ is None and value is not None and value.named_children:
            typ = _go_literal_type(value.named_children[0])
        for c in n.children_by_field_name("name"):
            if (r := _bind(c, _text(c), typ)) is not None:
                out.append(r)
    elif t == "short_var_declaration":
        left = n.child_by_field_name("left")
        right = n.child_by_field_name("right")
        if left is not None and right is not None:
            for name, value in zip(left.named_children, right.named_children, strict=False):
                r = _bind(name, _text(name), _go_literal_type(value))
                if name.type == "identifier" and r is not None:
                    out.append(r)
    return out


def _go_literal_type(v: _Node) -> str | None:
    if v.type == "unary_expression":
        v = v.child_by_field_name("operand") or v
    if v.type == "composite_literal":
        return _type_name(v.child_by_field_name("type"), "go")
    return None


def _js(n: _Node, language: str) -> list[Ref]:
    t = n.type
    if t in {"required_parameter", "optional_parameter"}:
        pat = n.child_by_field_name("pattern")
        typ = _type_name(n.child_by_field_name("type"), language)
        if pat is None or pat.type != "identifier":
            return []
        name = _text(pat)
        if any(c.type == "accessibility_modifier" for c in n.children):  # constructor(private c: C)
            r2 = _bind(pat, f"this.{name}", typ)
            r1 = _bind(pat, name, typ)
            return [r for r in (r1, r2) if r is not None]
        r = _bind(pat, name, typ)
        return [r] if r is not None else []
    if t == "variable_declarator":
        ident = n.child_by_field_name("name")
        if ident is None or ident.type != "identifier":
            return []
        typ = _type_name(n.child_by_field_name("type"), language)
        value = n.child_by_field_name("value")
        if typ is None and value is not None and value.type == "new_expression":
            typ = _dotted(value.child_by_field_name("constructor"))
        r = _bind(ident, _text(ident), typ)
        return [r] if r is not None else []
    if t in {"public_field_definition", "field_definition"}:
        ident = n.child_by_field_name("name") or n.child_by_field_name("property")
        if ident is None:
            return []
        typ = _type_name(n.child_by_field_name("type"), language)
        value = n.child_by_field_name("value")
        if typ is None and value is not None and value.type == "new_expression":
            typ = _dotted(value.child_by_field_name("constructor"))
        r = _bind(ident, f"this.{_text(ident)}", typ)
        return [r] if r is not None else []
    if t == "assignment_expression":  # this.client = new Client()
        left = n.child_by_field_name("left")
        right = n.child_by_field_name("right")
        if left is None or right is None or right.type != "new_expression":
            return []
        target = _dotted(left)
        if target is None or not (target.startswith("this.") and target.count(".") == 1):
            return []
        r = _bind(left, target, _dotted(right.child_by_field_name("constructor")))
        return [r] if r is not None else []
    return []


def _java(n: _Node) -> list[Ref]:
    t = n.type
    if t not in {"formal_parameter", "local_variable_declaration", "field_declaration"}:
        return []
    typ = _type_name(n.child_by_field_name("type"), "java")
    out: list[Ref] = []
    if t == "formal_parameter":
        ident = n.child_by_field_name("name")
        if ident is not None and (r := _bind(ident, _text(ident), typ)) is not None:
            out.append(r)
        return out
    for decl in n.children_by_field_name("declarator"):
        ident = decl.child_by_field_name("name")
        if ident is None:
            continue
        name = _text(ident) if t == "local_variable_declaration" else f"this.{_text(ident)}"
        if (r := _bind(ident, name, typ)) is not None:
            out.append(r)
    return out


def _rust(n: _Node) -> list[Ref]:
    t = n.type
    if t == "parameter":
        pat = n.child_by_field_name("pattern")
        if pat is None or pat.type != "identifier":
            return []
        r = _bind(pat, _text(pat), _type_name(n.child_by_field_name("type"), "rust"))
        return [r] if r is not None else []
    if t == "let_declaration":
        pat = n.child_by_field_name("pattern")
        if pat is None or pat.type != "identifier":
            return []
        typ = _type_name(n.child_by_field_name("type"), "rust")
        value = n.child_by_field_name("value")
        if typ is None and value is not None:
            if value.type == "call_expression":  # Foo::new(...)
                fn = value.child_by_field_name("function")
                if fn is not None and fn.type == "scoped_identifier":
                    typ = _dotted(fn.child_by_field_name("path"))
            elif value.type == "struct_expression":
                typ = _dotted(value.child_by_field_name("name"))
        r = _bind(pat, _text(pat), typ)
        return [r] if r is not None else []
    return []


_TYPES: dict[str, tuple[str, ...]] = {
    "python": ("assignment", "typed_parameter", "typed_default_parameter"),
    "go": ("parameter_declaration", "var_spec", "short_var_declaration"),
    "javascript": ("variable_declarator", "field_definition", "assignment_expression"),
    "typescript": (
        "required_parameter",
        "optional_parameter",
        "variable_declarator",
        "public_field_definition",
        "assignment_expression",
    ),
    "java": ("formal_parameter", "local_variable_declaration", "field_declaration"),
    "rust": ("parameter", "let_declaration"),
}
RETURNS = "()"
"""The name of a ``bind`` record that says what a function returns (owned by the function)."""
_RETURN_FIELDS: dict[str, tuple[str, str]] = {
    # node type -> (field of the return type, field of the name)
    "function_definition": ("return_type", "name"),  # python
    "function_declaration": ("return_type", "name"),  # js/ts
    "method_definition": ("return_type", "name"),  # js/ts
    "method_declaration": ("type", "name"),  # java
    "function_item": ("return_type", "name"),  # rust
}
_TYPES["python"] += ("function_definition",)
_TYPES["typescript"] += ("function_declaration", "method_definition")
_TYPES["java"] += ("method_declaration",)
_TYPES["rust"] += ("function_item",)
_TYPES["go"] += ("function_declaration", "method_declaration")
_TYPES["tsx"] = _TYPES["typescript"]
_NARROW: dict[tuple[str, str], str] = {
    # only the assignments that can say a type: a call on the right, or an annotation
    ("python", "assignment"): "(assignment right: (call)) @n (assignment type: (_)) @n",
}
_queries: dict[str, Any] = {}


def _query(language: str) -> Any:
    """The compiled query that finds the declarations of ``language`` (cached): matching
    runs in tree-sitter's C code, so only the few declaration nodes reach Python (walking every
    node in Python cost as much as chunking the file)."""
    q = _queries.get(language)
    if q is None:
        from tree_sitter import Query
        from tree_sitter_language_pack import get_language

        lang = get_language(language)  # type: ignore[arg-type]
        kinds = [k for k in _TYPES[language] if lang.id_for_node_kind(k, True)]
        patterns = [_NARROW.get((language, k), f"({k}) @n") for k in kinds]
        q = Query(lang, " ".join(patterns))
        _queries[language] = q
    return q


def _returns(n: _Node, language: str) -> Ref | None:
    """``bind`` ``()`` -> the type a function's declared result names."""
    if language == "go" and n.type in {"function_declaration", "method_declaration"}:
        typ = n.child_by_field_name("result")
    else:
        fields = _RETURN_FIELDS.get(n.type)
        if fields is None:
            return None
        typ = n.child_by_field_name(fields[0])
    name = n.child_by_field_name("name")
    if typ is None or name is None:
        return None
    return _bind(name, RETURNS, _type_name(typ, language))


def extract_binds(language: str, root: _Node) -> list[Ref]:
    """The ``bind`` records of one parsed file, in source order (see the module docstring)."""
    if language not in _TYPES:
        return []
    out: list[Ref] = []
    try:
        from tree_sitter import QueryCursor

        nodes = QueryCursor(_query(language)).captures(root).get("n", [])
        for n in nodes:
            if n.type in _RETURN_FIELDS:
                r = _returns(n, language)
                if r is not None:
                    out.append(r)
                continue
            if language == "python":
                r = _python(n)
                if r is not None:
                    out.append(r)
            elif language == "go":
                out.extend(_go(n))
            elif language in {"javascript", "typescript", "tsx"}:
                out.extend(_js(n, language))
            elif language == "java":
                out.extend(_java(n))
            elif language == "rust":
                out.extend(_rust(n))
    except Exception:  # extra evidence: a grammar surprise gives what was found so far
        pass
    out.sort(key=lambda r: r.byte)
    return out
