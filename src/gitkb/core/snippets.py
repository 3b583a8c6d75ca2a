"""Short excerpts of a chunk around the words of a query (pure)."""

from __future__ import annotations

import re
from functools import lru_cache

_WORD = re.compile(r"\w+", re.UNICODE)
_WORD_CHAR = re.compile(r"\w", re.UNICODE)
STOP = frozenset(
    "a an and are as at be by for from has have how i in is it its of on or that the this to was were what "
    "when where which who why will with do does can you your".split()
)


def query_terms(query: str) -> list[str]:
    """Lower-cased query words without stop words, cut to a crude stem (first 5 letters)."""
    out = []
    for w in _WORD.findall(query.lower()):
        if w in STOP or len(w) < 2:
            continue
        out.append(w[:5] if len(w) > 5 else w)
    return list(dict.fromkeys(out))


@lru_cache(maxsize=64)
def _terms(query: str) -> tuple[str, ...]:
    """The query's terms, kept for the last queries: a search makes every hit's snippet with one."""
    return tuple(query_terms(query))


def term_starts(lowered: str, terms: tuple[str, ...]) -> list[int]:
    """Where a word of ``lowered`` starts with one of ``terms`` (each made of word characters),
    ascending: the match starts of ``\\b(?:term|...)``, found with ``str.find`` (a few times faster
    than the regular expression's alternation tried at every character)."""
    found: set[int] = set()
    for term in terms:
        i = lowered.find(term)
        while i >= 0:
            if i == 0 or not _WORD_CHAR.match(lowered, i - 1):  # a word starts here
                found.add(i)
            i = lowered.find(term, i + 1)
    return sorted(found)


def make_snippet(text: str, query: str, max_chars: int = 300) -> str:
    """The window of ``text`` (about ``max_chars``) holding the most query words, whitespace collapsed."""
    if len(text) <= max_chars:
        return " ".join(text.split())
    best_start, best_score = 0, -1
    terms = _terms(query)
    if terms:
        positions = term_starts(text.lower(), terms)
        j = 0
        for i, p in enumerate(positions):
            while positions[j] < p - max_chars // 2:
                j += 1
            score = i - j + 1
            if score > best_score:
                best_score, best_start = score, positions[j]
    start = max(0, best_start - max_chars // 6) if best_score > 0 else 0
    start = min(start, len(text) - max_chars)  # near the end: a full window ending at the end, not a stub
    end = start + max_chars
    # align to a word boundary
    if start > 0:
        sp = text.rfind(" ", 0, start)
        start = sp + 1 if sp >= 0 and start - sp < 30 else start
    piece = text[start:end]
    snippet = " ".join(piece.split())
    return ("… " if start > 0 else "") + snippet + (" …" if end < len(text) else "")


def location(doc_text: str, start: int, end: int) -> dict[str, int]:
    """1-based lines and the characters ``start:end`` of ``doc_text`` cover."""
    last = max(start, end - 1)
    return {
        "line_start": doc_text.count("\n", 0, start) + 1,
        "line_end": doc_text.count("\n", 0, last) + 1,
        "char_start": start,
        "char_end": end,
    }
