"""Issue-text understanding (issue 21, part 3): a whole GitHub issue as the question.

Coding agents paste an issue whole: a title, template headings, prose, fenced code, Python or
pytest tracebacks, quoted replies and expected / actual output. Searched as one flat question,
the pasted output drowns the few words that point at code. The functions here are pure, need no
index and run in linear time (pre-compiled regexes, one pass per part, repeated lines skipped):

* :func:`looks_like_issue`: is this question an issue (and not a short question, an identifier
  or a commit subject)? Conservative: every single-line text under
  :data:`ISSUE_LONG_CHARS` characters is not one.
* :func:`parse_issue`: the parts (:class:`IssueText`): title, prose, code blocks,
  tracebacks (:class:`Traceback` of :class:`Frame`), quoted text and output.
* :func:`issue_signals`: what points at code (:class:`IssueSignals`): file paths, module paths,
  symbols, exception types and traceback functions, each weighted by where it was found
  (:data:`PART_WEIGHTS`).
* :func:`dense_text` / :func:`bm25_text` (:func:`bm25_terms`): what the query embedding and
  BM25 should see, both bounded whatever the issue's length.

Every constant is ragloom's choice, explained where it is set; none is tuned yet (issue 21 wires
the signals into ranking after the stage refactor, and tunes there).
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from ragloom.retrieve.query.lexer import ALL_EXTENSIONS
from ragloom.retrieve.query.vocabulary import QUERY_STOPWORDS

__all__ = [
    "BUILTIN_EXCEPTION_FACTOR",
    "DEFINED_IN_REPRO_FACTOR",
    "DENSE_SYMBOL_SHARE",
    "EXTERNAL_FRAME_FACTOR",
    "INNERMOST_FRAME_BONUS",
    "ISSUE_LONG_CHARS",
    "ISSUE_MIN_CHARS",
    "ISSUE_MULTILINE_CHARS",
    "MAX_BM25_TERMS",
    "MAX_SCANNED_CHARS",
    "MAX_SIGNALS_PER_KIND",
    "PART_WEIGHTS",
    "PROSE_TERM_WEIGHT",
    "Frame",
    "IssueSignals",
    "IssueText",
    "Signal",
    "SignalKind",
    "Traceback",
    "bm25_terms",
    "bm25_text",
    "dense_text",
    "issue_signals",
    "looks_like_issue",
    "parse_issue",
]

# -- constants ----------------------------------------------------------------------------------

ISSUE_MIN_CHARS = 40
"""Below this many characters nothing is an issue: the shortest issue with a code block or a
traceback still has a title and a few lines around it."""
ISSUE_LONG_CHARS = 400
"""Prose this long reads as an issue body even without markdown (issue 21's figure); also the
least a single-line text needs before it can be an issue (then with a marker or 3 sentences),
so one-line questions and commit subjects are never issues."""
ISSUE_MULTILINE_CHARS = 200
"""Three or more non-empty lines of at least this many characters, without any marker, read
as an issue; shorter multi-line texts are a question with a line break or a commit message."""
_MIN_SENTENCES = 3
"""A single long line is prose (an issue flattened to one line) with this many sentences."""

PART_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {
        "frame": 3.0,  # a traceback frame names the code that ran: the strongest evidence
        "traceback_code": 2.5,  # the source lines a traceback quotes under its frames
        "code": 2.0,  # a fenced / indented block or a doctest session: written as code
        "backtick": 1.5,  # `name` in prose: the reporter marked it as code
        "prose": 1.0,  # snake_case / CamelCase / dotted words in plain prose
        "quoted": 0.5,  # quoted replies and expected / actual output: often copied noise
    }
)
"""Weight of one sighting by where it was found (issue 21's order: frame > code > backticks >
prose). A signal's weight is the sum, over the parts it was seen in (title, prose, code,
tracebacks, quoted), of its best weight in that part: seen in several parts counts more, seen
many times in one part (a repeated log line) does not."""
TITLE_FACTOR = 2.0
"""The title is the reporter's own summary: its sightings count twice."""
EXTERNAL_FRAME_FACTOR = 0.5
"""Stdlib frames go to ``external_paths`` and their paths and functions count half; so does the
outermost ``<module>`` frame (the reporter's own script). A site-packages frame is reduced to
its package-relative path at full weight: the issue is usually about that package, and a path
the index does not have matches nothing anyway."""
INNERMOST_FRAME_BONUS = 1.0
"""Added to the path and function of the innermost frame that is not stdlib: where it broke."""
DEFINED_IN_REPRO_FACTOR = 0.5
"""Names a code block defines (``def`` / ``class``) are usually the reporter's own repro
helpers, not the library's: they count half."""
BUILTIN_EXCEPTION_FACTOR = 0.5
"""A builtin exception (``KeyError``) is raised all over a code base; a custom one
(``SchemaMismatchError``) points at the code that defines it: builtins count half."""
DOTTED_TAIL_FACTOR = 0.5
"""A lower-case dotted name in prose whose last part has an underscore (``mock._make_subclass``)
may be a module's function rather than a module: its head is also taken as a module and its
last part as a symbol, at this share of its weight."""
MAX_SIGNALS_PER_KIND = 48
"""At most this many signals of each kind are kept, strongest first: bounded output."""
MAX_SCANNED_CHARS = 16_000
"""At most this many characters of code, traceback source and quoted text are scanned for
signals (after repeated lines are dropped): a pasted 1 MB log costs no more than this."""
_MAX_TITLE_CHARS = 300
"""A title longer than this is cut: it is a first paragraph, not a title."""
MAX_BM25_TERMS = 400
""":func:`bm25_terms` gives at most this many distinct terms (the BM25 engine keeps the first
64 tokens of them, so they come strongest first)."""
PROSE_TERM_WEIGHT = 0.5
"""BM25 weight of a plain prose word (signals get their weight over the strongest, 0..1; title
words 1.0): prose of an issue is mostly the reporter's story, not names of code."""
_MAX_TERM_CHARS = 64
"""Longer tokens are hashes, base64 or minified output: never a BM25 term."""
DENSE_SYMBOL_SHARE = 0.25
"""Share of :func:`dense_text`'s token budget kept for the strongest symbols after the title
and prose."""
_TOKENS_PER_PIECE = 1.2
"""Wordpieces per word piece (letters run, digits run or punctuation) in the token estimate:
MiniLM's WordPiece splits rare words further, so a little over one."""

