"""Signatures from chunk text: per-language headers, the lexer's corner cases, real chunks."""

from __future__ import annotations

import ast
import sysconfig
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragloom.assemble.signature import MAX_HEADER_CHARS, SIGNATURE_LANGUAGES, signature
from ragloom.ingest.chunker import MAX_CHUNK_BYTES, chunk_file, part_label

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "langs"
STDLIB = Path(sysconfig.get_paths()["stdlib"])

# (language, kind, chunk text, expected signature)
CASES: list[tuple[str, str, str, str]] = [
    # --- python
    (
        "python",
        "function",
        'def f(x=")", y={1: 2}) -> Dict[str, int]:\n    return {}\n',
        'def f(x=")", y={1: 2}) -> Dict[str, int]:',
    ),
    (
        "python",
        "function",
        "# leading comment\n@decorator(x=1)\n@other\ndef f(x=')',\n      z: str = '#') -> int:\n"
        '    """Docstring first line.\n\n    More.\n    """\n    return 1\n',
        "@decorator(x=1)\n@other\ndef f(x=')',\n      z: str = '#') -> int:\n"
        '    """Docstring first line."""',
    ),
    (
        "python",
        "method",  # a method's chunk starts at the decorator; later lines keep the file indent
        "@property\n    async def name(self) -> str:\n        '''The name.'''\n        return self._n\n",
        '@property\nasync def name(self) -> str:\n    """The name."""',
    ),
    (
        "python",
        "method",  # aligned continuation lines stay aligned (indent from the body: 4 + 4)
        "def send(self, request,\n             timeout: float = 1.0,\n             **kw):\n"
        "        return None\n",
        "def send(self, request,\n         timeout: float = 1.0,\n         **kw):",
    ),
    (
        "python",
        "function",
        "def g(\n    a,  # the a\n    b: dict[str, int] = {'k': 1},\n) -> None:\n    pass\n",
        "def g(\n    a,  # the a\n    b: dict[str, int] = {'k': 1},\n) -> None:",
    ),
    (
        "python",
        "function",
        "@app.route('/x:y', methods=['GET'])\ndef view(): return 1\n",
        "@app.route('/x:y', methods=['GET'])\ndef view():",
    ),
    ("python", "function", "def f(): 'one-line doc'\n", 'def f():\n    """one-line doc"""'),
    ("python", "function", 'def f():\n    "x".join(y)\n', "def f():"),  # no docstring
    (
        "python",
        "function",
        'def f():\n    """\n    Summary after a blank line.\n    """\n',
        'def f():\n    """Summary after a blank line."""',
    ),
    (
        "python",
        "function",
        "def f():\n    r'''Returns \"x\"'''\n",
        'def f():\n    """Returns "x" """',  # a closing " would end the one-liner early
    ),
    (
        "python",
        "class",
        'class Foo(Base, metaclass=M):\n    """A foo."""\n    x: int = 1\n    def m(self): ...\n',
        'class Foo(Base, metaclass=M):\n    """A foo."""',
    ),
    ("python", "class", "class A[T](B, C):\n    pass\n", "class A[T](B, C):"),
    ("python", "function", "lambda_ = 1\ndef broken(a, b\n", "lambda_ = 1"),  # no header: 1st line
    # --- go
    (
        "go",
        "method",
        "// Send sends.\nfunc (c *Client) Send(ctx context.Context,\n\treq *Request) (*Response, error) {\n"
        "\treturn nil, nil\n}\n",
        "func (c *Client) Send(ctx context.Context,\n\treq *Request) (*Response, error)",
    ),
    (
        "go",
        "function",
        "func Decode(b []byte) (map[string]interface{}, error) {\n\treturn nil, nil\n}",
        "func Decode(b []byte) (map[string]interface{}, error)",
    ),
    (
        "go",
        "function",
        "func Empty() struct{} {\n\treturn struct{}{}\n}",
        "func Empty() struct{}",
    ),
    (
        "go",
        "function",
        "func Map[T any, U any](s []T, f func(T) U) []U {\n\treturn nil\n}",
        "func Map[T any, U any](s []T, f func(T) U) []U",
    ),
    ("go", "struct", '// T is T.\ntype T struct {\n\tA int `json:"a"`\n}', "type T struct"),
    ("go", "interface", "type Shape interface {\n\tArea() float64\n}", "type Shape interface"),
    # --- rust
    (
        "rust",
        "function",
        "/// Parses.\n#[inline]\npub fn parse<T: FromStr>(s: &str) -> Result<Vec<T>, Error>\nwhere\n"
        "    T::Err: Debug,\n{\n    todo!()\n}",
        "#[inline]\npub fn parse<T: FromStr>(s: &str) -> Result<Vec<T>, Error>\nwhere\n    T::Err: Debug,",
    ),
    (
        "rust",
        "method",
        "pub async fn get<'a>(&'a self, key: &'a str) -> Option<&'a str> {\n        let c = '{';\n"
        "        None\n    }",
        "pub async fn get<'a>(&'a self, key: &'a str) -> Option<&'a str>",
    ),
    (
        "rust",
        "impl",
        "impl<T> From<T> for Wrapper<T> where T: Clone {\n    fn from(t: T) -> Self { Self(t) }\n}",
        "impl<T> From<T> for Wrapper<T> where T: Clone",
    ),
    (
        "rust",
        "struct",
        "#[derive(Debug)]\npub struct Id(pub u64);",
        "#[derive(Debug)]\npub struct Id(pub u64)",
    ),
    (
        "rust",
        "function",
        "pub fn adder() -> impl Fn(u8) -> u8 {\n    |x| x + 1\n}",
        "pub fn adder() -> impl Fn(u8) -> u8",
    ),
    ("rust", "function", 'fn raw() -> &\'static str { r#"}{"# }', "fn raw() -> &'static str"),
    # --- java
    (
        "java",
        "method",
        '/** Maps. */\n    @Override\n    @Deprecated(since = "1")\n'
        "    public <R> List<R> map(Function<? super T, ? extends R> f,\n"
        "                           int n) throws IOException {\n        return null;\n    }",
        '@Override\n@Deprecated(since = "1")\npublic <R> List<R> map(Function<? super T, ? extends R> f,\n'
        "                       int n) throws IOException",
    ),
    (
        "java",
        "class",
        "@Service\npublic class A<T extends Comparable<? super T>> extends B implements C {\n"
        "    void m() { ... }\n}",
        "@Service\npublic class A<T extends Comparable<? super T>> extends B implements C",
    ),
    (
        "java",
        "method",
        'public Map<String, List<Integer>> m(@Ann("{") int x) {\n  return null;\n}',
        'public Map<String, List<Integer>> m(@Ann("{") int x)',
    ),
    (
        "java",
        "class",
        "public record Point(int x, int y) implements Shape {\n}",
        "public record Point(int x, int y) implements Shape",
    ),
    # --- javascript / typescript / tsx
    (
        "javascript",
        "function",
        "export default async function* gen(a = `{${x}}`, b = '}') {\n  yield a;\n}",
        "export default async function* gen(a = `{${x}}`, b = '}')",
    ),
    (
        "javascript",
        "function",
        'export const bar = async (a, b = "{") => {\n  return a;\n};',
        'export const bar = async (a, b = "{") =>',
    ),
    ("javascript", "function", "const twice = (x) => x * 2;", "const twice = (x) =>"),
    (
        "typescript",
        "function",
        '/** doc */\nexport async function foo<T extends {a: string}>(x: T = {a: "}"}): Promise<void> {\n}',
        'export async function foo<T extends {a: string}>(x: T = {a: "}"}): Promise<void>',
    ),
    (
        "typescript",
        "function",
        "function shape(): {a: string} | {b: number} {\n  return {a: ''};\n}",
        "function shape(): {a: string} | {b: number}",
    ),
    ("typescript", "function", "function cb(): () => void {\n}", "function cb(): () => void"),
    (
        "typescript",
        "class",
        "@Component({\n  selector: 'app',\n})\nexport class AppComponent<T> extends Base<T> implements OnInit {\n}",
        "@Component({\n  selector: 'app',\n})\nexport class AppComponent<T> extends Base<T> implements OnInit",
    ),
    (
        "typescript",
        "interface",
        "export interface Store<T> extends Base<{id: T}> {\n  get(id: T): T;\n}",
        "export interface Store<T> extends Base<{id: T}>",
    ),
    (
        "tsx",
        "function",
        "export const Hello = ({ name }: Props): JSX.Element => {\n  return <div>{name}</div>;\n};",
        "export const Hello = ({ name }: Props): JSX.Element =>",
    ),
    # --- c / c++
    (
        "c",
        "function",
        "/* adds */\nstatic int\nadd(int a, /* first */\n    int b)\n{\n  return a + b;\n}",
        "static int\nadd(int a, /* first */\n    int b)",
    ),
    (
        "c",
        "function",  # K&R parameter declarations end in ";" but belong to the header
        "int old(a, b)\n    int a;\n    char *b;\n{\n  return a;\n}",
        "int old(a, b)\n    int a;\n    char *b;",
    ),
    ("c", "struct", "typedef struct {\n  int x;\n} point_t;", "typedef struct { ... } point_t"),
    (
        "cpp",
        "method",
        "// c\ntemplate <typename T>\nstatic inline std::vector<T> Foo::bar(const T& x,\n"
        "                                      int y = 3) const noexcept {\n  return {};\n}",
        "template <typename T>\nstatic inline std::vector<T> Foo::bar(const T& x,\n"
        "                                      int y = 3) const noexcept",
    ),
    (
        "cpp",
        "method",
        "Foo::Foo(int x)\n    : a_{x}, b_(2), Base<int>{x}\n{\n}",
        "Foo::Foo(int x)\n    : a_{x}, b_(2), Base<int>{x}",
    ),
    (
        "cpp",
        "method",
        "bool operator<(const A& o) const {\n  return v < o.v;\n}",
        "bool operator<(const A& o) const",
    ),
    (
        "cpp",
        "class",
        "class Circle final : public Shape<double> {\n};",
        "class Circle final : public Shape<double>",
    ),
    # --- ruby
    (
        "ruby",
        "method",
        '# Adds.\ndef add(item, qty = 1, note: "#")\n    @items << item\n  end',
        'def add(item, qty = 1, note: "#")',
    ),
    ("ruby", "method", "def self.build(a,\n      b)\n    new\n  end", "def self.build(a,\n    b)"),
    ("ruby", "class", "class Cart < Base # the cart\n  def x; end\nend", "class Cart < Base"),
    # --- fallbacks
    ("python", "module", "# header\nimport os\nimport sys\n", "import os"),
    ("c", "module", "#include <stdio.h>\nint x;\n", "#include <stdio.h>"),
    ("markdown", "section", "<!-- Guide > Setup (part 2 of 3) -->\n## Setup\ntext", "## Setup"),
    ("sql", "window", "\n-- a comment\nSELECT 1;\n", "SELECT 1;"),
    ("python", "function", "", ""),
    ("python", "function", "  \n# only a comment\n", ""),
]


