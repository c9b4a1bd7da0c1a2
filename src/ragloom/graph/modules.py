"""Where an import points: module names and package folders mapped to the files of the index.

Each language names modules its own way (docs/graph.md): Python by dotted module (relative ones
against the importing file's package), JavaScript and TypeScript by a path without its
extension (or by the name of a package of the repository: ``package.json``), Go by the
package folder's import path (under the module path ``go.mod`` declares), Java by package and
class (a package is the union of its folders across source roots), Rust by a
``crate::``/``super::`` path. :class:`ModuleMap` answers "which indexed files does this import
mean" for each, best effort: an import it cannot place (a third-party package) gives nothing,
and the graph then drops the names it binds instead of guessing.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections import defaultdict
from collections.abc import Iterable

__all__ = ["MANIFEST_NAMES", "ModuleMap", "python_module"]

MANIFEST_NAMES = ("go.mod", "package.json")
"""The files (by name, in any folder) whose text says what imports name: a Go module's path,
a JavaScript/TypeScript package's name and entry points."""
_GO_MODULE = re.compile(r"^\s*module\s+\"?([^\s\"]+)", re.MULTILINE)
_JSON_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')
_JS_ENTRY_FIELDS = ("types", "typings", "module", "main")

_JS_EXTS = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts", ".d.ts")
_JS_LANGS = frozenset({"javascript", "typescript", "tsx"})


def python_module(path: str) -> str:
    """Dotted module of a Python file (``src/`` layouts and ``__init__`` handled)."""
    stem, dot, ext = path.rpartition(".")
    base = stem if dot and "/" not in ext else path
    parts = [p for p in base.split("/") if p]
    if parts and parts[-1] == "__init__":
        parts.pop()
    if len(parts) > 1 and parts[0] == "src":
        parts.pop(0)
    return ".".join(parts)


def _js_key(path: str) -> str:
    for ext in sorted(_JS_EXTS, key=len, reverse=True):
        if path.endswith(ext):
            path = path[: -len(ext)]
            break
    if path.endswith("/index"):
        path = path[: -len("/index")]
    return path


