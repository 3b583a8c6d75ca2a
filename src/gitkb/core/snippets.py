"""Short excerpts of a chunk around the words of a query (pure)."""

from __future__ import annotations

import re
from functools import lru_cache

_WORD = re.compile(r"\w+", re.UNICODE)
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
def _terms_pattern(query: str) -> re.Pattern[str] | None:
    """One compiled alternation of the query's terms (word starts only), or None when it has none;
    kept for the last queries: a search makes every hit's snippet with the same query."""
    terms = query_terms(query)
    if not terms:
        return None
    return re.compile(r"\b(?:" + "|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True)) + ")")


def make_snippet(text: str, query: str, max_chars: int = 300) -> str:
    """The window of ``text`` (about ``max_chars``) holding the most query words, whitespace collapsed."""
    if len(text) <= max_chars:
        return " ".join(text.split())
    best_start, best_score = 0, -1
    pattern = _terms_pattern(query)
    if pattern is not None:
        # over the lower-cased text
        positions = [m.start() for m in pattern.finditer(text.lower())]
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
