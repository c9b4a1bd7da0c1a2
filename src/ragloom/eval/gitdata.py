"""Evaluation datasets mined from a repository's git history ("find the code a commit changed").

Each qualifying commit of a public repository becomes one question, shaped like agent work: the
question is the commit's cleaned message (what somebody asked to have done) and the gold answer
is the set of library source files the commit modified or added, as they exist in the tree of a
*pinned* commit (the newest commit of the snapshot), which is the corpus that gets indexed.

Rules (docs/evaluation-git.md explains and measures them):

Commits
    Only ancestors of the pinned commit, the pinned commit itself excluded; merges are skipped
    (``git log --no-merges``), and so are commits by bots (dependabot, renovate, pre-commit-ci,
    github-actions), reverts, releases and version bumps, dependency bumps, formatting, lint,
    typo, CI, docs, style and test-only commits (recognised by their message, see
    :func:`skip_reason`), and messages with fewer than :data:`MIN_WORDS` words after cleaning.
Question
    :func:`clean_message`: the subject line without conventional-commit prefixes (``fix:``,
    ``feat(scope)!:``), leading ``[tag]`` and ``:gitmoji:`` markers, PR and issue references
    (``(#123)``, ``Fixes #12``, ``gh-7``, GitHub issue and pull URLs) and trailing punctuation.
    A ``Merge pull request #N from ...`` subject is replaced by the PR title on the next line.
    With ``body=True`` the first prose paragraph of the body is appended (trailers such as
    ``Signed-off-by`` and ``Co-authored-by``, bullet lists, headings, HTML comments and
    references removed; at most :data:`MAX_BODY_CHARS` characters).
Gold files
    Files the commit modified or added (``--no-renames``: a rename counts as an added new path)
    that are library source (:func:`path_role` is ``"source"``: a code language ragloom chunks
    into symbols, not a test, doc, example, benchmark, build/CI script, type declaration
    ``.d.ts`` or generated file), that exist at the same path in the pinned tree and that
    ragloom's walker indexes there. A commit qualifies when it touches (adds, modifies or
    deletes) at most :data:`MAX_SOURCE_FILES` source files and at least one gold file remains.
Corpus
    The tree of the pinned commit (symlinks and submodules aside) without its changelogs and
    release notes (:func:`is_changelog`): they quote the very commit messages the questions are
    made of, written after each change, so they would answer every question from its future.
Selection and split
    Qualifying commits are ordered by committer date, then hash; the newest ``max_questions``
    are kept (a repeated question text keeps only its newest commit), and per repository the
    older ``tune_share`` of them is the ``"tune"`` split, the newer rest ``"test"`` (held back:
    no default may be tuned on it).

Everything is deterministic: the same repository, pinned commit and settings give byte-identical
files (sorted keys, no run timestamps). Only git (a subprocess) and ragloom's own walker and
language table are used; nothing here imports the CLI. Reading git (:class:`Commit`,
:func:`read_log`, :func:`resolve_commit`, :func:`tree_paths`) and :func:`path_role` live in
:mod:`ragloom.ingest.git`, shared with the retrieval sources; they are re-exported here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from ragloom.errors import InputError
from ragloom.ingest.git import (
    CODE_LANGUAGES,
    Commit,
    PathRole,
    git_output,
    path_role,
    read_log,
    resolve_commit,
    tree_paths,
)
from ragloom.ingest.walker import walk

__all__ = [
    "CODE_LANGUAGES",
    "DEFAULT_MAX_QUESTIONS",
    "DEFAULT_TUNE_SHARE",
    "MAX_BODY_CHARS",
    "MAX_SOURCE_FILES",
    "MIN_WORDS",
    "Commit",
    "GitQuestion",
    "PathRole",
    "RepoBuild",
    "RepoSpec",
    "Selection",
    "build_repo",
    "clean_message",
    "clean_subject",
    "dump_questions",
    "extract_tree",
    "indexable_paths",
    "is_changelog",
    "is_generated_text",
    "load_repo_specs",
    "path_role",
    "read_commits",
    "read_log",
    "resolve_commit",
    "select_questions",
    "skip_reason",
    "tree_paths",
    "word_count",
]

DEFAULT_MAX_QUESTIONS = 200
"""Newest qualifying commits kept per repository."""
DEFAULT_TUNE_SHARE = 0.5
"""Share of a repository's questions (the older ones) in the tune split."""
MAX_SOURCE_FILES = 5
"""A commit touching more library source files than this is a refactor, not one task."""
MIN_WORDS = 3
"""Fewer words after cleaning ("fix", "wip", "Fixes #12") do not make a question."""
MAX_BODY_CHARS = 300
"""Cap of the body paragraph appended with ``body=True`` (cut at a word boundary)."""

