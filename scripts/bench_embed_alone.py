"""What embedding every text alone costs (docs/embedding.md, "A vector depends a little on its
batch").

    python scripts/bench_embed_alone.py [--texts 400] [--repeats 3]

Embeds the first ``--texts`` top-level functions and classes of the standard library (sorted
module paths, at most 1,500 characters each) with the shipped model, alternating every text
alone (``OnnxEmbedder.alone``, the default for the int8 model) and length-sorted batches of 32,
``--repeats`` times each, and prints the median seconds, chunks/s and their ratio. Both ways run
in one process, interleaved, so a busy machine slows both alike.
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
import sysconfig
import time
from pathlib import Path

from ragloom.embed.onnx import OnnxEmbedder
from ragloom.embed.registry import load_embedder


def stdlib_texts(n: int, max_chars: int = 1500) -> list[str]:
    """The first ``n`` top-level functions and classes of the standard library's modules."""
    texts: list[str] = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        source = path.read_text(encoding="utf-8", errors="replace")
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                segment = ast.get_source_segment(source, node)
                if segment:
                    texts.append(segment[:max_chars])
                    if len(texts) == n:
                        return texts
    return texts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--texts", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    texts = stdlib_texts(args.texts)
    emb = load_embedder(None)
    if not isinstance(emb, OnnxEmbedder):
        print("the default embedder is not the shipped ONNX model", file=sys.stderr)
        return 2
    emb.embed_documents(texts[:8])  # load the model
    seconds: dict[str, list[float]] = {"alone": [], "batches of 32": []}
    for _ in range(args.repeats):
        for way in seconds:
            # the benchmark's switch only: the model's own setting is fixed with its key
            emb._alone = way == "alone"
            t0 = time.perf_counter()
            emb.embed_documents(texts, batch_size=32)
            seconds[way].append(time.perf_counter() - t0)
    mean_chars = statistics.fmean(len(t) for t in texts)
    print(f"{len(texts)} texts, mean {mean_chars:.0f} characters, median of {args.repeats}")
    for way, runs in seconds.items():
        median = statistics.median(runs)
        print(f"{way}: {median:.2f} s, {len(texts) / median:.1f} chunks/s")
    ratio = statistics.median(seconds["alone"]) / statistics.median(seconds["batches of 32"])
    print(f"alone / batches: {ratio:.3f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
