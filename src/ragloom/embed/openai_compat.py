"""Embeddings from an OpenAI-compatible ``/embeddings`` endpoint.

Local model servers speak this API: Ollama (``http://localhost:11434/v1``), llama.cpp's
``llama-server --embeddings`` (``http://localhost:8080/v1``), vLLM (``--task embed``), LM Studio
(``http://localhost:1234/v1``), text-embeddings-inference; so does OpenAI itself. One request is
``POST {base_url}/embeddings`` with ``{"model": ..., "input": [...], "encoding_format": "float"}``;
the answer's ``data[i].embedding`` vectors are put back in input order by ``data[i].index`` and
L2-normalised here (servers differ on whether they normalise).

Transport is the standard library's :mod:`http.client`, not httpx (not a dependency) nor
``urllib.request``: one keep-alive connection per thread saves a TCP (and TLS) handshake per
request, and a direct connection is not diverted by ``http_proxy`` variables meant for the
internet (a loopback model server behind a proxy is the usual failure of urllib here). Requests
are made sequentially; nothing but numpy is imported on first use.

Identity: :attr:`OpenAICompatEmbedder.model_id` is
``openai-compat:<model>@<host>:<port><path>`` (``+chars<N>`` appended for a non-default
truncation limit), so vectors from another server, port, route or model are never mixed with
these; ragloom stores vectors under that id (``ragloom.embed.document.embedding_key``).

The API key comes from ``RAGLOOM_EMBEDDING_API_KEY``, else ``OPENAI_API_KEY`` (set the first to
an empty string to send no key even when the second is set); it is sent as a Bearer token and
never logged, shown in ``repr`` or error messages, nor written into a spec or manifest.
"""

from __future__ import annotations

import base64
import binascii
import email.utils
import http.client
import json
import logging
import os
import ssl
import threading
import time
import urllib.parse
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragloom._version import __version__
from ragloom.embed.base import ProgressCallback, check_batch_size, check_texts
from ragloom.errors import ConfigError, EmbeddingError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "API_KEY_ENV",
    "DEFAULT_MAX_CHARS",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_REQUEST_BATCH",
    "DEFAULT_TIMEOUT",
    "MODEL_ID_PREFIX",
    "BaseUrl",
    "OpenAICompatEmbedder",
    "parse_base_url",
]

log = logging.getLogger("ragloom.embed")

MODEL_ID_PREFIX = "openai-compat"
"""First part of ``model_id``: the provider, so these vectors never pass for a local model's."""

API_KEY_ENV = ("RAGLOOM_EMBEDDING_API_KEY", "OPENAI_API_KEY")
"""Environment variables read for the API key, first set one wins (an empty first one means
"no key", so an ``OPENAI_API_KEY`` meant for OpenAI is not sent to a local server)."""

DEFAULT_REQUEST_BATCH = 64
"""Inputs per request: 64 chunks of <= ~6 kB is <= ~400 kB of JSON out and about 64 x dim x 20
bytes back; a request amortises its ~1 ms of fixed cost on loopback (docs/embedding.md,
"Embedding providers") many times over, keeps a slow CPU server's answer within the timeout, and
stays well under the servers' input-count limits (OpenAI: 2048)."""

DEFAULT_MAX_CHARS = 8000
"""Inputs are cut to this many characters before they are sent. ragloom's chunks are at most
6,000 bytes plus a one-line header, so ordinary chunks are never cut; the limit stops a huge query
or a hostile file from becoming a request the server rejects. It is characters, not tokens
(ragloom does not know the server's tokenizer): about 2,000-2,700 tokens of code, inside the
context of the usual embedding models (nomic-embed-text 8192, OpenAI 8191) but not of 512-token
ones (bge, MiniLM): for those pass ``max_chars=1500`` or let the server truncate."""

DEFAULT_TIMEOUT = 60.0
"""Seconds to wait for the connection and for each read of the answer: a CPU-only local server
embedding 64 long chunks can take tens of seconds."""

DEFAULT_MAX_RETRIES = 3
"""Retries after a 408, 429 or 5xx answer or a dropped connection (four attempts in all)."""

DEFAULT_BACKOFF = 0.5
"""Seconds before the first retry when the server gives no ``Retry-After``; doubles per retry."""

MAX_WAIT = 30.0
"""Longest single wait between attempts, whatever ``Retry-After`` asks for."""

MAX_RESPONSE_BYTES = 256 << 20
"""Answers larger than this are refused (64 x 4096-d floats as JSON is ~5 MB)."""

_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
"""Transient answers: timeouts, rate limits, overload; 501/505 and 4xx are final."""

