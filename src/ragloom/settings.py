"""ragloom's configuration: one validated model, four layers, every value traced to its source.

Precedence, later wins (tamma "Configuration" / "Environment Variables"; ploke section 4 and
milestone M5, "env + file + builder, with live update hook")::

    built-in defaults
    < [tool.ragloom] in <root>/pyproject.toml
    < <root>/ragloom.toml
    < RAGLOOM_* environment variables (RAGLOOM_CACHE__TTL_S=60; the short RAGLOOM_API_TOKEN,
      RAGLOOM_BACKEND and RAGLOOM_DSN too)
    < explicit overrides (CLI flags, API arguments)

The layers are merged key by key, so a ``ragloom.toml`` that sets ``cache.ttl_s`` leaves the
``cache.max_entries`` of ``pyproject.toml`` in place. :func:`load_settings` returns the model
with the layer each key came from (``ragloom config show`` prints them), and a bad value or an
unknown key is one :class:`~ragloom.errors.ConfigError` line naming the layer and the key path
(``ragloom.toml: cache.ttl_s: Input should be greater than 0``): every section forbids extra
keys, so a typo fails instead of being ignored.

Only environment variables that address the model are read: ``RAGLOOM_<SECTION>__<KEY>`` (the
``__`` is what marks a setting) and the short ``RAGLOOM_API_TOKEN``, ``RAGLOOM_BACKEND`` and
``RAGLOOM_DSN``. The other ``RAGLOOM_*`` variables
ragloom already uses (``RAGLOOM_EMBEDDING_PROVIDER``, ``RAGLOOM_EMBEDDING_MODEL``,
``RAGLOOM_EMBEDDING_BASE_URL``, ``RAGLOOM_EMBEDDING_API_KEY``, ``RAGLOOM_FUZZ_EXAMPLES``, the test
knobs) have no ``__`` and are left to their readers.

:class:`SettingsWatcher` polls the two configuration files and hands a valid new configuration
to a callback (live reload); an invalid edit is logged as the same one line and the previous
settings stay in force.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import os
import re
import threading
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from ragloom.assemble.tokens import COUNTER_NAMES
from ragloom.errors import ConfigError, RagError
from ragloom.retrieve.search import DEFAULT_STRATEGY, MAX_TOP_K, parse_search_spec
from ragloom.service.bm25_actor import DEFAULT_TIMEOUT_MS

__all__ = [
    "CONFIG_FILE",
    "ENV_PREFIX",
    "MAX_AUTO_WORKERS",
    "PYPROJECT_FILE",
    "TOKEN_ENV",
    "AssemblySettings",
    "Bm25Settings",
    "CacheSettings",
    "EmbeddingSettings",
    "FeedbackSettings",
    "LoadedSettings",
    "RankingSettings",
    "ServerSettings",
    "Settings",
    "SettingsWatcher",
    "StorageSettings",
    "TimeoutSettings",
    "find_config_root",
    "load_settings",
    "resolve_workers",
]

log = logging.getLogger(__name__)

CONFIG_FILE: Final = "ragloom.toml"
"""ragloom's own configuration file, at the repository root."""
PYPROJECT_FILE: Final = "pyproject.toml"
"""Read for its ``[tool.ragloom]`` table; ``ragloom.toml`` wins key by key."""
ENV_PREFIX: Final = "RAGLOOM_"
ENV_NESTED_DELIMITER: Final = "__"
TOKEN_ENV: Final = "RAGLOOM_API_TOKEN"
"""Short name of ``RAGLOOM_SERVER__API_TOKEN`` (issue 12 names it); the long name wins."""
SHORT_ENV: Final[dict[str, tuple[str, str]]] = {
    TOKEN_ENV: ("server", "api_token"),
    "RAGLOOM_BACKEND": ("storage", "backend"),
    "RAGLOOM_DSN": ("storage", "dsn"),
}
"""Short environment names of settings (issues 12 and 14 name them); a long
``RAGLOOM_<SECTION>__<KEY>`` name of the same setting wins."""
DEFAULT_SOURCE: Final = "default"
OVERRIDE_SOURCE: Final = "override"
MASK: Final = "**********"
"""What a secret shows as in any output (pydantic's own SecretStr rendering)."""