# --- message cleaning -----------------------------------------------------------------------

_CONVENTIONAL_TYPES = (
    "feat|feature|features|fix|fixes|fixed|bugfix|hotfix|bug|chore|docs?|refactor|perf|"
    "performance|tests?|style|ci|build|revert|release|deps?|dependencies|types?|typing|"
    "security|improvement|improve|enhancement|enh|update|upgrade|breaking|misc|cleanup|wip|"
    "dx|ux|api|core|internal|example|examples|refac|refactoring|chores|tweak|tweaks"
)
_CONVENTIONAL_RE = re.compile(
    rf"^(?:(?:{_CONVENTIONAL_TYPES})\s*(?:\([^()]*\))?|[a-z]+\([^()]*\))\s*!?\s*:\s*",
    re.IGNORECASE,
)
_BRACKET_TAG_RE = re.compile(r"^\[[^\[\]]{0,40}\]\s*:?\s*")
_GITMOJI_RE = re.compile(r"^(?::[a-z0-9_+-]+:\s*)+", re.IGNORECASE)
_LEADING_SYMBOLS_RE = re.compile(r"^[^\w\"'`(\[{<@.$/~\\]+")
_REF = r"(?:[\w.-]+/[\w.-]+)?(?:#|gh-|GH-)\d+"
_REF_WORDS = (
    r"(?:fix(?:es|ed)?|close[sd]?|resolve[sd]?|refs?|references?|see|related(?:\s+to)?|"
    r"part\s+of|addresses|address|for|issue|pr|pull\s+request|cf\.?)"
)
_PAREN_REF_RE = re.compile(
    rf"[(\[]\s*(?:{_REF_WORDS}\s*:?\s*)?{_REF}(?:\s*(?:,|and|&)?\s*(?:{_REF_WORDS}\s*:?\s*)?{_REF})*"
    r"\s*[)\]]",
    re.IGNORECASE,
)
_WORD_REF_RE = re.compile(
    rf"\b{_REF_WORDS}\s*:?\s*{_REF}(?:\s*(?:,|and|&)?\s*{_REF})*", re.IGNORECASE
)
_BARE_REF_RE = re.compile(rf"(?<![\w&]){_REF}\b")
_URL_REF_RE = re.compile(r"https?://github\.com/[^\s)]+/(?:issues|pull|pulls)/\d+[^\s)]*")
_MERGE_PR_RE = re.compile(r"^merge pull request\s+#?\d*\s*(?:from\s+\S+)?\s*$", re.IGNORECASE)
_MERGE_BRANCH_RE = re.compile(
    r"^merge (?:remote-tracking )?(?:branch|tag|commit)\b|^merge\s+\S+\s+into\s+\S+",
    re.IGNORECASE,
)
_EMPTY_BRACKETS_RE = re.compile(r"\(\s*\)|\[\s*\]")
_SPACES_RE = re.compile(r"\s+")
_STRIP_CHARS = " \t-:;,.|/\\\u2026"
_TRAILER_RE = re.compile(
    r"^(?:signed-off-by|co-authored-by|co-authored|reviewed-by|acked-by|tested-by|"
    r"reported-by|suggested-by|helped-by|cc|change-id|pr-url|closes|fixes|resolves|refs?|"
    r"see-also|issue|ticket|backport-of|cherry-picked from|\(cherry picked from)\b.*",
    re.IGNORECASE,
)
_HTML_COMMENT_RE = re.compile(r"<!--.*?(?:-->|$)", re.DOTALL)


