"""Chunker tests, with the real tokenizer.

Run as a script (``python tests/test_chunking.py [DIR]``) to time ``chunk_many``
over a markdown corpus (default: the awsdocs sample) with the ``auto`` config.
"""

from __future__ import annotations

import time
from bisect import bisect_left

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from gitkb.core import chunk_config
from gitkb.core.chunk_config import AUTO_CHUNK_SIZE, AUTO_WHOLE_DOC_MAX_TOKENS, resolve_config
from gitkb.core.chunking import chunk_many, chunk_text, reassemble
from gitkb.core.errors import InvalidArgument
from gitkb.core.markdown_lines import scan_markdown
from gitkb.core.models import ChunkConfig, ChunkSpan
from gitkb.core.tokenizer import count_tokens, get_tokenizer

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def hf_starts(text: str) -> list[int]:
    """Where each word piece of the whole document starts (the tokenizer itself, no cache)."""
    return [s for s, _ in get_tokenizer().encode(text, add_special_tokens=False).offsets]


def check_chunks(text: str, chunks: list[ChunkSpan], size: int | None = None) -> None:
    """Every promise of ``chunk_text`` about coordinates, coverage, progress, lines and sizes."""
    if not text:
        assert chunks == []
        return
    assert chunks, "a non-empty document gives at least one chunk"
    assert chunks[0].char_start == 0
    assert chunks[-1].char_end == len(text)
    starts = hf_starts(text)
    for i, c in enumerate(chunks):
        assert c.text == text[c.char_start : c.char_end]
        assert c.char_start < c.char_end
        if i:
            prev = chunks[i - 1]
            assert c.char_start <= prev.char_end, "no gap"
            assert c.char_start > prev.char_start and c.char_end > prev.char_end, "progress"
            assert not c.text[0].isspace(), "only the first chunk may start with whitespace"
        assert c.line_start == text.count("\n", 0, c.char_start) + 1
        body = c.text.rstrip("\r\n")
        last = c.char_start + len(body) - 1
        expected_end = text.count("\n", 0, last) + 1 if body else c.line_start
        assert c.line_end == expected_end
        # token_count: the document's word pieces that start inside the chunk
        lo, hi = bisect_left(starts, c.char_start), bisect_left(starts, c.char_end)
        assert c.token_count == hi - lo
        if size is not None and c.token_count > size:
            # an unsplittable token run: all its pieces come from one char
            assert len(set(starts[lo:hi])) == 1, (c, size)
    assert reassemble(chunks) == text


# --------------------------------------------------------------------------- random documents

FRAGMENTS = [
    "Hello world. ",
    "Is it? ",
    "Yes! ",
    "e.g. this ",
    "café naïve ",
    "한국어 문장. ",
    "日本語の文。 ",
    "emoji 🎉 ok. ",
    "x\u200by ",
    "a\x0bb ",
    "tab\there ",
    "\u00a0nbsp ",
    "\x85nel ",
    "\n",
    "\r\n",
    "\n\n",
    "   \n",
    "# Title\n",
    "## Section two ##\n",
    "   ### Indented\n",
    "#nohash\n",
    "Setext\n=====\n",
    "Under\n---\n",
    "```python\nx = 1. y = 2\n# comment\n```\n",
    "~~~\ncode\n~~~\n",
    "```\nunclosed fence\n",
    "- item one\n- item two\n",
    "1. first\n2. second\n",
    "> quote\n",
    "| a | b |\n|---|---|\n",
    "---\ntitle: x\n---\n",
    "s3://bucket/key.json?x=1&y=2 ",
    "http://example.com/a/b/c ",
]