_STRICT = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)


class _Section(BaseModel):
    """A settings section: unknown keys, infinities and NaN refused (``ttl_s = inf`` made
    ``config show --json`` print ``Infinity``, which is not JSON), and a boolean is no number
    (pydantic takes ``budget = true`` as 1)."""

    model_config = _STRICT

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_number(cls, value: object, info: ValidationInfo) -> object:
        if isinstance(value, bool) and info.field_name is not None:
            annotation = cls.model_fields[info.field_name].annotation
            if annotation in (int, float) or annotation == int | None or annotation == float | None:
                raise ValueError(f"a number is needed, got {str(value).lower()}")
        return value


class RankingSettings(_Section):
    """Retrieval defaults (``ragloom search``, ``/search``, MCP ``search_code``)."""

    model_config = _STRICT

    strategy: str = Field(
        default=DEFAULT_STRATEGY,
        description="hybrid | hybrid-mmr | dense | sparse, optionally +raw, +seed, +changes, +lookup, +learned, +handset, +graph, +no-STEP",
    )
    top_k: int = Field(default=10, ge=1, le=MAX_TOP_K, description="hits returned by a search")

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, value: str) -> str:
        try:
            return parse_search_spec(value).name
        except ConfigError as exc:
            raise ValueError(exc.message) from exc


class AssemblySettings(_Section):
    """Context assembly defaults (``ragloom context``, ``/context``, MCP ``get_context``)."""

    model_config = _STRICT

    budget: int = Field(default=8000, ge=1, description="token budget of an assembled context")
    format: Literal["xml", "markdown", "plain", "json"] = Field(
        default="xml", description="rendering of the context (text is accepted for plain)"
    )
    counter: str = Field(default="cl100k", description="token counter: cl100k | o200k | approx")
    context_top_k: int = Field(
        default=15, ge=1, le=MAX_TOP_K, description="hits a context is built from"
    )
    structure: Literal["off", "signatures", "bodies"] = Field(
        default="off",
        description="structural context: add the signatures (or bodies) of what the selected "
        "code calls and of what calls it, within the same budget (docs/graph.md)",
    )

    @field_validator("format", mode="before")
    @classmethod
    def _text_is_plain(cls, value: object) -> object:
        return "plain" if value == "text" else value

    @field_validator("counter")
    @classmethod
    def _known_counter(cls, value: str) -> str:
        key = value.strip().lower().removesuffix("_base")
        if key not in COUNTER_NAMES:
            raise ValueError(
                f"unknown token counter {value!r}; expected one of {', '.join(COUNTER_NAMES)}"
            )
        return key


class CacheSettings(_Section):
    """Query-result and query-embedding caches (tamma phase 8: TTL 300 s, 1000 entries)."""

    model_config = _STRICT

    enabled: bool = True
    ttl_s: float = Field(default=300.0, gt=0, description="seconds a cached result stays valid")
    max_entries: int = Field(default=1000, ge=1, description="query results kept")
    embedding_max_entries: int = Field(default=1000, ge=1, description="query embeddings kept")


class TimeoutSettings(_Section):
    """Time limits (tamma ``timeouts.total_ms`` 5000; the BM25 actor's own request timeout)."""

    model_config = _STRICT

    query_ms: float = Field(default=5000.0, gt=0, description="whole query, retrieval and assembly")
    bm25_ms: float = Field(default=DEFAULT_TIMEOUT_MS, gt=0, description="one BM25 actor request")


class Bm25Settings(_Section):
    """ploke's strict/lenient switch: strict fails a query the BM25 index cannot answer."""

    model_config = _STRICT

    strict: bool = False


class EmbeddingSettings(_Section):
    """The query embedding model; None uses the model the index was built with."""

    model_config = _STRICT

    model: str | None = None

    @field_validator("model", mode="before")
    @classmethod
    def _blank_is_none(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value


MAX_AUTO_WORKERS = 4
"""``server.workers = 0`` runs this many worker processes at most (docs/serving.md)."""


def resolve_workers(workers: int) -> int:
    """The worker processes ``server.workers`` asks for: itself when positive; 0 (automatic)
    is the CPUs this process may run on, at most :data:`MAX_AUTO_WORKERS`."""
    if workers > 0:
        return workers
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_AUTO_WORKERS))