_PROBE_TEXT = "ragloom dimension probe"
"""Embedded once when :attr:`OpenAICompatEmbedder.dim` is needed before any other request."""

_MESSAGE_LIMIT = 300
"""Characters of a server's error message kept in an :class:`EmbeddingError`."""

_STALE_CONNECTION = (
    http.client.RemoteDisconnected,
    http.client.BadStatusLine,
    BrokenPipeError,
    ConnectionResetError,
    ConnectionAbortedError,
)
"""Errors of a reused keep-alive connection the server had closed: resent at once on a fresh
connection (embedding requests are idempotent)."""


@dataclass(frozen=True, slots=True)
class BaseUrl:
    """A validated base URL, split the way requests and ``model_id`` need it."""

    url: str
    """Normalised: scheme and host lowercased, no trailing slash."""
    scheme: str
    host: str
    port: int
    path: str
    """Path without a trailing slash (may be empty)."""
    query: str

    @property
    def address(self) -> str:
        """``host:port`` (IPv6 hosts in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def endpoint(self) -> str:
        """Request target of the embeddings route."""
        target = f"{self.path}/embeddings"
        return f"{target}?{self.query}" if self.query else target


def parse_base_url(url: str) -> BaseUrl:
    """Validate ``url`` (``http(s)://host[:port][/path]``); :class:`ConfigError` otherwise.

    Credentials in the URL are refused: the spec holding it is stored in the index manifest.
    """
    text = url.strip()
    expected = "expected http://HOST:PORT/PATH or https://..., e.g. http://localhost:11434/v1"
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"bad embedding server URL {url!r}: {exc}; {expected}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"bad embedding server URL {url!r}: {expected}")
    if parts.username is not None or parts.password is not None:
        raise ConfigError(
            f"bad embedding server URL: put credentials in {API_KEY_ENV[0]}, not in the URL "
            "(the URL is stored in the index manifest)"
        )
    if parts.fragment:
        raise ConfigError(f"bad embedding server URL {url!r}: it has a #fragment")
    host = parts.hostname.lower()
    port = port if port is not None else (443 if scheme == "https" else 80)
    path = parts.path.rstrip("/")
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    normalised = urllib.parse.urlunsplit((scheme, netloc, path, parts.query, ""))
    return BaseUrl(normalised, scheme, host, port, path, parts.query)


def _api_key_from_env(env: Mapping[str, str]) -> str | None:
    for name in API_KEY_ENV:
        value = env.get(name)
        if value is not None:
            return value.strip() or None
    return None


def _one_line(text: str, limit: int = _MESSAGE_LIMIT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _server_message(body: bytes) -> str:
    """The error message of an error answer, in the shapes servers use: OpenAI / llama.cpp /
    Ollama ``{"error": {"message": ...}}``, TEI ``{"error": "..."}``, older vLLM
    ``{"message": ...}``, FastAPI ``{"detail": ...}``; else the body's text."""
    text = body.decode("utf-8", errors="replace")
    try:
        obj: Any = json.loads(text)
    except ValueError:
        return text
    if isinstance(obj, dict):
        err = obj.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str) and err:
            return err
        for key in ("message", "detail"):
            if obj.get(key):
                return str(obj[key])
    return text