long_word = st.integers(min_value=30, max_value=400).map(lambda n: "supercalifragilistic" * (n // 20) + " ")
fragment = st.one_of(st.sampled_from(FRAGMENTS), st.text(min_size=1, max_size=30), long_word)
documents = st.lists(fragment, max_size=40).map("".join)


@st.composite
def windows(draw: st.DrawFn) -> tuple[int, int]:
    size = draw(st.integers(min_value=1, max_value=80))
    overlap = draw(st.integers(min_value=0, max_value=size - 1))
    return size, overlap


@SETTINGS
@given(text=documents, window=windows(), markdown=st.booleans())
def test_sentence_chunks_keep_every_promise(text: str, window: tuple[int, int], markdown: bool) -> None:
    size, overlap = window
    chunks = chunk_text(text, ChunkConfig("sentence", size, overlap), markdown=markdown)
    check_chunks(text, chunks, size)


@SETTINGS
@given(text=documents, markdown=st.booleans())
def test_auto_and_whole_doc_keep_every_promise(text: str, markdown: bool) -> None:
    check_chunks(text, chunk_text(text, ChunkConfig("auto"), markdown=markdown), AUTO_CHUNK_SIZE)
    whole = chunk_text(text, ChunkConfig("one_chunk_per_doc"), markdown=markdown)
    check_chunks(text, whole)
    assert len(whole) == (1 if text else 0)


@SETTINGS
@given(texts=st.lists(st.one_of(documents, st.text()), max_size=5))
def test_count_tokens_is_the_tokenizer_count(texts: list[str]) -> None:
    expected = [len(get_tokenizer().encode(t, add_special_tokens=False).ids) for t in texts]
    assert count_tokens(texts) == expected


@settings(max_examples=30, deadline=None)
@given(items=st.lists(st.tuples(documents, windows(), st.booleans()), max_size=6))
def test_chunk_many_equals_chunk_text(items: list[tuple[str, tuple[int, int], bool]]) -> None:
    batch = [(t, ChunkConfig("sentence", s, o), md) for t, (s, o), md in items]
    assert chunk_many(batch) == [chunk_text(t, c, markdown=md) for t, c, md in batch]


# --------------------------------------------------------------------------- behaviour

PROSE = " ".join(f"Sentence number {i} has a few plain words." for i in range(200))


@pytest.mark.parametrize("text", ["x.\x0bY z", "a\x0bb. c\x85d.\x1ce", "one.\x0c\ntwo"])
def test_chars_the_tokenizer_deletes(text: str) -> None:
    for size in (1, 2, 5):
        check_chunks(text, chunk_text(text, ChunkConfig("sentence", size, 0)), size)
    assert count_tokens([text]) == [len(hf_starts(text))]


def test_empty_and_blank_documents() -> None:
    assert chunk_text("", ChunkConfig("sentence", 10, 2)) == []
    (only,) = chunk_text(" \n\n\t ", ChunkConfig("sentence", 10, 2))
    assert (only.char_start, only.char_end, only.token_count) == (0, 5, 0)
    assert (only.line_start, only.line_end) == (1, 3)  # the last non-newline char is on line 3


def test_overlap_really_overlaps() -> None:
    chunks = chunk_text(PROSE, ChunkConfig("sentence", 64, 16))
    check_chunks(PROSE, chunks, 64)
    assert len(chunks) > 10
    for prev, nxt in zip(chunks, chunks[1:], strict=False):
        assert nxt.char_start < prev.char_end
        (repeated,) = count_tokens([PROSE[nxt.char_start : prev.char_end]])
        assert 0 < repeated <= 16
        assert nxt.text.startswith("Sentence"), "windows move by whole sentences"


def test_no_overlap_means_contiguous_chunks() -> None:
    chunks = chunk_text(PROSE, ChunkConfig("sentence", 64, 0))
    assert all(n.char_start == p.char_end for p, n in zip(chunks, chunks[1:], strict=False))
    assert all(c.token_count <= 64 for c in chunks)


def test_one_chunk_per_doc() -> None:
    (chunk,) = chunk_text(PROSE, ChunkConfig("one_chunk_per_doc"))
    assert chunk.text == PROSE and chunk.token_count == count_tokens([PROSE])[0]
    assert chunk.line_start == chunk.line_end == 1


def test_auto_keeps_short_documents_whole() -> None:
    assert count_tokens(["word " * 10]) == [10]
    at_limit = "word " * AUTO_WHOLE_DOC_MAX_TOKENS
    (whole,) = chunk_text(at_limit, ChunkConfig("auto"))
    assert whole.token_count == AUTO_WHOLE_DOC_MAX_TOKENS
    over = chunk_text(at_limit + "word", ChunkConfig("auto"))
    assert len(over) > 1 and all(c.token_count <= AUTO_CHUNK_SIZE for c in over)
    check_chunks(at_limit + "word", over, AUTO_CHUNK_SIZE)


def test_auto_windows_follow_the_module_constants(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunk_config, "AUTO_WHOLE_DOC_MAX_TOKENS", 20)
    monkeypatch.setattr(chunk_config, "AUTO_CHUNK_SIZE", 30)
    monkeypatch.setattr(chunk_config, "AUTO_CHUNK_OVERLAP", 0)
    chunks = chunk_text(PROSE[:500], ChunkConfig("auto"))
    assert len(chunks) > 2 and all(c.token_count <= 30 for c in chunks)
    assert all(n.char_start == p.char_end for p, n in zip(chunks, chunks[1:], strict=False))


MARKDOWN = """\
# Guide <a name="guide"></a>

Intro text. More intro.

## Install \\(Linux\\)

Run the installer. It takes a minute.

```sh
# not a heading. Just a comment.
make install
```

### Check

Look at the logs.

Usage
-----

Call it. Then wait.

# Appendix

The end.
"""


def test_heading_paths_on_markdown() -> None:
    chunks = chunk_text(MARKDOWN, ChunkConfig("sentence", 16, 0), markdown=True)
    check_chunks(MARKDOWN, chunks, 16)
    path_of = {c.text.split("\n")[0]: c.heading_path for c in chunks}
    assert path_of['# Guide <a name="guide"></a>'] == ("Guide",)
    assert path_of["## Install \\(Linux\\)"] == ("Guide", "Install (Linux)")
    assert path_of["### Check"] == ("Guide", "Install (Linux)", "Check")
    assert path_of["Usage"] == ("Guide", "Usage")
    assert path_of["# Appendix"] == ("Appendix",)
    assert all("# not a heading" not in c.text or c.heading_path[-1] == "Install (Linux)" for c in chunks)
    # with the flag off there is no markdown structure
    assert all(c.heading_path == () for c in chunk_text(MARKDOWN, ChunkConfig("sentence", 12, 0)))


def test_chunks_start_at_headings_and_fences_stay_whole() -> None:
    chunks = chunk_text(MARKDOWN, ChunkConfig("sentence", 40, 8), markdown=True)
    check_chunks(MARKDOWN, chunks, 40)
    fence = MARKDOWN[MARKDOWN.index("```sh") : MARKDOWN.index("```\n\n###") + 4]
    assert any(fence in c.text for c in chunks), "a code block that fits is never cut"
    firsts = [c.text.split("\n")[0] for c in chunks]
    # each chunk is at least half full before it ends at a heading, and then starts at one
    assert firsts == ['# Guide <a name="guide"></a>', "## Install \\(Linux\\)", "### Check", "# Appendix"]


def test_long_code_block_is_cut_by_lines() -> None:
    code = "```\n" + "".join(f"line_{i} = compute({i}) . next\n" for i in range(60)) + "```\n"
    chunks = chunk_text(code, ChunkConfig("sentence", 50, 0), markdown=True)
    check_chunks(code, chunks, 50)
    assert len(chunks) > 3
    assert all(c.char_end == len(code) or code[c.char_end - 1] == "\n" for c in chunks), "cuts at line ends"


def test_long_word_is_cut_at_word_pieces() -> None:
    text = "start " + "x" * 5 + "abc" * 300 + " end."
    chunks = chunk_text(text, ChunkConfig("sentence", 16, 4))
    check_chunks(text, chunks, 16)
    assert all(c.token_count <= 16 for c in chunks)


def test_hangul_syllable_is_an_unsplittable_run() -> None:
    text = "한" * 3
    (first, *_rest) = chunks = chunk_text(text, ChunkConfig("sentence", 1, 0))
    check_chunks(text, chunks, 1)
    assert first.text == "한" and first.token_count == 3


def test_crlf_line_numbers() -> None:
    text = "one.\r\ntwo.\r\n\r\nthree four five.\r\n"
    chunks = chunk_text(text, ChunkConfig("sentence", 2, 0))
    check_chunks(text, chunks, 2)
    assert [(c.line_start, c.line_end) for c in chunks] == [(1, 1), (2, 2), (4, 4), (4, 4)]
    (whole,) = chunk_text(text, ChunkConfig("one_chunk_per_doc"))
    assert (whole.line_start, whole.line_end) == (1, 4)


def test_markdown_scan_agrees_with_markdown_it() -> None:
    blocks = [
        "# One\n",
        "  ## Two ##\n",
        "Para line\nsecond line\n",
        "Setext one\n==\n",
        "Setext\ntwo lines\n---\n",
        "```\n# inside\nText\n---\n```\n",
        "~~~~\n## inside\n~~~~\n",
        "***\n",
        "- list\n- items\n",
        "####### seven\n",
        "#no space\n",
        "    # indented code\n",
    ]
    md = MarkdownIt("commonmark")
    for i in range(len(blocks)):
        doc = "\n".join(blocks[i:] + blocks[:i])
        tokens = md.parse(doc)
        expected = [(t.map[0] + 1, int(t.tag[1])) for t in tokens if t.type == "heading_open" and t.map]
        headings = scan_markdown(doc).headings
        found = [(doc.count("\n", 0, s) + 1, level) for s, _e, level, _t in headings]
        assert found == expected, doc


# --------------------------------------------------------------------------- config


def test_resolve_config_defaults_and_merging() -> None:
    assert resolve_config(None, None, None) == (ChunkConfig("auto", None, None), [])
    assert resolve_config("auto", None, None) == (ChunkConfig("auto", None, None), [])
    assert resolve_config(None, 300, None)[0] == ChunkConfig("sentence", 300, 200)
    assert resolve_config(None, None, 50)[0] == ChunkConfig("sentence", 1024, 50)
    assert resolve_config("sentence", None, None)[0] == ChunkConfig("sentence", 1024, 200)
    stored = ChunkConfig("sentence", 512, 64)
    assert resolve_config(None, None, None, defaults=stored)[0] == stored
    assert resolve_config(None, 256, None, defaults=stored)[0] == ChunkConfig("sentence", 256, 64)
    stored_auto = ChunkConfig("auto", None, None)
    assert resolve_config(None, None, None, defaults=stored_auto)[0] == stored_auto
    assert resolve_config(None, 300, None, defaults=stored_auto)[0] == ChunkConfig("sentence", 300, 200)
    assert resolve_config("auto", 300, None)[0] == ChunkConfig("auto", 300, 200)
    config, warnings = resolve_config(None, 100, None)
    assert config == ChunkConfig("sentence", 100, 20) and "chunk_overlap" in warnings[0]


def test_resolve_config_one_chunk_per_doc_warns_about_size() -> None:
    config, warnings = resolve_config("one_chunk_per_doc", 500, None)
    assert config.strategy == "one_chunk_per_doc"
    assert warnings == ["chunk_size is ignored with chunk_strategy one_chunk_per_doc"]
    assert resolve_config("one_chunk_per_doc", None, None)[1] == []
    assert resolve_config("one_chunk_per_doc", None, 10)[1] == [
        "chunk_overlap is ignored with chunk_strategy one_chunk_per_doc"
    ]


@pytest.mark.parametrize(
    ("strategy", "size", "overlap", "needle"),
    [
        ("paragraph", None, None, "sentence, one_chunk_per_doc, auto"),
        ("sentence", 0, None, "chunk_size"),
        ("sentence", -5, 0, "chunk_size"),
        ("sentence", 100, -1, "chunk_overlap"),
        ("sentence", 100, 100, "smaller than chunk_size"),
        (None, None, 2000, "smaller than chunk_size"),
        ("sentence", True, None, "chunk_size"),
    ],
)
def test_resolve_config_errors(
    strategy: str | None, size: int | None, overlap: int | None, needle: str
) -> None:
    with pytest.raises(InvalidArgument) as err:
        resolve_config(strategy, size, overlap)
    assert needle in err.value.message
    assert err.value.code == "invalid_argument"


def test_chunk_text_rejects_a_bad_config() -> None:
    with pytest.raises(InvalidArgument):
        chunk_text("text", ChunkConfig("sentence", 10, 10))
    with pytest.raises(InvalidArgument):
        chunk_text("text", ChunkConfig("nope"))


# --------------------------------------------------------------------------- speed


def test_tokenizer_is_shared_and_unbounded() -> None:
    tok = get_tokenizer()
    assert tok is get_tokenizer()
    assert tok.truncation is None and tok.padding is None


def test_threads_and_a_tiny_word_cache_give_the_same_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from gitkb.core import tokenizer

    docs = [(f"Doc {i}: " + PROSE[i * 300 : i * 300 + 3000] + MARKDOWN, i % 2 == 0) for i in range(6)]
    config = ChunkConfig("sentence", 48, 8)
    expected = [chunk_text(t, config, markdown=md) for t, md in docs]
    tokenizer._word_counts.clear()
    tokenizer.learn_words(set())  # just the seed
    monkeypatch.setattr(tokenizer, "WORD_CACHE_MAX", len(tokenizer._word_counts) + 50)  # clears all the time
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda d: chunk_text(d[0], config, markdown=d[1]), docs * 2))
    assert got == expected * 2


