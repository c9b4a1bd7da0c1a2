"""Reading a repository's git state with ``git`` itself (a subprocess; never the network).

The one place below :mod:`ragloom.sources` and :mod:`ragloom.eval` that runs git: the ``commits``
source and the history ranking read commits through :func:`read_log` and classify paths with
:func:`path_role`; the evaluation's dataset builder (:mod:`ragloom.eval.gitdata`, which re-exports
these names) does the same; ``Index.index`` records the branch and HEAD an index reflects
(:func:`head_state`) and ``Index.status`` compares them with the work tree (:func:`git_status`).

It sits in the ingest layer (docs/architecture.md): like the walker it reads the repository
being indexed, it needs only the foundation and the language table of :mod:`ragloom.ingest`
(for :func:`path_role`), and the index layer may use it (:func:`changed_paths`) without
importing upward.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from ragloom.errors import InputError
from ragloom.ingest.languages import CODE_SPECS, detect_language

__all__ = [
    "CODE_LANGUAGES",
    "Commit",
    "GitState",
    "PathRole",
    "changed_paths",
    "dirty_paths",
    "git_dir_of",
    "git_output",
    "git_status",
    "head_state",
    "ignored_by_work_tree",
    "last_commit_times",
    "path_role",
    "read_log",
    "resolve_commit",
    "run_git",
    "state_record",
    "tree_paths",
]

CODE_LANGUAGES: frozenset[str] = frozenset(CODE_SPECS) - {"bash"}
"""Languages whose files can be library source: those ragloom chunks into symbols, shell
scripts aside."""

PathRole = Literal["source", "test", "docs", "example", "bench", "build", "declaration", "other"]

# --- running git -------------------------------------------------------------------------------


def _env(git_dir: Path | None, keep: Sequence[str] = ()) -> dict[str, str]:
    """The environment without the caller's ``GIT_*`` variables (a hook or an outer git must
    not redirect us), ``GIT_DIR`` when given, and the C locale (stable messages)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in keep}
    if git_dir is not None:
        env["GIT_DIR"] = str(git_dir)
    env["LC_ALL"] = "C"
    return env


def run_git(
    args: Sequence[str], cwd: Path | None = None, git_dir: Path | None = None
) -> tuple[int, str]:
    """``git ARGS`` in ``cwd`` (or on ``git_dir``): (exit status, stdout as text). Never raises
    for a git failure; a missing ``git`` executable reads as status 127."""
    try:
        proc = subprocess.run(
            ["git", "-c", "core.quotepath=off", *args],
            cwd=cwd,
            env=_env(git_dir),
            capture_output=True,
            check=False,
        )
    except OSError:
        return 127, ""
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