@pytest.mark.parametrize(("language", "kind", "text", "expected"), CASES)
def test_signature(language: str, kind: str, text: str, expected: str) -> None:
    assert signature(text, language, kind) == expected


def test_doc_switch() -> None:
    text = 'def f(a):\n    """Doc."""\n    return a\n'
    assert signature(text, "python", "function") == 'def f(a):\n    """Doc."""'
    assert signature(text, "python", "function", doc=False) == "def f(a):"
    assert signature("int f() {\n}", "c", "function", doc=True) == "int f()"


def test_part_labelled_chunk_skips_the_label() -> None:
    body = "".join(f"    x{i} = compute({i}, 'value {i}')\n" for i in range(400))
    src = f'@decorated\ndef big(a: int,\n        b: str = "}}") -> None:\n    """Big."""\n{body}'
    chunks = [c for c in chunk_file("big.py", src.encode(), "h") if c.symbol == "big"]
    assert len(chunks) > 1 and len(src) > MAX_CHUNK_BYTES
    later = chunks[1]
    assert part_label(later.id, later.text) == f"big (part 2 of {len(chunks)})"
    assert signature(chunks[0].text, "python", "function") == (
        '@decorated\ndef big(a: int,\n        b: str = "}") -> None:\n    """Big."""'
    )
    # later parts repeat the header from `def` (below the label), without the docstring
    assert signature(later.text, "python", "function") == (
        'def big(a: int,\n        b: str = "}") -> None:'
    )


