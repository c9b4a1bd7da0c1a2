"""OpenAI-compatible embedding provider, against a real loopback server speaking that API.

The server (:class:`LoopbackEmbeddingServer`, ``http.server`` on 127.0.0.1, port 0) answers
``POST /v1/embeddings`` with :class:`~ragloom.embed.base.HashingEmbedder` vectors scaled by 3
(so normalisation is visible) in *reversed* order (so ordering by ``index`` is visible), keeps
HTTP/1.1 connections alive, and can be told to misbehave for the next requests (429 with
Retry-After, 500, 401, malformed bodies, other widths, silently dropped connections, slowness).

``python tests/unit/test_embed_openai.py`` prints the per-request cost figures of
docs/embedding.md ("Embedding providers").
"""

from __future__ import annotations

import json
import logging
import socket
import statistics
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ragloom
from ragloom.embed.base import Embedder, HashingEmbedder
from ragloom.embed.openai_compat import (
    DEFAULT_MAX_CHARS,
    DEFAULT_REQUEST_BATCH,
    OpenAICompatEmbedder,
    parse_base_url,
)
from ragloom.embed.registry import load_embedder, openai_embedder
from ragloom.errors import ConfigError, EmbeddingError
from ragloom.logs import JsonFormatter

DIM = 32
KEY = "sk-test-0123456789abcdef-secret"
ENV_VARS = (
    "RAGLOOM_EMBEDDING_API_KEY",
    "OPENAI_API_KEY",
    "RAGLOOM_EMBEDDING_PROVIDER",
    "RAGLOOM_EMBEDDING_MODEL",
    "RAGLOOM_EMBEDDING_BASE_URL",
)


