"""Snippets: the excerpt shows the window with the most query words."""

from __future__ import annotations

from gitkb.core.snippets import make_snippet, query_terms


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


def test_the_query_pattern_is_built_once_for_all_the_hits_of_a_search() -> None:
    """A search makes a snippet for each of its hits with one query: the query's terms and their
    compiled pattern are made once (cached by query), and each snippet is the one made afresh."""
    from gitkb.core import snippets

    text = "filler words here. " * 40 + "Rotate the keys weekly. " + "tail text. " * 40
    fresh = [make_snippet(text[i:], "rotating keys weekly") for i in range(0, 200, 20)]
    snippets._terms_pattern.cache_clear()
    again = [make_snippet(text[i:], "rotating keys weekly") for i in range(0, 200, 20)]
    info = snippets._terms_pattern.cache_info()
    assert again == fresh and (info.misses, info.hits) == (1, 9)
    assert make_snippet("short text", "short") == "short text"  # whole: no pattern needed
    assert snippets._terms_pattern.cache_info().misses == 1
