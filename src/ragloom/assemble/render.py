"""Output formats with source attribution (tamma phase 6 "Format Examples").

Every part says where it comes from: source kind, path, line ranges, symbol, chunk kind and
language, and (optionally) its fused score. A whole context is ``head + sep.join(blocks) +
tail``, so each part's block can be counted on its own; an empty context renders as ``""``.

* ``xml`` (default, tamma: "recommended for Claude"): ``<retrieved_context>`` with one
  ``<chunk ...>`` element per part; the code is not escaped (it is prompt text, and escaping
  would change it and cost tokens).
* ``markdown``: ``### path:start-end`` headers and language fences, parts separated by ``---``.
* ``plain``: a ``==> path:lines <==`` header line above each part.
* ``json``: ``{"context": [{...}, ...]}``, one object per line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from xml.sax.saxutils import quoteattr as _sax_quoteattr

from ragloom.assemble.budget import Format

__all__ = ["BlockMeta", "format_ranges", "frame", "render", "render_block"]

_FRAMES: dict[str, tuple[str, str, str]] = {
    # format: (head, separator, tail)
    "xml": ("<retrieved_context>\n", "\n", "\n</retrieved_context>"),
    "markdown": ("", "\n\n---\n\n", ""),  # tamma formatAsMarkdown joins with '\n\n---\n\n'
    "plain": ("", "\n\n", ""),
    "json": ('{"context": [\n', ",\n", "\n]}"),
}
_BACKTICKS = re.compile(r"`{3,}")

quoteattr = lru_cache(maxsize=4096)(_sax_quoteattr)
"""``xml.sax.saxutils.quoteattr``, memoised: an assembly renders each part's header several
times (trimming, stitching) with the same path, symbol, kind and language."""


@dataclass(frozen=True, slots=True)
class BlockMeta:
    """Attribution shown with a part."""

    source: str
    path: str
    ranges: Sequence[tuple[int, int]]
    symbol: str
    kind: str
    language: str
    score: float
    relation: str | None = None
    """``callee`` or ``caller`` for a definition structural context added."""
    related_to: str | None = None
    """With ``relation``: the symbol of the selected code it relates to."""


def format_ranges(ranges: Sequence[tuple[int, int]]) -> str:
    """``10-20,31-40`` (a one-line range is just ``10``)."""
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def _score(score: float) -> str:
    return format(score, ".4g")


def frame(fmt: Format) -> tuple[str, str, str]:
    """``(head, separator, tail)`` of a format."""
    return _FRAMES[fmt]


def render_block(fmt: Format, meta: BlockMeta, text: str, include_scores: bool) -> str:
    """One part in format ``fmt``."""
    lines = format_ranges(meta.ranges)
    if fmt == "xml":
        attrs = [
            f"source={quoteattr(meta.source)}",
            f"path={quoteattr(meta.path)}",
            f"lines={quoteattr(lines)}",
        ]
        if meta.symbol:
            attrs.append(f"symbol={quoteattr(meta.symbol)}")
        attrs.append(f"kind={quoteattr(meta.kind)}")
        if meta.language:
            attrs.append(f"language={quoteattr(meta.language)}")
        if include_scores:
            attrs.append(f"score={quoteattr(_score(meta.score))}")
        if meta.relation:
            attrs.append(f"relation={quoteattr(meta.relation)}")
            attrs.append(f"of={quoteattr(meta.related_to or '')}")
        return f"<chunk {' '.join(attrs)}>\n{text}\n</chunk>"
    if fmt == "markdown":
        head = f"### {meta.path}:{lines}"
        what = f"{meta.kind} `{meta.symbol}`" if meta.symbol else meta.kind
        if meta.relation:
            what = f"{meta.relation} of `{meta.related_to}`: {what}"
        head += f" ({what}, {meta.source}"
        head += f", score {_score(meta.score)})" if include_scores else ")"
        longest = max((len(m) for m in _BACKTICKS.findall(text)), default=2)
        fence = "`" * max(3, longest + 1)
        return f"{head}\n\n{fence}{meta.language}\n{text}\n{fence}"
    if fmt == "plain":
        head = f"==> {meta.path}:{lines} {meta.kind}"
        if meta.symbol:
            head += f" {meta.symbol}"
        head += f" [{meta.source}"
        if meta.relation:
            head += f", {meta.relation} of {meta.related_to}"
        head += f", score {_score(meta.score)}] <==" if include_scores else "] <=="
        return f"{head}\n{text}"
    obj: dict[str, object] = {
        "source": meta.source,
        "path": meta.path,
        "ranges": [[a, b] for a, b in meta.ranges],
        "symbol": meta.symbol,
        "kind": meta.kind,
        "language": meta.language,
    }
    if include_scores:
        obj["score"] = round(meta.score, 6)
    if meta.relation:
        obj["relation"] = meta.relation
        obj["of"] = meta.related_to
    obj["text"] = text
    return json.dumps(obj, ensure_ascii=False)


EMPTY_JSON = '{"context": []}'
"""The JSON format's context without parts: still a JSON document."""


def render(fmt: Format, blocks: Sequence[str]) -> str:
    """Whole context from part blocks; without any, ``""`` (:data:`EMPTY_JSON` in JSON, so a
    script parsing it never meets an empty string)."""
    if not blocks:
        return EMPTY_JSON if fmt == "json" else ""
    head, sep, tail = _FRAMES[fmt]
    return head + sep.join(blocks) + tail