# -- the loopback server -----------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
    disable_nagle_algorithm = True  # as real servers do (else headers and body wait 40 ms)
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # silence stderr
        pass

    def _reply(
        self, status: int, body: bytes, headers: dict[str, str] | None = None, close: bool = False
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        if close:  # drop the connection without announcing it (a server restart, an idle timeout)
            self.close_connection = True

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        body = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
        self._reply(status, json.dumps(body).encode(), headers)

    def do_POST(self) -> None:
        app = self.server.app
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        req = json.loads(raw)
        with app.lock:
            app.requests.append({"path": self.path, "headers": dict(self.headers), "body": req})
            fault = app.faults.popleft() if app.faults else None
        if self.path != "/v1/embeddings":
            self._reply(404, b"404 page not found")
            return
        auth = self.headers.get("Authorization")
        if app.api_key is not None and auth != f"Bearer {app.api_key}":
            # OpenAI echoes (part of) the key it got: the client must not repeat it
            self._error(401, f"Incorrect API key provided: {auth}. You can find your API key ...")
            return
        dim = app.dim
        match fault:
            case None | "close":
                pass
            case "429":
                self._error(429, "Rate limit reached", {"Retry-After": app.retry_after})
                return
            case "500":
                self._error(500, "model runner crashed")
                return
            case "400":
                self._error(400, "input is too large to process. increase the physical batch size")
                return
            case "not-json":
                self._reply(200, b"<html>proxy error</html>")
                return
            case "no-data":
                self._reply(200, b'{"object": "list"}')
                return
            case "short":
                req["input"] = req["input"][:-1]
            case "bad-index":
                self._reply(200, json.dumps({"data": [{"index": 5, "embedding": [1.0]}]}).encode())
                return
            case "strings":
                bad = {"data": [{"index": 0, "embedding": ["a", "b"]}]}
                self._reply(200, json.dumps(bad).encode())
                return
            case "number-strings" | "bools":  # json numbers as text, or true/false
                value: Any = "0.5" if fault == "number-strings" else True
                bad = {"data": [{"index": 0, "embedding": [value, value]}]}
                self._reply(200, json.dumps(bad).encode())
                return
            case "cut":  # announces the whole answer, sends half, hangs up
                body_cut = json.dumps({"data": [{"index": 0, "embedding": [1.0] * 50}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body_cut)))
                self.end_headers()
                self.wfile.write(body_cut[: len(body_cut) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            case "nested":
                bad = {"data": [{"index": 0, "embedding": [[1.0], [2.0]]}]}
                self._reply(200, json.dumps(bad).encode())
                return
            case "nan":
                bad = {"data": [{"index": 0, "embedding": [1.0, float("nan")]}]}
                self._reply(200, json.dumps(bad).encode())
                return
            case "zero":
                zero = {
                    "data": [
                        {"index": i, "embedding": [0.0] * dim} for i in range(len(req["input"]))
                    ]
                }
                self._reply(200, json.dumps(zero).encode())
                return
            case str() if fault.startswith("dim:"):
                dim = int(fault[4:])
            case str() if fault.startswith("sleep:"):
                time.sleep(float(fault[6:]))
            case _:
                raise AssertionError(f"unknown fault {fault!r}")
        vecs = HashingEmbedder(dim).embed_documents(req["input"]) * 3.0
        data = [
            {"object": "embedding", "index": i, "embedding": [float(x) for x in vecs[i]]}
            for i in reversed(range(len(vecs)))
        ]
        body: dict[str, Any] = {"object": "list", "data": data, "model": req["model"], "usage": {}}
        self._reply(200, json.dumps(body).encode(), close=fault == "close")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    app: LoopbackEmbeddingServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up (BrokenPipeError) is the client's business: the default prints
        # a traceback to sys.stderr, which is whatever the code under test is capturing then
        # (a CliRunner's output), so a test server never prints.
        pass


class LoopbackEmbeddingServer:
    """An OpenAI-compatible embeddings server on 127.0.0.1 (see the module docstring)."""

    def __init__(self, dim: int = DIM, api_key: str | None = None) -> None:
        self.dim = dim
        self.api_key = api_key
        self.retry_after = "0"
        self.faults: deque[str] = deque()
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.httpd = _Server(("127.0.0.1", 0), _Handler)
        self.httpd.app = self
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def fail(self, *faults: str) -> None:
        with self.lock:
            self.faults.extend(faults)

    def reset(self) -> None:
        with self.lock:
            self.faults.clear()
            self.requests.clear()
        self.dim = DIM
        self.api_key = None
        self.retry_after = "0"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackEmbeddingServer]:
    srv = LoopbackEmbeddingServer()
    yield srv
    srv.close()


@pytest.fixture
def srv(
    server: LoopbackEmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> LoopbackEmbeddingServer:
    """The shared server, reset, with no provider variables in the environment."""
    server.reset()
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    return server


@pytest.fixture
def make(srv: LoopbackEmbeddingServer) -> Iterator[Any]:
    """Build embedders on ``srv`` (fast retries) and close their connections afterwards."""
    made: list[OpenAICompatEmbedder] = []

    def factory(**kw: Any) -> OpenAICompatEmbedder:
        kw.setdefault("backoff", 0.01)
        emb = OpenAICompatEmbedder(kw.pop("model", "test-model"), kw.pop("url", srv.url), **kw)
        made.append(emb)
        return emb

    yield factory
    for emb in made:
        emb.close()


def expected(texts: list[str], dim: int = DIM) -> np.ndarray:
    return HashingEmbedder(dim).embed_documents(texts)


TEXTS = [
    "def parse_header(line): return line.split(':')",
    "class JSONDecoder: def decode(self, s): ...",
    "",
    'fn main() { println!("hello"); }',
    "x" * 50,
]


# -- shapes, order, normalisation, batching ------------------------------------------------------


def test_documents_and_query_shape_order_and_norm(make: Any, srv: LoopbackEmbeddingServer) -> None:
    emb = make()
    vecs = emb.embed_documents(TEXTS)
    assert vecs.shape == (len(TEXTS), DIM) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-6)
    # the server answers in reversed order and scaled by 3: index ordering + normalisation
    want = expected([t or " " for t in TEXTS])
    np.testing.assert_allclose(vecs, want, atol=1e-6)
    q = emb.embed_query("parse_header line")
    assert q.shape == (DIM,) and q.dtype == np.float32
    np.testing.assert_allclose(q, expected(["parse_header line"])[0], atol=1e-6)
    assert emb.dim == DIM
    body = srv.requests[0]["body"]
    assert body["model"] == "test-model" and body["encoding_format"] == "float"
    assert body["input"][2] == " "  # an empty text is sent as one space
    assert srv.requests[0]["headers"]["User-Agent"].startswith("ragloom/")
    # last: on Python 3.11 isinstance() reads every protocol member, dim included
    assert isinstance(emb, Embedder)


def test_batching_progress_and_empty_input(make: Any, srv: LoopbackEmbeddingServer) -> None:
    emb = make()
    texts = [f"text number {i} about symbol_{i % 7}" for i in range(150)]
    seen: list[int] = []
    vecs = emb.embed_documents(texts, progress=seen.append)
    assert [len(r["body"]["input"]) for r in srv.requests] == [64, 64, 22]
    assert seen == [64, 128, 150] and DEFAULT_REQUEST_BATCH == 64
    np.testing.assert_allclose(vecs, expected(texts), atol=1e-6)
    srv.reset()
    emb.embed_documents(texts[:25], batch_size=10)
    assert [len(r["body"]["input"]) for r in srv.requests] == [10, 10, 5]
    assert make(batch_size=7).embed_documents([]).shape == (0, DIM)  # learns dim by a probe
    with pytest.raises(ConfigError):
        emb.embed_documents(["a"], batch_size=0)
    with pytest.raises(ConfigError):
        emb.embed_documents("one string")


def test_truncation_by_characters(make: Any, srv: LoopbackEmbeddingServer) -> None:
    emb = make(max_chars=100)
    emb.embed_documents(["a" * 1000, "short"])
    assert [len(t) for t in srv.requests[0]["body"]["input"]] == [100, 5]
    assert emb.model_id.endswith("+chars100")
    default = make()
    default.embed_query("b" * (DEFAULT_MAX_CHARS + 10))
    assert len(srv.requests[-1]["body"]["input"][0]) == DEFAULT_MAX_CHARS
    assert "+chars" not in default.model_id


def test_dimension_is_lazy_probed_once_or_given(make: Any, srv: LoopbackEmbeddingServer) -> None:
    emb = make()
    assert emb.model_id == f"openai-compat:test-model@127.0.0.1:{srv.url.split(':')[2]}"
    assert srv.requests == []  # construction and model_id make no request
    assert emb.dim == DIM and emb.dim == DIM
    assert len(srv.requests) == 1
    given = make(dim=DIM)
    assert given.dim == DIM and len(srv.requests) == 1  # no probe when given
    wrong = make(dim=16)
    with pytest.raises(EmbeddingError, match=r"returned 32-d vectors but this embedder is 16-d"):
        wrong.embed_query("x")


def test_dimension_change_between_calls(make: Any, srv: LoopbackEmbeddingServer) -> None:
    emb = make()
    emb.embed_query("first")
    srv.fail("dim:48")
    with pytest.raises(EmbeddingError) as info:
        emb.embed_documents(["second"])
    msg = str(info.value)
    assert "48-d" in msg and "32-d" in msg and "\n" not in msg
    assert emb.embed_query("third").shape == (DIM,)  # the embedder keeps its dimension


# -- retries and errors ------------------------------------------------------------------------


def test_retry_after_429_is_honoured(make: Any, srv: LoopbackEmbeddingServer) -> None:
    srv.retry_after = "0.3"
    srv.fail("429")
    emb = make(backoff=20.0)  # ignoring Retry-After would wait 20 s
    started = time.perf_counter()
    vec = emb.embed_query("rate limited")
    elapsed = time.perf_counter() - started
    assert 0.25 <= elapsed < 10.0  # generous: a busy machine is slow, never 20 s slow
    assert len(srv.requests) == 2
    np.testing.assert_allclose(vec, expected(["rate limited"])[0], atol=1e-6)


def test_retry_on_500_then_give_up(make: Any, srv: LoopbackEmbeddingServer) -> None:
    srv.fail("500")
    emb = make(max_retries=2)
    assert emb.embed_query("once").shape == (DIM,)
    assert len(srv.requests) == 2
    srv.reset()
    srv.fail("500", "500", "500", "500")
    with pytest.raises(EmbeddingError) as info:
        emb.embed_query("always")
    msg = str(info.value)
    assert len(srv.requests) == 3  # 1 + max_retries
    assert "HTTP 500: model runner crashed after 3 attempts" in msg and "\n" not in msg
    assert srv.url in msg and "test-model" in msg


def test_4xx_is_final_with_the_server_message(make: Any, srv: LoopbackEmbeddingServer) -> None:
    srv.fail("400")
    with pytest.raises(EmbeddingError, match=r"HTTP 400: input is too large to process"):
        make().embed_query("big")
    assert len(srv.requests) == 1
    with pytest.raises(EmbeddingError, match=r"HTTP 404: 404 page not found \(is .* the API root"):
        make(url=srv.url.removesuffix("/v1")).embed_query("x")


def test_401_names_the_key_variables_and_hides_the_key(
    make: Any, srv: LoopbackEmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    srv.api_key = "the-right-key"
    monkeypatch.setenv("RAGLOOM_EMBEDDING_API_KEY", KEY)
    emb = make()
    with pytest.raises(EmbeddingError) as info:
        emb.embed_query("x")
    msg = str(info.value)
    assert "HTTP 401: Incorrect API key provided: Bearer ***" in msg
    assert "RAGLOOM_EMBEDDING_API_KEY" in msg and KEY not in msg and "\n" not in msg
    assert len(srv.requests) == 1  # not retried


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("not-json", r"malformed answer: not JSON \('<html>proxy error</html>'\)"),
        ("no-data", r"malformed answer: no 'data' list"),
        ("short", r"malformed answer: 1 embeddings for 2 inputs"),
        ("bad-index", r"malformed answer: 1 embeddings for 2 inputs"),
        ("zero", r"malformed answer: an all-zero vector"),
    ],
)
def test_malformed_answers(
    make: Any, srv: LoopbackEmbeddingServer, fault: str, message: str
) -> None:
    srv.fail(fault)
    with pytest.raises(EmbeddingError, match=message) as info:
        make().embed_documents(["a b", "c d"])
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("bad-index", r"indexes \[5\] are not 0..0"),
        ("strings", r"holds non-numbers"),
        ("number-strings", r"holds non-numbers"),  # "0.5" was taken as 0.5
        ("bools", r"holds non-numbers"),  # true was taken as 1.0
        ("nested", r"not a flat list of numbers"),
        ("nan", r"NaN or infinite values"),
    ],
)
def test_malformed_single_answers(
    make: Any, srv: LoopbackEmbeddingServer, fault: str, message: str
) -> None:
    srv.fail(fault)
    with pytest.raises(EmbeddingError, match=message):
        make().embed_query("a")


