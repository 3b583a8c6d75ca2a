"""Cut documents into chunks with exact coordinates.

Every chunk is a slice of its document: ``text == document[char_start:char_end]``.
Chunks come in order, cover the whole document with no gap (the first starts
at 0, the last ends at ``len(document)``, ``next.char_start <= prev.char_end``)
and both their starts and their ends strictly increase, so ``reassemble``
gives the document back byte for byte. Sizes are counted in the embedding
model's word pieces (``gitkb.core.tokenizer``).

Strategies
----------
``sentence``
    1. Units. The text is cut into contiguous units: a unit is a sentence
       (ending in ``.``, ``!`` or ``?``, maybe closing quotes or brackets,
       then whitespace) or a line, plus the whitespace after it. So every
       unit but the first starts on a non-space char: leading whitespace never
       starts a chunk, except at the start of the document. Each boundary
       gets a rank: 1 sentence or line end, 2 paragraph end (a blank line, or
       the end of a code block), 3 markdown heading.
    2. Markdown (``markdown=True``). A fenced code block (and YAML front
       matter) is one unit, not cut into sentences; a heading line is one
       unit. Headings give each chunk its ``heading_path``: the headings in
       force where the chunk's text starts, outermost first.
    3. Long units. A unit over ``size`` pieces is cut: a code block into its
       lines first, then anything still too long at word-piece boundaries
       (the unit alone goes through the tokenizer with offsets, preferring a
       cut before a whole word once the piece is half full). Pieces that
       start at the same char (one char can give several pieces, e.g. Hangul
       syllables) are never parted, so a chunk holds more than ``size``
       pieces only when it is one such char: an *unsplittable token run*.
    4. Packing. Units are packed greedily while the total stays within
       ``size``. Once a chunk is at least half full, it ends before a
       heading; when the next unit would overflow it, it ends at the best
       boundary seen since it got half full (highest rank, then latest), so
       chunks tend to end at paragraph ends rather than mid-paragraph.
    5. Overlap. The next chunk starts at the earliest unit such that the
       repeated tail holds at most ``overlap`` pieces, still leaves room for
       the next new unit, starts after the previous chunk's start, and does
       not reach back past a heading. A chunk that starts at a heading repeats
       nothing: the section break already gives it its context.
``one_chunk_per_doc``
    The whole text, one chunk.
``auto`` (the default when no chunk parameter is given anywhere)
    A document of at most ``AUTO_WHOLE_DOC_MAX_TOKENS`` pieces stays whole;
    a longer one gets ``sentence`` with ``AUTO_CHUNK_SIZE`` and
    ``AUTO_CHUNK_OVERLAP`` (or the size and overlap the config gives). Why:
    the default embedder (all-MiniLM-L6-v2) reads at most 256 pieces, special
    tokens included, and drops the rest, so text past that point of a larger
    chunk is invisible to semantic search; and a short page cut into pieces
    loses the title and context each piece needs, for no gain. So a page that
    fits the model stays one chunk, and a longer one is cut into windows the
    model reads (nearly) whole, with a small overlap so that a sentence cut
    off at a window's end is seen whole in the next. (A full 256-piece window
    plus [CLS] and [SEP] loses its last 2 pieces to truncation; 254 would
    avoid that, and both constants are meant to be tuned on retrieval
    results.)

Speed
-----
Markdown structure comes from the line scanner of ``gitkb.core.markdown_lines``.
Token counts come from the exact per-word cache of
``gitkb.core.tokenizer``, not from tokenizing whole documents with offsets
(``encode_batch`` took 9 s for the same corpus, plus 2.5 s to read the
offsets). ``chunk_many`` learns the unknown words of each group of
``_COUNT_GROUP`` documents in one ``encode_batch`` call, and cuts every
over-long unit of the batch with one more.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import accumulate

from gitkb.core.errors import InvalidArgument
from gitkb.core.markdown_lines import MarkdownLines, scan_markdown
from gitkb.core.models import (
    CHUNK_STRATEGIES,
    FALLBACK_CHUNK_OVERLAP,
    FALLBACK_CHUNK_SIZE,
    ChunkConfig,
    ChunkSpan,
)
from gitkb.core.tokenizer import count_spans, count_spans_many, token_starts

AUTO_WHOLE_DOC_MAX_TOKENS = 256
AUTO_CHUNK_SIZE = 256
AUTO_CHUNK_OVERLAP = 32

# Documents whose unknown words are learnt together: a bigger group batches the
# tokenizer better, a smaller one recounts fewer units on a cold word cache.
_COUNT_GROUP = 32

# Boundary ranks: a chunk prefers to end at the highest one; never right after a heading if it can help it.
_AFTER_HEADING, _PIECE, _LINE, _PARA, _HEADING = -1, 0, 1, 2, 3

# One regex per end mark: a literal first char lets the regex engine skip ahead fast.
_SENTENCE_RES = tuple(re.compile(re.escape(p) + r"[\"'\u2019\u201d)\]*_]*\s+") for p in ".!?")
_PARA_RE = re.compile(r"\n[^\S\n]*\n\s*")
_LINE_RE = re.compile(r"\n\s*")


# --------------------------------------------------------------------------- config


def resolve_config(
    strategy: str | None,
    size: int | None,
    overlap: int | None,
    *,
    defaults: ChunkConfig | None = None,
) -> tuple[ChunkConfig, list[str]]:
    """Merge explicit chunk parameters, the index's stored defaults and the fallbacks; validate.

    Explicit values win, then ``defaults`` (the index's stored ones). When no
    parameter is given anywhere (or only ``strategy="auto"``; stored defaults
    of ``auto`` with no size count as nothing given), the result is
    ``ChunkConfig("auto", None, None)``. Otherwise missing values fall back to
    ``sentence``, size 1024 and overlap 200 (a fallback overlap that would not
    be smaller than the size becomes size // 5, with a warning); ``auto`` with
    a size keeps whole the documents of at most ``AUTO_WHOLE_DOC_MAX_TOKENS``
    pieces and cuts the others with that size. ``one_chunk_per_doc`` drops
    size and overlap, with a warning when they were passed. Returns the config
    and the warnings for the caller to show.
    """
    warnings: list[str] = []
    if strategy is not None and not isinstance(strategy, str):
        raise InvalidArgument(f"chunk_strategy must be one of {', '.join(CHUNK_STRATEGIES)}.")
    strat = strategy.strip().lower() if strategy is not None else None
    if strat is not None and strat not in CHUNK_STRATEGIES:
        raise InvalidArgument(
            f"Unknown chunk_strategy {strategy!r}: use one of {', '.join(CHUNK_STRATEGIES)}."
        )
    for name, value, low in (("chunk_size", size, 1), ("chunk_overlap", overlap, 0)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise InvalidArgument(
                f"{name} must be an integer >= {low} (got {value!r}); pass a value >= {low}."
            )
    d = defaults or ChunkConfig(strategy="", size=None, overlap=None)
    if d == ChunkConfig("auto", None, None):
        d = ChunkConfig(strategy="", size=None, overlap=None)  # stored "nothing given" is nothing given
    strat = strat or (d.strategy or None)
    if strat == "one_chunk_per_doc":
        for name, value in (("chunk_size", size), ("chunk_overlap", overlap)):
            if value is not None:
                warnings.append(f"{name} is ignored with chunk_strategy one_chunk_per_doc")
        return ChunkConfig("one_chunk_per_doc", None, None), warnings
    size_v = size if size is not None else d.size
    overlap_v = overlap if overlap is not None else d.overlap
    if strat is None and size_v is None and overlap_v is None:
        return ChunkConfig("auto", None, None), warnings
    if strat == "auto" and size_v is None and overlap_v is None:
        return ChunkConfig("auto", None, None), warnings
    strat = strat or "sentence"
    if size_v is None:
        size_v = FALLBACK_CHUNK_SIZE
    if overlap_v is None:
        overlap_v = _fallback_overlap(size_v)
        if overlap_v != FALLBACK_CHUNK_OVERLAP:
            warnings.append(
                f"chunk_overlap defaults to {overlap_v} because the usual {FALLBACK_CHUNK_OVERLAP} "
                f"is not smaller than chunk_size {size_v}"
            )
    config = ChunkConfig(strat, size_v, overlap_v)
    _check(config)
    return config, warnings


def _fallback_overlap(size: int) -> int:
    return FALLBACK_CHUNK_OVERLAP if size > FALLBACK_CHUNK_OVERLAP else size // 5


def _check(config: ChunkConfig) -> None:
    if config.strategy not in CHUNK_STRATEGIES:
        raise InvalidArgument(
            f"Unknown chunk_strategy {config.strategy!r}: use one of {', '.join(CHUNK_STRATEGIES)}."
        )
    if config.size is not None and config.size < 1:
        raise InvalidArgument(f"chunk_size must be >= 1 (got {config.size}); pass a positive chunk_size.")
    if config.overlap is not None and config.overlap < 0:
        raise InvalidArgument(f"chunk_overlap must be >= 0 (got {config.overlap}); pass 0 for no overlap.")
    if config.size is not None and config.overlap is not None and config.overlap >= config.size:
        raise InvalidArgument(
            f"chunk_overlap ({config.overlap}) must be smaller than chunk_size ({config.size}); "
            "lower chunk_overlap or raise chunk_size."
        )


def _window(config: ChunkConfig) -> tuple[int, int]:
    """Size and overlap a ``sentence`` pass uses under ``config``."""
    if config.strategy == "auto" and config.size is None:
        size = AUTO_CHUNK_SIZE
        overlap = AUTO_CHUNK_OVERLAP if config.overlap is None else config.overlap
    else:
        size = config.size if config.size is not None else FALLBACK_CHUNK_SIZE
        overlap = config.overlap if config.overlap is not None else _fallback_overlap(size)
    return size, min(overlap, size - 1)


# --------------------------------------------------------------------------- units


@dataclass
class _Doc:
    text: str
    config: ChunkConfig
    starts: list[int] = field(default_factory=lambda: [0])  # unit k is text[starts[k]:starts[k+1]]
    ranks: list[int] = field(default_factory=lambda: [_LINE])  # boundary rank before unit k
    counts: list[int] = field(default_factory=list)
    multiline: set[int] = field(default_factory=set)  # units that are code blocks or front matter
    heading_at: list[int] = field(default_factory=list)  # heading starts, ascending
    heading_paths: list[tuple[str, ...]] = field(default_factory=list)  # the path from each heading on


def _prepare(text: str, config: ChunkConfig, markdown: bool) -> _Doc:
    """Units with their boundary ranks, and the heading paths; counts come later."""
    _check(config)
    doc = _Doc(text, config)
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
    ranks = [_LINE] * len(starts)
    for m in _PARA_RE.finditer(text):
        k = bisect_right(starts, m.end()) - 1
        if starts[k] == m.end():
            ranks[k] = _PARA
    for s, _e in md.blocks:
        k = bisect_right(starts, s) - 1
        doc.multiline.add(k)
        if k + 1 < len(starts):
            ranks[k + 1] = _PARA
    for s in doc.heading_at:
        k = bisect_right(starts, s) - 1
        ranks[k] = _HEADING
        if k + 1 < len(starts) and ranks[k + 1] != _HEADING:
            ranks[k + 1] = _AFTER_HEADING
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


def _end(doc: _Doc, k: int) -> int:
    return doc.starts[k + 1] if k + 1 < len(doc.starts) else len(doc.text)


def _split_lines(doc: _Doc, size: int) -> list[int]:
    """Cut code blocks over ``size`` pieces into lines; return the units still over ``size``."""
    long_units = [k for k, c in enumerate(doc.counts) if c > size]
    if not long_units or not doc.multiline:
        return long_units
    parts: dict[int, list[tuple[int, int, int]]] = {}
    for k in long_units:
        if k in doc.multiline:
            s, e = doc.starts[k], _end(doc, k)
            subs = [s]
            subs.extend(b for m in _LINE_RE.finditer(doc.text, s, e) if (b := m.end()) < e)
            counts = count_spans(doc.text, subs, e)
            parts[k] = [
                (b, doc.ranks[k] if j == 0 else _LINE, c)
                for j, (b, c) in enumerate(zip(subs, counts, strict=True))
            ]
    _replace_units(doc, parts)
    doc.multiline = set()
    return [k for k, c in enumerate(doc.counts) if c > size]


def _split_tokens(doc: _Doc, size: int, units: list[int], offsets: list[list[int]]) -> None:
    """Replace each unit in ``units`` by its parts cut at word-piece boundaries."""
    parts: dict[int, list[tuple[int, int, int]]] = {}
    for k, offs in zip(units, offsets, strict=True):
        pieces = _token_pieces(doc.text, doc.starts[k], offs, size)
        parts[k] = [(b, doc.ranks[k] if j == 0 else _PIECE, c) for j, (b, c) in enumerate(pieces)]
    _replace_units(doc, parts)


def _replace_units(doc: _Doc, parts: dict[int, list[tuple[int, int, int]]]) -> None:
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


# --------------------------------------------------------------------------- packing


def _pack(counts: list[int], ranks: list[int], size: int, overlap: int) -> list[tuple[int, int]]:
    """Greedy windows over units: [(first unit, end unit exclusive)]."""
    n = len(counts)
    out: list[tuple[int, int]] = []
    i = 0
    prev_end = 0
    while True:
        total = counts[i]
        j = i + 1
        cut = n
        best, best_rank = -1, -1
        heading = -1  # latest heading past prev_end: a cut there beats leaving a heading at the end
        while j < n:
            r = ranks[j]
            eligible = j > prev_end and total * 2 >= size
            if r == _HEADING and j > prev_end:
                if eligible:
                    cut = j
                    break
                heading = j
            c = counts[j]
            if total + c > size:
                if eligible and r >= max(best_rank, _PIECE):
                    best = j
                cut = best if best > 0 else heading if heading > 0 else j
                break
            if eligible and r >= max(best_rank, _PIECE):
                best, best_rank = j, r
            total += c
            j += 1
        out.append((i, cut))
        if cut >= n:
            return out
        k = cut
        if ranks[cut] != _HEADING:
            tail = 0
            room = size - counts[cut]
            while k - 1 > i:
                c = counts[k - 1]
                if tail + c > overlap or tail + c > room:
                    break
                k -= 1
                tail += c
                if ranks[k] == _HEADING:
                    break
        i, prev_end = k, cut


def _window_for(doc: _Doc) -> tuple[int, int] | None:
    """(size, overlap) of the sentence pass this document gets, or None to keep it whole."""
    strategy = doc.config.strategy
    if strategy == "one_chunk_per_doc":
        return None
    if strategy == "auto" and sum(doc.counts) <= AUTO_WHOLE_DOC_MAX_TOKENS:
        return None
    return _window(doc.config)


def _spans(doc: _Doc, windows: list[tuple[int, int]]) -> list[ChunkSpan]:
    text, starts = doc.text, doc.starts
    n = len(text)
    prefix = [0, *accumulate(doc.counts)]
    out: list[ChunkSpan] = []
    line_pos, line_no = 0, 1
    for i, e in windows:
        cs = starts[i]
        ce = starts[e] if e < len(starts) else n
        line_no += text.count("\n", line_pos, cs)
        line_pos = cs
        q = ce - 1
        while q >= cs and text[q] in "\r\n":  # a CRLF line break is one line break
            q -= 1
        line_end = line_no + text.count("\n", cs, q) if q >= cs else line_no
        path: tuple[str, ...] = ()
        if doc.heading_at:
            look = cs
            while look < ce and text[look].isspace():
                look += 1
            h = bisect_right(doc.heading_at, look) - 1
            if h >= 0:
                path = doc.heading_paths[h]
        out.append(ChunkSpan(text[cs:ce], cs, ce, line_no, line_end, path, prefix[e] - prefix[i]))
    return out


# --------------------------------------------------------------------------- public


def chunk_many(items: list[tuple[str, ChunkConfig, bool]]) -> list[list[ChunkSpan]]:
    """Chunk many documents ``(text, config, markdown)`` at once; tokenizer calls are batched."""
    docs = [_prepare(text, config, markdown) for text, config, markdown in items]
    for g in range(0, len(docs), _COUNT_GROUP):
        group = docs[g : g + _COUNT_GROUP]
        counts = count_spans_many([(d.text, d.starts, len(d.text)) for d in group])
        for doc, c in zip(group, counts, strict=True):
            doc.counts = c
    windows = [_window_for(doc) for doc in docs]
    long_units = [_split_lines(doc, w[0]) if w else [] for doc, w in zip(docs, windows, strict=True)]
    long_texts = [
        d.text[d.starts[k] : _end(d, k)] for d, ks in zip(docs, long_units, strict=True) for k in ks
    ]
    offsets = iter(token_starts(long_texts) if long_texts else [])
    out: list[list[ChunkSpan]] = []
    for doc, w, ks in zip(docs, windows, long_units, strict=True):
        if not doc.text:
            out.append([])
        elif w is None:
            total = sum(doc.counts)
            doc.starts, doc.ranks, doc.counts = [0], [_LINE], [total]
            out.append(_spans(doc, [(0, 1)]))
        else:
            if ks:
                _split_tokens(doc, w[0], ks, [next(offsets) for _ in ks])
            out.append(_spans(doc, _pack(doc.counts, doc.ranks, *w)))
    return out


def chunk_text(text: str, config: ChunkConfig, *, markdown: bool = False) -> list[ChunkSpan]:
    """Chunk one document (see the module docstring). An empty text gives no chunk."""
    return chunk_many([(text, config, markdown)])[0]


def reassemble(chunks: list[ChunkSpan]) -> str:
    """The document back from its chunks (drops each chunk's overlap with the one before)."""
    if not chunks:
        return ""
    parts = [chunks[0].text]
    for prev, ck in zip(chunks, chunks[1:], strict=False):
        parts.append(ck.text[prev.char_end - ck.char_start :])
    return "".join(parts)
