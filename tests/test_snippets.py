"""Snippets: the excerpt shows the window with the most query words."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from gitkb.core.snippets import make_snippet, query_terms, term_starts


def test_query_terms_drop_stop_words_and_cut_stems() -> None:
    assert query_terms("How do I rotate the API keys?") == ["rotat", "api", "keys"]


def test_short_text_is_returned_whole_with_whitespace_collapsed() -> None:
    assert make_snippet("a  b\n\nc", "b") == "a b c"


def test_window_centres_on_the_densest_matches() -> None:
    text = (
        "filler words here. " * 60
        + "Rotate the keys; rotating keys weekly keeps keys fresh. "
        + "tail text. " * 60
    )
    snip = make_snippet(text, "rotating keys", max_chars=120)
    assert "Rotate the keys" in snip and snip.startswith("… ") and snip.endswith(" …")
    assert len(snip) <= 130


def test_no_match_starts_at_the_beginning() -> None:
    text = "word " * 200
    assert make_snippet(text, "absent", max_chars=50).startswith("word word")


def test_matches_near_the_end_still_give_a_full_window() -> None:
    """A match in the last lines used to give a stub of the chunk's tail (150 of 300 characters on
    the handbook's incident runbook): the window slides back so the snippet is as long as any other."""
    text = "opening words here. " * 40 + "the blameless postmortem follows within five days."
    snip = make_snippet(text, "blameless postmortem", max_chars=300)
    assert snip.startswith("… ") and not snip.endswith("…") and "postmortem follows" in snip
    assert len(snip) >= 290


def test_the_query_terms_are_made_once_for_all_the_hits_of_a_search() -> None:
    """A search makes a snippet for each of its hits with one query: the query's terms are made
    once (cached by query), and each snippet is the one made afresh."""
    from gitkb.core import snippets

    text = "filler words here. " * 40 + "Rotate the keys weekly. " + "tail text. " * 40
    fresh = [make_snippet(text[i:], "rotating keys weekly") for i in range(0, 200, 20)]
    snippets._terms.cache_clear()
    again = [make_snippet(text[i:], "rotating keys weekly") for i in range(0, 200, 20)]
    info = snippets._terms.cache_info()
    assert again == fresh and (info.misses, info.hits) == (1, 9)
    assert make_snippet("short text", "short") == "short text"  # whole: no terms needed
    assert snippets._terms.cache_info().misses == 1


def _regex_starts(lowered: str, terms: list[str]) -> list[int]:
    """How the snippet found the query's words before issue 20: one alternation, word starts only."""
    pattern = re.compile(
        r"\b(?:" + "|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True)) + ")"
    )
    return [m.start() for m in pattern.finditer(lowered)]


_WORDS = st.sampled_from(
    [
        "key",
        "keys",
        "rotate",
        "rotation",
        "ab",
        "abab",
        "b",
        "_x",
        "x_",
        "é",
        "Été",
        "ÉTÉS",
        "9a",
        "İstanbul",
        "ß",
        "straße",
        "ǅ",
    ]
)
_GLUE = st.sampled_from([" ", "", "-", "_", ".", "\n", "'", "é", "0"])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_WORDS, _GLUE), max_size=60), st.lists(_WORDS, min_size=1, max_size=4))
def test_term_starts_are_the_word_starts_the_alternation_finds(
    parts: list[tuple[str, str]], words: list[str]
) -> None:
    """``term_starts`` (``str.find`` per term) finds exactly the positions ``\\b(?:t1|t2|...)`` matched
    at, on any text, terms overlapping each other or inside words, underscores, digits, non-ASCII
    letters whose lower case is longer; and snippets are what they were."""
    text = "".join(w + g for w, g in parts)
    query = " ".join(words)
    terms = query_terms(query)
    if terms:
        assert term_starts(text.lower(), tuple(terms)) == _regex_starts(text.lower(), terms)
    for size in (10, 60):
        assert make_snippet(text * 3, query, max_chars=size) == _regex_snippet(text * 3, query, size)


def _regex_snippet(text: str, query: str, max_chars: int) -> str:
    """``make_snippet`` as it was before issue 20 (the alternation), to compare with."""
    terms = query_terms(query)
    if len(text) <= max_chars:
        return " ".join(text.split())
    best_start, best_score = 0, -1
    if terms:
        positions = _regex_starts(text.lower(), terms)
        j = 0
        for i, p in enumerate(positions):
            while positions[j] < p - max_chars // 2:
                j += 1
            if i - j + 1 > best_score:
                best_score, best_start = i - j + 1, positions[j]
    start = max(0, best_start - max_chars // 6) if best_score > 0 else 0
    start = min(start, len(text) - max_chars)
    end = start + max_chars
    if start > 0:
        sp = text.rfind(" ", 0, start)
        start = sp + 1 if sp >= 0 and start - sp < 30 else start
    snippet = " ".join(text[start:end].split())
    return ("… " if start > 0 else "") + snippet + (" …" if end < len(text) else "")