def test_connection_refused_and_timeout(make: Any, srv: LoopbackEmbeddingServer) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(EmbeddingError) as info:
        make(url=url).embed_query("x")
    assert str(info.value).endswith(f"connection refused (is the server running at {url}?)")
    srv.fail("sleep:0.8")
    with pytest.raises(EmbeddingError, match=r"no answer within 0.2 s \(timeout\)"):
        make(timeout=0.2).embed_query("slow")


def test_dropped_keepalive_connection_is_resent_at_once(
    make: Any, srv: LoopbackEmbeddingServer
) -> None:
    emb = make(backoff=20.0)
    srv.fail("close")  # answers, then closes the socket without "Connection: close"
    emb.embed_query("one")
    time.sleep(0.05)
    started = time.perf_counter()
    assert emb.embed_query("two").shape == (DIM,)
    assert time.perf_counter() - started < 10.0  # no 20 s backoff: a stale connection is fine
    assert len(srv.requests) == 2


def test_the_server_never_prints_a_client_hang_up(
    srv: LoopbackEmbeddingServer, capsys: pytest.CaptureFixture[str]
) -> None:
    # A handler that answers a client that gave up (a timeout above) hits BrokenPipeError in
    # the server's thread, maybe while a later test's CliRunner captures sys.stderr.
    for exc in (BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "reset")):
        try:
            raise exc
        except OSError:
            srv.httpd.handle_error(None, ("127.0.0.1", 1))
    assert capsys.readouterr() == ("", "")


