"""File roles, declarations and question intent (ragloom.retrieve.roles)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragloom.retrieve.roles import (
    FILE_ROLES,
    change_request,
    file_role,
    is_declaration,
    query_intent,
)


@pytest.mark.parametrize(
    ("path", "role"),
    [
        ("starlette/routing.py", "implementation"),
        ("src/lib.rs", "implementation"),
        ("mux.go", "implementation"),
        ("lib/core/Axios.js", "implementation"),
        ("packages/zod/src/v4/core/schemas.ts", "implementation"),
        ("tests/test_routing.py", "test"),
        ("test_routing.py", "test"),
        ("mux_test.go", "test"),
        ("lib/adapters/http.spec.ts", "test"),
        ("packages/zod/src/v4/classic/tests/string.test.ts", "test"),
        ("axum/src/routing/tests/mod.rs", "test"),
        ("conftest.py", "test"),
        ("benchmarks/bench_table.py", "test"),
        ("CHANGELOG.md", "changelog"),
        ("docs/release-notes.md", "changelog"),
        ("HISTORY.rst", "changelog"),
        ("README.md", "documentation"),
        ("docs/routing.md", "documentation"),
        ("docs/conf.py", "documentation"),
        ("doc/man_docs.go", "implementation"),  # a Go package called doc (spf13/cobra)
        ("doc/README.md", "documentation"),
        ("examples/hello.py", "example"),
        ("_examples/rest/main.go", "example"),
        ("example_app.py", "example"),
        ("dist/axios.min.js", "generated"),
        ("api/service_pb2.py", "generated"),
        ("zz_generated.deepcopy.go", "generated"),
        (".github/workflows/ci.yml", "build"),
        ("setup.py", "build"),
        ("tasks.py", "build"),
        ("asyncio/tasks.py", "implementation"),  # only a root tasks.py is an invoke file
        ("pkg/setup.py", "implementation"),
        ("package.json", "build"),
        ("Cargo.toml", "build"),
        ("rollup.config.js", "build"),
        ("tsconfig.json", "build"),
        ("scripts/release.py", "build"),
        ("index.d.ts", "declaration"),
        ("rich/console.pyi", "declaration"),
        ("include/foo.h", "declaration"),
    ],
)
def test_file_role(path: str, role: str) -> None:
    assert file_role(path) == role


@given(st.text(max_size=60))
def test_file_role_total(path: str) -> None:
    """Any string gets exactly one known role, the same each time."""
    assert file_role(path) in FILE_ROLES
    assert file_role(path) == file_role(path)


@given(st.from_regex(r"[a-z]{1,8}(/[a-z]{1,8}){0,3}", fullmatch=True))
def test_tests_folder_always_test(prefix: str) -> None:
    assert file_role(f"tests/{prefix}.py") == "test"
    assert file_role(f"{prefix}/test_x.py") == "test"


def test_declaration_by_path_and_kind() -> None:
    assert is_declaration("types/index.d.ts", "function")
    assert is_declaration("rich/console.pyi", "function")
    assert is_declaration("src/api.ts", "interface")
    assert not is_declaration("src/api.ts", "function")
    assert not is_declaration("src/api.ts", "function", "function f() { return 1 }")


def test_python_class_skeleton() -> None:
    skeleton = "class Renderable(Protocol):\n    def render(self): ...\n\n    def size(self): ...\n"
    assert is_declaration("rich/protocol.py", "class", skeleton)
    with_attrs = 'class Box:\n    """A box."""\n    width: int\n\n    def draw(self): ...\n'
    assert is_declaration("rich/box.py", "class", with_attrs)
    with_code = "class Box:\n    WIDTH = compute()\n\n    def draw(self): ...\n"
    assert not is_declaration("rich/box.py", "class", with_code)
    no_methods = "class Empty:\n    x = 1\n"
    assert not is_declaration("rich/box.py", "class", no_methods)


def test_abstract_method() -> None:
    text = "@abstractmethod\ndef render(self) -> str:\n    raise NotImplementedError\n"
    assert is_declaration("rich/abc.py", "method", text)
    text = "def render(self) -> str:\n    return 'x'\n"
    assert not is_declaration("rich/abc.py", "method", text)
    assert is_declaration("src/a.ts", "module", "export declare function f(): void;")


@pytest.mark.parametrize(
    ("query", "roles"),
    [
        ("Add support for tuples as positional arguments in rich repr", set()),
        ("Fix flaky test for the router", {"test"}),
        ("Update docs for Mount", {"documentation"}),
        ("Add types to the d.ts file", {"declaration"}),
        ("Add an example of middleware", {"example"}),
        ("Bump eslint in CI", {"build"}),
        ("add a CHANGELOG entry", {"changelog"}),
    ],
)
def test_query_intent(query: str, roles: set[str]) -> None:
    assert query_intent(query) == roles


@given(st.text(max_size=80))
def test_query_intent_roles_known(query: str) -> None:
    assert query_intent(query) <= set(FILE_ROLES) - {"implementation"}


@pytest.mark.parametrize(
    ("query", "change"),
    [
        ("Fix crash when the header is empty", True),
        ("Add support for tuples as positional arguments in rich repr", True),
        ("middleware: new SetHeader handler to set response header key/value", True),
        ("fix(router): keep the trailing slash", True),
        ("Secret: add a __bool__ implementation", True),
        ("ContentCharset should skip requests without a body", True),
        ("Where is the retry policy configured?", False),
        ("How does the router match wildcard routes", False),
        ("Get the current time, in seconds", False),
        ("float: Get the current time, in seconds", False),
        ("Return the width of a string in terminal cells", False),
        ("", False),
    ],
)
def test_change_request(query: str, change: bool) -> None:
    assert change_request(query) is change
