"""A document cut into units (sentences, lines, code blocks, headings) with boundary ranks.

Steps 1 to 3 of the ``sentence`` strategy of :mod:`gitkb.core.chunking`: the units and their
ranks, the heading paths, and long units cut into lines, then at word-piece boundaries.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field

from gitkb.core.chunk_config import check_config
from gitkb.core.markdown_lines import MarkdownLines, scan_markdown
from gitkb.core.models import ChunkConfig
from gitkb.core.tokenizer import count_spans

# Boundary ranks: a chunk prefers to end at the highest one; never right after a heading if it can help it.
AFTER_HEADING, PIECE, LINE, PARA, HEADING = -1, 0, 1, 2, 3

# One regex per end mark: a literal first char lets the regex engine skip ahead fast.
_SENTENCE_RES = tuple(re.compile(re.escape(p) + r"[\"'\u2019\u201d)\]*_]*\s+") for p in ".!?")
_PARA_RE = re.compile(r"\n[^\S\n]*\n\s*")
_LINE_RE = re.compile(r"\n\s*")


@dataclass
class DocUnits:
    text: str
    config: ChunkConfig
    starts: list[int] = field(default_factory=lambda: [0])  # unit k is text[starts[k]:starts[k+1]]
    ranks: list[int] = field(default_factory=lambda: [LINE])  # boundary rank before unit k
    counts: list[int] = field(default_factory=list)
    multiline: set[int] = field(default_factory=set)  # units that are code blocks or front matter
    heading_at: list[int] = field(default_factory=list)  # heading starts, ascending
    heading_paths: list[tuple[str, ...]] = field(default_factory=list)  # the path from each heading on


def prepare_units(text: str, config: ChunkConfig, markdown: bool) -> DocUnits:
    """Units with their boundary ranks, and the heading paths; counts come later."""
    check_config(config)
    doc = DocUnits(text, config)
    md = scan_markdown(text) if markdown and text else MarkdownLines()
    stack: list[tuple[int, str]] = []
    for start, _end, level, title in md.headings:
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        doc.heading_at.append(start)
        doc.heading_paths.append(tuple(t for _, t in stack if t))
    if config.strategy == "one_chunk_per_doc" or not text:
        return doc
    n = len(text)
    ends = {m.end() for m in _LINE_RE.finditer(text)}
    for pattern in _SENTENCE_RES:
        ends.update([m.end() for m in pattern.finditer(text)])
    ends.discard(n)
    ends.discard(0)
    starts = sorted(ends)
    starts.insert(0, 0)
    if md.headings or md.blocks:
        starts = _merge_regions(text, starts, sorted([(s, e) for s, e, _, _ in md.headings] + md.blocks))
    ranks = [LINE] * len(starts)
    for m in _PARA_RE.finditer(text):
        k = bisect_right(starts, m.end()) - 1
        if starts[k] == m.end():
            ranks[k] = PARA
    for s, _e in md.blocks:
        k = bisect_right(starts, s) - 1
        doc.multiline.add(k)
        if k + 1 < len(starts):
            ranks[k + 1] = PARA
    for s in doc.heading_at:
        k = bisect_right(starts, s) - 1
        ranks[k] = HEADING
        if k + 1 < len(starts) and ranks[k + 1] != HEADING:
            ranks[k + 1] = AFTER_HEADING
    doc.starts, doc.ranks = starts, ranks
    return doc


def _merge_regions(text: str, starts: list[int], regions: list[tuple[int, int]]) -> list[int]:
    """Boundaries without those inside a heading or block; each region starts a unit of its own."""
    out: list[int] = []
    r = 0
    for b in starts:
        while r < len(regions) and regions[r][1] <= b:  # regions that end before b: add their start
            s = regions[r][0]
            if out[-1] < s and text[s - 1].isspace():
                out.append(s)
            r += 1
        if r < len(regions) and regions[r][0] < b:  # inside region r
            continue
        out.append(b)
    for s, _e in regions[r:]:
        if out[-1] < s and text[s - 1].isspace():
            out.append(s)
    return out


def unit_end(doc: DocUnits, k: int) -> int:
    return doc.starts[k + 1] if k + 1 < len(doc.starts) else len(doc.text)


def long_blocks(doc: DocUnits, size: int) -> list[tuple[int, list[int], int]]:
    """(unit, its line starts, its end) of each code block over ``size`` pieces: ``split_lines`` cuts
    them into lines once their lines are counted (``chunk_many`` counts every document's at once)."""
    if not doc.multiline:
        return []
    out: list[tuple[int, list[int], int]] = []
    for k, c in enumerate(doc.counts):
        if c > size and k in doc.multiline:
            s, e = doc.starts[k], unit_end(doc, k)
            subs = [s]
            subs.extend(b for m in _LINE_RE.finditer(doc.text, s, e) if (b := m.end()) < e)
            out.append((k, subs, e))
    return out


def split_lines(
    doc: DocUnits,
    size: int,
    blocks: list[tuple[int, list[int], int]] | None = None,
    line_counts: list[list[int]] | None = None,
) -> list[int]:
    """Cut code blocks over ``size`` pieces into lines; return the units still over ``size``.

    ``blocks`` and ``line_counts``: the document's ``long_blocks`` and the piece count of each of their
    lines, when the caller counted them (for many documents at once); otherwise counted here."""
    long_units = [k for k, c in enumerate(doc.counts) if c > size]
    if not long_units or not doc.multiline:
        return long_units
    if blocks is None:
        blocks = long_blocks(doc, size)
        line_counts = [count_spans(doc.text, subs, e) for _k, subs, e in blocks]
    assert line_counts is not None
    parts: dict[int, list[tuple[int, int, int]]] = {
        k: [
            (b, doc.ranks[k] if j == 0 else LINE, c)
            for j, (b, c) in enumerate(zip(subs, counts, strict=True))
        ]
        for (k, subs, _e), counts in zip(blocks, line_counts, strict=True)
    }
    _replace_units(doc, parts)
    doc.multiline = set()
    return [k for k, c in enumerate(doc.counts) if c > size]


def split_tokens(doc: DocUnits, size: int, units: list[int], offsets: list[list[int]]) -> None:
    """Replace each unit in ``units`` by its parts cut at word-piece boundaries."""
    parts: dict[int, list[tuple[int, int, int]]] = {}
    for k, offs in zip(units, offsets, strict=True):
        pieces = _token_pieces(doc.text, doc.starts[k], offs, size)
        parts[k] = [(b, doc.ranks[k] if j == 0 else PIECE, c) for j, (b, c) in enumerate(pieces)]
    _replace_units(doc, parts)


def _replace_units(doc: DocUnits, parts: dict[int, list[tuple[int, int, int]]]) -> None:
    """Put (start, rank, count) parts in place of the units they cut (one pass, any number of units)."""
    starts: list[int] = []
    ranks: list[int] = []
    counts: list[int] = []
    for k, unit in enumerate(zip(doc.starts, doc.ranks, doc.counts, strict=True)):
        for s, r, c in parts.get(k, (unit,)):
            starts.append(s)
            ranks.append(r)
            counts.append(c)
    doc.starts, doc.ranks, doc.counts = starts, ranks, counts


def _token_pieces(text: str, base: int, offs: list[int], size: int) -> list[tuple[int, int]]:
    """(start, pieces) of the parts of one unit cut at word-piece boundaries."""
    groups: list[list[int]] = []  # [relative start, word pieces starting there]
    for o in offs:
        if groups and groups[-1][0] == o:
            groups[-1][1] += 1
        else:
            groups.append([o, 1])
    out: list[tuple[int, int]] = []
    g = 0
    while g < len(groups):
        total = groups[g][1]
        h = g + 1
        best, best_total = -1, 0
        while h < len(groups) and total + groups[h][1] <= size:
            if total * 2 >= size and text[base + groups[h][0] - 1].isspace():
                best, best_total = h, total
            total += groups[h][1]
            h += 1
        if h < len(groups) and best > 0 and not text[base + groups[h][0] - 1].isspace():
            h, total = best, best_total
        out.append((base if g == 0 else base + groups[g][0], total))
        g = h
    return out