class ServerSettings(_Section):
    """``ragloom serve http`` / ``serve mcp``: address, token, request limits, batching."""

    model_config = _STRICT

    host: str = Field(default="127.0.0.1", min_length=1, description="bind address (loopback only)")
    port: int = Field(default=8765, ge=0, le=65535, description="HTTP port; 0 picks a free one")
    api_token: SecretStr | None = Field(
        default=None, description="bearer token every route but health"
    )
    max_query_chars: int = Field(
        default=65_536,
        ge=1,
        description="longest question a server accepts (a whole GitHub issue, up to ~25k, fits)",
    )
    max_top_k: int = Field(default=100, ge=1, le=MAX_TOP_K)
    max_budget: int = Field(default=200_000, ge=1)
    max_body_bytes: int = Field(default=1_000_000, ge=1)
    batch_window_ms: float = Field(
        default=2.0, ge=0, description="query-embedding micro-batch window"
    )
    reload: bool = Field(
        default=True, description="watch the configuration files and apply changes"
    )
    watch: bool = Field(
        default=True,
        description="follow the work tree and apply each batch of edits as it happens "
        "(a local folder index; ragloom.watch)",
    )
    watch_debounce_ms: int = Field(
        default=200,
        ge=0,
        le=60_000,
        description="quiet time that closes a batch of edits (one saved file: 20 ms)",
    )
    max_inflight: int = Field(
        default=8,
        ge=0,
        le=10_000,
        description="new answers computed at once; a question beyond them is answered 503 "
        "with Retry-After at once instead of queueing (0: no limit; docs/serving.md)",
    )
    workers: int = Field(
        default=0,
        ge=0,
        le=64,
        description="worker processes of `serve http` (0: automatic, the machine's CPUs up to "
        f'{MAX_AUTO_WORKERS}; 1: one process; docs/serving.md "Workers")',
    )

    @field_validator("api_token", mode="before")
    @classmethod
    def _empty_token_is_none(cls, value: object) -> object:
        # An empty token would accept an empty bearer: treat it as "no token".
        return None if isinstance(value, str) and value == "" else value


class FeedbackSettings(_Section):
    """The query log (every answer's question and hits, so feedback can name an answer) and
    what it may hold (docs/configuration.md)."""

    model_config = _STRICT

    query_log_max_mb: float = Field(
        default=256.0,
        ge=0,
        description="megabytes of questions and hits the query log keeps (oldest unrated "
        "answers go first); 0 keeps none, and feedback cannot name an answer",
    )