def _strings(value: object) -> list[str]:
    """The paths an ``exports`` entry names, conditions in their order (nested ones too)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _package_json(text: str) -> tuple[str | None, dict[str, list[str]]]:
    """A ``package.json``'s name and, per subpath (``"."``, ``"./v4"``), the paths it may
    resolve to, best first. Text that is not JSON (a chunk of a large file) gives the name
    alone, when a ``"name"`` field can be read."""
    try:
        doc = json.loads(text)
    except ValueError:
        m = _JSON_NAME.search(text)
        return (m.group(1) if m else None), {}
    if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
        return None, {}
    subpaths: dict[str, list[str]] = defaultdict(list)
    exports = doc.get("exports")
    if isinstance(exports, dict) and any(str(k).startswith(".") for k in exports):
        for k, v in exports.items():
            if str(k).startswith(".") and "*" not in str(k):
                subpaths[str(k).rstrip("/")].extend(_strings(v))
    elif exports is not None:  # "exports": "./x.js" or conditions of "." alone
        subpaths["."].extend(_strings(exports))
    subpaths["."].extend(str(doc[f]) for f in _JS_ENTRY_FIELDS if isinstance(doc.get(f), str))
    return doc["name"], dict(subpaths)


class ModuleMap:
    """The indexed files by the names imports use for them."""

    def __init__(
        self, files: Iterable[tuple[str, str]], manifests: Iterable[tuple[str, str]] = ()
    ) -> None:
        """``files``: (path, language) of every code file of the index; ``manifests``: (path,
        text) of its :data:`MANIFEST_NAMES` files."""
        self.py: dict[str, str] = {}
        self.py_suffix: dict[str, list[str]] = defaultdict(list)
        self.js: dict[str, str] = {}
        self.dirs: dict[str, list[str]] = defaultdict(list)  # folder -> files (Go, Java, Rust)
        self.language: dict[str, str] = {}
        self._tails: dict[str, list[str]] | None = None
        self._package_memo: dict[tuple[str, str], list[str]] = {}
        for path, language in files:
            self.language[path] = language
            self.dirs[posixpath.dirname(path)].append(path)
            if language == "python":
                mod = python_module(path)
                if mod:
                    self.py.setdefault(mod, path)
            elif language in _JS_LANGS:
                self.js.setdefault(_js_key(path), path)
        crates: dict[str, list[str]] = defaultdict(list)
        for path, language in self.language.items():
            if language == "rust" and (path == "src/lib.rs" or path.endswith("/src/lib.rs")):
                src = posixpath.dirname(path)
                name = posixpath.basename(posixpath.dirname(src))
                if name:
                    crates[name.replace("-", "_")].append(src)
        self.rust_crates: dict[str, str] = {n: d[0] for n, d in crates.items() if len(d) == 1}
        """A workspace's library crates by name (its folder's name, ``-`` read as ``_``) ->
        its ``src`` folder: ``use globset::GlobBuilder`` in another crate of the workspace.
        A name two crates share is left out (ambiguous)."""
        self.py_packages: set[str] = set()
        """Dotted names of folders holding Python modules (namespace packages included)."""
        for mod, path in self.py.items():
            comps = mod.split(".")
            for k in range(1, len(comps)):
                self.py_suffix[".".join(comps[k:])].append(path)
                self.py_packages.add(".".join(comps[:k]))
        self.go_modules: dict[str, str] = {}
        """Module path (``go.mod``'s ``module`` line) -> the folder of its ``go.mod``."""
        self.js_packages: dict[str, tuple[str, dict[str, list[str]]]] = {}
        """The repository's own JavaScript/TypeScript packages by ``package.json`` name ->
        (their folder, the paths each subpath may resolve to)."""
        for path, text in sorted(manifests):
            folder = posixpath.dirname(path)
            if posixpath.basename(path) == "go.mod":
                m = _GO_MODULE.search(text)
                if m:
                    self.go_modules.setdefault(m.group(1).rstrip("/"), folder)
            elif posixpath.basename(path) == "package.json":
                pkg, subpaths = _package_json(text)
                if pkg and pkg not in self.js_packages:
                    self.js_packages[pkg] = (folder, subpaths)
        self._java_roots: dict[tuple[str, str], list[str]] | None = None
        self.rust_modules: set[str] = set()
        """Names of the Rust modules of the index (a file's stem, a folder holding ``.rs``
        files) and of its workspace crates: the first segment of a path that may be local."""
        for path, language in self.language.items():
            if language == "rust":
                stem = posixpath.basename(path).rpartition(".")[0]
                if stem not in {"mod", "lib", "main"}:
                    self.rust_modules.add(stem)
                self.rust_modules.add(posixpath.basename(posixpath.dirname(path)))
        self.rust_modules.update(self.rust_crates)

    # -- Python ------------------------------------------------------------------------------
    def python_absolute(self, importer: str, module: str) -> str | None:
        """The dotted module ``module`` (relative ones with their leading dots) names from the
        file ``importer``, resolved to a dotted name of this index, or None."""
        if module.startswith("."):
            level = len(module) - len(module.lstrip("."))
            rest = module[level:]
            base = python_module(importer).split(".")
            if not importer.endswith("__init__.py"):
                base = base[:-1]
            if level > 1:
                base = base[: len(base) - (level - 1)] if level - 1 <= len(base) else []
            full = ".".join([*base, rest] if rest else base)
            return full if full in self.py or full in self.py_packages else None
        if module in self.py or module in self.py_packages:
            return module
        # a package laid out below a folder this index does not treat as a root (lib/, python/)
        found = self.py_suffix.get(module)
        if found and len(found) == 1:
            return python_module(found[0])
        return None

    def python_file(self, module: str) -> str | None:
        return self.py.get(module)

    # -- JavaScript / TypeScript -------------------------------------------------------------
    def js_file(self, importer: str, spec: str) -> str | None:
        if spec.startswith("."):
            target = posixpath.normpath(posixpath.join(posixpath.dirname(importer), spec))
            return self.js.get(_js_key(target)) or self.js.get(target)
        own = self._own_package(spec)
        if own is not None:
            return own
        # path aliases (``@/lib/x``, ``~/x``): match by the path's tail
        tail = spec.split("/", 1)[1] if spec[:1] in "@~" and "/" in spec else None
        if tail:
            hits = [p for k, p in self.js.items() if k == tail or k.endswith("/" + tail)]
            if len(hits) == 1:
                return hits[0]
        return None

    def _own_package(self, spec: str) -> str | None:
        """The file an import of one of the repository's own packages (``"zod"``,
        ``"zod/v4"``, ``"@scope/lib"``) names: the subpath's entry in ``exports`` (or
        ``types``/``module``/``main`` for the package itself) that is indexed, else
        ``src/index`` (``src/<sub>``) or ``index`` (``<sub>``) of the package's folder."""
        name, sub = spec, "."
        while name not in self.js_packages:
            head, slash, _ = name.rpartition("/")
            if not slash or not head:
                return None
            name = head
        if name != spec:
            sub = "./" + spec[len(name) + 1 :]
        folder, subpaths = self.js_packages[name]
        rest = sub[2:]
        fallbacks = [posixpath.join("src", rest), rest] if rest else ["src/index", "index"]
        for cand in [*subpaths.get(sub, ()), *fallbacks]:
            target = posixpath.normpath(posixpath.join(folder, cand))
            found = self.js.get(_js_key(target)) or self.js.get(target)
            if found is not None:
                return found
        return None

    # -- folders: Go packages, Java packages, Rust modules -----------------------------------
    def package_files(self, import_path: str, sep: str = "/") -> list[str]:
        """The files of the indexed folder whose path ends with the import path's longest
        matching tail (Go ``github.com/o/r/sub/pkg`` -> ``sub/pkg``; Java ``a.b`` -> ``a/b``).

        Go: an import under a module path of a ``go.mod`` is the folder below that file
        (the longest module path first: nested modules). Java: a package is the union of the
        folders with that tail (``src/main/java/a/b`` and ``src/test/java/a/b``); in Go two
        folders with one tail are two packages, and the import is left unresolved."""
        key = (import_path, sep)
        found = self._package_memo.get(key)
        if found is None:
            found = self._package_memo[key] = self._package_files(import_path, sep)
        return found

    def _package_files(self, import_path: str, sep: str) -> list[str]:
        if self._tails is None:  # every folder by each of its tails, built once
            # (a scan of every folder per import tail took 1.6 s of a `ragloom defs` on a
            # 7,600-file Java and Go monorepo: 7,821 scans)
            tails: dict[str, list[str]] = defaultdict(list)
            for d in self.dirs:
                comps = d.split("/")
                for k in range(len(comps)):
                    tails["/".join(comps[k:])].append(d)
            self._tails = tails
        if sep == "/" and self.go_modules:
            for mod in sorted(self.go_modules, key=len, reverse=True):
                if import_path == mod or import_path.startswith(mod + "/"):
                    folder = posixpath.join(self.go_modules[mod], import_path[len(mod) + 1 :])
                    folder = folder.rstrip("/")
                    if folder in self.dirs:
                        return self.dirs[folder]
                    break
        comps = [c for c in import_path.split(sep) if c]
        for k in range(len(comps)):
            hits = self._tails.get("/".join(comps[k:]), [])
            if len(hits) == 1:
                return self.dirs[hits[0]]
            if hits and sep == ".":  # one Java package over several source roots
                return [p for d in sorted(hits) for p in self.dirs[d]]
            if hits:
                return []
        return []

    def package_dirs(self, folder: str, language: str) -> list[str]:
        """The folders of the package ``folder`` is part of: for Java, the same package path
        under each source root of one Maven/Gradle module (``<m>/src/main/java/a/b`` and
        ``<m>/src/test/java/a/b``); else the folder alone."""
        if language != "java":
            return [folder]
        if self._java_roots is None:
            roots: dict[tuple[str, str], list[str]] = defaultdict(list)
            for d in self.dirs:
                key = _java_package(d)
                if key is not None:
                    roots[key].append(d)
            self._java_roots = roots
        key = _java_package(folder)
        return sorted(self._java_roots.get(key, [folder])) if key is not None else [folder]

    def rust_files(self, importer: str, path: str) -> list[str]:
        """Files a Rust ``use`` path (``crate::a::b``, ``super::x``, ``self::y``, ``other::z``
        for a crate ``other`` of the same workspace) may name."""
        comps = [c for c in path.split("::") if c]
        if not comps:
            return []
        here = posixpath.dirname(importer)
        if comps[0] == "crate":
            comps = comps[1:]
            base = self._crate_src(importer)
        elif comps[0] in {"super", "self"}:
            base = here
            while comps and comps[0] in {"super", "self"}:
                if comps.pop(0) == "super":
                    base = posixpath.dirname(base)
        elif comps[0] in self.rust_crates and self.rust_crates[comps[0]] != self._crate_src(
            importer
        ):  # another crate of the workspace
            base = self.rust_crates[comps[0]]
            comps = comps[1:]
        else:
            return []
        for k in range(len(comps), -1, -1):
            stem = posixpath.join(base, *comps[:k]) if comps[:k] else base
            for cand in (stem + ".rs", stem + "/mod.rs"):
                if cand in self.language:
                    return [cand]
            if k == 0 and (base + "/lib.rs") in self.language:
                return [base + "/lib.rs"]
        return []

    def _crate_src(self, importer: str) -> str:
        d = posixpath.dirname(importer)
        while d:
            if posixpath.basename(d) == "src":
                return d
            d = posixpath.dirname(d)
        return posixpath.dirname(importer)


def _java_package(folder: str) -> tuple[str, str] | None:
    """(the module folder, the package path) of a folder below ``<m>/src/<set>/java``."""
    comps = folder.split("/")
    for i in range(len(comps) - 1, 1, -1):
        if comps[i] == "java" and comps[i - 2] == "src":
            return "/".join(comps[: i - 2]), "/".join(comps[i + 1 :])
    return None
