"""ragloom.settings: the layers and their precedence, per-key sources, one-line errors with the
source and key path, secret masking, and live reload through SettingsWatcher on real files."""

from __future__ import annotations

import json
import logging
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragloom.cli.query import context_cmd, search_cmd
from ragloom.errors import ConfigError
from ragloom.retrieve.search import DEFAULT_STRATEGY, MAX_TOP_K
from ragloom.service.bm25_actor import DEFAULT_TIMEOUT_MS
from ragloom.settings import (
    KEYS,
    SHORT_ENV,
    LoadedSettings,
    Settings,
    SettingsWatcher,
    find_config_root,
    load_settings,
)

REPO = Path(__file__).resolve().parents[2]
SECRET = "s3cr3t-token-value"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def config_error(root: Path, **kwargs: Any) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(root, **kwargs)
    message = str(info.value)
    assert "\n" not in message, message
    assert info.value.exit_code == 2
    return message


# -- defaults ------------------------------------------------------------------------------


def test_defaults_come_from_ragloom_constants_and_the_seeds() -> None:
    s = Settings()
    assert s.ranking.strategy == DEFAULT_STRATEGY
    assert s.ranking.top_k == 10
    assert s.timeouts.bm25_ms == DEFAULT_TIMEOUT_MS
    assert s.timeouts.query_ms == 5000.0  # tamma timeouts.total_ms
    assert (s.cache.enabled, s.cache.ttl_s, s.cache.max_entries) == (True, 300.0, 1000)
    assert (s.assembly.budget, s.assembly.format, s.assembly.counter) == (8000, "xml", "cl100k")
    assert s.assembly.context_top_k == 15
    assert (s.server.host, s.server.port, s.server.api_token) == ("127.0.0.1", 8765, None)
    assert s.bm25.strict is False and s.embedding.model is None


def test_cli_option_defaults_equal_the_settings_defaults() -> None:
    """`ragloom search/context --help` shows the values an empty configuration gives."""

    def default(cmd: click.Command, name: str) -> object:
        return next(p.default for p in cmd.params if p.name == name)

    s = Settings()
    assert default(search_cmd, "top_k") == s.ranking.top_k
    assert default(search_cmd, "strategy") == s.ranking.strategy
    assert default(context_cmd, "top_k") == s.assembly.context_top_k
    assert default(context_cmd, "budget") == s.assembly.budget
    assert default(context_cmd, "fmt") == s.assembly.format
    assert default(context_cmd, "counter") == s.assembly.counter
    assert default(context_cmd, "strategy") == s.ranking.strategy


def test_settings_alone_reads_no_environment_but_load_settings_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGLOOM_CACHE__TTL_S", "5")
    assert Settings().cache.ttl_s == 300.0
    assert Settings.model_validate({"ranking": {"top_k": 3}}).cache.ttl_s == 300.0
    loaded = load_settings(tmp_path)  # env=None: the process environment
    assert loaded.settings.cache.ttl_s == 5.0
    assert loaded.sources["cache.ttl_s"] == "env:RAGLOOM_CACHE__TTL_S"


def test_no_files_no_env_is_all_defaults(tmp_path: Path) -> None:
    loaded = load_settings(tmp_path, env={})
    assert loaded.settings == Settings()
    assert set(loaded.sources) == set(KEYS)
    assert set(loaded.sources.values()) == {"default"}
    assert loaded.files == [] and loaded.root == tmp_path


# -- precedence and sources ----------------------------------------------------------------


def test_precedence_across_all_layers_key_by_key(tmp_path: Path) -> None:
    write(
        tmp_path / "pyproject.toml",
        '[project]\nname = "demo"\n\n[tool.ragloom.ranking]\ntop_k = 2\n'
        "[tool.ragloom.cache]\nttl_s = 10\n[tool.ragloom.assembly]\nbudget = 100\n"
        "[tool.ragloom.server]\nport = 1111\n",
    )
    write(
        tmp_path / "ragloom.toml",
        "[ranking]\ntop_k = 3\n[cache]\nttl_s = 20\n[assembly]\nbudget = 200\n",
    )
    env = {"RAGLOOM_CACHE__TTL_S": "30", "RAGLOOM_ASSEMBLY__BUDGET": "300"}
    loaded = load_settings(tmp_path, env=env, overrides={"assembly.budget": 400})
    s = loaded.settings
    assert s.server.port == 1111  # pyproject only
    assert s.ranking.top_k == 3  # ragloom.toml beats pyproject
    assert s.cache.ttl_s == 30.0  # env beats both files
    assert s.assembly.budget == 400  # override beats everything
    assert s.cache.max_entries == 1000  # untouched
    src = loaded.sources
    assert src["server.port"] == "pyproject.toml"
    assert src["ranking.top_k"] == "ragloom.toml"
    assert src["cache.ttl_s"] == "env:RAGLOOM_CACHE__TTL_S"
    assert src["assembly.budget"] == "override"
    assert src["cache.max_entries"] == "default"
    assert loaded.files == [tmp_path / "pyproject.toml", tmp_path / "ragloom.toml"]


