"""Finding sources: Python entry points of the group ``ragloom.sources``.

Built-in sources are declared in ragloom's own ``pyproject.toml`` exactly as a third-party
package declares its own::

    [project.entry-points."ragloom.sources"]
    jira = "my_package.jira:JiraSource"

Each entry point loads a factory ``(SourceContext) -> Source`` (a class is one). The built-ins
are also known without installed metadata (a source checkout run with ``PYTHONPATH=src``), and an
installed entry point of the same name wins, so a package can replace one.

The configuration of an index's sources (which were synced, with which options) is kept in
``<index>/sources/config.json`` (in the database for a PostgreSQL index:
:func:`load_source_config`) so later syncs, queries and ``ragloom status`` use the same ones.
"""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, cast

from ragloom.errors import ConfigError, RagError
from ragloom.sources.base import (
    DEFAULT_SETTINGS,
    Source,
    SourceContext,
    SourceFactory,
    SourceSettings,
)
from ragloom.sources.isolate import IsolatedSource

log = logging.getLogger("ragloom")

__all__ = [
    "BUILTIN_SOURCES",
    "ENTRY_POINT_GROUP",
    "create_source",
    "load_config",
    "load_source_config",
    "parse_source_list",
    "save_config",
    "save_source_config",
    "source_factories",
]

ENTRY_POINT_GROUP = "ragloom.sources"
BUILTIN_SOURCES: Mapping[str, str] = {
    "code": "ragloom.sources.code:CodeSource",
    "docs": "ragloom.sources.docs:DocsSource",
    "commits": "ragloom.sources.commits:CommitsSource",
    "issues": "ragloom.sources.issues:IssuesSource",
    "prs": "ragloom.sources.issues:PrsSource",
}
"""The built-in sources (the same targets as the entry points in ``pyproject.toml``)."""
CONFIG_NAME = "config.json"


def _load_target(target: str) -> SourceFactory:
    module, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return cast(SourceFactory, obj)


def source_factories() -> dict[str, SourceFactory]:
    """Every known source by name: the built-ins, then installed entry points (which win)."""
    out: dict[str, SourceFactory] = {}
    for name, target in BUILTIN_SOURCES.items():
        out[name] = _load_target(target)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        # names are compared in lower case (`--sources MyNotes` is `mynotes`)
        try:
            out[ep.name.lower()] = cast(SourceFactory, ep.load())
        except Exception as exc:  # a broken plug-in must not break the built-ins, nor any
            # command that does not name it: it fails only when asked for
            log.warning("source plug-in %s (%s) cannot be loaded: %s", ep.name, ep.value, exc)
            out[ep.name.lower()] = _broken(ep.name, ep.value, exc)
    return out


def _broken(name: str, value: str, exc: BaseException) -> SourceFactory:
    message = f"source entry point {name!r} ({value}) failed: {exc}"

    def refuse(context: SourceContext) -> Source:
        raise ConfigError(message)

    return refuse


def default_settings(name: str) -> SourceSettings:
    return DEFAULT_SETTINGS.get(name, SourceSettings(enabled=True, weight=0.2, top_k=5))


def create_source(
    name: str,
    context: SourceContext,
    settings: SourceSettings | None = None,
    factories: Mapping[str, SourceFactory] | None = None,
) -> Source:
    """Instantiate and initialize source ``name`` (ConfigError for an unknown name)."""
    known = factories if factories is not None else source_factories()
    if name not in known:
        raise ConfigError(f"unknown source {name!r}; known: {', '.join(sorted(known))}")
    try:
        src = known[name](context)
        src.initialize(settings if settings is not None else default_settings(name))
    except RagError:
        raise
    except Exception as exc:  # a plug-in's constructor: a clear error, not an internal one
        raise ConfigError(
            f"source {name!r} could not be created: {type(exc).__name__}: {exc}"
        ) from exc
    builtin = BUILTIN_SOURCES.get(name)
    if builtin is None or known[name] is not _load_target(builtin):
        # a plug-in: its blocking calls cannot stall the others
        return IsolatedSource(src, key=f"{name}@{context.index_dir}")
    return src


def parse_source_list(spec: str | Sequence[str]) -> list[str]:
    """``"code,docs, commits"`` -> ``["code", "docs", "commits"]`` (order kept, no repeats)."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    out: list[str] = []
    for raw in items:
        name = raw.strip().lower()
        if name and name not in out:
            out.append(name)
    if not out:
        raise ConfigError("--sources needs at least one source name")
    return out


def load_config(index_dir: Path) -> dict[str, dict[str, Any]]:
    """Source name -> options saved by the last ``ragloom index --sources`` (empty if none)."""
    path = index_dir / "sources" / CONFIG_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"unreadable source configuration {path}: {exc}") from exc
    sources = data.get("sources") if isinstance(data, dict) else None
    if not isinstance(sources, dict):
        return {}
    return {str(k): dict(v) for k, v in sources.items() if isinstance(v, dict)}


def save_config(index_dir: Path, sources: Mapping[str, Mapping[str, Any]]) -> None:
    """Write the configuration (atomically: a reader never sees half a file)."""
    from ragloom.index.atomic import atomic_write_json

    folder = index_dir / "sources"
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_json(folder / CONFIG_NAME, {"sources": {k: dict(v) for k, v in sources.items()}})


def load_source_config(context: SourceContext) -> dict[str, dict[str, Any]]:
    """The saved source configuration where ``context`` keeps its sources (the storage it
    carries, e.g. PostgreSQL, else ``<index>/sources/config.json``)."""
    if context.storage is not None:
        return context.storage.load_config()
    return load_config(context.index_dir)


def save_source_config(context: SourceContext, sources: Mapping[str, Mapping[str, Any]]) -> None:
    """Save the source configuration where ``context`` keeps its sources."""
    if context.storage is not None:
        context.storage.save_config(sources)
    else:
        save_config(context.index_dir, sources)