# -- the key -----------------------------------------------------------------------------------


def test_key_from_environment_and_never_shown(
    make: Any, srv: LoopbackEmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    records: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(JsonFormatter().format(record))

    handler = Capture(logging.DEBUG)
    logger = logging.getLogger("ragloom.embed")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        srv.api_key = KEY
        emb = make()
        srv.fail("429", "500")
        emb.embed_documents(["a" * (DEFAULT_MAX_CHARS + 1)])
        assert srv.requests[-1]["headers"]["Authorization"] == f"Bearer {KEY}"
        monkeypatch.setenv("RAGLOOM_EMBEDDING_API_KEY", "")  # empty: send no key at all
        anonymous = make()
        with pytest.raises(EmbeddingError) as info:
            anonymous.embed_query("x")
        assert "Authorization" not in srv.requests[-1]["headers"]
        assert not anonymous.has_api_key and emb.has_api_key
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert any("retrying" in r for r in records) and any("truncated" in r for r in records)
    shown = [*records, repr(emb), emb.spec, emb.model_id, str(info.value)]
    assert all(KEY not in s for s in shown)
    assert (
        repr(emb) == f"OpenAICompatEmbedder(model='test-model', base_url='{srv.url}', api_key=set)"
    )


# -- threads -----------------------------------------------------------------------------------


def test_concurrent_queries_and_one_probe(make: Any, srv: LoopbackEmbeddingServer) -> None:
    emb = make()
    barrier = threading.Barrier(6)
    dims: list[int] = []
    results: dict[str, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            barrier.wait()
            dims.append(emb.dim)
            for i in range(15):
                text = f"thread {t} query {i} symbol_{t}_{i}"
                results[text] = emb.embed_query(text)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors and dims == [DIM] * 6
    probes = [r for r in srv.requests if r["body"]["input"] == ["ragloom dimension probe"]]
    assert len(probes) == 1
    texts = sorted(results)
    np.testing.assert_allclose(np.stack([results[t] for t in texts]), expected(texts), atol=1e-6)


# -- specs and the environment -----------------------------------------------------------------


def test_spec_grammar(srv: LoopbackEmbeddingServer, monkeypatch: pytest.MonkeyPatch) -> None:
    emb = load_embedder("openai:nomic-embed-text:latest@http://LocalHost:11434/v1/")
    assert isinstance(emb, OpenAICompatEmbedder)
    assert emb.model == "nomic-embed-text:latest" and emb.base_url == "http://localhost:11434/v1"
    assert emb.model_id == "openai-compat:nomic-embed-text:latest@localhost:11434/v1"
    assert emb.spec == "openai:nomic-embed-text:latest@http://localhost:11434/v1"
    https = load_embedder("openai:text-embedding-3-small@https://api.openai.com/v1")
    assert https.model_id == "openai-compat:text-embedding-3-small@api.openai.com:443/v1"
    v6 = load_embedder("openai:BAAI/bge-small@http://[::1]:8080")
    assert v6.model_id == "openai-compat:BAAI/bge-small@[::1]:8080"
    opts = load_embedder(f"openai:m@{srv.url}#max_chars=1500&batch_size=16&timeout=2.5&dim=32")
    assert isinstance(opts, OpenAICompatEmbedder)
    assert (opts.max_chars, opts.batch_size, opts.timeout, opts.dim) == (1500, 16, 2.5, 32)
    again = openai_embedder(opts.spec)  # the spec round-trips, options included
    assert again.model_id == opts.model_id and again.spec == opts.spec
    assert openai_embedder(f"openai:m@{srv.url}", batch_size=8).spec.endswith("#batch_size=8")
    assert srv.requests == []  # none of this touched the network
    for bad, needle in [
        ("openai:", "openai[:MODEL"),
        ("openai:@http://x:1/v1", "openai[:MODEL"),
        ("openai:http://localhost:11434/v1", "openai[:MODEL"),
        ("openai:m@ftp://host/v1", "expected http://HOST:PORT"),
        ("openai:m@http://user:pw@host/v1", "RAGLOOM_EMBEDDING_API_KEY"),
        ("openai:m@http://host:99999/v1", "bad embedding server URL"),
        ("openai:m@http://h:1#max_chars=x", "max_chars needs int"),
        ("openai:m@http://h:1#colour=blue", "NAME in dim, batch_size"),
        ("openai:m@http://h:1#max_chars=0", "max_chars must be a positive integer"),
        ("openai-compat:m@localhost:11434/v1", "is a model id, not a spec"),
        ("openai", "RAGLOOM_EMBEDDING_MODEL and RAGLOOM_EMBEDDING_BASE_URL"),
        ("openai:m", "RAGLOOM_EMBEDDING_BASE_URL"),
    ]:
        with pytest.raises(ConfigError) as info:
            load_embedder(bad)
        assert needle in str(info.value), (bad, str(info.value))
    with pytest.raises(ConfigError, match="unexpected keyword"):
        load_embedder(f"openai:m@{srv.url}", threads=2)


def test_environment_configuration(
    srv: LoopbackEmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGLOOM_EMBEDDING_MODEL", "env-model")
    monkeypatch.setenv("RAGLOOM_EMBEDDING_BASE_URL", srv.url)
    emb = load_embedder("openai")
    assert isinstance(emb, OpenAICompatEmbedder)
    assert (emb.model, emb.base_url) == ("env-model", srv.url)
    assert emb.spec == f"openai:env-model@{srv.url}"  # resolved: usable without the variables
    assert openai_embedder("openai:other").model == "other"
    assert openai_embedder("openai#max_chars=99").max_chars == 99
    # the provider variable applies when no spec is given, never to "default"
    from ragloom.embed.onnx import OnnxEmbedder

    monkeypatch.setenv("RAGLOOM_EMBEDDING_PROVIDER", "openai")
    assert isinstance(load_embedder(None), OpenAICompatEmbedder)
    assert isinstance(load_embedder("default"), OnnxEmbedder)
    monkeypatch.setenv("RAGLOOM_EMBEDDING_PROVIDER", "local")
    assert isinstance(load_embedder(None), OnnxEmbedder)
    monkeypatch.setenv("RAGLOOM_EMBEDDING_PROVIDER", "cohere")
    with pytest.raises(ConfigError, match="choose from default, local, openai"):
        load_embedder(None)
    assert openai_embedder(f"openai:m@{srv.url}", env={}, dim=3).dim == 3  # given: no probe
    with pytest.raises(ConfigError, match="RAGLOOM_EMBEDDING_MODEL"):
        openai_embedder("openai", env={"RAGLOOM_EMBEDDING_BASE_URL": srv.url})
    assert srv.requests == []


def test_parse_base_url_keeps_the_query() -> None:
    base = parse_base_url("https://example.test/openai/deployments/x?api-version=2024-02-01")
    assert base.endpoint == "/openai/deployments/x/embeddings?api-version=2024-02-01"
    assert base.address == "example.test:443"


# -- end to end --------------------------------------------------------------------------------


def _repo(root: Path) -> Path:
    (root / "net").mkdir(parents=True)
    (root / "net" / "headers.py").write_text(
        "def parse_header_line(line):\n"
        '    """Split one HTTP header line into name and value."""\n'
        "    name, _, value = line.partition(':')\n"
        "    return name.strip().lower(), value.strip()\n"
    )
    (root / "codec.py").write_text(
        "class JSONDecoder:\n    def decode(self, document):\n        return document\n"
    )
    (root / "geometry.go").write_text(
        "package geometry\n\nfunc Area(width, height float64) float64 {\n"
        "\treturn width * height\n}\n"
    )
    return root


def test_index_and_search_through_the_server(
    srv: LoopbackEmbeddingServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGLOOM_EMBEDDING_API_KEY", KEY)
    srv.api_key = KEY
    repo = _repo(tmp_path / "repo")
    spec = f"openai:test-model@{srv.url}"
    # first a hashing index: switching provider re-embeds every chunk under the new model id
    with ragloom.Index.at(repo, embedder="hashing:32") as first:
        first.index()
    idx = ragloom.Index.at(repo, embedder=spec)
    try:
        stats = idx.index()
        assert stats.model_changed and stats.chunks_embedded == stats.chunks_total > 0
        assert stats.embeddings_pruned > 0  # the hashing vectors are gone
        model_id = f"openai-compat:test-model@127.0.0.1:{srv.url.split(':')[2]}"
        status = idx.status(freshness=False)
        assert status.model == model_id and status.dim == DIM and status.vectors_ready
        hits = idx.search("parse header line name value", strategy="hybrid").hits
        assert hits and hits[0].path == "net/headers.py"
        dense = idx.search("JSONDecoder decode document", strategy="dense").hits
        assert dense and dense[0].path == "codec.py"
        assert idx.index().chunks_embedded == 0  # nothing changed: no request for documents
    finally:
        idx.close()
    # a new process-like reader uses the spec from the manifest
    with ragloom.open(repo / ".ragloom") as reader:
        assert reader.search("Area width height", strategy="dense").hits[0].path == "geometry.go"
    assert all(r["headers"]["Authorization"] == f"Bearer {KEY}" for r in srv.requests)


def test_cli_index_and_search(srv: LoopbackEmbeddingServer, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ragloom.cli import cli

    repo = _repo(tmp_path / "repo")
    runner = CliRunner()
    spec = f"openai:test-model@{srv.url}"
    res = runner.invoke(cli, ["index", str(repo), "--model", spec, "--json", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["chunks_embedded"] > 0  # --json is stdout; logs go to stderr
    index_dir = str(repo / ".ragloom")
    res = runner.invoke(
        cli, ["search", "parse header line", "--index-dir", index_dir, "--strategy", "dense"]
    )
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[0].split()[1].startswith("net/headers.py:")
    bad = runner.invoke(cli, ["index", str(repo), "--model", "openai:", "--no-progress"])
    assert bad.exit_code != 0 and "openai[:MODEL" in bad.output


# -- cost figures (docs/embedding.md) ------------------------------------------------------------


def _bench() -> None:  # pragma: no cover - run by hand
    """Per-request latency against the loopback server: ragloom's and the loopback's overhead,
    not a model's speed (the server computes hashing vectors)."""
    srv = LoopbackEmbeddingServer(dim=384)
    chunk = ("def handler(request):\n    return response.json(request.body)  # x\n" * 22)[:1500]
    emb = OpenAICompatEmbedder("bench", srv.url)
    rows: list[tuple[int, bool | None, float]] = []
    for batch in (1, 16, 64):
        texts = [chunk + str(i) for i in range(batch)]
        rng = np.random.default_rng(0)  # full-precision floats, as servers send them
        body = json.dumps(
            {
                "data": [
                    {"index": i, "embedding": rng.normal(size=384).tolist()} for i in range(batch)
                ]
            }
        ).encode()
        for keepalive in (True, False):
            times = []
            for _ in range(60 if batch < 64 else 30):
                if not keepalive:
                    emb.close()
                t0 = time.perf_counter()
                emb.embed_documents(texts)
                times.append((time.perf_counter() - t0) * 1000)
            rows.append((batch, keepalive, statistics.median(times)))
        client = []
        for _ in range(30):
            t0 = time.perf_counter()
            emb._prepare(texts)
            json.dumps({"model": "bench", "input": texts, "encoding_format": "float"})
            emb._parse(body, batch)
            client.append((time.perf_counter() - t0) * 1000)
        rows.append((batch, None, statistics.median(client)))
    emb.close()
    srv.close()
    print("batch  what                            median ms")
    for batch, keep, ms in rows:
        if keep is None:
            what = "ragloom encode+decode only"
        else:
            what = "round trip, keep-alive" if keep else "round trip, new connection"
        print(f"{batch:>5}  {what:<30}  {ms:8.2f}")


if __name__ == "__main__":  # pragma: no cover
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    _bench()


def test_an_embedding_server_that_is_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedding server is down (an Ollama container not started yet). Before, the index
    could not be updated even with ``--no-embed``, ``serve http`` did not start, and every
    hybrid question failed (HTTP 500). Now the update without embedding takes the dimension
    the manifest records, the server starts, and hybrid answers from BM25 with a note."""
    from ragloom.errors import EmbeddingError
    from ragloom.server.engine import ServingEngine
    from ragloom.settings import Settings

    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    own = LoopbackEmbeddingServer()
    repo = _repo(tmp_path / "repo")
    spec = f"openai:test-model@{own.url}#max_retries=0"
    with ragloom.Index.at(repo, embedder=spec) as idx:
        idx.index(history=False)
    own.close()  # the server goes away
    (repo / "late.py").write_text("def zebra_quantum_marker():\n    return 1\n")
    with ragloom.Index.at(repo) as idx:
        stats = idx.index(embed=False, history=False)
        assert stats.files_changed == 1 and stats.embeddings_pending >= 1
        res = idx.search("zebra_quantum_marker")
        assert res.hits[0].path == "late.py"
        assert any("could not be embedded" in n for n in res.notes)
        with pytest.raises(EmbeddingError):
            idx.search("zebra quantum", strategy="dense")
    with ServingEngine.open(repo, Settings(), warm=False) as eng:
        answer = eng.search("zebra_quantum_marker", top_k=3)
        assert answer["hits"][0]["path"] == "late.py"
        assert any("hybrid answered from BM25 alone" in n for n in answer["notes"])


def test_a_first_index_that_fails_leaves_its_folder_ignored_by_git(tmp_path: Path) -> None:
    from ragloom.errors import EmbeddingError

    own = LoopbackEmbeddingServer()
    url = own.url
    own.close()
    repo = _repo(tmp_path / "repo")
    with (
        pytest.raises(EmbeddingError),
        ragloom.Index.at(repo, embedder=f"openai:test-model@{url}#max_retries=0") as idx,
    ):
        idx.index(history=False)
    assert (repo / ".ragloom" / ".gitignore").read_text() == "*\n"


def test_an_answer_cut_off_is_retried(make: Any, srv: LoopbackEmbeddingServer) -> None:
    """A server that sends half of the body it announced and hangs up: read as "not JSON"
    after one request before, with no retry."""
    srv.fail("cut")
    assert make().embed_query("x").shape == (DIM,)
    assert len(srv.requests) == 2