def test_fixture_chunks() -> None:
    got: dict[str, str] = {}
    for path in sorted(FIXTURES.iterdir()):
        for c in chunk_file(path.name, path.read_bytes(), "h"):
            if c.kind not in ("module", "section", "window"):
                got[f"{path.name}:{c.kind}:{c.symbol}"] = signature(c.text, c.language, c.kind)
    assert got["sample.py:function:top"] == 'def top(a, b=DEFAULT):\n    """Add two numbers."""'
    assert got["sample.py:method:Decoder.__init__"] == "def __init__(self, strict=True):"
    assert got["sample.go:function:Largest"] == "func Largest(shapes []Shape) (Shape, error)"
    assert got["sample.rs:struct:Point"] == "#[derive(Debug, Clone, Copy)]\npub struct Point"
    assert (
        got["sample.rs:method:Point.fmt"]
        == "fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result"
    )
    assert got["Sample.java:method:Sample.size"] == "@Override\npublic int size()"
    assert got["sample.c:struct:user_t"] == "typedef struct { ... } user_t"
    assert got["sample.cpp:function:geo.twice"] == "template <typename T>\nT twice(T v)"
    assert got["sample.ts:class:Base"] == "export abstract class Base implements Store"
    assert got["sample.tsx:function:Farewell"] == "export const Farewell = ({ name }: Props) =>"
    assert got["sample.js:function:double"] == "const double = (x) =>"
    assert got["sample.rb:method:Shop.Cart.empty"] == "def self.empty"
    for key, sig in got.items():
        assert sig and sig == sig.strip() and "\n\n" not in sig, key