COLD_WORDS = (
    "Use DynamoDB's UpdateItem (see https://docs.aws.amazon.com/amazondynamodb/latest/APIReference) on "
    "x86_64 or ARM64: c5d.12xlarge, db.t2.medium, v1.11, 0x7FFFFFFF, 1234567890123, ABCDEFGHIJ, "
    "IAMRoleForLambdaExecution, eu-west-1a, S3://my-bucket/key.json, "
    + "Pneumonoultramicroscopicsilicovolcanoconiosis" * 3  # over WordPiece's 100 chars: one [UNK]
    + " naïve Café résumé Ωmega 東京 zażółć ǅemal ﬁle ＡＢＣ ⅻ 1st 2ND ³ snake_case_name camelCaseName"
)


def test_a_cold_word_cache_counts_what_the_tokenizer_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cold words are learnt partly through the WordPiece model alone (ASCII letters and digits,
    lower-cased): their counts, and the chunks made from them, are the whole tokenizer's."""
    from gitkb.core import tokenizer

    words = COLD_WORDS.split()
    texts = [COLD_WORDS, *words, " ".join(w.upper() for w in words), " ".join(w.title() for w in words)]
    expected = [len(get_tokenizer().encode(t, add_special_tokens=False).ids) for t in texts]
    monkeypatch.setattr(tokenizer, "_word_counts", {})
    assert count_tokens(texts) == expected
    text = (COLD_WORDS + ". ") * 40
    monkeypatch.setattr(tokenizer, "_word_counts", {})
    [chunks] = chunk_many([(text, ChunkConfig("sentence", 48, 8), False)])
    starts = hf_starts(text)
    for c in chunks:
        assert c.token_count == bisect_left(starts, c.char_end) - bisect_left(starts, c.char_start)