def _retry_after(value: str | None) -> float | None:
    """Seconds asked for by a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _close_all(conns: list[http.client.HTTPConnection], lock: threading.Lock) -> None:
    with lock:
        todo = conns[:]
        conns.clear()
    for conn in todo:
        conn.close()


class OpenAICompatEmbedder:
    """Embed through an OpenAI-compatible server (see the module docstring).

    ``model`` is the server's model name (``nomic-embed-text``, ``text-embedding-3-small``);
    ``base_url`` the API root the ``/embeddings`` route hangs from (``http://localhost:11434/v1``).
    ``dim``, when given, is the dimension the server must return (checked on every answer);
    otherwise it is learnt from the first answer, or from one probe request when :attr:`dim` is
    read first, and any later answer of another width is an :class:`EmbeddingError`.
    ``batch_size`` is the number of inputs per request (``embed_documents(batch_size=...)``
    overrides it per call); ``max_chars`` the truncation limit; ``timeout`` seconds per connect
    and per read; ``max_retries`` and ``backoff`` shape the retries on transient answers.
    ``api_key`` defaults to the environment (:data:`API_KEY_ENV`).

    Every failure is one :class:`EmbeddingError` line naming the server. Thread-safe: each thread
    keeps its own connection, and the learnt dimension is set under a lock.
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        dim: int | None = None,
        batch_size: int = DEFAULT_REQUEST_BATCH,
        max_chars: int = DEFAULT_MAX_CHARS,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff: float = DEFAULT_BACKOFF,
        api_key: str | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("the embedding model name must be a non-empty string")
        model = model.strip()
        if "#" in model or any(ord(c) < 32 or ord(c) == 127 for c in model):
            raise ConfigError(f"bad embedding model name {model!r}: '#' or control characters")
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
            raise ConfigError(f"dim must be a positive integer or None, got {dim!r}")
        check_batch_size(batch_size)
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
            raise ConfigError(f"max_chars must be a positive integer, got {max_chars!r}")
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout < float("inf")
        ):
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigError(f"max_retries must be an integer >= 0, got {max_retries!r}")
        if (
            isinstance(backoff, bool)
            or not isinstance(backoff, int | float)
            or not 0 <= backoff < float("inf")
        ):
            raise ConfigError(f"backoff must be a number of seconds >= 0, got {backoff!r}")
        self.model = model
        self.base = parse_base_url(base_url)
        self.base_url = self.base.url
        self.batch_size = batch_size
        self.max_chars = max_chars
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.backoff = float(backoff)
        self._explicit_dim = dim
        self._dim: int | None = dim
        key = api_key if api_key is not None else _api_key_from_env(os.environ)
        self._api_key: str | None = (key.strip() or None) if key is not None else None
        suffix = f"+chars{max_chars}" if max_chars != DEFAULT_MAX_CHARS else ""
        self._model_id = f"{MODEL_ID_PREFIX}:{model}@{self.base.address}{self.base.path}{suffix}"
        self.spec = self._make_spec()
        self._dim_lock = threading.Lock()
        self._probe_lock = threading.Lock()
        self._local = threading.local()
        self._conns: list[http.client.HTTPConnection] = []
        self._conns_lock = threading.Lock()
        # Sockets of a garbage-collected embedder are closed, not left to a ResourceWarning.
        weakref.finalize(self, _close_all, self._conns, self._conns_lock)
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"ragloom/{__version__}",
        }
        if self._api_key:
            self._headers["Authorization"] = f"Bearer {self._api_key}"

    def _make_spec(self) -> str:
        """The registry spec that rebuilds this embedder (options only when not the default;
        never the key)."""
        opts = []
        defaults = (
            ("dim", self._explicit_dim, None),
            ("batch_size", self.batch_size, DEFAULT_REQUEST_BATCH),
            ("max_chars", self.max_chars, DEFAULT_MAX_CHARS),
            ("timeout", self.timeout, DEFAULT_TIMEOUT),
            ("max_retries", self.max_retries, DEFAULT_MAX_RETRIES),
            ("backoff", self.backoff, DEFAULT_BACKOFF),
        )
        for name, value, default in defaults:
            if value != default:
                opts.append(f"{name}={value!r}")  # repr: floats round-trip exactly
        frag = "#" + "&".join(opts) if opts else ""
        return f"openai:{self.model}@{self.base_url}{frag}"

    def __repr__(self) -> str:
        key = "set" if self._api_key else "none"
        return (
            f"OpenAICompatEmbedder(model={self.model!r}, base_url={self.base_url!r}, api_key={key})"
        )

    # -- identity ------------------------------------------------------------------------------
    @property
    def model_id(self) -> str:
        """``openai-compat:<model>@<host>:<port><path>[+chars<N>]``; no request is made."""
        return self._model_id

    @property
    def dim(self) -> int:
        """Vector dimension: given, or learnt from the first answer (one probe request if no
        embedding has been made yet)."""
        if self._dim is None:
            with self._probe_lock:
                if self._dim is None:
                    self._embed_batch([_PROBE_TEXT])
        assert self._dim is not None  # set by _check_width on every successful answer
        return self._dim

    @property
    def has_api_key(self) -> bool:
        """Whether requests carry an ``Authorization`` header."""
        return self._api_key is not None

    # -- embedding -----------------------------------------------------------------------------
    def embed_documents(
        self,
        texts: Sequence[str],
        *,
        batch_size: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> np.ndarray:
        """Embed ``texts`` in requests of ``batch_size`` inputs (default: the constructor's);
        see :meth:`ragloom.embed.base.Embedder.embed_documents`."""
        import numpy as np

        size = self.batch_size if batch_size is None else batch_size
        n = check_texts(texts, size)
        if n == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts: list[np.ndarray] = []
        for start in range(0, n, size):
            parts.append(self._embed_batch(texts[start : start + size]))
            if progress is not None:
                progress(min(start + size, n))
        out: np.ndarray = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query; see :meth:`ragloom.embed.base.Embedder.embed_query`."""
        if not isinstance(text, str):
            raise ConfigError(f"embed_query takes a string, got {type(text).__name__}")
        result: np.ndarray = self._embed_batch([text])[0]
        return result

    def close(self) -> None:
        """Close the keep-alive connections of every thread (they reopen on the next request)."""
        _close_all(self._conns, self._conns_lock)

    def _prepare(self, texts: Sequence[str]) -> list[str]:
        out: list[str] = []
        cut = 0
        for text in texts:
            if not isinstance(text, str):
                raise ConfigError(f"texts to embed must be strings, got {type(text).__name__}")
            if len(text) > self.max_chars:
                text = text[: self.max_chars]
                cut += 1
            # OpenAI rejects an empty input string; a space embeds as "no content" everywhere.
            out.append(text if text else " ")
        if cut:
            log.debug(
                "embedding inputs truncated",
                extra={"truncated": cut, "max_chars": self.max_chars},
            )
        return out

    def _embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        inputs = self._prepare(texts)
        payload = json.dumps(
            {"model": self.model, "input": inputs, "encoding_format": "float"},
            ensure_ascii=False,
        ).encode("utf-8")
        body = self._post(payload, len(inputs))
        return self._parse(body, len(inputs))

    # -- transport -----------------------------------------------------------------------------
    def _fail(self, what: str) -> EmbeddingError:
        text = f"embedding server {self.base_url} (model {self.model}): {what}"
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return EmbeddingError(_one_line(text, 2 * _MESSAGE_LIMIT))

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection and whether it was used before."""
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None and conn.sock is not None:
            return conn, True
        if conn is None:
            if self.base.scheme == "https":
                conn = http.client.HTTPSConnection(
                    self.base.host,
                    self.base.port,
                    timeout=self.timeout,
                    context=ssl.create_default_context(),
                )
            else:
                conn = http.client.HTTPConnection(
                    self.base.host, self.base.port, timeout=self.timeout
                )
            self._local.conn = conn
        with self._conns_lock:  # (re-)register: close() forgets the connections it closed
            if conn not in self._conns:
                self._conns.append(conn)
        return conn, False

    def _drop_connection(self) -> None:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()

    def _send(self, payload: bytes) -> tuple[int, Mapping[str, str], bytes]:
        """One exchange; a reused connection the server had closed is retried once at once."""
        for fresh_retry in (False, True):
            conn, reused = self._connection()
            try:
                conn.request("POST", self.base.endpoint, body=payload, headers=self._headers)
                resp = conn.getresponse()
                data = resp.read(MAX_RESPONSE_BYTES + 1)
                if len(data) > MAX_RESPONSE_BYTES:
                    self._drop_connection()
                    raise self._fail(f"answer larger than {MAX_RESPONSE_BYTES} bytes")
                headers = {k.lower(): v for k, v in resp.getheaders()}
                declared = headers.get("content-length", "")
                if declared.isdigit() and int(declared) != len(data):
                    # a read of a given size returns what came before the server hung up,
                    # without http.client's IncompleteRead: a cut-off answer, retried
                    self._drop_connection()
                    raise http.client.RemoteDisconnected(
                        f"answer cut off after {len(data)} of {declared} bytes"
                    )
                if resp.will_close:
                    self._drop_connection()
                return resp.status, headers, data
            except _STALE_CONNECTION:
                self._drop_connection()
                if reused and not fresh_retry:
                    continue
                raise
            except BaseException:
                self._drop_connection()
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _post(self, payload: bytes, n_inputs: int) -> bytes:
        attempt = 0
        while True:
            started = time.perf_counter()
            wait: float | None = None
            try:
                status, headers, data = self._send(payload)
            except ConnectionRefusedError:
                raise self._fail(
                    f"connection refused (is the server running at {self.base_url}?)"
                ) from None
            except TimeoutError:
                raise self._fail(f"no answer within {self.timeout:g} s (timeout)") from None
            except _STALE_CONNECTION as exc:
                if attempt >= self.max_retries:
                    raise self._fail(
                        f"connection dropped ({type(exc).__name__}) after {attempt + 1} attempts"
                    ) from None
                reason = type(exc).__name__
            except ssl.SSLError as exc:
                raise self._fail(f"TLS error: {exc}") from None
            except (OSError, http.client.HTTPException) as exc:
                raise self._fail(f"cannot reach the server: {exc}") from None
            else:
                ms = (time.perf_counter() - started) * 1000.0
                log.debug(
                    "embedding request",
                    extra={
                        "host": self.base.address,
                        "status": status,
                        "inputs": n_inputs,
                        "ms": round(ms, 2),
                    },
                )
                if 200 <= status < 300:
                    return data
                if status not in _RETRY_STATUSES or attempt >= self.max_retries:
                    raise self._fail(self._status_text(status, data, attempt))
                reason = f"HTTP {status}"
                wait = _retry_after(headers.get("retry-after"))
            if wait is None:
                wait = self.backoff * (2**attempt)
            wait = min(wait, MAX_WAIT)
            attempt += 1
            log.warning(
                "embedding request failed, retrying",
                extra={
                    "host": self.base.address,
                    "reason": reason,
                    "attempt": attempt,
                    "wait_s": round(wait, 3),
                },
            )
            time.sleep(wait)

    def _status_text(self, status: int, data: bytes, attempt: int) -> str:
        message = _one_line(_server_message(data)) or "(empty body)"
        text = f"HTTP {status}: {message}"
        if status in (401, 403):
            text += f" (API key from {' or '.join(API_KEY_ENV)})"
        elif status == 404 and "model" not in message.lower():
            text += f" (is {self.base_url} the API root, e.g. ending in /v1?)"
        if attempt:
            text += f" after {attempt + 1} attempts"
        return text

    # -- decoding ------------------------------------------------------------------------------
    def _parse(self, body: bytes, n: int) -> np.ndarray:
        import numpy as np

        try:
            obj: Any = json.loads(body)
        except ValueError:
            raise self._fail(
                f"malformed answer: not JSON ({_one_line(body[:80].decode('utf-8', 'replace'))!r})"
            ) from None
        data = obj.get("data") if isinstance(obj, dict) else None
        if not isinstance(data, list):
            raise self._fail("malformed answer: no 'data' list")
        if len(data) != n:
            raise self._fail(f"malformed answer: {len(data)} embeddings for {n} inputs")
        if not all(isinstance(item, dict) for item in data):
            raise self._fail("malformed answer: 'data' items are not objects")
        indexes = [item.get("index") for item in data]
        if all(i is None for i in indexes):
            order = list(range(n))  # no indexes at all: answer order is input order
        elif all(isinstance(i, int) and not isinstance(i, bool) for i in indexes):
            order = [int(i) for i in indexes]
            if sorted(order) != list(range(n)):
                raise self._fail(
                    f"malformed answer: indexes {sorted(order)[:8]} are not 0..{n - 1}"
                )
        else:
            raise self._fail("malformed answer: 'index' missing or not an integer")
        rows: list[Any] = [None] * n
        for pos, item in zip(order, data, strict=True):
            rows[pos] = self._vector(item.get("embedding"))
        width = len(rows[0])
        if any(len(r) != width for r in rows):
            raise self._fail("malformed answer: vectors of different lengths in one answer")
        try:  # numpy checks the elements (a per-float Python check cost ~20 % of a decode):
            # numbers give a numeric array, while strings ("0.1") or booleans would be
            # converted by a float64 cast, so the kind is checked before casting
            raw = np.asarray(rows)
        except (TypeError, ValueError):
            raise self._fail("malformed answer: an 'embedding' holds non-numbers") from None
        if raw.dtype.kind not in "fiu":
            raise self._fail("malformed answer: an 'embedding' holds non-numbers")
        mat = raw.astype(np.float64, copy=False)
        if mat.ndim != 2:
            raise self._fail("malformed answer: an 'embedding' is not a flat list of numbers")
        self._check_width(width)
        if not np.isfinite(mat).all():
            raise self._fail("malformed answer: NaN or infinite values")
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        if (norms == 0.0).any():
            raise self._fail("malformed answer: an all-zero vector")
        out: np.ndarray = (mat / norms).astype(np.float32)
        return out

    def _vector(self, emb: Any) -> Any:
        import numpy as np

        if isinstance(emb, str):  # base64 little-endian float32 (servers ignoring "float")
            try:
                raw = base64.b64decode(emb, validate=True)
            except (binascii.Error, ValueError):
                raise self._fail("malformed answer: bad base64 embedding") from None
            if not raw or len(raw) % 4:
                raise self._fail("malformed answer: base64 embedding is not float32")
            return np.frombuffer(raw, dtype="<f4").astype(np.float64)
        if not isinstance(emb, list) or not emb:
            raise self._fail("malformed answer: an 'embedding' is not a non-empty list")
        return emb

    def _check_width(self, width: int) -> None:
        with self._dim_lock:
            if self._dim is None:
                self._dim = width
                return
            if width == self._dim:
                return
        given = " (dim given)" if self._explicit_dim is not None else ""
        raise self._fail(
            f"returned {width}-d vectors but this embedder is {self._dim}-d{given}: the model "
            "behind the server changed; re-index with the new model"
        )
