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
