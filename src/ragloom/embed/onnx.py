"""Sentence embeddings with onnxruntime + tokenizers: no torch, no network.

A model folder holds ``model.onnx`` (a transformer whose output is ``last_hidden_state``),
``tokenizer.json`` (a Hugging Face *tokenizers* file) and, for models ragloom ships or exports,
``ragloom_model.json`` (model id, dimension, sequence length, pooling, variant and the sha256 of
``model.onnx``; written by ``scripts/export_model.py``). Pooling and normalisation run in numpy.

A dynamically quantised model (a variant naming ``int8``, as the shipped one) scales each
MatMul's activations by the range of its whole input: a text embedded among others would get a
vector that depends a little on the others (cosine 0.980-0.998, docs/embedding.md). Such a model
embeds every text alone (:attr:`OnnxEmbedder.alone`), so a vector is a function of its text and
the model only, whatever was indexed with it; its ``model_id`` says so (``+alone``), and no
index or vector cache mixes its vectors with the batch-dependent ones of earlier versions.

onnxruntime, tokenizers and numpy are imported on first use, not when this module is imported,
so the CLI starts fast; the model file is hashed and loaded on the first ``embed_*`` call.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragloom.embed.base import DEFAULT_BATCH_SIZE, ProgressCallback, check_texts
from ragloom.errors import ConfigError, EmbeddingError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "DEFAULT_MAX_SEQ_LENGTH",
    "META_FILE",
    "MODEL_FILE",
    "QUANTISED_VARIANT",
    "TOKENIZER_FILE",
    "ModelMeta",
    "OnnxEmbedder",
    "read_model_meta",
    "sha256_file",
]

QUANTISED_VARIANT = "int8"
"""A model whose ``variant`` names this is dynamically quantised: it embeds every text alone."""

FINGERPRINT_BYTES = 1 << 20
"""Bytes read from each end of ``model.onnx`` for :func:`folder_fingerprint`."""


def folder_fingerprint(model_dir: Path) -> str:
    """12 hex digits identifying a model folder without ``ragloom_model.json`` by what it
    holds: the whole ``tokenizer.json``, and ``model.onnx``'s size and its first and last
    MiB (two exports differ there; reading a 90 MB graph whole for every open would not pay).
    A user trial had two different models in folders both named ``model`` embed as one: the
    index switched between them without re-embedding, and the vector cache gave one model's
    vectors to the other."""
    digest = hashlib.sha256()
    for name in (TOKENIZER_FILE, MODEL_FILE):
        path = model_dir / name
        try:
            size = path.stat().st_size
            with open(path, "rb") as fh:
                if name == TOKENIZER_FILE:
                    digest.update(fh.read())
                else:
                    digest.update(str(size).encode())
                    digest.update(fh.read(FINGERPRINT_BYTES))
                    fh.seek(max(0, size - FINGERPRINT_BYTES))
                    digest.update(fh.read(FINGERPRINT_BYTES))
        except OSError:
            digest.update(b"missing " + name.encode())
    return digest.hexdigest()[:12]


MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
META_FILE = "ragloom_model.json"

DEFAULT_MAX_SEQ_LENGTH = 256
"""Token limit when a folder has no ``ragloom_model.json``: all-MiniLM-L6-v2's own
``max_seq_length`` (its sentence_bert_config.json); longer inputs are truncated."""

_MIN_SEQ_LENGTH = 2
"""[CLS] and [SEP]: a shorter limit leaves no room for any text token."""

_POOLINGS = ("mean", "cls")
"""Pooling modes understood here (sentence-transformers' names)."""

_NORM_EPS = 1e-12
"""Floor of the L2 norm before dividing (torch.nn.functional.normalize's default eps)."""

_MASK_EPS = 1e-9
"""Floor of the token count in mean pooling (sentence-transformers' clamp value)."""


@dataclass(frozen=True, slots=True)
class ModelMeta:
    """What ``ragloom_model.json`` records about an exported model."""

    model_id: str
    dim: int
    max_seq_length: int
    pooling: str
    normalize: bool
    variant: str
    sha256: str | None


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_model_meta(model_dir: Path) -> ModelMeta | None:
    """Parse ``model_dir/ragloom_model.json``; ``None`` when the file does not exist.

    Raises :class:`EmbeddingError` when it exists but is unreadable or malformed.
    """
    path = model_dir / META_FILE
    if not path.is_file():
        return None
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EmbeddingError(f"cannot read {path}: {exc}") from exc
    try:
        if not isinstance(raw, dict):
            raise TypeError("not a JSON object")
        meta = ModelMeta(
            model_id=str(raw["model_id"]),
            dim=int(raw["dim"]),
            max_seq_length=int(raw["max_seq_length"]),
            pooling=str(raw.get("pooling", "mean")),
            normalize=bool(raw.get("normalize", True)),
            variant=str(raw["variant"]),
            sha256=str(raw["sha256"]).lower() if raw.get("sha256") else None,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise EmbeddingError(f"malformed {path}: {exc!r}") from exc
    if meta.dim < 1 or meta.max_seq_length < _MIN_SEQ_LENGTH or meta.pooling not in _POOLINGS:
        raise EmbeddingError(
            f"malformed {path}: need dim >= 1, max_seq_length >= {_MIN_SEQ_LENGTH} and "
            f"pooling in {_POOLINGS}, got {meta.dim}, {meta.max_seq_length}, {meta.pooling!r}"
        )
    return meta


IDLE_LOAD_MARGIN = 0.5
"""A lone query takes every core while the *other* processes use less than the cores less one
(for this query) less this margin: less than half a core on 2 cores."""
_LOAD_TTL_S = 0.5
_LOAD_WINDOW_S = 60.0


def _machine_busy_s() -> float | None:
    """CPU seconds the whole machine has spent busy since boot (Linux ``/proc/stat``), None
    where there is no such file."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()[1:9]
        ticks = [int(x) for x in fields]
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
        return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class _MachineLoad:
    """Whether the machine has a core to spare for this process now: the CPU the other
    processes used since the last look (at most every half second), which is the machine's
    busy time (``/proc/stat``) less this process's own. Where there is no ``/proc/stat`` the
    one-minute load average stands in, less this process's own CPU use averaged over the same
    minute (else a loop of queries would see its own load)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._when = -1.0
        self._free = False
        self._t = time.monotonic()
        self._cpu = time.process_time()
        self._busy = _machine_busy_s()
        self._own = 0.0
        """This process's CPU use, in cores, averaged over a minute (the load-average way)."""

    def core_free(self) -> bool:
        now = time.monotonic()
        if now - self._when < _LOAD_TTL_S:
            return self._free
        with self._lock:
            if now - self._when < _LOAD_TTL_S:
                return self._free
            cpu, busy = time.process_time(), _machine_busy_s()
            dt = now - self._t
            others: float | None = None
            if busy is not None and self._busy is not None and dt > 0:
                others = max(0.0, (busy - self._busy) - (cpu - self._cpu)) / dt
            elif dt > 0:
                rate = (cpu - self._cpu) / dt
                self._own += (1.0 - math.exp(-dt / _LOAD_WINDOW_S)) * (rate - self._own)
                try:
                    others = os.getloadavg()[0] - self._own
                except (OSError, AttributeError):  # neither (Windows): never adaptive
                    others = None
            self._t, self._cpu, self._busy = now, cpu, busy
            cores = os.cpu_count() or 1
            self._free = others is not None and others < cores - 1 - IDLE_LOAD_MARGIN
            self._when = now
            return self._free


_MACHINE = _MachineLoad()


_SHARED_BY = [1]
"""Processes of this program sharing the machine's cores (:func:`share_cores`)."""


def share_cores(processes: int) -> None:
    """Declare this process one of ``processes`` that share the machine's cores (``ragloom
    serve http --workers N``): ONNX sessions made from now on use the cores divided among them
    (at least one intra-op thread each) and never spin, and a lone query no longer takes every
    core. Two workers that each ran a spinning two-thread session took the CPU from each other:
    at 100k chunks on 2 cores, 74 against 91 answers/s (docs/serving.md "Workers")."""
    _SHARED_BY[0] = max(1, int(processes))


def _a_core_is_free() -> bool:
    """Whether this machine has a core to spare for this process now (:class:`_MachineLoad`;
    never while the cores are shared among worker processes)."""
    return _SHARED_BY[0] == 1 and _MACHINE.core_free()


class OnnxEmbedder:
    """Embed with an ONNX transformer on the CPU (see the module docstring for the folder).

    ``threads`` bounds onnxruntime's intra-op threads (default: one per physical core);
    ``spin`` lets those threads spin briefly between operators instead of sleeping: a query
    then embeds about 30 % faster and batches as fast (docs/embedding.md); pass ``False`` on a
    machine where idle cores must stay idle;
    ``query_threads`` (default 1) runs :meth:`embed_query` on a session of its own with that
    many intra-op threads and no spinning, created on the first query: a spinning worker on the
    other core slowed everything a search does after its embedding 1.5-3x on a busy 2-core
    machine, and concurrent queries of a server parallelise across queries anyway
    (docs/embedding.md, "Query session"); None embeds queries on the batch session;
    ``adaptive`` (default on) still embeds a query on the batch session when the machine has a
    core to spare (the other processes' load below the cores less one and a half) and no other
    query is being embedded in this process: on an idle machine every core and spinning make
    a lone query ~1.3 ms faster (docs/embedding.md, "Adaptive query session"), and the vector
    is the same either way (both sessions give identical vectors for one text);
    ``max_seq_length`` overrides the folder's token limit (changing it changes ``model_id``,
    because long texts then embed differently). Texts are tokenised together, sorted by token
    count and run in batches of similar length (little padding), or one by one when the model
    is dynamically quantised (:attr:`alone`); results come back in input order. Thread-safe:
    one session is shared and onnxruntime sessions may run concurrently.
    """

    def __init__(
        self,
        model_dir: Path,
        *,
        threads: int | None = None,
        max_seq_length: int | None = None,
        spin: bool = True,
        query_threads: int | None = 1,
        adaptive: bool = True,
    ) -> None:
        self.model_dir = Path(model_dir)
        self.spec = str(self.model_dir)
        for name in (MODEL_FILE, TOKENIZER_FILE):
            if not (self.model_dir / name).is_file():
                raise EmbeddingError(f"embedding model folder {self.model_dir} has no {name}")
        if threads is not None and (isinstance(threads, bool) or threads < 1):
            raise ConfigError(f"threads must be a positive integer or None, got {threads!r}")
        if query_threads is not None and (isinstance(query_threads, bool) or query_threads < 1):
            raise ConfigError(
                f"query_threads must be a positive integer or None, got {query_threads!r}"
            )
        self.query_threads = query_threads
        if max_seq_length is not None and (
            isinstance(max_seq_length, bool) or max_seq_length < _MIN_SEQ_LENGTH
        ):
            raise ConfigError(
                f"max_seq_length must be an integer >= {_MIN_SEQ_LENGTH}, got {max_seq_length!r}"
            )
        self.meta = read_model_meta(self.model_dir)
        default_len = self.meta.max_seq_length if self.meta else DEFAULT_MAX_SEQ_LENGTH
        self.max_seq_length = max_seq_length if max_seq_length is not None else default_len
        self.threads = threads
        if not isinstance(spin, bool):
            raise ConfigError(f"spin must be True or False, got {spin!r}")
        self.spin = spin
        self._pooling = self.meta.pooling if self.meta else "mean"
        self._normalize = self.meta.normalize if self.meta else True
        self._dim: int | None = self.meta.dim if self.meta else None
        if self.meta is not None:
            base = f"{self.meta.model_id}@{self.meta.variant}"
        else:  # the folder's name and what its files hold: two models in folders both named
            # `onnx/` (the usual export layout) are two models, not one
            base = f"{self.model_dir.resolve().name}@onnx+{folder_fingerprint(self.model_dir)}"
        suffix = f"+seq{self.max_seq_length}" if self.max_seq_length != default_len else ""
        self._alone = self.meta is not None and QUANTISED_VARIANT in self.meta.variant
        self._model_id = base + suffix + ("+alone" if self._alone else "")
        if not isinstance(adaptive, bool):
            raise ConfigError(f"adaptive must be True or False, got {adaptive!r}")
        self.adaptive = adaptive
        self._queries_running = 0
        self._lock = threading.Lock()
        self._session: Any = None
        self._query_session: Any = None
        self._verified = False
        self._tokenizer: Any = None
        self._input_names: frozenset[str] = frozenset()
        self._output_name = ""

    def __repr__(self) -> str:
        return f"OnnxEmbedder({str(self.model_dir)!r}, model_id={self._model_id!r})"

    # -- identity ------------------------------------------------------------------------------
    @property
    def model_id(self) -> str:
        """``<model id>@<variant>``, e.g.
        ``sentence-transformers/all-MiniLM-L6-v2@onnx-int8+alone`` (``+seq<N>`` appended when
        ``max_seq_length`` overrides the folder's value, ``+alone`` when every text is embedded
        alone)."""
        return self._model_id

    @property
    def alone(self) -> bool:
        """Every text is embedded alone (a dynamically quantised model: see the module
        docstring). Fixed with the model, as the embedding key says it. A folder without
        ``ragloom_model.json`` is embedded in batches: its variant is unknown."""
        return self._alone

    @property
    def dim(self) -> int:
        """Vector dimension (from ``ragloom_model.json``; else the model's output shape)."""
        if self._dim is None:
            self._load()
            if self._dim is None:  # symbolic output width: run the model once to learn it
                self._dim = int(self._run_batch([[101, 102]])[0].shape[-1])
        return self._dim

    @property
    def loaded(self) -> bool:
        """Whether a session and the tokenizer have been created yet."""
        return self._session is not None or self._query_session is not None

    # -- loading -------------------------------------------------------------------------------
    def _load(self, query: bool = False) -> None:
        """Create the tokenizer and the batch session (``query``: the query session)."""
        query = query and self.query_threads is not None
        if (self._query_session if query else self._session) is not None:
            return
        with self._lock:
            if (self._query_session if query else self._session) is not None:
                return
            model_path = self.model_dir / MODEL_FILE
            try:
                data = model_path.read_bytes()
            except OSError as exc:
                raise EmbeddingError(f"cannot read {model_path}: {exc}") from exc
            if not self._verified and self.meta is not None and self.meta.sha256 is not None:
                actual = hashlib.sha256(data).hexdigest()
                if actual != self.meta.sha256:
                    raise EmbeddingError(
                        f"{model_path} is corrupt or was replaced: its sha256 is {actual} but "
                        f"{META_FILE} records {self.meta.sha256}; reinstall ragloom (or re-run "
                        "scripts/export_model.py for a self-exported model)"
                    )
            self._verified = True
            tokenizer = self._tokenizer or self._make_tokenizer()
            if query:
                session = self._make_session(data, model_path, self.query_threads, spin=False)
            else:
                session = self._make_session(data, model_path, self.threads, spin=self.spin)
            self._input_names = frozenset(i.name for i in session.get_inputs())
            missing = {"input_ids", "attention_mask"} - self._input_names
            if missing:
                raise EmbeddingError(f"{model_path} lacks the inputs {sorted(missing)}")
            output = session.get_outputs()[0]
            self._output_name = output.name
            width = output.shape[-1] if output.shape else None
            if isinstance(width, int):
                if self._dim is not None and width != self._dim:
                    raise EmbeddingError(
                        f"{model_path} outputs {width}-d vectors but {META_FILE} says {self._dim}"
                    )
                self._dim = width
            self._tokenizer = tokenizer
            if query:
                self._query_session = session
            else:
                self._session = session

    def _make_tokenizer(self) -> Any:
        from tokenizers import Tokenizer

        path = self.model_dir / TOKENIZER_FILE
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises plain Exception subclasses
            raise EmbeddingError(f"cannot load tokenizer {path}: {exc}") from exc
        tokenizer.no_padding()  # we pad per batch, to that batch's longest text
        tokenizer.enable_truncation(max_length=self.max_seq_length)
        return tokenizer

    def _make_session(
        self, data: bytes, model_path: Path, threads: int | None, *, spin: bool
    ) -> Any:
        import onnxruntime as ort

        if _SHARED_BY[0] > 1:  # a worker among several: its share of the cores, no spinning
            share = max(1, (os.cpu_count() or 1) // _SHARED_BY[0])
            threads, spin = min(threads or share, share), False
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.intra_op_num_threads = threads or 0  # 0: onnxruntime's default, physical cores
        so.inter_op_num_threads = 1  # sequential graph: a second pool would only idle
        # Shapes change with every batch, so memory patterns (which are planned per shape) are
        # never reused and only hold memory; the arena stays on (it reuses the largest batch's
        # buffers) and batches run longest-first, so it grows once. Measured in embedding.md.
        so.enable_mem_pattern = False
        # Spinning workers pick up the next operator without a wake-up: a one-line query spends
        # much of its ~1.5 ms in such hand-offs (p50 1.69 -> 1.12-1.27 ms), while batches run
        # at the same rate (166.5 vs 166.6 chunks/s). Measured in embedding.md.
        so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        # AVX2 machines without VNNI: use the non-saturating u8s8 kernel for the int8 model
        # (no effect on VNNI / AVX512 machines, nor on the fp32 model).
        so.add_session_config_entry("session.x64quantprecision", "1")
        so.log_severity_level = 3  # errors only: onnxruntime warns about unused initializers
        try:
            return ort.InferenceSession(data, sess_options=so, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph/... types
            raise EmbeddingError(f"cannot load ONNX model {model_path}: {exc}") from exc

    # -- inference -----------------------------------------------------------------------------
    def _run_batch(self, batch_ids: Sequence[Sequence[int]], session: Any = None) -> np.ndarray:
        """Pool and (optionally) normalise one batch of token id lists (on the batch session
        unless ``session`` is given)."""
        import numpy as np

        rows = len(batch_ids)
        width = max(len(ids) for ids in batch_ids)
        input_ids = np.zeros((rows, width), dtype=np.int64)
        mask = np.zeros((rows, width), dtype=np.int64)
        for r, ids in enumerate(batch_ids):
            input_ids[r, : len(ids)] = ids
            mask[r, : len(ids)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        try:
            out = (session or self._session).run([self._output_name], feeds)[0]
        except Exception as exc:
            raise EmbeddingError(f"embedding model {self._model_id} failed: {exc}") from exc
        out = np.asarray(out, dtype=np.float32)
        if out.ndim == 3:
            if self._pooling == "cls":
                pooled = out[:, 0, :]
            else:
                maskf = mask.astype(np.float32)
                summed = np.einsum("bld,bl->bd", out, maskf)
                counts = np.maximum(maskf.sum(axis=1, keepdims=True), _MASK_EPS)
                pooled = summed / counts
        elif out.ndim == 2:  # the graph already pools
            pooled = out
        else:
            raise EmbeddingError(f"embedding model {self._model_id} output has shape {out.shape}")
        if self._normalize:
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            pooled = pooled / np.maximum(norms, _NORM_EPS)
        result: np.ndarray = pooled.astype(np.float32, copy=False)
        return result

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text after truncation (special tokens included)."""
        self._load()
        try:
            if len(texts) == 1:  # a query: no hand-off to the tokenizer's thread pool
                encodings = [self._tokenizer.encode(texts[0], add_special_tokens=True)]
            else:
                encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=True)
        except Exception as exc:
            raise EmbeddingError(f"tokenisation failed: {exc}") from exc
        return [list(e.ids) for e in encodings]

    def embed_documents(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        progress: ProgressCallback | None = None,
    ) -> np.ndarray:
        """Embed texts in length-sorted batches; see :meth:`Embedder.embed_documents`."""
        import numpy as np

        n = check_texts(texts, batch_size)
        if n == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        token_ids = self.tokenize(texts)
        # Longest first: the arena grows to the largest batch once and is reused after.
        order = sorted(range(n), key=lambda i: -len(token_ids[i]))
        out: np.ndarray | None = None
        done = 0
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            if self._alone:  # one text a run: no other text (nor padding) in the quantisation
                vecs = np.vstack([self._run_batch([token_ids[i]]) for i in idx])
            else:
                vecs = self._run_batch([token_ids[i] for i in idx])
            if out is None:
                out = np.empty((n, vecs.shape[1]), dtype=np.float32)
                if self._dim is None:
                    self._dim = int(vecs.shape[1])
            out[idx] = vecs
            done += len(idx)
            if progress is not None:
                progress(done)
        assert out is not None  # n > 0, so at least one batch ran
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query (on the query session, see the class docstring); see
        :meth:`Embedder.embed_query`."""
        with self._lock:
            alone = self._queries_running == 0
            self._queries_running += 1
        try:
            if self.query_threads is None or (alone and self.adaptive and _a_core_is_free()):
                result: np.ndarray = self.embed_documents([text])[0]
                return result
            return self._embed_on_query_session(text)
        finally:
            with self._lock:
                self._queries_running -= 1

    def _embed_on_query_session(self, text: str) -> np.ndarray:
        check_texts([text], DEFAULT_BATCH_SIZE)
        self._load(query=True)
        try:
            encoding = self._tokenizer.encode(text, add_special_tokens=True)
        except Exception as exc:
            raise EmbeddingError(f"tokenisation failed: {exc}") from exc
        vec: np.ndarray = self._run_batch([list(encoding.ids)], self._query_session)[0]
        if self._dim is None:
            self._dim = int(vec.shape[0])
        return vec