# -- value types --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Frame:
    """One traceback frame: ``File "path", line N, in function`` or pytest's
    ``path.py:N: in function`` (``line`` 0 when the traceback did not say)."""

    path: str
    line: int
    function: str


@dataclass(frozen=True, slots=True)
class Traceback:
    """A Python or pytest traceback: its frames (outermost first), the exception type and
    message of its last line, and the source lines it quotes."""

    frames: tuple[Frame, ...]
    exception: str
    message: str
    source: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class IssueText:
    """The parts of an issue (:func:`parse_issue`); every part is text of the issue."""

    title: str
    prose: tuple[str, ...] = ()
    code_blocks: tuple[str, ...] = ()
    tracebacks: tuple[Traceback, ...] = ()
    quoted: tuple[str, ...] = ()


SignalKind = Literal["path", "external_path", "module", "symbol", "exception", "function"]


@dataclass(frozen=True, slots=True)
class Signal:
    """One name that points at code, its weight (:data:`PART_WEIGHTS`) and the parts it was
    seen in, in the order first seen (``title``, ``prose``, ``code``, ``traceback``,
    ``quoted``)."""

    value: str
    weight: float
    parts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class IssueSignals:
    """What an issue points at, each tuple strongest first (at most
    :data:`MAX_SIGNALS_PER_KIND`). ``paths`` are repository-relative guesses (site-packages
    frames reduced to the package-relative part); ``external_paths`` are stdlib frames."""

    paths: tuple[Signal, ...] = ()
    external_paths: tuple[Signal, ...] = ()
    modules: tuple[Signal, ...] = ()
    symbols: tuple[Signal, ...] = ()
    exceptions: tuple[Signal, ...] = ()
    functions: tuple[Signal, ...] = ()

    def strongest(self, n: int) -> list[Signal]:
        """The ``n`` strongest symbols, functions, exceptions and paths together."""
        pool = [*self.symbols, *self.functions, *self.exceptions, *self.paths]
        order = sorted(range(len(pool)), key=lambda i: (-pool[i].weight, i))
        seen: set[str] = set()
        out: list[Signal] = []
        for i in order:
            if pool[i].value not in seen:
                seen.add(pool[i].value)
                out.append(pool[i])
            if len(out) >= n:
                break
        return out


# -- patterns -----------------------------------------------------------------------------------