def _clean_step(text: str) -> str:
    s = _SPACES_RE.sub(" ", text.replace("\\n\\n", " ")).strip()
    s = _GITMOJI_RE.sub("", s)
    s = _LEADING_SYMBOLS_RE.sub("", s)
    s = _BRACKET_TAG_RE.sub("", s)
    s = _CONVENTIONAL_RE.sub("", s)
    s = _URL_REF_RE.sub("", s)
    s = _PAREN_REF_RE.sub("", s)
    s = _WORD_REF_RE.sub("", s)
    s = _BARE_REF_RE.sub("", s)
    s = _EMPTY_BRACKETS_RE.sub("", s)
    s = _SPACES_RE.sub(" ", s)
    return s.strip(_STRIP_CHARS)


def clean_subject(line: str) -> str:
    """One line cleaned to a question: prefixes, tags, references and end punctuation removed.

    Applied until nothing changes (``fix: feat(x): y`` loses both prefixes), so cleaning a
    cleaned line returns it unchanged.
    """
    s = line
    for _ in range(len(line) + 2):
        nxt = _clean_step(s)
        if nxt == s:
            break
        s = nxt
    return s


def _paragraphs(text: str) -> list[list[str]]:
    paras: list[list[str]] = []
    cur: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            if cur:
                paras.append(cur)
                cur = []
            continue
        cur.append(line)
    if cur:
        paras.append(cur)
    return paras


def _body_paragraph(body: str) -> str:
    """The first prose paragraph of a commit body, cleaned; "" when there is none."""
    body = _HTML_COMMENT_RE.sub("", body)
    for para in _paragraphs(body):
        lines = [
            ln
            for ln in para
            if not _TRAILER_RE.match(ln)
            and not ln.startswith(("#", "*", "-", "+", ">", "|", "```", "<", "[", "!["))
            and not re.match(r"^\d+[.)]\s", ln)
        ]
        if len(lines) != len(para):
            continue  # a list, a heading block or trailers: not one prose paragraph
        text = clean_subject(" ".join(lines))
        text = _SPACES_RE.sub(" ", re.sub(r"https?://\S+", "", text)).strip(_STRIP_CHARS)
        if word_count(text) < MIN_WORDS:
            continue
        if len(text) > MAX_BODY_CHARS:
            cut = text[:MAX_BODY_CHARS]
            text = cut[: cut.rfind(" ")] if " " in cut else cut
            text = clean_subject(text)
        return text
    return ""


def _subject_and_body(message: str) -> tuple[str, str]:
    if "\\n\\n" in message:
        # a message written with literal "\n" escapes (some tools do): they are line breaks
        message = message.replace("\\n", "\n")
    lines = message.strip().splitlines()
    if not lines:
        return "", ""
    subject = lines[0].strip()
    rest = lines[1:]
    if _MERGE_PR_RE.match(subject):
        # GitHub's merge message: the PR title is the first non-empty line of the body
        while rest and not rest[0].strip():
            rest = rest[1:]
        if rest:
            subject, rest = rest[0].strip(), rest[1:]
        else:
            subject = ""
    return subject, "\n".join(rest)


def clean_message(message: str, *, body: bool = False) -> str:
    """The question a commit message asks: its cleaned subject, optionally + body paragraph.

    Never raises; the result is one line without leading or trailing spaces (possibly empty).
    """
    subject, rest = _subject_and_body(message)
    if _MERGE_PR_RE.match(subject):
        subject = ""
    text = clean_subject(subject)
    if _MERGE_PR_RE.match(text):
        text = ""
    if body:
        extra = _body_paragraph(rest)
        if extra and extra.lower() not in text.lower():
            text = f"{text}. {extra}" if text else extra
    return text


def word_count(text: str) -> int:
    """Words that contain a letter or digit (``a``, ``HTTP/2``, ``foo_bar``)."""
    return sum(1 for w in text.split() if re.search(r"[^\W_]", w))


# --- commit filters ---------------------------------------------------------------------------