@pytest.mark.parametrize(
    "module", ["dataclasses.py", "argparse.py", "typing.py", "json/decoder.py"]
)
def test_python_signatures_parse(module: str) -> None:
    """Every function/class signature of a real module is a valid Python header: with a body
    stub it parses (decorators, multi-line parameters, dedent and the docstring line)."""
    path = STDLIB / module
    chunks = chunk_file(module, path.read_bytes(), "h")
    n = 0
    for c in chunks:
        if c.kind in ("function", "method", "class"):
            for doc in (True, False):
                sig = signature(c.text, c.language, c.kind, doc=doc)
                ast.parse(sig + "\n    ...")
                n += 1
    assert n > 20


@settings(max_examples=150, deadline=None)
@given(
    text=st.text(
        alphabet=st.sampled_from(list("def f(x):{}[]<>;'\"`/#*\\\n\t =-rabc@")), max_size=80
    ),
    language=st.sampled_from([*sorted(SIGNATURE_LANGUAGES), "markdown", "text"]),
    kind=st.sampled_from(["function", "method", "class", "struct", "module"]),
)
def test_never_raises_and_is_tidy(text: str, language: str, kind: str) -> None:
    sig = signature(text, language, kind)
    assert sig == signature(text, language, kind)
    assert sig == sig.strip() or sig.endswith('"""')
    assert all(line.strip() for line in sig.split("\n")) or not sig


def test_python_decorators_over_the_limit_give_the_declaration() -> None:
    """A click command whose options run past ``MAX_HEADER_CHARS`` (black's ``main``): the
    map showed the first decorator line, ``@click.command(``; it shows the ``def``."""
    opts = "\n".join(f'@click.option("--opt{i}", help="{"x" * 120}")' for i in range(40))
    text = (
        f"@click.command(\n    context_settings=dict(),\n)\n{opts}\n"
        'async def main(\n    ctx: int,\n) -> None:\n    """The formatter."""\n    pass\n'
    )
    assert len(text) > MAX_HEADER_CHARS
    assert signature(text, "python", "function") == (
        'async def main(\n    ctx: int,\n) -> None:\n    """The formatter."""'
    )
    # a class the same way; under the limit the decorators stay
    assert signature(text.replace("async def main(", "class Main(", 1), "python", "class") == (
        'class Main(\n    ctx: int,\n) -> None:\n    """The formatter."""'
    )
    assert signature("@dec\ndef f(x):\n    return x\n", "python", "function") == "@dec\ndef f(x):"