_FENCE_RE = re.compile(r"^\s{0,8}(`{3,}|~{3,})\s*([\w+-]*)")
_TRACEBACK_HEAD = "Traceback (most recent call last)"
_FRAME_RE = re.compile(r'^\s*File "([^"]+)", line (\d+)(?:, in (\S+))?')
_EXC_LINE_RE = re.compile(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$")
_PYTEST_LOC_RE = re.compile(r"^(\S+\.py):(\d+): (?:in (\S+)|([A-Za-z_][\w.]*))\s*$")
_PYTEST_E_RE = re.compile(r"^E\s+(.*)$")
_PYTEST_SEP_RE = re.compile(r"^_{3,} (\S+) _{3,}$")
_HEADING_RE = re.compile(r"^\s{0,3}#{1,6}\s+|^\s*\*\*(?=.*\*\*\s*:?\s*$)")
_OUTPUT_HEAD_RE = re.compile(
    r"^\s{0,3}(?:#{1,6}\s*)?\**\s*(?:expected|actual|current|observed|output|result)"
    r"(?:\s+(?:behaviou?r|output|result|results))?\s*\**\s*:?\s*\**\s*(.*)$",
    re.IGNORECASE,
)
_TEMPLATE_RE = re.compile(
    r"^\s{0,3}(?:#{1,6}\s*)?\**\s*(?:describe the bug|bug description|description|to reproduce|"
    r"steps to reproduce|reproduction|minimal (?:reproducible )?example|code example|"
    r"environment|versions?|additional context|screenshots|system info|"
    r"traceback|error message|stack ?trace|logs?|debug log|summary|problem|"
    r"proposed (?:solution|fix)|motivation)\s*\**\s*:?\s*\**\s*$",
    re.IGNORECASE,
)
_LIST_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")
_STRONG_RE = re.compile(
    r"^\s{0,8}(?:`{3}|~{3})|Traceback \(most recent call last\)|^E {2,}\S|^\S+\.py:\d+: |"
    r"^\s*>>> |^\s{0,3}(?:#{1,6}\s*)?\**\s*(?:steps to reproduce|to reproduce|"
    r"expected (?:behaviou?r|output|result)|actual (?:behaviou?r|output|result))",
    re.IGNORECASE | re.MULTILINE,
)
"""Markers only an issue (or a bug report) has: a code fence, a traceback, pytest output, a
doctest session, or a "Steps to reproduce" / "Expected ..." / "Actual ..." section."""
_WEAK_RE = re.compile(r"^\s{0,3}(?:#{1,6}\s|> |[-*] )", re.MULTILINE)
"""Markdown structure (headings, quotes, bullets): an issue with three or more lines."""
_SENTENCE_RE = re.compile(r"[.!?](?:\s|$)")
_URL_RE = re.compile(r"https?://\S+")
_MD_LINK_RE = re.compile(r"!?\[([^\]\n]*)\]\([^)\s]*\)")
_BLOB_RE = re.compile(r"^https?://github\.com/[^/\s]+/[^/\s]+/blob/[^/\s]+/([^\s#?)]+)")
_TOKEN_RE = re.compile(r"[A-Za-z_]\w*(?:[./-]\w+)*(\()?")
"""One pass over a part: every word-like run (dots, slashes and dashes inside kept), and
whether a ``(`` follows. :meth:`_Signals.scan` sorts each into a file path, a module, a dotted
name, a snake_case / CamelCase identifier or a called name, using the word before it for
``from m import``, ``import m``, ``def f`` and ``class C``. One simple pattern keeps the scan
linear and cheap (a pattern with one alternative per shape cost 5x more)."""
_CONTEXT_WORDS = frozenset(["import", "from", "def", "class"])
"""Words that make the next word a module or a definition."""
_CAMEL_RE = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")
_EXTENSIONS = frozenset(ALL_EXTENSIONS)
_BACKTICK_RE = re.compile(r"`([^`\n]{1,200})`")
_IDENT_RE = re.compile(r"[A-Za-z_][\w.]*(?:\(\))?")
_EXC_NAME_RE = re.compile(r"(?:Error|Exception|Warning|Exit|Interrupt|Failure|Fault)$")
_WORD_RE = re.compile(r"[A-Za-z_][\w]*(?:[.:/-][A-Za-z_]\w*)*")
_DIGITS_RE = re.compile(r"\d+")
_STRING_RE = re.compile(r"\"[^\"\n]*\"|'[^'\n]*'")
_PIECE_RE = re.compile(r"[A-Za-z][a-z]*|\d+|[^\sA-Za-z\d]")

_BUILTIN_EXCEPTIONS = frozenset(
    name
    for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, BaseException)
)
_NOISE_NAMES = frozenset(
    [
        "print",
        "len",
        "str",
        "int",
        "float",
        "list",
        "dict",
        "set",
        "tuple",
        "range",
        "open",
        "isinstance",
        "issubclass",
        "type",
        "super",
        "self",
        "cls",
        "object",
        "format",
        "append",
        "extend",
        "get",
        "items",
        "keys",
        "values",
        "sorted",
        "reversed",
        "enumerate",
        "zip",
        "map",
        "filter",
        "repr",
        "min",
        "max",
        "sum",
        "any",
        "all",
        "abs",
        "getattr",
        "setattr",
        "hasattr",
        "delattr",
        "id",
        "input",
        "iter",
        "next",
        "bytes",
        "bool",
        "callable",
        "vars",
        "dir",
        "hash",
        "round",
        "pow",
        "divmod",
        "help",
        "exec",
        "eval",
        "compile",
        "globals",
        "locals",
        "if",
        "elif",
        "else",
        "for",
        "while",
        "with",
        "not",
        "and",
        "or",
        "in",
        "is",
        "def",
        "class",
        "return",
        "yield",
        "lambda",
        "assert",
        "raise",
        "try",
        "except",
        "finally",
        "import",
        "from",
        "as",
        "pass",
        "break",
        "continue",
        "del",
        "global",
        "nonlocal",
        "await",
        "async",
        "None",
        "True",
        "False",
        "e.g",
        "i.e",
        "etc",
        "vs",
        "GitHub",
        "GitLab",
        "JavaScript",
        "TypeScript",
        "PyPI",
        "PyCharm",
        "VSCode",
        "MacBook",
        "PowerShell",
        "CPython",
        "PyPy",
        "macOS",
        "iOS",
        "YouTube",
        "LinkedIn",
        "OpenAI",
        "ChatGPT",
    ]
)
"""Names that are never a signal: Python builtins and keywords, abbreviations that look dotted,
and brand names that look CamelCase."""
_DOMAIN_TLDS = frozenset(["com", "org", "net", "io", "dev", "html", "htm"])
_PSEUDO_FILE_RE = re.compile(r"^<[^>]*>$")
_SITE_RE = re.compile(r"(?:site|dist)-packages/")
_STDLIB_RE = re.compile(r"(?:^|/)(?:lib|Lib)/(?:python|pypy)?\d?(?:\.\d+)?/")