def git_output(git_dir: Path, *args: str) -> bytes:
    """``git ARGS`` on ``git_dir``: its stdout, or InputError with git's message."""
    proc = subprocess.run(
        ["git", "-c", "core.quotepath=off", "-c", "log.showSignature=false", *args],
        env=_env(git_dir, keep=("GIT_CONFIG_NOSYSTEM",)),
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip()
        raise InputError(f"git {' '.join(args[:2])} failed in {git_dir}: {err}")
    return proc.stdout


def git_dir_of(root: Path) -> Path | None:
    """The git directory of the work tree at ``root``: None when it is not in one, or when
    that work tree ignores ``root`` (:func:`ignored_by_work_tree`: a build or data folder is
    not the enclosing repository's code, and its history is not the folder's)."""
    code, out = run_git(["rev-parse", "--absolute-git-dir", "--show-prefix"], cwd=root)
    lines = out.split("\n")
    if code != 0 or not lines[0].strip():
        return None
    prefix = lines[1].strip() if len(lines) > 1 else ""
    if prefix and ignored_by_work_tree(root):
        return None
    return Path(lines[0].strip())


def ignored_by_work_tree(root: Path) -> bool:
    """Whether the git work tree ``root`` lies in ignores it (``git check-ignore``: a
    ``.gitignore`` rule or ``info/exclude`` names the folder or one above it, and it holds no
    tracked file). False outside a work tree, at its top, and when git cannot tell."""
    code, _ = run_git(["check-ignore", "-q", "."], cwd=root)
    return code == 0


# --- commits -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Commit:
    """One non-merge commit: hash, committer time, author, raw message and changed paths."""

    sha: str
    timestamp: int
    author: str
    email: str
    message: str
    changes: tuple[tuple[str, str], ...]
    """``(status, path)`` pairs of ``git log --name-status --no-renames``: A, M, D, T."""


def resolve_commit(git_dir: Path, rev: str) -> str:
    """The full hash of ``rev`` in ``git_dir`` (InputError when it is not there)."""
    out = git_output(git_dir, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    return out.decode().strip()


_LOG_FORMAT = "%x1e%H%x1f%ct%x1f%an%x1f%ae%x1f%B%x1f"


def read_log(git_dir: Path, *revs: str) -> list[Commit]:
    """Non-merge commits ``git log REVS`` lists (``A..B`` ranges too), newest first, with their
    changed paths (the ``commits`` retrieval source reads history through this as well)."""
    raw = git_output(
        git_dir,
        "log",
        "--no-merges",
        "--no-renames",
        "--no-color",
        "--no-ext-diff",
        "-z",
        f"--format={_LOG_FORMAT}",
        "--name-status",
        *revs,
        "--",
    )
    text = raw.decode("utf-8", "replace")
    commits: list[Commit] = []
    for record in text.split("\x1e"):
        if not record.strip("\x00\n"):
            continue
        parts = record.split("\x1f")
        if len(parts) < 6:
            continue
        sha, ts, author, email, message = parts[:5]
        tail = "\x1f".join(parts[5:])
        fields = [f for f in tail.strip("\x00\n").split("\x00") if f]
        changes: list[tuple[str, str]] = []
        i = 0
        while i + 1 < len(fields):
            status = fields[i].strip("\n")
            changes.append((status[:1], fields[i + 1]))
            i += 2
        commits.append(Commit(sha, int(ts), author, email, message, tuple(changes)))
    return commits


def tree_paths(git_dir: Path, commit: str) -> dict[str, tuple[str, str]]:
    """Path -> (mode, blob hash) of every entry of ``commit``'s tree (recursively)."""
    raw = git_output(git_dir, "ls-tree", "-r", "-z", "--full-tree", commit)
    out: dict[str, tuple[str, str]] = {}
    for entry in raw.decode("utf-8", "replace").split("\x00"):
        if not entry:
            continue
        meta, _, path = entry.partition("\t")
        mode, _kind, sha = meta.split(" ")
        out[path] = (mode, sha)
    return out


# --- path roles --------------------------------------------------------------------------------

_TEST_DIRS = frozenset(
    {
        "test",
        "tests",
        "__tests__",
        "__test__",
        "testing",
        "testdata",
        "test_data",
        "test-data",
        "spec",
        "specs",
        "e2e",
        "fixtures",
        "__fixtures__",
        "__mocks__",
        "mocks",
        "test-utils",
        "test_utils",
        "testutil",
        "testutils",
        "integration-tests",
        "integration_tests",
        "ui-tests",
        "snapshots",
        "__snapshots__",
        "tests-integration",
        "test_helpers",
        "test-helpers",
        "testhelpers",
        "internal_test",
    }
)
_TEST_FILE_RE = re.compile(
    r"^(?:test_.*\.pyi?|.*_tests?\.pyi?|conftest\.py|.*_test\.go|tests?\.rs|"
    r".*[._-](?:test|spec|tests|specs|bench)\.(?:[cm]?[jt]sx?)|test\.[cm]?[jt]sx?|"
    r".*_test\.(?:rs|rb|c|cc|cpp|java)|.*Tests?\.java|.*_spec\.rb)$"
)
_DOC_DIRS = frozenset(
    {"docs", "doc", "documentation", "website", "site", "www", "docs_src", "doc_src", "book"}
)
_EXAMPLE_DIRS = frozenset(
    {
        "examples",
        "example",
        "samples",
        "sample",
        "demo",
        "demos",
        "sandbox",
        "playground",
        "play",
        "tutorial",
        "tutorials",
        "cookbook",
    }
)
_EXAMPLE_FILE_RE = re.compile(
    r"^(?:play|playground|scratch|sandbox|example|examples|demo)\.[\w.]+$", re.IGNORECASE
)
_BENCH_DIRS = frozenset({"bench", "benches", "benchmark", "benchmarks", "perf", "profiling"})
_BUILD_DIRS = frozenset(
    {
        "scripts",
        "script",
        "tools",
        "tool",
        "ci",
        "bin",
        "build",
        "dist",
        "gulp",
        "grunt",
        "xtask",
        "hack",
    }
)
_BUILD_FILE_RE = re.compile(
    r"^(?:setup\.py|noxfile\.py|tasks\.py|fabfile\.py|manage\.py|"
    r"(?:.*\.)?(?:config|conf|rc)\.[cm]?[jt]s|gulpfile\.[cm]?[jt]s|gruntfile\.[cm]?[jt]s|"
    r"\.eslintrc\.[cm]?js|\.prettierrc\.[cm]?js|babel\.config\.[cm]?js|"
    r"(?:webpack|rollup|vite|vitest|jest|karma|tsup|esbuild|eslint|prettier|commitlint|"
    r"lint-staged|playwright|tsdown|tsconfig)\..*|magefile\.go|mage\.go)$",
    re.IGNORECASE,
)
_DECLARATION_RE = re.compile(r"\.d\.[cm]?ts$|\.pyi$", re.IGNORECASE)
_GENERATED_NAME_RE = re.compile(
    r"(?:_pb2(?:_grpc)?\.pyi?|\.pb(?:\.gw)?\.go|^zz_generated.*|_generated\.\w+|\.generated\.\w+|"
    r"\.gen\.\w+|_gen\.go|\.min\.[cm]?js|-min\.js|\.bundle\.[cm]?js)$",
    re.IGNORECASE,
)


def path_role(path: str) -> PathRole:
    """What a repo-relative file is: library ``"source"`` (gold-eligible) or something else.

    Only files of a :data:`CODE_LANGUAGES` language can be ``"source"``; a test, doc, example,
    benchmark, build or CI file, a type declaration (``.d.ts``, ``.pyi``) or a file with a
    generated-looking name is not, and neither is anything under a hidden folder.
    """
    p = PurePosixPath(path)
    # "_examples" (Go hides folders from the build with a leading "_") is "examples"
    dirs = [d.lower().lstrip("_") or d for d in p.parts[:-1]]
    name = p.name
    if _TEST_FILE_RE.match(name) or any(d in _TEST_DIRS for d in dirs):
        return "test"
    if any(d in _DOC_DIRS for d in dirs):
        return "docs"
    if any(d in _EXAMPLE_DIRS for d in dirs) or _EXAMPLE_FILE_RE.match(name):
        return "example"
    if any(d in _BENCH_DIRS for d in dirs):
        return "bench"
    if any(d.startswith(".") for d in dirs) or any(d in _BUILD_DIRS for d in dirs):
        return "build"
    if _BUILD_FILE_RE.match(name):
        return "build"
    if _DECLARATION_RE.search(name):
        return "declaration"
    if _GENERATED_NAME_RE.search(name):
        return "other"
    if detect_language(path) not in CODE_LANGUAGES:
        return "other"
    return "source"


# --- the work tree's state -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GitState:
    """Where a work tree is: its ``branch`` (None when HEAD is detached) and ``head`` commit
    (None before the first commit); ``prefix`` is the folder's path inside the repository
    (``""`` at its top, else ending in ``/``)."""

    branch: str | None
    head: str | None
    prefix: str = ""

    def to_dict(self) -> dict[str, str | None]:
        """What ``Index.index`` records (the prefix is not: it follows from the root)."""
        return {"branch": self.branch, "head": self.head}

    @classmethod
    def from_dict(cls, data: object) -> GitState | None:
        """A recorded state back (None for anything that is not one)."""
        if not isinstance(data, dict):
            return None
        branch, head = data.get("branch"), data.get("head")
        return cls(
            branch if isinstance(branch, str) else None, head if isinstance(head, str) else None
        )


def head_state(root: Path) -> GitState | None:
    """The branch and HEAD of the work tree ``root`` is in; None when it is in none (not a
    repository, a bare one, no ``git``, or a folder the work tree ignores). Two ``git`` calls
    (three below the top of the work tree), a few milliseconds."""
    code, out = run_git(
        ["rev-parse", "--is-inside-work-tree", "--show-prefix", "HEAD^{commit}"], root
    )
    lines = out.split("\n")
    if not lines or lines[0] != "true":
        return None  # not a work tree (a failing rev-parse prints nothing for its options)
    prefix = lines[1] if len(lines) > 1 else ""
    if prefix and ignored_by_work_tree(root):
        return None  # a folder the work tree ignores is not in it (git_dir_of)
    head = lines[2].strip() if code == 0 and len(lines) > 2 else ""
    code, out = run_git(["symbolic-ref", "-q", "--short", "HEAD"], root)
    branch = out.strip() if code == 0 else ""
    return GitState(branch or None, head or None, prefix)


def _porcelain_paths(raw: str) -> set[str]:
    """Every path of ``git status --porcelain=v1 -z``: both sides of a rename or copy."""
    out: set[str] = set()
    fields = raw.split("\x00")
    i = 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        if len(entry) < 4:
            continue
        out.add(entry[3:])
        if entry[0] in "RC" or entry[1] in "RC":  # the origin path follows as its own field
            if i < len(fields) and fields[i]:
                out.add(fields[i])
            i += 1
    return out


def _under(prefix: str, paths: set[str]) -> set[str]:
    """Repository-relative paths made relative to the folder at ``prefix`` (others dropped)."""
    return {p[len(prefix) :] for p in paths if p.startswith(prefix) and len(p) > len(prefix)}


def dirty_paths(
    root: Path,
    *,
    exclude: Sequence[Path] = (),
    untracked: Literal["normal", "all"] = "normal",
) -> set[str] | None:
    """Paths under ``root`` (relative to it, ``/``-separated) that differ from HEAD: changed,
    staged, deleted and untracked files (``git status --porcelain=v1 -z``; with ``untracked``
    ``"normal"`` an untracked folder is one ``dir/`` entry, ``"all"`` lists its files). Folders
    in ``exclude`` (the index folder) are left out. None when ``root`` is not in a work tree.

    ``--no-optional-locks``: a status never takes the repository's index lock, so a concurrent
    ``git commit`` is not disturbed. ~10 ms on a repository of a few hundred files.
    """
    state = head_state(root)
    if state is None:
        return None
    spec = ["."]
    for folder in exclude:
        try:
            rel = Path(os.path.relpath(folder, root))
        except ValueError:
            continue
        if not rel.parts or rel.parts[0] == "..":
            continue
        spec.append(f":(exclude){rel.as_posix()}")
    code, out = run_git(
        ["--no-optional-locks", "status", "--porcelain=v1", "-z", "--no-renames",
         f"--untracked-files={untracked}", "--", *spec],
        root,
    )  # fmt: skip
    if code != 0:
        return None
    return _under(state.prefix, _porcelain_paths(out))


_TIMES_BATCH = 200
"""Paths per ``git log`` of :func:`last_commit_times` (the command line has a length limit)."""


def last_commit_times(root: Path, paths: Sequence[str]) -> dict[str, float]:
    """The committer time of the newest commit that changed each of ``paths`` (relative to
    ``root``, ``/``-separated), for those git knows; {} outside a work tree. One ``git log
    --name-only`` per :data:`_TIMES_BATCH` paths, read as it streams and stopped once every path
    of the batch was seen (the newest commits come first), so a long history costs little."""
    out: dict[str, float] = {}
    wanted = sorted(set(paths))
    for start in range(0, len(wanted), _TIMES_BATCH):
        batch = wanted[start : start + _TIMES_BATCH]
        left = set(batch)
        try:
            proc = subprocess.Popen(
                ["git", "-c", "core.quotepath=off", "log", "--format=%x00%ct", "--name-only",
                 "--no-renames", "--relative", "--", *(f":(literal){p}" for p in batch)],
                cwd=root, env=_env(None), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        except OSError:
            return out
        assert proc.stdout is not None
        when = 0.0
        try:
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                if line.startswith("\x00"):
                    try:
                        when = float(line[1:])
                    except ValueError:
                        when = 0.0
                elif line in left and when:
                    out[line] = when
                    left.discard(line)
                    if not left:
                        break
        finally:
            proc.stdout.close()
            proc.kill()
            proc.wait()
    return out


def changed_paths(root: Path, old_head: str, new_head: str) -> set[str] | None:
    """Files under ``root`` (relative to it) whose content may differ between a work tree that
    was at ``old_head`` and the work tree now at ``new_head``: ``git diff --name-only
    old new`` plus what differs from ``new_head`` now (:func:`dirty_paths`, untracked files
    listed one by one). None when either commit is unknown here or git fails: the caller then
    scans everything.

    It does not see what differed from ``old_head`` *when* that state was indexed (files
    edited but not committed then), nor files git ignores: an indexer using it must add
    those itself (see ``docs/architecture.md``, "Git awareness").
    """
    for rev in (old_head, new_head):
        code, _ = run_git(["cat-file", "-e", f"{rev}^{{commit}}"], root)
        if code != 0:
            return None
    code, out = run_git(
        ["diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--relative",
         old_head, new_head, "--", "."],
        root,
    )  # fmt: skip
    if code != 0:
        return None
    dirty = dirty_paths(root, untracked="all")
    if dirty is None:
        return None
    return {p for p in out.split("\x00") if p} | dirty


def git_status(
    root: Path, indexed: GitState | None, *, dirty: bool = True, exclude: Sequence[Path] = ()
) -> dict[str, object] | None:
    """The ``git`` object of ``ragloom status``: ``branch`` and ``head`` now, ``indexed_branch``
    and ``indexed_head`` (what the last index recorded; null when it recorded none),
    ``head_moved`` (HEAD differs from the indexed one; false when none was recorded) and
    ``dirty_paths`` (files that differ from HEAD, :func:`dirty_paths`; null when ``dirty`` is
    false). None when ``root`` is not in a git work tree."""
    now = head_state(root)
    if now is None:
        return None
    count: int | None = None
    if dirty:
        paths = dirty_paths(root, exclude=exclude)
        count = None if paths is None else len(paths)
    return {
        "branch": now.branch,
        "head": now.head,
        "indexed_branch": indexed.branch if indexed else None,
        "indexed_head": indexed.head if indexed else None,
        "head_moved": indexed is not None and indexed.head != now.head,
        "dirty_paths": count,
    }


def state_record(root: Path) -> dict[str, str | None] | None:
    """What ``Index.index`` keeps of the work tree's state (:meth:`GitState.to_dict`; None
    outside a work tree)."""
    state = head_state(root)
    return None if state is None else state.to_dict()