_BOT_RE = re.compile(
    r"\[bot\]|dependabot|renovate|greenkeeper|pre-commit-ci|github-actions|snyk-bot|"
    r"allcontributors|semantic-release-bot",
    re.IGNORECASE,
)
_SKIP_CONVENTIONAL_RE = re.compile(
    r"^(?P<type>docs?|ci|style|tests?|release|revert|build\s*\(\s*deps?\s*\)|"
    r"chore\s*\(\s*(?:deps?|deps-dev|release|ci|docs?|lint|format|changelog|version)\s*\)|"
    r"deps?|lint|format|typo|wip)\s*(?:\([^()]*\))?\s*!?\s*:",
    re.IGNORECASE,
)
_REVERT_RE = re.compile(r"^(?:revert\b|reverts\b|rollback\b|back\s*out\b)", re.IGNORECASE)
_RELEASE_RES: tuple[re.Pattern[str], ...] = (
    re.compile(r"^v?\d+(?:\.\d+)+\S*$", re.IGNORECASE),
    re.compile(r"^v?\d+(?:\.\d+)*\s*(?:alpha|beta|rc|pre|preview|final)\b", re.IGNORECASE),
    re.compile(
        r"^(?:release|released|releasing|prepare|preparing|publish|tag(?:ged)?|cut)\b"
        r".*(?:\d+\.\d+|release|version)",
        re.IGNORECASE,
    ),
    re.compile(r"^(?:version|ver)\s+v?\d", re.IGNORECASE),
    re.compile(r"\b(?:bump|update|increment|set|prepare)s?\s+(?:the\s+)?version\b", re.IGNORECASE),
    re.compile(r"\bversion\s+bump\b|\brelease\s+v?\d+\.\d+|\bnew\s+version\b", re.IGNORECASE),
    re.compile(r"\b(?:version|release)\s+(?:to\s+)?v?\d+\.\d+", re.IGNORECASE),
    re.compile(
        r"^(?:update|updated|add|added)?\s*(?:the\s+)?(?:changelog|changes|history)\b", re.I
    ),
)
_DEPENDENCY_RES: tuple[re.Pattern[str], ...] = (
    re.compile(
        r"^(?:bump|bumps|bumped|update|updates|upgrade|upgrades)\s+\S+\s+from\s+\S+\s+to\b", re.I
    ),
    re.compile(
        r"^(?:bump|update|upgrade|pin|unpin|lock)s?\b.*\b(?:dependency|dependencies|deps|"
        r"dev-?dependencies|requirements|lockfile|lock file|package-lock|yarn\.lock|cargo\.lock|"
        r"go\.mod|go\.sum|pnpm-lock)\b",
        re.IGNORECASE,
    ),
    re.compile(r"^update (?:module|rust crate|dependency)\b", re.IGNORECASE),
    re.compile(
        r"^(?:update|upgrade|bump|migrate|move|port)s?\s+(?:to\s+)?[\w.-]+\s+(?:to\s+)?v?\d+\.\d+",
        re.IGNORECASE,
    ),
    re.compile(r"\bthe \S+ group\b.*\bupdates?\b", re.IGNORECASE),
)
_FORMAT_RE = re.compile(
    r"\b(?:typos?|spelling|misspell\w*|mis-spell\w*|grammar|lint\w*|reformat\w*|"
    r"format(?:ted|ting)?\s+(?:code|files?|source|all)|code\s+style|coding\s+style|prettier|"
    r"gofmt|goimports|gofumpt|golangci\w*|rustfmt|cargo\s+fmt|clippy|isort|flake8|pylint|"
    r"eslint|tslint|biome|whitespaces?|trailing\s+spaces?|pre-commit|precommit|"
    r"(?:run|apply|ran|applied)\s+black|black\s+format\w*|ruff|mypy|pyright|codespell)\b",
    re.IGNORECASE,
)
_CI_RE = re.compile(
    r"^(?:ci|travis|appveyor|circleci|github\s+actions?|gh\s+actions?|workflows?|"
    r"(?:fix|update|add|improve|bump|move)\s+(?:the\s+)?(?:ci|travis|appveyor|circleci|"
    r"github\s+actions?|workflows?|codecov|coverage(?:\s+config)?)\b)",
    re.IGNORECASE,
)
_DOCS_RE = re.compile(
    r"^(?:docs?|documentation|docstrings?|readme|changelog|comments?)\b|"
    r"^(?:update|updated|updates|improve|improved|fix|fixed|clarify|clarified|tweak|add|added|"
    r"expand|polish|correct|document|reword)\s+(?:the\s+|a\s+|some\s+|more\s+|missing\s+)?"
    r"(?:docs?|documentation|docstrings?|comments?|readme|changelog|doc\s+comments?|"
    r"code\s+comments?|api\s+docs?|examples?\s+in\s+docs?)\b",
    re.IGNORECASE,
)
_DOCS_ANYWHERE_RE = re.compile(
    r"\b(?:in|to|from)\s+(?:the\s+)?(?:readme|docs|documentation|changelog)\b|"
    r"\b(?:doc|docs|documentation)\s+links?\b|^(?:fix|fixed|update|updated)\s+(?:broken\s+|dead\s+)?"
    r"(?:links?|urls?)\b|\b(?:fix|fixed|update|updated|improve|improved|broken|typo\s+in|add|added)\b"
    r".*\b(?:comments?|godoc|go\s+doc|docstrings?|rustdoc|jsdoc|tsdoc|doc\s+comments?)\b|"
    r"\b(?:docs|documentation|docstrings?)\b|^(?:clearly\s+|better\s+)?document(?:ed|s)?\b",
    re.IGNORECASE,
)
_WIP_RE = re.compile(
    r"^(?:wip|tmp|temp|todo|checkpoint|fixup!|squash!|amend!)\b|"
    r"^(?:address(?:ed|es|ing)?|apply|applied|applying|fix(?:ed)?|incorporate[ds]?|resolve[ds]?)"
    r"\s+(?:the\s+|some\s+|more\s+)?(?:pr\s+|code\s+|review\s+)?"
    r"(?:review|feedback|comments?|suggestions?|nits?)\b",
    re.IGNORECASE,
)