def test_pyproject_without_a_ragloom_table_is_not_a_config_file(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[project]\nname = "demo"\n[tool.ruff]\nline-length = 99\n')
    loaded = load_settings(tmp_path, env={})
    assert loaded.files == [] and set(loaded.sources.values()) == {"default"}


def test_pyproject_alone_and_ragloom_toml_alone(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.ragloom]\nbm25 = { strict = true }\n")
    loaded = load_settings(tmp_path, env={})
    assert loaded.settings.bm25.strict is True
    assert loaded.sources["bm25.strict"] == "pyproject.toml"
    (tmp_path / "pyproject.toml").unlink()
    write(tmp_path / "ragloom.toml", "[bm25]\nstrict = true\n")
    assert load_settings(tmp_path, env={}).sources["bm25.strict"] == "ragloom.toml"


def test_nested_env_names_types_and_the_short_token_name(tmp_path: Path) -> None:
    env = {
        "RAGLOOM_CACHE__ENABLED": "false",
        "ragloom_ranking__strategy": "Sparse",  # names are case-insensitive, like pydantic's
        "RAGLOOM_SERVER__PORT": "0",
        "RAGLOOM_EMBEDDING__MODEL": "hashing:64",
        "RAGLOOM_API_TOKEN": SECRET,
    }
    loaded = load_settings(tmp_path, env=env)
    s = loaded.settings
    assert s.cache.enabled is False and s.server.port == 0
    assert s.ranking.strategy == "sparse" and s.embedding.model == "hashing:64"
    assert s.server.api_token is not None and s.server.api_token.get_secret_value() == SECRET
    assert loaded.sources["ranking.strategy"] == "env:ragloom_ranking__strategy"
    assert loaded.sources["server.api_token"] == "env:RAGLOOM_API_TOKEN"
    # the long name is more specific and wins over the short one
    both = load_settings(tmp_path, env={**env, "RAGLOOM_SERVER__API_TOKEN": "long"})
    assert both.settings.server.api_token is not None
    assert both.settings.server.api_token.get_secret_value() == "long"
    assert both.sources["server.api_token"] == "env:RAGLOOM_SERVER__API_TOKEN"
    # an empty token is no token (it would accept an empty bearer)
    empty = load_settings(tmp_path, env={"RAGLOOM_API_TOKEN": ""})
    assert empty.settings.server.api_token is None


def _ragloom_env_names_used_in_the_repo() -> set[str]:
    names: set[str] = set()
    pattern = re.compile(r"\bRAGLOOM_[A-Z0-9_]*[A-Z0-9]\b")
    for folder in ("src", "tests", "scripts"):
        for path in (REPO / folder).rglob("*.py"):
            names.update(pattern.findall(path.read_text(encoding="utf-8", errors="replace")))
    for extra in ("Makefile", "README.md"):
        if (REPO / extra).exists():
            names.update(pattern.findall((REPO / extra).read_text(encoding="utf-8")))
    return names


def test_other_ragloom_variables_never_collide(tmp_path: Path) -> None:
    """Every RAGLOOM_* name the repository uses for something else (the embedding provider,
    fuzz budgets, test knobs) is ignored, whatever its value."""
    names = _ragloom_env_names_used_in_the_repo()
    assert {"RAGLOOM_EMBEDDING_PROVIDER", "RAGLOOM_EMBEDDING_MODEL"} <= names
    assert "RAGLOOM_FUZZ_EXAMPLES" in names
    others = {n for n in names if "__" not in n and n not in SHORT_ENV}
    env = {name: "not a setting: {[" for name in others}
    env["RAGLOOM_"] = "x"
    env["RAGLOOM_CACHE"] = "{not json"
    loaded = load_settings(tmp_path, env=env)
    assert set(loaded.sources.values()) == {"default"}


def test_overrides_dotted_nested_and_none(tmp_path: Path) -> None:
    write(tmp_path / "ragloom.toml", "[ranking]\ntop_k = 7\n")
    a = load_settings(tmp_path, env={}, overrides={"ranking.strategy": "dense"})
    b = load_settings(tmp_path, env={}, overrides={"ranking": {"strategy": "dense"}})
    assert a.settings == b.settings and a.sources == b.sources
    assert a.sources["ranking.strategy"] == "override"
    # None is "not given" (an unset CLI flag): the file's value stays
    c = load_settings(tmp_path, env={}, overrides={"ranking.top_k": None})
    assert c.settings.ranking.top_k == 7 and c.sources["ranking.top_k"] == "ragloom.toml"


def test_values_are_normalised(tmp_path: Path) -> None:
    overrides = {
        "ranking.strategy": "  HYBRID+No-Synonyms ",
        "assembly.format": "text",
        "assembly.counter": "o200k_base",
        "embedding.model": "  ",
    }
    s = load_settings(tmp_path, env={}, overrides=overrides).settings
    assert s.ranking.strategy == "hybrid+no-synonyms"
    assert s.assembly.format == "plain"
    assert s.assembly.counter == "o200k"
    assert s.embedding.model is None


def test_config_root_is_found_above_the_current_folder(tmp_path: Path) -> None:
    write(tmp_path / "ragloom.toml", "[ranking]\ntop_k = 4\n")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_config_root(deep) == tmp_path.resolve()


# -- errors --------------------------------------------------------------------------------


def test_file_error_names_the_file_and_key_path(tmp_path: Path) -> None:
    write(tmp_path / "ragloom.toml", "[cache]\nttl_s = 0\n")
    assert config_error(tmp_path, env={}) == (
        "ragloom.toml: cache.ttl_s: Input should be greater than 0"
    )


def test_unknown_keys_in_every_layer(tmp_path: Path) -> None:
    write(tmp_path / "ragloom.toml", "[cache]\nttl = 60\n")
    assert config_error(tmp_path, env={}).startswith("ragloom.toml: cache.ttl: unknown key")
    assert "did you mean cache.ttl_s?" in config_error(tmp_path, env={})
    write(tmp_path / "ragloom.toml", "[cach]\nttl_s = 60\n")
    assert config_error(tmp_path, env={}).startswith("ragloom.toml: cach: unknown key")
    write(tmp_path / "ragloom.toml", "top_k = 3\n")
    assert config_error(tmp_path, env={}).startswith("ragloom.toml: top_k: unknown key")
    (tmp_path / "ragloom.toml").unlink()
    env = {"RAGLOOM_CACHE__TTL": "60"}
    assert config_error(tmp_path, env=env).startswith(
        "env:RAGLOOM_CACHE__TTL: cache.ttl: unknown key"
    )
    env = {"RAGLOOM_RANKNG__TOP_K": "3"}
    assert config_error(tmp_path, env=env).startswith(
        "env:RAGLOOM_RANKNG__TOP_K: rankng: unknown key (did you mean ranking?)"
    )
    message = config_error(tmp_path, env={}, overrides={"ranking.topk": 3})
    assert message.startswith("override: ranking.topk: unknown key")


def test_bad_values_name_their_source(tmp_path: Path) -> None:
    message = config_error(tmp_path, env={"RAGLOOM_CACHE__TTL_S": "-1"})
    assert message == "env:RAGLOOM_CACHE__TTL_S: cache.ttl_s: Input should be greater than 0"
    message = config_error(tmp_path, env={"RAGLOOM_SERVER__PORT": "http"})
    assert message.startswith("env:RAGLOOM_SERVER__PORT: server.port: Input should be a valid")
    message = config_error(tmp_path, env={}, overrides={"ranking.top_k": MAX_TOP_K + 1})
    assert message == "override: ranking.top_k: Input should be less than or equal to 10000"
    message = config_error(tmp_path, env={}, overrides={"ranking.strategy": "hybrid+no-x"})
    assert message.startswith("override: ranking.strategy: unknown strategy modifier 'no-x'")
    message = config_error(tmp_path, env={}, overrides={"assembly.counter": "gpt2"})
    assert message.startswith("override: assembly.counter: unknown token counter 'gpt2'")
    message = config_error(tmp_path, env={}, overrides={"assembly.format": "html"})
    assert message.startswith("override: assembly.format: Input should be 'xml'")


def test_pyproject_errors_point_into_the_tool_table(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.ragloom.assembly]\nbudget = 0\n")
    assert config_error(tmp_path, env={}) == (
        "pyproject.toml [tool.ragloom]: assembly.budget: Input should be greater than or equal to 1"
    )
    write(tmp_path / "pyproject.toml", '[tool]\nragloom = "on"\n')
    assert config_error(tmp_path, env={}).startswith(
        "pyproject.toml: tool.ragloom: expected a table"
    )


def test_malformed_files_and_non_table_sections(tmp_path: Path) -> None:
    write(tmp_path / "ragloom.toml", "[cache\nttl_s = 1\n")
    assert config_error(tmp_path, env={}).startswith("ragloom.toml: invalid TOML: ")
    (tmp_path / "ragloom.toml").write_bytes(b"[cache]\nttl_s = 1 # \xff\n")
    assert config_error(tmp_path, env={}).startswith("ragloom.toml: not UTF-8 text")
    write(tmp_path / "ragloom.toml", "cache = 5\n")
    assert config_error(tmp_path, env={}) == "ragloom.toml: cache: expected a table of settings"
    (tmp_path / "ragloom.toml").unlink()
    (tmp_path / "ragloom.toml").mkdir()
    assert config_error(tmp_path, env={}) == "ragloom.toml: is a directory, not a file"


def test_a_broken_pyproject_without_ragloom_is_someone_elses_problem(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[project\nname = 'demo'\n")
    assert load_settings(tmp_path, env={}).files == []
    write(tmp_path / "pyproject.toml", "[tool.ragloom\nranking = 1\n")
    assert config_error(tmp_path, env={}).startswith("pyproject.toml: invalid TOML: ")


def test_several_errors_are_still_one_line(tmp_path: Path) -> None:
    write(tmp_path / "ragloom.toml", "[cache]\nttl_s = 0\nmax_entries = 0\n[ranking]\ntop_k = 0\n")
    message = config_error(tmp_path, env={})
    assert message.startswith("ragloom.toml: ranking.top_k: ") and message.endswith("(+2 more)")


# -- secrets -------------------------------------------------------------------------------


def test_the_token_is_masked_everywhere(tmp_path: Path) -> None:
    write(tmp_path / "ragloom.toml", f'[server]\napi_token = "{SECRET}"\n')
    loaded = load_settings(tmp_path, env={})
    shown = json.dumps(loaded.to_dict()) + repr(loaded) + str(loaded.settings)
    shown += json.dumps(loaded.settings.flat()) + loaded.settings.model_dump_json()
    assert SECRET not in shown
    assert loaded.to_dict()["settings"]["server"]["api_token"] == "**********"
    assert loaded.settings.flat(mask_secrets=False)["server.api_token"] == SECRET
    # a bad token value is reported without echoing it
    write(tmp_path / "ragloom.toml", f'[server]\napi_token = ["{SECRET}"]\n')
    message = config_error(tmp_path, env={})
    assert message.startswith("ragloom.toml: server.api_token: ") and SECRET not in message


# -- property: overrides round-trip --------------------------------------------------------

VALID_VALUES: dict[str, st.SearchStrategy[Any]] = {
    # the defaults a request gets stay within the server's limits (server.max_top_k 100,
    # server.max_budget 200000 by default)
    "ranking.strategy": st.sampled_from(["hybrid", "hybrid-mmr", "dense", "sparse+raw"]),
    "ranking.top_k": st.integers(1, 100),
    "assembly.budget": st.integers(1, 200_000),
    "assembly.format": st.sampled_from(["xml", "markdown", "plain", "json"]),
    "assembly.counter": st.sampled_from(["cl100k", "o200k", "approx"]),
    "assembly.context_top_k": st.integers(1, 100),
    "cache.enabled": st.booleans(),
    "cache.ttl_s": st.floats(min_value=1e-3, max_value=1e7, allow_nan=False),
    "cache.max_entries": st.integers(1, 10**7),
    "timeouts.query_ms": st.floats(min_value=1e-3, max_value=1e7, allow_nan=False),
    "bm25.strict": st.booleans(),
    "embedding.model": st.sampled_from(["hashing:64", "openai:text-embedding-3-small"]),
    "server.port": st.integers(0, 65535),
    "server.max_top_k": st.integers(100, MAX_TOP_K),
    "server.batch_window_ms": st.floats(min_value=0, max_value=100, allow_nan=False),
    "server.reload": st.booleans(),
}


@pytest.fixture(scope="module")
def empty_root() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        yield Path(folder)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_valid_override_round_trips(empty_root: Path, data: st.DataObject) -> None:
    keys = data.draw(st.sets(st.sampled_from(sorted(VALID_VALUES)), min_size=1))
    overrides = {key: data.draw(VALID_VALUES[key], label=key) for key in sorted(keys)}
    loaded = load_settings(empty_root, env={}, overrides=overrides)
    flat = loaded.settings.flat()
    for key, value in overrides.items():
        assert flat[key] == value, key
        assert loaded.sources[key] == "override"
    assert all(loaded.sources[k] == "default" for k in KEYS if k not in overrides)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    key=st.sampled_from(sorted(VALID_VALUES)),
    junk=st.text(st.characters(codec="utf-8"), min_size=1, max_size=8).filter(
        lambda s: s.isidentifier()
    ),
)
def test_any_unknown_key_fails_with_its_path(empty_root: Path, key: str, junk: str) -> None:
    section = key.split(".")[0]
    bad = f"{section}.{junk}_x"
    with pytest.raises(ConfigError) as info:
        load_settings(empty_root, env={}, overrides={bad: 1})
    assert str(info.value).startswith(f"override: {bad}: unknown key")


# -- live reload ---------------------------------------------------------------------------


class Recorder:
    """Collects the callbacks of a watcher; ``wait`` blocks until ``n`` have arrived."""

    def __init__(self) -> None:
        self.calls: list[LoadedSettings] = []
        self._cond = threading.Condition()

    def __call__(self, loaded: LoadedSettings) -> None:
        with self._cond:
            self.calls.append(loaded)
            self._cond.notify_all()

    def wait(self, n: int, timeout: float = 10.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: len(self.calls) >= n, timeout)


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def settings_log() -> Iterator[Captured]:
    logger = logging.getLogger("ragloom.settings")
    handler = Captured()
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def watcher(root: Path, recorder: Recorder) -> SettingsWatcher:
    return SettingsWatcher(root, recorder, interval_s=0.03, debounce_s=0.03, env={})


def test_watcher_applies_a_valid_change(tmp_path: Path) -> None:
    config = write(tmp_path / "ragloom.toml", "[ranking]\ntop_k = 3\n")
    rec = Recorder()
    with watcher(tmp_path, rec) as w:
        assert w.current is not None and w.current.settings.ranking.top_k == 3
        write(config, "[ranking]\ntop_k = 4\n[cache]\nttl_s = 9.5\n")
        assert rec.wait(1)
        new = rec.calls[0]
        assert new.settings.ranking.top_k == 4 and new.settings.cache.ttl_s == 9.5
        assert new.sources["cache.ttl_s"] == "ragloom.toml"
        assert w.current is new and w.reloads == 1
    assert len(rec.calls) == 1


def test_watcher_keeps_the_old_settings_on_an_invalid_change(
    tmp_path: Path, settings_log: Captured
) -> None:
    config = write(tmp_path / "ragloom.toml", "[cache]\nttl_s = 60\n")
    rec = Recorder()
    with watcher(tmp_path, rec) as w:
        old = w.current
        write(config, "[cache]\nttl_s = -5\n")
        assert until(lambda: w.errors >= 1)
        assert rec.calls == [] and w.current is old
        assert w.last_error == "ragloom.toml: cache.ttl_s: Input should be greater than 0"
        failures = [r for r in settings_log.records if r.levelno == logging.WARNING]
        assert len(failures) == 1
        line = failures[0].getMessage()
        assert "\n" not in line and line.endswith(
            "ragloom.toml: cache.ttl_s: Input should be greater than 0"
        )
        assert getattr(failures[0], "event", None) == "config_reload_failed"
        time.sleep(0.2)  # the same bad content is not reported again and again
        assert w.errors == 1
        write(config, "[cache]\nttl_s = 61\n")  # fixed: applied
        assert rec.wait(1)
        assert rec.calls[0].settings.cache.ttl_s == 61.0 and w.last_error is None


def test_watcher_notices_a_file_created_later(tmp_path: Path) -> None:
    rec = Recorder()
    with watcher(tmp_path, rec) as w:
        assert w.current is not None and w.current.files == []
        time.sleep(0.1)
        write(tmp_path / "ragloom.toml", '[assembly]\nformat = "markdown"\n')
        assert rec.wait(1)
        assert rec.calls[0].settings.assembly.format == "markdown"
        assert rec.calls[0].files == [tmp_path / "ragloom.toml"]
        (tmp_path / "ragloom.toml").unlink()  # removed: back to the defaults
        assert rec.wait(2)
        assert rec.calls[1].settings.assembly.format == "xml"


def test_watcher_follows_pyproject_and_ignores_a_touch(tmp_path: Path) -> None:
    pyproject = write(tmp_path / "pyproject.toml", "[tool.ragloom.ranking]\ntop_k = 5\n")
    rec = Recorder()
    with watcher(tmp_path, rec):
        write(pyproject, "[tool.ragloom.ranking]\ntop_k = 6\n")
        assert rec.wait(1)
        assert rec.calls[0].sources["ranking.top_k"] == "pyproject.toml"
        write(pyproject, "[tool.ragloom.ranking]\ntop_k = 6\n# a comment\n")  # same settings
        time.sleep(0.3)
        assert len(rec.calls) == 1


def test_a_failing_callback_does_not_stop_the_watcher(
    tmp_path: Path, settings_log: Captured
) -> None:
    config = write(tmp_path / "ragloom.toml", "[ranking]\ntop_k = 1\n")
    seen: list[int] = []

    def callback(loaded: LoadedSettings) -> None:
        seen.append(loaded.settings.ranking.top_k)
        if len(seen) == 1:
            raise RuntimeError("engine refused")

    with SettingsWatcher(tmp_path, callback, interval_s=0.03, debounce_s=0.03, env={}):
        write(config, "[ranking]\ntop_k = 2\n")
        assert until(lambda: len(seen) == 1)
        write(config, "[ranking]\ntop_k = 3\n")
        assert until(lambda: len(seen) == 2)
    assert seen == [2, 3]
    assert any(r.levelno == logging.ERROR for r in settings_log.records)


def test_stop_ends_the_thread_and_later_changes_are_not_applied(tmp_path: Path) -> None:
    config = write(tmp_path / "ragloom.toml", "[ranking]\ntop_k = 1\n")
    rec = Recorder()
    w = watcher(tmp_path, rec).start()
    thread = w._thread
    assert thread is not None and thread.is_alive()
    w.stop()
    assert not thread.is_alive()
    write(config, "[ranking]\ntop_k = 2\n")
    time.sleep(0.2)
    assert rec.calls == []


def test_an_edit_after_the_initial_load_is_not_missed(tmp_path: Path) -> None:
    config = write(tmp_path / "ragloom.toml", "[ranking]\ntop_k = 1\n")
    initial = load_settings(tmp_path, env={})
    write(config, "[ranking]\ntop_k = 2\n")  # before the watcher starts
    rec = Recorder()
    w = SettingsWatcher(tmp_path, rec, interval_s=5.0, env={}, initial=initial)
    with w:
        assert rec.wait(1, timeout=1.0)  # at start, not after a 5 s poll
        assert w.current is not None and w.current.settings.ranking.top_k == 2
    unchanged = load_settings(tmp_path, env={})
    rec2 = Recorder()
    with SettingsWatcher(tmp_path, rec2, interval_s=5.0, env={}, initial=unchanged):
        assert rec2.calls == []


def test_watcher_refuses_a_bad_start(tmp_path: Path) -> None:
    write(tmp_path / "ragloom.toml", "[ranking]\ntop_k = -1\n")
    with pytest.raises(ConfigError, match=r"ragloom.toml: ranking.top_k"):
        watcher(tmp_path, Recorder()).start()
    with pytest.raises(ConfigError, match="interval"):
        SettingsWatcher(tmp_path, Recorder(), interval_s=0)


def test_storage_section_short_names_and_precedence(tmp_path: Path) -> None:
    """The backend is chosen in ragloom.toml, overridden by RAGLOOM_BACKEND / RAGLOOM_DSN, and
    those by the long RAGLOOM_STORAGE__* names; the DSN is a secret in every output."""
    assert load_settings(tmp_path, env={}).settings.storage.backend == "embedded"
    write(
        tmp_path / "ragloom.toml",
        '[storage]\nbackend = "postgres"\nrepository = "mono"\nef_search = 200\n',
    )
    loaded = load_settings(tmp_path, env={})
    assert loaded.settings.storage.backend == "postgres"
    assert loaded.sources["storage.repository"] == "ragloom.toml"
    dsn = "postgresql://u:hunter2@db/x"
    loaded = load_settings(tmp_path, env={"RAGLOOM_DSN": dsn, "RAGLOOM_BACKEND": " Embedded "})
    storage = loaded.settings.storage
    assert (
        storage.backend == "embedded" and loaded.sources["storage.backend"] == "env:RAGLOOM_BACKEND"
    )
    assert storage.dsn is not None and storage.dsn.get_secret_value() == dsn
    assert "hunter2" not in json.dumps(loaded.to_dict())
    long_wins = load_settings(
        tmp_path, env={"RAGLOOM_DSN": dsn, "RAGLOOM_STORAGE__DSN": "postgresql://other/y"}
    )
    assert long_wins.settings.storage.dsn is not None
    assert long_wins.settings.storage.dsn.get_secret_value() == "postgresql://other/y"
    with pytest.raises(ConfigError, match=r"env:RAGLOOM_BACKEND: storage\.backend"):
        load_settings(tmp_path, env={"RAGLOOM_BACKEND": "mysql"})
    with pytest.raises(ConfigError, match=r"storage\.ef_search"):
        load_settings(tmp_path, env={"RAGLOOM_STORAGE__EF_SEARCH": "0"})


def test_server_workers_from_the_environment_and_automatic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragloom.settings import MAX_AUTO_WORKERS, resolve_workers

    assert Settings().server.workers == 0
    monkeypatch.setenv("RAGLOOM_SERVER__WORKERS", "3")
    loaded = load_settings(tmp_path)
    assert loaded.settings.server.workers == 3
    assert loaded.sources["server.workers"] == "env:RAGLOOM_SERVER__WORKERS"
    with pytest.raises(ConfigError, match=r"server\.workers"):
        load_settings(tmp_path, env={"RAGLOOM_SERVER__WORKERS": "-1"})
    assert resolve_workers(3) == 3 and resolve_workers(1) == 1
    assert 1 <= resolve_workers(0) <= MAX_AUTO_WORKERS
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(16)))
    assert resolve_workers(0) == MAX_AUTO_WORKERS