# -- detection ----------------------------------------------------------------------------------


def looks_like_issue(text: str) -> bool:
    """True for a GitHub-issue-like question: several lines with a code fence, a traceback,
    pytest output, a doctest session or "Steps to reproduce" / "Expected" / "Actual" sections;
    three or more lines with markdown structure or of :data:`ISSUE_MULTILINE_CHARS`+ characters;
    or :data:`ISSUE_LONG_CHARS`+ characters of prose. False for short questions, identifiers and
    one- or two-line commit messages.
    """
    stripped = text.strip()
    if len(stripped) < ISSUE_MIN_CHARS:
        return False
    lines = sum(1 for line in stripped.replace("\r", "\n").split("\n") if line.strip())
    strong = _STRONG_RE.search(stripped) is not None
    if lines <= 1:
        return len(stripped) >= ISSUE_LONG_CHARS and (
            strong or len(_SENTENCE_RE.findall(stripped)) >= _MIN_SENTENCES
        )
    if lines == 2:
        return strong or len(stripped) >= ISSUE_LONG_CHARS
    return strong or len(stripped) >= ISSUE_MULTILINE_CHARS or _WEAK_RE.search(stripped) is not None


# -- parsing ------------------------------------------------------------------------------------


class _Parser:
    """One linear scan over the lines of an issue."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.prose: list[str] = []
        self.code: list[str] = []
        self.tracebacks: list[Traceback] = []
        self.quoted: list[str] = []
        self.para: list[str] = []
        self.output_next = False  # after an "Expected" / "Actual" / "Output" header

    def flush(self) -> None:
        if self.para:
            self.prose.append(" ".join(self.para))
            self.para = []

    def block(self, body: list[str], lang: str = "") -> None:
        """A fenced or indented block: tracebacks out of it, the rest code or output."""
        body = _dedent("\n".join(body)).split("\n")
        rest: list[str] = []
        i = 0
        while i < len(body):
            line = body[i].strip()
            if line.startswith(_TRACEBACK_HEAD):
                tb, i = _python_traceback(body, i)
                self.tracebacks.append(tb)
                continue
            if _FRAME_RE.match(line):  # frames pasted without their header
                tb, i = _python_traceback(body, i, header=False)
                self.tracebacks.append(tb)
                continue
            if _PYTEST_E_RE.match(body[i]) or _PYTEST_LOC_RE.match(line):
                tb, i, pre = _pytest_traceback(body, i, rest)
                self.tracebacks.append(tb)
                rest = pre
                continue
            rest.append(body[i])
            i += 1
        text = "\n".join(rest).strip("\n")
        if text.strip():
            output = self.output_next or lang.lower() in ("text", "txt", "output", "log")
            (self.quoted if output else self.code).append(_dedent(text))
        self.output_next = False

    def run(self, start: int) -> None:
        lines = self.lines
        n = len(lines)
        i = start
        while i < n:
            line = lines[i]
            s = line.strip()
            if not s:
                self.flush()
                i += 1
                continue
            fence = _FENCE_RE.match(line)
            if fence:
                self.flush()
                mark = fence.group(1)
                j = i + 1
                while j < n and not lines[j].strip().startswith(mark[0] * len(mark)):
                    j += 1
                self.block(lines[i + 1 : j], fence.group(2))
                i = j + 1
                continue
            if s.startswith(_TRACEBACK_HEAD):
                self.flush()
                tb, i = _python_traceback(lines, i)
                self.tracebacks.append(tb)
                continue
            if line[:1] not in (" ", "\t") and (
                _PYTEST_E_RE.match(line) or _PYTEST_LOC_RE.match(s) or _PYTEST_SEP_RE.match(s)
            ):
                self.flush()
                j = i
                while j < n and lines[j].strip():
                    j += 1
                self.block(lines[i:j])
                i = j
                continue
            if s.startswith(">>>"):
                self.flush()
                j = i
                while j < n and lines[j].strip():
                    j += 1
                self.code.append(_dedent("\n".join(lines[i:j])))
                i = j
                continue
            if s.startswith(">"):
                self.flush()
                j = i
                quote: list[str] = []
                while j < n and lines[j].strip().startswith(">"):
                    quote.append(lines[j].strip()[1:].removeprefix(" "))
                    j += 1
                self.quoted.append("\n".join(quote))
                i = j
                continue
            indented = line.startswith(("    ", "\t"))
            if indented and (i == start or not lines[i - 1].strip()) and not _LIST_RE.match(line):
                self.flush()
                j = i
                while j < n and (lines[j].startswith(("    ", "\t")) or not lines[j].strip()):
                    j += 1
                self.block(lines[i:j])
                i = j
                continue
            if s.startswith("<!--"):
                self.flush()
                j = i
                while j < n and "-->" not in lines[j]:
                    j += 1
                i = j + 1
                continue
            if _TEMPLATE_RE.match(line):
                self.flush()
                self.output_next = False
                i += 1
                continue
            out = _OUTPUT_HEAD_RE.match(line)
            if out and len(s) < 80:
                self.flush()
                self.output_next = True
                if out.group(1).strip(" *"):
                    self.quoted.append(out.group(1).strip(" *"))
                i += 1
                continue
            self.para.append(_HEADING_RE.sub("", s).strip("* ") if _HEADING_RE.match(line) else s)
            i += 1
        self.flush()


def _dedent(text: str) -> str:
    lines = text.split("\n")
    widths = [len(x) - len(x.lstrip()) for x in lines if x.strip()]
    cut = min(widths, default=0)
    return "\n".join(x[cut:] for x in lines)


def _python_traceback(lines: list[str], i: int, *, header: bool = True) -> tuple[Traceback, int]:
    """The traceback whose header is ``lines[i]`` (or whose first frame is, ``header=False``:
    frames pasted without the header), and the index after it."""
    frames: list[Frame] = []
    source: list[str] = []
    j = i + 1 if header else i
    n = len(lines)
    exception = message = ""
    while j < n:
        line = lines[j]
        frame = _FRAME_RE.match(line)
        if frame:
            frames.append(Frame(frame.group(1), int(frame.group(2)), frame.group(3) or ""))
        elif line.startswith((" ", "\t")):
            code = line.strip()
            if code and code.strip("^~ ") and not code.startswith("..."):
                source.append(code)
        elif not line.strip():
            if j + 1 < n and lines[j + 1].startswith((" ", "\t")):  # a blank between frames
                j += 1
                continue
            break
        else:
            exc = _EXC_LINE_RE.match(line.strip())
            if exc and not line.strip().startswith(_TRACEBACK_HEAD):
                exception, message = exc.group(1), (exc.group(2) or "").strip()
                j += 1
            elif ":" in line and line[:1].isalpha():  # "pondlib.errors.X: message (detail)"
                head, _, tail = line.strip().partition(":")
                exception, message = head.strip(), tail.strip()
                j += 1
            break
        j += 1
    return Traceback(tuple(frames), exception, message, tuple(source)), j


def _pytest_traceback(
    lines: list[str], i: int, before: list[str]
) -> tuple[Traceback, int, list[str]]:
    """pytest output from ``lines[i]``: its frames, ``E`` lines and the source lines before
    them (``before``, the block's lines so far, up to the last separator); returns the
    traceback, the index after it and what remains of ``before``."""
    frames: list[Frame] = []
    source: list[str] = []
    exception = message = ""
    keep = list(before)
    # the source pytest shows is the lines just before (from its "____ test ____" separator)
    cut = max((k for k, x in enumerate(keep) if _PYTEST_SEP_RE.match(x.strip())), default=-1)
    if cut >= 0:
        frames.append(Frame("", 0, _PYTEST_SEP_RE.match(keep[cut].strip()).group(1)))  # type: ignore[union-attr]
        source.extend(x.strip().lstrip(">").strip() for x in keep[cut + 1 :] if x.strip())
        keep = keep[:cut]
    j = i
    n = len(lines)
    while j < n:
        line = lines[j]
        s = line.strip()
        e = _PYTEST_E_RE.match(line)
        loc = _PYTEST_LOC_RE.match(s)
        if e:
            exc = _EXC_LINE_RE.match(e.group(1).strip()) if not exception else None
            if exc and _EXC_NAME_RE.search(exc.group(1)):
                exception, message = exc.group(1), (exc.group(2) or "").strip()
        elif loc:
            func = loc.group(3) or ""
            frames.append(Frame(loc.group(1), int(loc.group(2)), func))
            if loc.group(4) and not exception:
                exception = loc.group(4)
        elif _PYTEST_SEP_RE.match(s):
            frames.append(Frame("", 0, _PYTEST_SEP_RE.match(s).group(1)))  # type: ignore[union-attr]
        elif s and not s.startswith(("=", "-")):
            source.append(s.lstrip(">").strip())
        elif not s and not (j + 1 < n and lines[j + 1].strip()):
            break
        j += 1
    frames = [f for f in frames if f.path or f.function]
    return Traceback(tuple(frames), exception, message, tuple(source)), j, keep


def parse_issue(text: str) -> IssueText:
    """The parts of an issue: ``title`` (the first non-empty line, markdown heading marks
    stripped, at most 300 characters; empty when the text opens with a block), ``prose``
    (paragraphs), ``code_blocks`` (fenced, 4-space indented and ``>>>`` sessions),
    ``tracebacks`` (Python and pytest) and ``quoted`` (``>`` quotes and the output blocks under
    "Expected" / "Actual" / "Output" headers). Never raises; linear in the text's length."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    start = 0
    while start < len(lines) and not lines[start].strip():
        start += 1
    title = ""
    if start < len(lines):
        first = lines[start]
        s = first.strip()
        opens_block = (
            _FENCE_RE.match(first) is not None
            or s.startswith((_TRACEBACK_HEAD, ">"))
            or first.startswith(("    ", "\t"))
        )
        if not opens_block:
            title = _HEADING_RE.sub("", s).strip("* ").strip()[:_MAX_TITLE_CHARS].strip()
            start += 1
    parser = _Parser(lines)
    parser.run(start)
    return IssueText(
        title=title,
        prose=tuple(parser.prose),
        code_blocks=tuple(parser.code),
        tracebacks=tuple(parser.tracebacks),
        quoted=tuple(parser.quoted),
    )


# -- signals ------------------------------------------------------------------------------------


class _Signals:
    """Sightings per (kind, value): the best weight in each part."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], dict[str, float]] = {}

    def add(self, kind: str, value: str, part: str, weight: float) -> None:
        if not value or len(value) > _MAX_TERM_CHARS:
            return
        parts = self.seen.setdefault((kind, value), {})
        if weight > parts.get(part, 0.0):
            parts[part] = weight

    def name(self, value: str, part: str, weight: float, *, defined: bool = False) -> None:
        """A symbol-shaped name: an exception type or a symbol."""
        name = value.rsplit(".", 1)[-1] if "." in value else value
        if name in _NOISE_NAMES or len(name) < 2 or not name.strip("_").isidentifier():
            return
        if _EXC_NAME_RE.search(name) and name[:1].isupper():
            factor = BUILTIN_EXCEPTION_FACTOR if name in _BUILTIN_EXCEPTIONS else 1.0
            self.add("exception", name, part, weight * factor)
            return
        self.add("symbol", name, part, weight * (DEFINED_IN_REPRO_FACTOR if defined else 1.0))

    def scan(self, text: str, part: str, weight: float, *, code: bool) -> None:
        """Every name of code in ``text`` (:data:`_TOKEN_RE`); URLs are skipped, but a GitHub
        ``blob`` URL gives its file path."""
        if "://" in text:
            for url in _URL_RE.findall(text):
                blob = _BLOB_RE.match(url)
                if blob:
                    self.add("path", blob.group(1), part, weight)
            text = _URL_RE.sub(" ", text)
        if code and ('"' in text or "'" in text):
            text = _STRING_RE.sub(" ", text)  # keys and data in literals are not names of code
        defined: set[str] = set()
        prev = ""
        for m in _TOKEN_RE.finditer(text):
            tok = m.group(0)
            called = m.group(1) is not None
            if called:
                tok = tok[:-1]
            before, prev = prev, tok
            if not called and tok.islower() and tok.isalpha() and before not in _CONTEXT_WORDS:
                continue  # a plain word: the common case, decided first
            lower = tok[:1].islower() or tok[:1] == "_"
            if (before == "import" and lower and (code or "." in tok)) or (
                before == "from" and text[m.end() : m.end() + 9].lstrip().startswith("import")
            ):
                self.add("module", tok, part, weight)
                continue
            if before == "import" and code:  # from m import Name
                self.name(tok, part, weight)
                continue
            if before in ("def", "class") and code:
                defined.add(tok)
                self.name(tok, part, weight, defined=True)
                continue
            start = m.start()
            if start and text[start - 1] in "/.-\\":
                if called and text[start - 1] == ".":  # f(x).method(): a method call
                    self.name(tok, part, weight)
                continue  # the tail of something that is not a name (../x, a-b)
            if "/" in tok or "-" in tok:
                if "/" in tok and tok.rsplit(".", 1)[-1] in _EXTENSIONS and "." in tok:
                    self.add("path", tok, part, weight)
                continue
            if start and text[start - 1] == "@":  # a decorator
                self.name(tok, part, weight)
                continue
            if "." in tok:
                if tok.rsplit(".", 1)[-1] in _EXTENSIONS and not called:
                    self.add("path", tok, part, weight)
                else:
                    self._dotted(tok, called, part, weight, code)
                continue
            if (
                "_" in tok
                or (not lower and _CAMEL_RE.search(tok))
                or (called and (code or not lower))
            ):
                self.name(tok, part, weight, defined=tok in defined)

    def _dotted(
        self, dotted: str, called: bool, part: str, weight: float, code: bool = False
    ) -> None:
        comps = dotted.split(".")
        if comps[-1].lower() in _DOMAIN_TLDS or dotted in _NOISE_NAMES:
            return
        head, last = comps[0], comps[-1]
        if called or last[:1].isupper() or head[:1].isupper():
            # obj.method(), Class.method, module.Class: the names, and Class.method as written
            if head[:1].isupper() and len(comps) == 2 and head not in _NOISE_NAMES:
                self.add("symbol", dotted, part, weight)
                self.name(head, part, weight)
            self.name(last, part, weight)
            if len(comps) > 2 and all(c.islower() or "_" in c for c in comps[:-1]):
                self.add("module", ".".join(comps[:-1]), part, weight)
        elif code:
            return  # node.children: attribute access in code (modules come from imports)
        elif all(c[:1].islower() or c[:1] == "_" for c in comps) and head not in ("self", "cls"):
            self.add("module", dotted, part, weight)  # pondlib.core.schema in prose
            if "_" in last:  # or module.function: `mock._make_subclass`
                self.add("module", ".".join(comps[:-1]), part, weight * DOTTED_TAIL_FACTOR)
                self.name(last, part, weight * DOTTED_TAIL_FACTOR)
        else:
            self.name(last, part, weight)

    def scan_prose(self, text: str, part: str, factor: float) -> None:
        """Backticked spans at the backtick weight, the rest at the prose weight."""
        rest = text
        if "`" in text:
            for m in _BACKTICK_RE.finditer(text):
                inner = m.group(1).strip()
                if _IDENT_RE.fullmatch(inner):
                    ident = inner.removesuffix("()")
                    if "." in ident:
                        self._dotted(
                            ident, inner.endswith("()"), part, PART_WEIGHTS["backtick"] * factor
                        )
                    else:
                        self.name(ident, part, PART_WEIGHTS["backtick"] * factor)
                else:
                    self.scan(inner, part, PART_WEIGHTS["backtick"] * factor, code=True)
            rest = _BACKTICK_RE.sub(" ", text)
        self.scan(rest, part, PART_WEIGHTS["prose"] * factor, code=False)

    def frames(self, tb: Traceback) -> None:
        where = [_frame_path(f.path) for f in tb.frames]
        inner = max((k for k, (p, kind) in enumerate(where) if p and kind != "stdlib"), default=-1)
        for k, f in enumerate(tb.frames):
            bonus = INNERMOST_FRAME_BONUS if k == inner else 0.0
            w = PART_WEIGHTS["frame"]
            path, external = where[k]
            script = f.function == "<module>" and k == 0 and k != inner
            if path:
                if external == "stdlib":
                    self.add("external_path", path, "traceback", w * EXTERNAL_FRAME_FACTOR)
                else:
                    wp = w * (EXTERNAL_FRAME_FACTOR if script else 1.0)
                    self.add("path", path, "traceback", wp + bonus)
            func = f.function
            if func and not func.startswith("<") and func not in _NOISE_NAMES:
                wf = w * (EXTERNAL_FRAME_FACTOR if external == "stdlib" else 1.0)
                self.add("function", func, "traceback", wf + bonus)
        if tb.exception:
            name = tb.exception.rsplit(".", 1)[-1]
            if "." in tb.exception:
                self.add(
                    "module", tb.exception.rsplit(".", 1)[0], "traceback", PART_WEIGHTS["frame"]
                )
            factor = BUILTIN_EXCEPTION_FACTOR if name in _BUILTIN_EXCEPTIONS else 1.0
            self.add("exception", name, "traceback", PART_WEIGHTS["frame"] * factor)

    def result(self) -> IssueSignals:
        by_kind: dict[str, list[tuple[float, int, Signal]]] = {}
        for order, ((kind, value), parts) in enumerate(self.seen.items()):
            weight = round(sum(parts.values()), 6)
            by_kind.setdefault(kind, []).append(
                (-weight, order, Signal(value, weight, tuple(parts)))
            )

        def top(kind: str) -> tuple[Signal, ...]:
            ranked = sorted(by_kind.get(kind, []), key=lambda t: (t[0], t[1]))
            return tuple(s for _, _, s in ranked[:MAX_SIGNALS_PER_KIND])

        return IssueSignals(
            paths=top("path"),
            external_paths=top("external_path"),
            modules=top("module"),
            symbols=top("symbol"),
            exceptions=top("exception"),
            functions=top("function"),
        )


def _frame_path(path: str) -> tuple[str, str]:
    """A frame's path as the index would name it, and ``""`` / ``"site"`` / ``"stdlib"``:
    site-packages frames reduced to the package-relative part, stdlib frames to the part
    after ``lib/pythonX.Y/``, absolute project paths to their last four parts."""
    p = path.replace("\\", "/").strip()
    if not p or _PSEUDO_FILE_RE.match(p):
        return "", ""
    sites = _SITE_RE.split(p)
    if len(sites) > 1:
        return sites[-1], "site"
    std = _STDLIB_RE.search(p)
    if std is not None:
        return p[std.end() :], "stdlib"
    if p.startswith("/") or re.match(r"^[A-Za-z]:/", p):
        return "/".join(p.split("/")[-4:]), ""
    return p.removeprefix("./"), ""


def _deduped(text: str) -> str:
    """``text`` without the lines that repeat an earlier one up to its digits (log lines,
    repeated output), bounded to :data:`MAX_SCANNED_CHARS`."""
    seen: set[str] = set()
    out: list[str] = []
    size = 0
    for line in text.split("\n"):
        key = _DIGITS_RE.sub("0", line.strip())
        if not key or key in seen:
            continue
        seen.add(key)
        out.append(line)
        size += len(line) + 1
        if size >= MAX_SCANNED_CHARS:
            break
    return "\n".join(out)


def issue_signals(issue: IssueText) -> IssueSignals:
    """What the issue points at, weighted by where each name was found (:data:`PART_WEIGHTS`,
    :data:`TITLE_FACTOR`, the frame factors): file paths, module paths, symbols, exception
    types and traceback functions, strongest first."""
    acc = _Signals()
    if issue.title:
        acc.scan_prose(issue.title, "title", TITLE_FACTOR)
    for tb in issue.tracebacks:
        acc.frames(tb)
    budget = MAX_SCANNED_CHARS
    for para in issue.prose:
        if budget <= 0:
            break
        acc.scan_prose(para[:budget], "prose", 1.0)
        budget -= len(para)
    budget = MAX_SCANNED_CHARS
    pieces = [
        *(("traceback", "traceback_code", "\n".join(tb.source)) for tb in issue.tracebacks),
        *(("code", "code", block) for block in issue.code_blocks),
        *(("quoted", "quoted", q) for q in issue.quoted),
    ]
    for part, weight_key, text in pieces:
        if budget <= 0:
            break
        text = _deduped(text)[:budget]
        budget -= len(text)
        acc.scan(text, part, PART_WEIGHTS[weight_key], code=part != "quoted")
    return acc.result()


# -- what the retrievers see --------------------------------------------------------------------


def _tokens(text: str) -> float:
    return len(_PIECE_RE.findall(text)) * _TOKENS_PER_PIECE


def _readable(text: str) -> str:
    """Prose as it reads: a markdown link or image is its text, a bare URL is dropped."""
    if "://" not in text and "](" not in text:
        return text
    return _URL_RE.sub(" ", _MD_LINK_RE.sub(r"\1", text))


def dense_text(issue: IssueText, max_tokens: int = 256, signals: IssueSignals | None = None) -> str:
    """What the query embedding should see, about ``max_tokens`` wordpieces at most: the
    title, then the first prose sentences, then the strongest symbols
    (:data:`DENSE_SYMBOL_SHARE` of the budget); never a traceback or pasted output."""
    sig = signals if signals is not None else issue_signals(issue)
    budget = float(max(max_tokens, 1))
    out: list[str] = []
    used = 0.0

    def put(words: list[str], limit: float) -> bool:
        nonlocal used
        for w in words:
            cost = _tokens(w)
            if used + cost > limit:
                return False
            out.append(w)
            used += cost
        return True

    put(_readable(issue.title).split(), budget)
    prose_limit = budget * (1.0 - DENSE_SYMBOL_SHARE)
    for para in issue.prose:
        if not put(_readable(para).split(), prose_limit):
            break
    names = [s.value for s in sig.strongest(16) if s.value.lower() not in issue.title.lower()]
    put(names, budget)
    return " ".join(out)


def bm25_terms(
    issue: IssueText, max_terms: int = MAX_BM25_TERMS, signals: IssueSignals | None = None
) -> list[tuple[str, float]]:
    """Weighted BM25 terms, strongest first, at most ``max_terms`` distinct (case-insensitive):
    the signals (weight over the strongest one, 0..1; paths also as file stems), the title's
    words (1.0) and the prose's words (:data:`PROSE_TERM_WEIGHT`); filler words, numbers,
    hashes and URLs dropped. Code blocks and output give only their signals."""
    sig = signals if signals is not None else issue_signals(issue)
    ranked: list[tuple[float, int, str]] = []
    order = 0

    def put(term: str, weight: float) -> None:
        nonlocal order
        ranked.append((weight, order, term))
        order += 1

    every = [
        *sig.symbols,
        *sig.functions,
        *sig.exceptions,
        *sig.paths,
        *sig.modules,
    ]
    top = max((s.weight for s in every), default=1.0) or 1.0
    for s in every:
        w = round(s.weight / top, 6)
        put(s.value, w)
        if "/" in s.value or s.value.endswith(ALL_EXTENSIONS):
            stem = s.value.rsplit("/", 1)[-1].rsplit(".", 1)[0]
            put(stem, w)
    for text, weight in ((issue.title, 1.0), *((p, PROSE_TERM_WEIGHT) for p in issue.prose)):
        for m in _WORD_RE.finditer(_readable(text)):
            word = m.group(0)
            if "/" in word and "." not in word:
                continue  # "and/or", "input/output"
            if word.lower() in QUERY_STOPWORDS or len(word) < 3:
                continue
            put(word, weight)
        if order > 4 * max_terms:
            break
    ranked.sort(key=lambda t: (-t[0], t[1]))
    out: list[tuple[str, float]] = []
    seen: set[str] = set()
    for weight, _, term in ranked:
        key = term.lower()
        if key in seen or len(term) > _MAX_TERM_CHARS or term.isdigit():
            continue
        seen.add(key)
        out.append((term, weight))
        if len(out) >= max_terms:
            break
    return out


def bm25_text(
    issue: IssueText, max_terms: int = MAX_BM25_TERMS, signals: IssueSignals | None = None
) -> str:
    """:func:`bm25_terms` as one space-separated string, strongest first."""
    return " ".join(term for term, _ in bm25_terms(issue, max_terms, signals))