def skip_reason(message: str, author: str = "", email: str = "") -> str | None:
    """Why a commit gives no question, judged from its message and author; None if it may."""
    if _BOT_RE.search(author) or _BOT_RE.search(email):
        return "bot"
    raw_subject, _ = _subject_and_body(message)
    raw_subject = _SPACES_RE.sub(" ", raw_subject).strip()
    if _MERGE_BRANCH_RE.match(raw_subject) or _MERGE_PR_RE.match(raw_subject):
        return "merge"
    lowered = raw_subject.lower()
    if _REVERT_RE.match(lowered) or "this reverts commit" in message.lower():
        return "revert"
    if _WIP_RE.match(lowered):
        return "wip"
    m = _SKIP_CONVENTIONAL_RE.match(_GITMOJI_RE.sub("", raw_subject))
    if m:
        kind = re.sub(r"\W.*", "", m.group("type").lower())
        return {
            "doc": "docs",
            "docs": "docs",
            "ci": "ci",
            "style": "format",
            "lint": "format",
            "format": "format",
            "typo": "format",
            "test": "tests",
            "tests": "tests",
            "release": "release",
            "revert": "revert",
            "wip": "wip",
        }.get(kind, "dependency")
    subject = clean_subject(raw_subject)
    if any(r.search(subject) for r in _RELEASE_RES):
        return "release"
    if any(r.search(subject) for r in _DEPENDENCY_RES):
        return "dependency"
    if _FORMAT_RE.search(subject):
        return "format"
    if _CI_RE.match(subject):
        return "ci"
    if _DOCS_RE.match(subject) or _DOCS_ANYWHERE_RE.search(subject):
        return "docs"
    if word_count(subject) < MIN_WORDS:
        return "short"
    return None


# --- changelogs and generated files -----------------------------------------------------------

_GENERATED_TEXT_RE = re.compile(
    r"code generated .* do not edit|@generated|auto-?generated|automatically generated|"
    r"this file (?:is|was) generated|do not edit(?: this file)?[:!.]? ?(?:it is|this file is)",
    re.IGNORECASE,
)


_CHANGELOG_RE = re.compile(
    r"^(?:changelog|changes|history|news|release[-_ ]?notes|releases)"
    r"(?:\.(?:md|mdx|markdown|rst|txt|adoc|asciidoc))?$",
    re.IGNORECASE,
)


def is_changelog(path: str) -> bool:
    """A changelog or release-notes file (``CHANGELOG.md``, ``docs/release-notes.md``, ...).

    These are left out of the corpus: they quote the commit messages the questions are made
    of, written after the change (a leak from the future of every question).
    """
    return bool(_CHANGELOG_RE.match(PurePosixPath(path).name))


def is_generated_text(head: str) -> bool:
    """A file whose first lines say it is generated (``Code generated ... DO NOT EDIT``)."""
    return bool(_GENERATED_TEXT_RE.search(head))


# --- git ---------------------------------------------------------------------------------------