@pytest.mark.parametrize(
    ("toml", "says"),
    [
        ("[assembly]\nbudget = true\n", "assembly.budget: a number is needed, got true"),
        ("[cache]\nttl_s = inf\n", "cache.ttl_s: Input should be a finite number"),
        ("[timeouts]\nquery_ms = nan\n", "timeouts.query_ms"),
        ("[ranking]\ntop_k = false\n", "ranking.top_k: a number is needed, got false"),
    ],
)
def test_no_boolean_numbers_and_no_infinities(tmp_path: Path, toml: str, says: str) -> None:
    """A user trial: ``budget = true`` was taken as a budget of 1, and ``ttl_s = inf`` made
    ``config show --json`` print ``Infinity``, which is not JSON."""
    write(tmp_path / "ragloom.toml", toml)
    assert says in config_error(tmp_path, env={})
    write(tmp_path / "ragloom.toml", "[cache]\nenabled = false\nttl_s = 5\n")
    settings = load_settings(tmp_path, env={"RAGLOOM_ASSEMBLY__BUDGET": "700"}).settings
    assert settings.cache.enabled is False and settings.assembly.budget == 700


def test_a_default_above_the_server_limit_is_refused(tmp_path: Path) -> None:
    """A live reload of ``assembly.budget = 999999999`` made every ``/context`` that size,
    above ``server.max_budget``, which a request cannot ask for itself (a user trial)."""
    write(tmp_path / "ragloom.toml", "[assembly]\nbudget = 999999999\n")
    assert config_error(tmp_path, env={}) == (
        "ragloom.toml: assembly.budget: assembly.budget 999999999 is above server.max_budget "
        "200000 (the default a request gets must be one it could ask for: lower assembly.budget "
        "or raise server.max_budget)"
    )
    write(tmp_path / "ragloom.toml", "[assembly]\nbudget = 300000\n[server]\nmax_budget = 400000\n")
    assert load_settings(tmp_path, env={}).settings.assembly.budget == 300000
    write(tmp_path / "ragloom.toml", "[ranking]\ntop_k = 500\n")
    assert "ranking.top_k 500 is above server.max_top_k 100" in config_error(tmp_path, env={})
