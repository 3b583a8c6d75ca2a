"""The embedding model's tokenizer (BERT uncased WordPiece of all-MiniLM-L6-v2), and fast exact token counts.

``get_tokenizer()`` loads the Hugging Face tokenizer once from package data,
with truncation and padding off. Chunk sizes are counted in its word pieces,
without special tokens.

Counting by running the tokenizer over whole documents is exact but slow: on
a 2-core machine ``encode_batch`` needs ~9 s for the 21 MB awsdocs corpus,
plus ~2.5 s to turn its offsets into Python objects. This module counts the
same pieces ~10x faster with a per-word cache, which is exact because BERT
tokenization is context-free across whitespace:

* the normalizer works char by char (clean control chars, space out CJK
  ideographs, strip accents, lowercase) and never turns a non-space char into
  a space;
* the pre-tokenizer splits on whitespace, then isolates punctuation;
* WordPiece works on each pre-token alone.

So ``count(text) == sum(count(w) for w in text.split())``, with one wrinkle:
``str.split`` also splits on seven chars the normalizer *deletes* instead of
treating as spaces (VT, FF, U+001C..U+001F, NEL), which glues their
neighbours together. ``split_words`` deletes them first. (Checked over every
code point, and on the whole awsdocs corpus: 6,125,703 pieces either way.)

Each distinct word is tokenized once per process and its count cached: split at
ASCII punctuation, its ASCII letters-and-digits runs go to the WordPiece model
alone (lower-cased), any other run through ``encode_batch`` (joined by spaces). The cache
holds at most ``WORD_CACHE_MAX`` words; past that it starts afresh. A plain
dict under the GIL: a race only means a word is counted twice.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from importlib import resources

from tokenizers import Tokenizer

WORD_CACHE_MAX = 400_000
_JOIN_WORDS = 200  # words per string sent to the tokenizer when learning (several strings: both cores)

# Chars that str.split() treats as whitespace but the BERT normalizer deletes.
_DELETED = "\x0b\x0c\x1c\x1d\x1e\x1f\x85"
_DELETED_RE = re.compile(f"[{_DELETED}]")
# ASCII punctuation: always a pre-token of its own, and one piece each.
_PUNCT_RE = re.compile(r"[!-/:-@\[-`{-~]")

_lock = threading.Lock()
_learn_lock = threading.Lock()
_tokenizer: Tokenizer | None = None
_word_counts: dict[str, int] = {}


def get_tokenizer() -> Tokenizer:
    """The shared tokenizer (loaded once, thread-safe), truncation and padding disabled."""
    global _tokenizer
    tok = _tokenizer
    if tok is not None:
        return tok
    with _lock:
        if _tokenizer is None:
            data = resources.files("gitkb.core").joinpath("data", "tokenizer.json").read_text("utf-8")
            loaded = Tokenizer.from_str(data)
            loaded.no_truncation()
            loaded.no_padding()
            _tokenizer = loaded
        return _tokenizer


def has_deleted_chars(text: str) -> bool:
    """Whether ``text`` holds a char that ``split_words`` must delete (rare: VT, FF, U+001C..1F, NEL)."""
    return any(c in text for c in _DELETED)  # seven fast scans beat one char-class regex


def split_words(text: str, *, check: bool = True) -> list[str]:
    """Whitespace-separated words as the tokenizer sees them.

    ``check=False`` skips the scan for deleted chars: pass it only when the
    whole document is known to hold none (``has_deleted_chars`` is False).
    """
    if check and has_deleted_chars(text):
        text = _DELETED_RE.sub("", text)
    return text.split()


def known_count(words: list[str]) -> int | None:
    """Word pieces in ``words`` from the cache alone; None when a word is not cached yet."""
    try:
        return sum(map(_word_counts.__getitem__, words))
    except KeyError:
        return None


def learn_words(words: Iterable[str]) -> None:
    """Cache the piece counts of the words not cached yet, tokenizing as little text as possible.

    The pre-tokenizer isolates every ASCII punctuation char, and each is one
    piece of the vocabulary, so a word such as ``s3://bucket/key.json`` counts
    as its punctuation plus the runs between them. Only runs not cached yet
    go through the tokenizer (joined by spaces, in one ``encode_batch``):
    on the awsdocs corpus 380 kB of text instead of 3.9 MB. The cache starts
    with the vocabulary's whole ASCII words (one piece each, in lower,
    Capitalized and UPPER case).
    """
    with _learn_lock:
        counts = _word_counts
        if not counts:
            _seed()
        wanted = words if isinstance(words, set) else set(words)
        if len(counts) + 2 * len(wanted) > WORD_CACHE_MAX:
            counts.clear()
            _seed()
        new = [w for w in wanted if w not in counts]
        if not new:
            return
        get = counts.__getitem__
        split = _PUNCT_RE.split
        leaves: set[str] = set()
        waiting: list[tuple[str, list[str]]] = []
        for w in new:
            parts = split(w)
            if len(parts) == 1:
                leaves.add(w)
                continue
            try:
                counts[w] = len(parts) - 1 + sum(map(get, parts))
            except KeyError:
                leaves.update(parts)
                waiting.append((w, parts))
        _learn_leaves([w for w in leaves if w not in counts])
        for w, parts in waiting:
            counts[w] = len(parts) - 1 + sum(map(get, parts))


def _seed() -> None:
    counts = _word_counts
    counts[""] = 0  # the empty run between two adjacent punctuation chars
    for piece in get_tokenizer().get_vocab():
        if piece.isascii() and piece.isalnum():  # not "##..." continuations nor "[CLS]"
            counts[piece] = counts[piece.capitalize()] = counts[piece.upper()] = 1


def _learn_leaves(leaves: list[str]) -> None:
    """Cache the piece counts of ``leaves`` (words without ASCII punctuation, not cached yet).

    An ASCII letters-and-digits leaf goes to the WordPiece model alone, lower-cased: for it the
    normalizer only lower-cases and the pre-tokenizer leaves it whole, so the count is the same,
    at half the CPU of the whole pipeline (98% of awsdocs' cold leaves). Any other leaf goes
    through the whole tokenizer, several joined by spaces per string.
    """
    model = get_tokenizer().model
    counts = _word_counts
    rest: list[str] = []
    for w in leaves:
        if w.isascii() and w.isalnum():
            counts[w] = len(model.tokenize(w.lower()))
        else:
            rest.append(w)
    if rest:
        _learn_joined(rest)


def _learn_joined(leaves: list[str]) -> None:
    batches = [leaves[i : i + _JOIN_WORDS] for i in range(0, len(leaves), _JOIN_WORDS)]
    encodings = get_tokenizer().encode_batch([" ".join(b) for b in batches], add_special_tokens=False)
    for batch, enc in zip(batches, encodings, strict=True):
        starts = [s for s, _ in enc.offsets]
        t = 0
        pos = 0
        for w in batch:
            end = pos + len(w)
            n = 0
            while t < len(starts) and starts[t] < end:
                n += 1
                t += 1
            _word_counts[w] = n
            pos = end + 1


def count_words(words: list[str]) -> int:
    """Word pieces in ``words`` (learning unknown words as needed)."""
    while True:
        n = known_count(words)
        if n is not None:
            return n
        learn_words(words)


def count_tokens(texts: list[str]) -> list[int]:
    """Word pieces of each text, without special tokens (exactly what the tokenizer gives)."""
    word_lists = [split_words(t) for t in texts]
    learn_words({w for ws in word_lists for w in ws})
    return [count_words(ws) for ws in word_lists]


def count_spans(text: str, starts: list[int], end: int | None = None) -> list[int]:
    """Word pieces of each slice ``text[starts[k]:starts[k+1]]`` (the last one runs to ``end``).

    Every start but the first must follow whitespace or punctuation, so that
    each slice tokenizes as it does inside ``text``.
    """
    return count_spans_many([(text, starts, len(text) if end is None else end)])[0]


def count_spans_many(items: list[tuple[str, list[int], int]]) -> list[list[int]]:
    """``count_spans`` for many ``(text, starts, end)`` at once: unknown words are learnt in one batch."""
    results: list[list[int]] = []
    retry: list[int] = []
    unknown: set[str] = set()
    for i, (text, starts, end) in enumerate(items):
        try:
            results.append(_count_known(text, starts, end))
        except KeyError:
            results.append([])
            retry.append(i)
            unknown.update(_words(text, starts, end))
    if retry:
        learn_words(unknown)
        for i in retry:
            text, starts, end = items[i]
            while True:  # another thread may empty the cache in between; then learn again
                try:
                    results[i] = _count_known(text, starts, end)
                    break
                except KeyError:
                    learn_words(_words(text, starts, end))
    return results


def _words(text: str, starts: list[int], end: int) -> set[str]:
    """Every word ``_count_known`` looks up for these slices."""
    if not has_deleted_chars(text):
        return set(text[starts[0] : end].split())  # slices start after whitespace: same words
    ends = starts[1:]
    ends.append(end)
    out: set[str] = set()
    for s, e in zip(starts, ends, strict=True):
        out.update(split_words(text[s:e]))  # a deleted char at a slice edge glues nothing across it
    return out


def _count_known(text: str, starts: list[int], end: int) -> list[int]:
    """Counts of the slices from the cache; KeyError on the first word not in it."""
    get = _word_counts.__getitem__
    ends = starts[1:]
    ends.append(end)
    if has_deleted_chars(text):
        return [sum(map(get, split_words(text[s:e]))) for s, e in zip(starts, ends, strict=True)]
    return [sum(map(get, text[s:e].split())) for s, e in zip(starts, ends, strict=True)]


def token_starts(texts: list[str]) -> list[list[int]]:
    """Char offset where each word piece of each text starts (one ``encode_batch`` call)."""
    encodings = get_tokenizer().encode_batch(texts, add_special_tokens=False)
    return [[s for s, _ in enc.offsets] for enc in encodings]