def read_commits(git_dir: Path, pinned: str) -> list[Commit]:
    """Every non-merge ancestor of ``pinned`` (itself excluded) with its changed paths."""
    return [c for c in read_log(git_dir, pinned) if c.sha != pinned]


_FILE_MODES = ("100644", "100755")


def extract_tree(
    git_dir: Path, commit: str, dest: Path, *, skip: Callable[[str], bool] | None = None
) -> int:
    """Write ``commit``'s tree into ``dest`` (replaced), as ``git archive`` would; returns files.

    Unlike ``git archive`` it ignores ``export-ignore`` and ``export-subst`` attributes (a
    checkout has those files), and it skips symlinks, submodules and the paths ``skip`` says
    yes to. Every file's mtime is the commit time, so two extractions are identical.
    """
    entries = tree_paths(git_dir, commit)
    ts = int(git_output(git_dir, "show", "-s", "--format=%ct", commit).decode().strip())
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    blobs = sorted((p, sha, mode) for p, (mode, sha) in entries.items() if mode in _FILE_MODES)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_DIR"] = str(git_dir)
    written = 0
    with subprocess.Popen(
        ["git", "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    ) as proc:
        stdin, stdout = proc.stdin, proc.stdout
        if stdin is None or stdout is None:  # pragma: no cover - PIPE always gives both
            raise InputError("git cat-file: no pipe")
        for path, sha, mode in blobs:
            stdin.write(sha.encode() + b"\n")
            stdin.flush()
            header = stdout.readline().split()
            if len(header) != 3:
                raise InputError(f"git cat-file: unexpected answer for {path}: {header!r}")
            data = stdout.read(int(header[2]))
            stdout.read(1)  # the newline after the object
            if ".." in PurePosixPath(path).parts or (skip is not None and skip(path)):
                continue
            target = dest / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            if mode == "100755":
                target.chmod(0o755)
            os.utime(target, (ts, ts))
            written += 1
        stdin.close()
    return written


def indexable_paths(corpus: Path) -> set[str]:
    """Repo-relative paths ragloom's walker would index under ``corpus``."""
    return {f.rel for f in walk(corpus).files}


# --- selection ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GitQuestion:
    """One question: a dataset line of :mod:`ragloom.eval.dataset` plus provenance fields."""

    id: str
    query: str
    gold_files: tuple[str, ...]
    repo: str
    commit: str
    date: str
    split: str
    dropped_files: int = 0
    """Source files the commit touched that are not gold (deleted, renamed or not indexed)."""

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "query": self.query,
            "gold_files": list(self.gold_files),
            "repo": self.repo,
            "commit": self.commit,
            "date": self.date,
            "split": self.split,
            "dropped_files": self.dropped_files,
        }


@dataclass(slots=True)
class Selection:
    """The chosen questions (oldest first) and why the other commits were left out."""

    questions: list[GitQuestion]
    skipped: Counter[str] = field(default_factory=Counter)
    qualifying: int = 0


def _iso(ts: int) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def gold_for(
    commit: Commit, eligible: set[str], *, max_source_files: int = MAX_SOURCE_FILES
) -> tuple[tuple[str, ...], int, str | None]:
    """(gold files, touched source files not gold, skip reason) of one commit.

    ``eligible`` holds the pinned-tree paths that are indexed, not generated and ``"source"``.
    """
    source = sorted({p for _, p in commit.changes if path_role(p) == "source"})
    if not source:
        return (), 0, "no-source"
    if len(source) > max_source_files:
        return (), 0, "too-many-files"
    kept = sorted({p for st, p in commit.changes if st in ("A", "M", "T") and p in eligible})
    if not kept:
        return (), 0, "gold-gone"
    return tuple(kept), len(source) - len(kept), None


def select_questions(
    commits: Iterable[Commit],
    eligible: set[str],
    *,
    repo: str,
    max_questions: int = DEFAULT_MAX_QUESTIONS,
    tune_share: float = DEFAULT_TUNE_SHARE,
    body: bool = False,
    max_source_files: int = MAX_SOURCE_FILES,
) -> Selection:
    """Questions of the newest ``max_questions`` qualifying commits, split by time."""
    if not 0.0 <= tune_share <= 1.0:
        raise ValueError(f"tune_share must be in [0, 1], got {tune_share}")
    if max_questions < 1:
        raise ValueError(f"max_questions must be >= 1, got {max_questions}")
    ordered = sorted(commits, key=lambda c: (c.timestamp, c.sha))
    skipped: Counter[str] = Counter()
    candidates: list[tuple[Commit, str, tuple[str, ...], int]] = []
    for c in ordered:
        gold: tuple[str, ...] = ()
        dropped = 0
        query = ""
        reason = skip_reason(c.message, c.author, c.email)
        if reason is None:
            gold, dropped, reason = gold_for(c, eligible, max_source_files=max_source_files)
        if reason is None:
            query = clean_message(c.message, body=body)
            if word_count(query) < MIN_WORDS:
                reason = "short"
        if reason is not None:
            skipped[reason] += 1
            continue
        candidates.append((c, query, gold, dropped))
    # a repeated question text is ambiguous: keep its newest commit only (judged on subjects,
    # so the subject-only and the body datasets hold the same commits)
    seen: set[str] = set()
    unique: list[tuple[Commit, str, tuple[str, ...], int]] = []
    for cand in reversed(candidates):
        key = clean_message(cand[0].message).lower()
        if key in seen:
            skipped["duplicate"] += 1
            continue
        seen.add(key)
        unique.append(cand)
    unique.reverse()
    qualifying = len(unique)
    chosen = unique[-max_questions:]
    n_tune = int(len(chosen) * tune_share)
    questions = [
        GitQuestion(
            id=f"{repo}-{c.sha[:12]}",
            query=query,
            gold_files=gold,
            repo=repo,
            commit=c.sha,
            date=_iso(c.timestamp),
            split="tune" if i < n_tune else "test",
            dropped_files=dropped,
        )
        for i, (c, query, gold, dropped) in enumerate(chosen)
    ]
    skipped["older-than-selection"] = qualifying - len(chosen)
    return Selection(questions=questions, skipped=skipped, qualifying=qualifying)


def dump_questions(questions: Iterable[GitQuestion], path: Path) -> int:
    """Write questions as JSON Lines with sorted keys (byte-for-byte reproducible)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(q.to_dict(), ensure_ascii=False, sort_keys=True) for q in questions]
    path.write_bytes(("".join(line + "\n" for line in lines)).encode("utf-8"))
    return len(lines)


# --- one repository ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RepoSpec:
    """One line of ``scripts/git_eval_repos.toml``."""

    name: str
    language: str
    git_dir: str
    commit: str
    url: str = ""


def load_repo_specs(data: Mapping[str, object]) -> list[RepoSpec]:
    """Repository specs from parsed TOML: ``[[repo]]`` tables of name/language/git_dir/commit."""
    rows = data.get("repo")
    if not isinstance(rows, list) or not rows:
        raise InputError("the repository list needs at least one [[repo]] table")
    specs: list[RepoSpec] = []
    for i, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise InputError(f"[[repo]] #{i} is not a table")
        vals: dict[str, str] = {}
        for key in ("name", "language", "git_dir", "commit", "url"):
            v = row.get(key, "")
            if not isinstance(v, str) or (key != "url" and not v):
                raise InputError(f"[[repo]] #{i}: field {key!r} must be a non-empty string")
            vals[key] = v
        if not re.fullmatch(r"[0-9a-f]{40}", vals["commit"]):
            raise InputError(f"[[repo]] {vals['name']}: commit must be a full 40-hex hash")
        specs.append(RepoSpec(**vals))
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise InputError("repository names must be unique")
    return specs


@dataclass(slots=True)
class RepoBuild:
    """What :func:`build_repo` wrote for one repository."""

    name: str
    commit: str
    corpus_files: int
    indexable_files: int
    source_files: int
    commits: int
    qualifying: int
    tune: int
    test: int
    skipped: dict[str, int]
    extracted: bool

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "commit": self.commit,
            "corpus_files": self.corpus_files,
            "indexable_files": self.indexable_files,
            "source_files": self.source_files,
            "commits": self.commits,
            "qualifying": self.qualifying,
            "tune": self.tune,
            "test": self.test,
            "skipped": dict(sorted(self.skipped.items())),
        }


def _eligible(corpus: Path, indexable: set[str]) -> set[str]:
    out: set[str] = set()
    for rel in indexable:
        if path_role(rel) != "source":
            continue
        try:
            with (corpus / rel).open("rb") as fh:
                head = fh.read(2048).decode("utf-8", "replace")
        except OSError:
            continue
        if not is_generated_text(head):
            out.add(rel)
    return out


def build_repo(
    spec: RepoSpec,
    out_dir: Path,
    mirror_root: Path,
    *,
    max_questions: int = DEFAULT_MAX_QUESTIONS,
    tune_share: float = DEFAULT_TUNE_SHARE,
    force_extract: bool = False,
) -> RepoBuild:
    """Write ``out_dir/<name>/``: corpus/, questions.jsonl, questions-body.jsonl, tune.jsonl,
    test.jsonl and meta.json.

    The corpus is extracted only when missing or made from another commit (the marker is
    ``out_dir/<name>/corpus.commit``), so an index built inside it survives a rebuild of the
    questions; ``force_extract`` always re-extracts.
    """
    git_dir = Path(spec.git_dir)
    if not git_dir.is_absolute():
        git_dir = mirror_root / git_dir
    if not git_dir.exists():
        raise InputError(f"{spec.name}: git directory not found: {git_dir}")
    pinned = resolve_commit(git_dir, spec.commit)
    repo_out = out_dir / spec.name
    corpus = repo_out / "corpus"
    marker = repo_out / "corpus.commit"
    extracted = False
    current = marker.read_text().strip() if marker.exists() else ""
    corpus_files = 0
    if force_extract or current != pinned or not corpus.is_dir():
        repo_out.mkdir(parents=True, exist_ok=True)
        marker.unlink(missing_ok=True)
        corpus_files = extract_tree(git_dir, pinned, corpus, skip=is_changelog)
        marker.write_text(pinned + "\n")
        extracted = True
    entries = tree_paths(git_dir, pinned)
    removed = sorted(p for p, (m, _) in entries.items() if m in _FILE_MODES and is_changelog(p))
    for rel in removed:  # a corpus extracted before changelogs were left out
        (corpus / rel).unlink(missing_ok=True)
    entries = {p: e for p, e in entries.items() if p not in set(removed)}
    if not extracted:
        corpus_files = sum(1 for m, _ in entries.values() if m in _FILE_MODES)
    indexable = indexable_paths(corpus) & set(entries)
    eligible = _eligible(corpus, indexable)
    commits = read_commits(git_dir, pinned)
    sel = select_questions(
        commits, eligible, repo=spec.name, max_questions=max_questions, tune_share=tune_share
    )
    sel_body = select_questions(
        commits,
        eligible,
        repo=spec.name,
        max_questions=max_questions,
        tune_share=tune_share,
        body=True,
    )
    dump_questions(sel.questions, repo_out / "questions.jsonl")
    dump_questions(sel_body.questions, repo_out / "questions-body.jsonl")
    dump_questions([q for q in sel.questions if q.split == "tune"], repo_out / "tune.jsonl")
    dump_questions([q for q in sel.questions if q.split == "test"], repo_out / "test.jsonl")
    build = RepoBuild(
        name=spec.name,
        commit=pinned,
        corpus_files=corpus_files,
        indexable_files=len(indexable),
        source_files=len(eligible),
        commits=len(commits),
        qualifying=sel.qualifying,
        tune=sum(1 for q in sel.questions if q.split == "tune"),
        test=sum(1 for q in sel.questions if q.split == "test"),
        skipped=dict(sel.skipped),
        extracted=extracted,
    )
    meta = {
        **build.to_dict(),
        "language": spec.language,
        "url": spec.url,
        "left_out_of_corpus": removed,
    }
    (repo_out / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return build


def summary_lines(builds: Sequence[RepoBuild]) -> list[str]:
    """A plain-text table of builds (for the script's output)."""
    head = f"{'repo':<12} {'commit':<12} {'files':>6} {'src':>5} {'commits':>7} {'qual':>5} {'tune':>5} {'test':>5}"
    lines = [head]
    for b in builds:
        lines.append(
            f"{b.name:<12} {b.commit[:12]:<12} {b.indexable_files:>6} {b.source_files:>5} "
            f"{b.commits:>7} {b.qualifying:>5} {b.tune:>5} {b.test:>5}"
        )
    return lines