class StorageSettings(_Section):
    """Where the index lives (docs/postgres.md): a ``.ragloom`` folder beside the code (the
    default, no server) or one repository in a PostgreSQL + pgvector database. Command-line
    ``--backend`` / ``--dsn`` / ``--repo`` win over these."""

    model_config = _STRICT

    backend: Literal["embedded", "postgres"] = Field(
        default="embedded", description="embedded (a .ragloom folder) | postgres"
    )
    dsn: SecretStr | None = Field(
        default=None, description="postgresql:// URI of the postgres backend (masked)"
    )
    repository: str | None = Field(
        default=None, description="repository name in the database [the folder's name]"
    )
    ef_search: int = Field(
        default=100, ge=1, le=1000, description="pgvector hnsw.ef_search floor (postgres)"
    )
    pool_size: int = Field(
        default=4,
        ge=1,
        le=64,
        description="read connections of a serving node to the database (postgres)",
    )

    @field_validator("backend", mode="before")
    @classmethod
    def _backend_name(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("dsn", "repository", mode="before")
    @classmethod
    def _blank_is_none(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value


class Settings(BaseSettings):
    """Every setting, grouped by concern; ``extra="forbid"`` in every section.

    ``Settings()`` on its own is the built-in defaults (plus keyword arguments): the files and
    the environment are layered by :func:`load_settings`, which knows where each value came
    from and names it in errors.
    """

    model_config = SettingsConfigDict(
        extra="forbid",
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_NESTED_DELIMITER,
        validate_default=True,
    )

    ranking: RankingSettings = Field(default_factory=RankingSettings)
    assembly: AssemblySettings = Field(default_factory=AssemblySettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    timeouts: TimeoutSettings = Field(default_factory=TimeoutSettings)
    bm25: Bm25Settings = Field(default_factory=Bm25Settings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    feedback: FeedbackSettings = Field(default_factory=FeedbackSettings)

    @model_validator(mode="after")
    def _defaults_within_the_server_limits(self) -> Settings:
        """A default a request could not ask for itself is refused: a live reload of
        ``assembly.budget = 999999999`` made every ``/context`` that size, above
        ``server.max_budget`` (a user trial)."""
        limits = [
            ("assembly.budget", self.assembly.budget, "server.max_budget", self.server.max_budget),
            ("ranking.top_k", self.ranking.top_k, "server.max_top_k", self.server.max_top_k),
            (
                "assembly.context_top_k",
                self.assembly.context_top_k,
                "server.max_top_k",
                self.server.max_top_k,
            ),
        ]
        for name, value, limit_name, limit in limits:
            if value > limit:
                raise ValueError(
                    f"{name} {value} is above {limit_name} {limit} (the default a request "
                    f"gets must be one it could ask for: lower {name} or raise {limit_name})"
                )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Only keyword arguments: load_settings does the layering, with sources.
        return (init_settings,)

    def flat(self, *, mask_secrets: bool = True) -> dict[str, Any]:
        """``{"cache.ttl_s": 300.0, ...}``: every leaf as JSON-ready values, secrets masked."""
        out: dict[str, Any] = {}
        for section_name, section in self._sections():
            for key in type(section).model_fields:
                value = getattr(section, key)
                if isinstance(value, SecretStr):
                    value = MASK if mask_secrets else value.get_secret_value()
                out[f"{section_name}.{key}"] = value
        return out

    def public_dict(self) -> dict[str, dict[str, Any]]:
        """The nested settings as JSON-ready values with secrets masked."""
        nested: dict[str, dict[str, Any]] = {}
        for dotted, value in self.flat().items():
            section, _, key = dotted.partition(".")
            nested.setdefault(section, {})[key] = value
        return nested

    def _sections(self) -> Iterator[tuple[str, BaseModel]]:
        for name in type(self).model_fields:
            yield name, getattr(self, name)


SECTIONS: Final[dict[str, type[BaseModel]]] = {
    name: info.annotation  # type: ignore[misc]
    for name, info in Settings.model_fields.items()
}
"""Section name -> its model (the order of ``Settings``)."""

KEYS: Final[tuple[str, ...]] = tuple(
    f"{section}.{key}" for section, model in SECTIONS.items() for key in model.model_fields
)
"""Every dotted key, in model order."""


@dataclass(frozen=True)
class LoadedSettings:
    """The effective settings, where each key came from, and the files read."""

    settings: Settings
    sources: dict[str, str]
    """Dotted key -> ``default`` | ``pyproject.toml`` | ``ragloom.toml`` |
    ``env:RAGLOOM_CACHE__TTL_S`` | ``override``."""
    files: list[Path]
    """Configuration files that were read (ragloom.toml; pyproject.toml when it has a
    ``[tool.ragloom]`` table)."""
    root: Path | None = None
    """The folder the files were looked up in."""

    def to_dict(self) -> dict[str, Any]:
        """``{"settings": {...nested, secrets masked...}, "sources": {...}, "files": [...]}``."""
        return {
            "settings": self.settings.public_dict(),
            "sources": dict(self.sources),
            "files": [str(p) for p in self.files],
        }


# -- layers --------------------------------------------------------------------------------


@dataclass
class _Layer:
    """One layer's values, nested like the model, and the source label of each key."""

    label: str
    values: dict[str, Any] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    """Dotted key (or section name, for a non-table section) -> source label."""

    def put(self, path: tuple[str, ...], value: Any, label: str | None = None) -> None:
        node = self.values
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[path[-1]] = value
        self.origin[".".join(path)] = label or self.label

    def put_tree(self, tree: Mapping[str, Any]) -> None:
        """A TOML table: sections are tables, their keys leaves (anything deeper is a value)."""
        for section, body in tree.items():
            if isinstance(body, dict):
                if not body:
                    self.values.setdefault(section, {})
                    self.origin.setdefault(section, self.label)
                for key, value in body.items():
                    self.put((section, key), value)
            else:
                self.put((section,), body)


def _read_toml(path: Path, label: str, *, shared: bool = False) -> dict[str, Any] | None:
    """The parsed file, None when absent; unreadable or malformed is a ConfigError.

    ``shared`` (pyproject.toml, which other tools own): a file that cannot be read or parsed
    and does not mention ragloom at all cannot hold ragloom settings, so it is skipped (and
    logged) instead of failing every ragloom command over someone else's file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError as exc:
        if shared:
            return None
        raise ConfigError(f"{label}: is a directory, not a file") from exc
    except OSError as exc:
        raise ConfigError(f"{label}: cannot read: {exc.strerror or exc}") from exc
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        if isinstance(exc, UnicodeDecodeError):
            message = f"{label}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        else:
            message = f"{label}: invalid TOML: {' '.join(str(exc).split())}"
        if shared and b"ragloom" not in data:
            log.info("skipped %s", message, extra={"event": "config_file_skipped"})
            return None
        raise ConfigError(message) from exc


def _file_layers(root: Path) -> tuple[list[_Layer], list[Path]]:
    layers: list[_Layer] = []
    files: list[Path] = []
    pyproject = root / PYPROJECT_FILE
    doc = _read_toml(pyproject, PYPROJECT_FILE, shared=True)
    if doc is not None:
        tool = doc.get("tool")
        table = tool.get("ragloom") if isinstance(tool, dict) else None
        if table is not None:
            label = PYPROJECT_FILE
            if not isinstance(table, dict):
                raise ConfigError(f"{label}: tool.ragloom: expected a table ([tool.ragloom])")
            layer = _Layer(label)
            layer.put_tree(table)
            layers.append(layer)
            files.append(pyproject)
    config = root / CONFIG_FILE
    doc = _read_toml(config, CONFIG_FILE)
    if doc is not None:
        layer = _Layer(CONFIG_FILE)
        layer.put_tree(doc)
        layers.append(layer)
        files.append(config)
    return layers, files


def _env_layer(env: Mapping[str, str]) -> _Layer:
    """``RAGLOOM_<SECTION>__<KEY>`` variables and the short names of :data:`SHORT_ENV`
    (``RAGLOOM_API_TOKEN``, ``RAGLOOM_BACKEND``, ``RAGLOOM_DSN``); nothing else."""
    layer = _Layer("env")
    for short, (section, key) in SHORT_ENV.items():
        name = next((k for k in sorted(env) if k.upper() == short), None)
        if name is not None:
            layer.put((section, key), env[name], f"env:{name}")
    for name in sorted(env):
        if not name.upper().startswith(ENV_PREFIX):
            continue
        rest = name[len(ENV_PREFIX) :]
        if ENV_NESTED_DELIMITER not in rest:
            continue  # RAGLOOM_EMBEDDING_PROVIDER, RAGLOOM_FUZZ_EXAMPLES, ...: not ours
        path = tuple(part.lower() for part in rest.split(ENV_NESTED_DELIMITER))
        layer.put(path, env[name], f"env:{name}")
    return layer


def _override_layer(overrides: Mapping[str, Any]) -> _Layer:
    """Dotted keys (``{"ranking.top_k": 5}``) or nested sections; None means "not given"."""
    layer = _Layer(OVERRIDE_SOURCE)

    def walk(prefix: tuple[str, ...], mapping: Mapping[str, Any]) -> None:
        for key, value in mapping.items():
            path = (*prefix, *str(key).split("."))
            if value is None:
                continue
            if isinstance(value, Mapping) and len(path) < 2:
                walk(path, value)
            else:
                layer.put(path, value)

    walk((), overrides)
    return layer


def _merge(layers: list[_Layer]) -> tuple[dict[str, Any], dict[str, str]]:
    merged: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for layer in layers:
        _deep_update(merged, layer.values)
        for key, label in layer.origin.items():
            # a section replaced by a scalar (or back) forgets the keys under it
            if "." not in key:
                for stale in [k for k in origin if k.startswith(key + ".")]:
                    del origin[stale]
            origin[key] = label
    return merged, origin


def _deep_update(target: dict[str, Any], source: Mapping[str, Any]) -> None:
    for key, value in source.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _deep_update(target[key], value)
        elif isinstance(value, dict):
            target[key] = {}
            _deep_update(target[key], value)
        else:
            target[key] = value


# -- validation errors as one line ---------------------------------------------------------


def _did_you_mean(loc: tuple[str, ...]) -> str:
    if len(loc) == 1:
        choices = list(SECTIONS)
        prefix = ""
    elif len(loc) == 2 and loc[0] in SECTIONS:
        choices = list(SECTIONS[loc[0]].model_fields)
        prefix = f"{loc[0]}."
    else:
        return ""
    close = difflib.get_close_matches(loc[-1], choices, n=1, cutoff=0.6)
    return f" (did you mean {prefix}{close[0]}?)" if close else ""


def _source_of(loc: tuple[str, ...], origin: Mapping[str, str]) -> str:
    """The layer that set ``loc``, an enclosing section, or the first key under it."""
    for n in range(len(loc), 0, -1):
        found = origin.get(".".join(loc[:n]))
        if found is not None:
            return found
    dotted = ".".join(loc) + "."
    return next((v for k, v in origin.items() if k.startswith(dotted)), DEFAULT_SOURCE)


def _error_line(exc: ValidationError, origin: Mapping[str, str]) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0]
    loc = tuple(str(p) for p in first["loc"])
    key = ".".join(loc) or "(settings)"
    source = _source_of(loc, origin)
    if first["type"] == "extra_forbidden":
        message = "unknown key" + _did_you_mean(loc)
    elif first["type"] == "model_type":
        message = "expected a table of settings"
    else:
        message = str(first["msg"]).removeprefix("Value error, ")
    keys = re.findall(r"\b([a-z_]+\.[a-z_]+)\b", message) if not loc else []
    if keys:
        # a check across keys: the error is told where one of them was set (not a default)
        set_by = [(k, _source_of(tuple(k.split(".")), origin)) for k in keys]
        key, source = next(((k, v) for k, v in set_by if v != DEFAULT_SOURCE), set_by[0])
    if source == PYPROJECT_FILE:
        source = f"{PYPROJECT_FILE} [tool.ragloom]"
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{source}: {key}: {' '.join(message.split())}{more}"


# -- loading -------------------------------------------------------------------------------


def find_config_root(start: Path | None = None) -> Path:
    """The nearest folder at or above ``start`` (default: the current directory) holding a
    ``ragloom.toml``, a ``pyproject.toml``, an index (``.ragloom``) or ``.git``; else ``start``.
    """
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        for marker in (CONFIG_FILE, PYPROJECT_FILE, ".ragloom", ".git"):
            if (folder / marker).exists():
                return folder
    return here


def load_settings(
    root: Path | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> LoadedSettings:
    """The effective settings for the repository at ``root`` (default: :func:`find_config_root`).

    ``env`` defaults to ``os.environ``; ``overrides`` are dotted keys or nested sections, and a
    None value means "not given". Raises ConfigError (one line, source and key path).
    """
    folder = find_config_root() if root is None else Path(root)
    layers, files = _file_layers(folder)
    layers.append(_env_layer(os.environ if env is None else env))
    if overrides:
        layers.append(_override_layer(overrides))
    merged, origin = _merge(layers)
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_error_line(exc, origin)) from None
    sources = {key: origin.get(key, DEFAULT_SOURCE) for key in KEYS}
    return LoadedSettings(settings=settings, sources=sources, files=files, root=folder)


# -- live reload ---------------------------------------------------------------------------

_Signature = tuple[tuple[int, int, str] | None, ...]


class SettingsWatcher:
    """Polls ``ragloom.toml`` and ``pyproject.toml`` under ``root`` and reloads on a change.

    A change (a file edited, created or removed) is applied once the files stop changing for
    ``debounce_s`` (an editor's save in several writes is read once, complete). A valid result
    different from the current settings goes to ``on_change``; an invalid one is logged as the
    one-line ConfigError and the previous settings stay. Polling (size, mtime and a content
    hash of two small files) needs no platform file-event API and notices a file that appears.
    """

    def __init__(
        self,
        root: Path,
        on_change: Callable[[LoadedSettings], None],
        interval_s: float = 1.0,
        *,
        debounce_s: float | None = None,
        env: Mapping[str, str] | None = None,
        overrides: Mapping[str, Any] | None = None,
        initial: LoadedSettings | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ConfigError(f"watch interval must be > 0 s, got {interval_s}")
        self.root = Path(root)
        self.on_change = on_change
        self.interval_s = interval_s
        self.debounce_s = min(0.25, interval_s) if debounce_s is None else max(0.0, debounce_s)
        self._env = dict(os.environ if env is None else env)
        self._overrides = dict(overrides or {})
        self._current = initial
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.reloads = 0
        """Valid changes handed to ``on_change``."""
        self.errors = 0
        """Invalid configurations seen (each logged once)."""
        self.last_error: str | None = None

    @property
    def paths(self) -> tuple[Path, Path]:
        return (self.root / PYPROJECT_FILE, self.root / CONFIG_FILE)

    @property
    def current(self) -> LoadedSettings | None:
        with self._lock:
            return self._current

    def _load(self) -> LoadedSettings:
        return load_settings(self.root, overrides=self._overrides, env=self._env)

    def _signature(self) -> _Signature:
        out: list[tuple[int, int, str] | None] = []
        for path in self.paths:
            try:
                st = path.stat()
                digest = hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()
            except OSError:
                out.append(None)
                continue
            out.append((st.st_size, st.st_mtime_ns, digest))
        return tuple(out)

    def start(self) -> SettingsWatcher:
        """Start polling in a daemon thread. Without ``initial`` the settings are loaded first
        (an invalid configuration raises ConfigError); with it they are checked once more, so
        an edit made between the caller's load and this call is not missed."""
        if self._thread is not None:
            return self
        seen = self._signature()
        if self._current is None:
            self._current = self._load()
        else:  # ``initial`` was loaded earlier: catch an edit made since
            self.check_now()
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, args=(seen,), name="ragloom-settings-watcher", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop polling and wait for the thread (a callback in progress finishes first)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def __enter__(self) -> SettingsWatcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, seen: _Signature) -> None:
        while not self._stop.wait(self.interval_s):
            sig = self._signature()
            if sig == seen:
                continue
            while True:  # debounce: wait until the files stop changing
                if self._stop.wait(self.debounce_s):
                    return
                again = self._signature()
                if again == sig:
                    break
                sig = again
            seen = sig
            self.check_now()

    def check_now(self) -> bool:
        """Reload now; True when a new valid configuration was handed to ``on_change``."""
        try:
            loaded = self._load()
        except RagError as exc:
            self.last_error = str(exc)
            log.warning(
                "configuration not reloaded, keeping the previous settings: %s",
                exc,
                extra={"event": "config_reload_failed", "root": str(self.root), "error": str(exc)},
            )
            # counted once everything about the failure is visible: a reader that waits for
            # ``errors`` then finds the log record and ``last_error`` (a test did not, under load)
            self.errors += 1
            return False
        self.last_error = None
        with self._lock:
            previous = self._current
            self._current = loaded
        if (
            previous is not None
            and previous.settings == loaded.settings
            and previous.sources == loaded.sources
        ):
            return False
        changed = _changed_keys(previous, loaded)
        log.info(
            "configuration reloaded",
            extra={"event": "config_reloaded", "root": str(self.root), "changed": changed},
        )
        self.reloads += 1
        try:
            self.on_change(loaded)
        except Exception:
            log.exception("settings callback failed", extra={"event": "config_callback_failed"})
        return True


def _changed_keys(old: LoadedSettings | None, new: LoadedSettings) -> list[str]:
    if old is None:
        return list(KEYS)
    a, b = old.settings.flat(mask_secrets=False), new.settings.flat(mask_secrets=False)
    return [k for k in KEYS if a[k] != b[k] or old.sources[k] != new.sources[k]]
