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

from bisect import bisect_right
from itertools import accumulate

from gitkb.core.chunk_config import sentence_window
from gitkb.core.chunk_units import (
    HEADING,
    LINE,
    PIECE,
    DocUnits,
    long_blocks,
    prepare_units,
    split_lines,
    split_tokens,
    unit_end,
)
from gitkb.core.models import ChunkConfig, ChunkSpan
from gitkb.core.tokenizer import count_spans_many, token_starts

# Documents whose unknown words are learnt together: a bigger group batches the
# tokenizer better, a smaller one recounts fewer units on a cold word cache.
_COUNT_GROUP = 32


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
            if r == HEADING and j > prev_end:
                if eligible:
                    cut = j
                    break
                heading = j
            c = counts[j]
            if total + c > size:
                if eligible and r >= max(best_rank, PIECE):
                    best = j
                cut = best if best > 0 else heading if heading > 0 else j
                break
            if eligible and r >= max(best_rank, PIECE):
                best, best_rank = j, r
            total += c
            j += 1
        out.append((i, cut))
        if cut >= n:
            return out
        k = cut
        if ranks[cut] != HEADING:
            tail = 0
            room = size - counts[cut]
            while k - 1 > i:
                c = counts[k - 1]
                if tail + c > overlap or tail + c > room:
                    break
                k -= 1
                tail += c
                if ranks[k] == HEADING:
                    break
        i, prev_end = k, cut


# A chunk without its text: (char_start, char_end, line_start, line_end, heading_path, token_count).
SpanRow = tuple[int, int, int, int, tuple[str, ...], int]


def _span_rows(doc: DocUnits, windows: list[tuple[int, int]]) -> list[SpanRow]:
    text, starts = doc.text, doc.starts
    n = len(text)
    prefix = [0, *accumulate(doc.counts)]
    out: list[SpanRow] = []
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
        out.append((cs, ce, line_no, line_end, path, prefix[e] - prefix[i]))
    return out


# --------------------------------------------------------------------------- public


def chunk_many(items: list[tuple[str, ChunkConfig, bool]]) -> list[list[ChunkSpan]]:
    """Chunk many documents ``(text, config, markdown)`` at once; tokenizer calls are batched."""
    return [
        [ChunkSpan(text[cs:ce], cs, ce, ls, le, path, n) for cs, ce, ls, le, path, n in rows]
        for (text, _config, _markdown), rows in zip(items, chunk_rows(items), strict=True)
    ]


def chunk_rows(items: list[tuple[str, ChunkConfig, bool]]) -> list[list[SpanRow]]:
    """``chunk_many`` without cutting each chunk's text out of its document (the chunking worker
    sends chunks back without it)."""
    docs = [prepare_units(text, config, markdown) for text, config, markdown in items]
    for g in range(0, len(docs), _COUNT_GROUP):
        group = docs[g : g + _COUNT_GROUP]
        counts = count_spans_many([(d.text, d.starts, len(d.text)) for d in group])
        for doc, c in zip(group, counts, strict=True):
            doc.counts = c
    windows = [sentence_window(doc.config, doc.counts) for doc in docs]
    # code blocks over a window are cut into lines: every document's lines counted in one call
    blocks = [long_blocks(doc, w[0]) if w else [] for doc, w in zip(docs, windows, strict=True)]
    line_counts = iter(
        count_spans_many(
            [(d.text, subs, e) for d, bs in zip(docs, blocks, strict=True) for _k, subs, e in bs]
        )
    )
    long_units = [
        split_lines(doc, w[0], bs, [next(line_counts) for _ in bs]) if w else []
        for doc, w, bs in zip(docs, windows, blocks, strict=True)
    ]
    long_texts = [
        d.text[d.starts[k] : unit_end(d, k)] for d, ks in zip(docs, long_units, strict=True) for k in ks
    ]
    offsets = iter(token_starts(long_texts) if long_texts else [])
    out: list[list[SpanRow]] = []
    for doc, w, ks in zip(docs, windows, long_units, strict=True):
        if not doc.text:
            out.append([])
        elif w is None:
            total = sum(doc.counts)
            doc.starts, doc.ranks, doc.counts = [0], [LINE], [total]
            out.append(_span_rows(doc, [(0, 1)]))
        else:
            if ks:
                split_tokens(doc, w[0], ks, [next(offsets) for _ in ks])
            out.append(_span_rows(doc, _pack(doc.counts, doc.ranks, *w)))
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