def test_a_300k_char_document_is_quick() -> None:
    text = ("## Part\n\n" + PROSE + "\n\n```\n" + "code line. x = 1\n" * 50 + "```\n") * 30
    text = text[:300_000]
    chunk_text(text, ChunkConfig("auto"), markdown=True)  # warm the word cache
    start = time.perf_counter()
    chunks = chunk_text(text, ChunkConfig("auto"), markdown=True)
    elapsed = time.perf_counter() - start
    assert reassemble(chunks) == text
    assert elapsed < 2.0, elapsed


def _time_corpus(root: str) -> None:
    """Print how long ``chunk_many`` takes over every ``*.md`` under ``root`` (auto config, markdown)."""
    from pathlib import Path

    paths = sorted(Path(root).rglob("*.md"))
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in paths]
    get_tokenizer()
    config = ChunkConfig("auto")
    for label in ("cold word cache", "warm word cache"):
        wall, cpu = time.perf_counter(), time.process_time()
        result = chunk_many([(t, config, True) for t in texts])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(
            f"{label}: {len(texts)} docs, {sum(map(len, texts)) / 1e6:.1f} M chars -> "
            f"{sum(map(len, result))} chunks in {wall:.2f} s wall, {cpu:.2f} s CPU "
            f"({len(texts) / wall:.0f} docs/s)"
        )


if __name__ == "__main__":
    import sys

    _time_corpus(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/data/awsdocs/docs")
