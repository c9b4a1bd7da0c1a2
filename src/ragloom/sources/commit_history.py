"""The ``commits`` source as ranking evidence: :class:`CommitHistory` implements
:class:`ragloom.retrieve.history.ChangeHistory` over ``<index>/sources/commits.db`` (docs/ranking.md,
"Change history"). ``ragloom.api.Index`` attaches it to its retriever when the index keeps one."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

from ragloom.sources.itemstore import BaseItemStore, ItemStore

__all__ = ["CommitHistory", "work_tree_prefix"]

log = logging.getLogger("ragloom")


def _under(paths: Sequence[str], prefix: str) -> list[str]:
    """``paths`` inside ``prefix`` (a work-tree-relative folder ending in ``/``, or ``""``),
    relative to it: commits name paths from the top of the work tree, an index from its root."""
    if not prefix:
        return list(paths)
    n = len(prefix)
    return [p[n:] for p in paths if p.startswith(prefix)]


class CommitHistory:
    """:class:`ChangeHistory` over the ``commits`` source of an index: its store (an
    :class:`~ragloom.sources.itemstore.ItemStore` in ``<index>/sources/``, a
    :class:`~ragloom.sources.pg_items.PgItemStore` in PostgreSQL), or the folder that holds
    ``commits.db``. ``prefix`` is the indexed root's folder inside the git work tree
    (``services/api/``; ``""`` at the top): paths outside it are dropped and the rest made
    relative to it, like the index's own paths."""

    def __init__(self, store: BaseItemStore | Path, prefix: str = "") -> None:
        self.data_dir = store if isinstance(store, Path) else None
        self.prefix = prefix
        self._store = ItemStore(store, "commits") if isinstance(store, Path) else store

    @classmethod
    def open(cls, index_dir: Path, root: Path | None = None) -> CommitHistory | None:
        """The history of the folder index at ``index_dir`` whose root is ``root``; None when it
        keeps no commits, none of them touched a file under ``root``, or they cannot be opened
        (ranking then goes on without them, with a warning)."""
        data_dir = index_dir / "sources"
        if not (data_dir / "commits.db").is_file():
            return None
        try:
            store = ItemStore(data_dir, "commits")
        except Exception as exc:  # a broken source must not stop code search
            log.warning("commit history unavailable, ranking without it: %s", exc)
            return None
        return cls.attach(store, root)

    @classmethod
    def attach(cls, store: BaseItemStore, root: Path | None = None) -> CommitHistory | None:
        """The history over an open commits ``store`` (closed again when None is returned:
        no commits, or none touched a file under ``root``, or it cannot be read)."""
        try:
            prefix = work_tree_prefix(root) if root is not None else ""
            hist = cls(store, prefix or "")
            # at the top of the work tree every commit path is under the root: only a
            # sub-folder needs the (whole-history) check that some commit touched it
            empty = hist.store.count() == 0 if not hist.prefix else not any(hist.changes())
            if empty:
                hist.close()
                return None
            return hist
        except Exception as exc:  # a broken source must not stop code search
            log.warning("commit history unavailable, ranking without it: %s", exc)
            store.close()
            return None

    @property
    def store(self) -> BaseItemStore:
        """The commits source's store (items, BM25)."""
        return self._store

    def similar(self, query: str, k: int) -> list[tuple[float, Sequence[str]]]:
        return [(h.score, _under(h.paths, self.prefix)) for h in self._store.search(query, k)]

    def changes(self) -> Iterable[Sequence[str]]:
        return [_under(paths, self.prefix) for paths in self._store.path_lists()]

    def recent(self, n: int) -> list[Sequence[str]]:
        return [_under(paths, self.prefix) for paths in self._store.recent_path_lists(n)]

    def version(self) -> str:
        return self._store.state_token("last_commit")

    def close(self) -> None:
        self._store.close()


def work_tree_prefix(root: Path) -> str | None:
    """``root``'s folder inside its git work tree (``"a/b/"``, ``""`` at the top), None when
    it is not in one (``git rev-parse --show-prefix``)."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--show-prefix"],
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None
