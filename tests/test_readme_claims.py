"""The README's "Chunking" section, checked (issue 21: a README that is true).

It used to say every chunk of the default chunking is embedded whole; the model reads 256 word
pieces *including* its two special tokens, after the title/heading prefix the chunk is embedded
with, so a full 256-piece window is not. These tests pin what the README says now, on
example_kb_repo and on the first 150 awsdocs pages (``-s`` prints the figures).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gitkb.core.chunk_config import (
    AUTO_CHUNK_OVERLAP,
    AUTO_CHUNK_SIZE,
    AUTO_WHOLE_DOC_MAX_TOKENS,
    resolve_config,
)
from gitkb.core.chunking import chunk_many
from gitkb.core.embedders.fastembed_minilm import MAX_INPUT_TOKENS
from gitkb.core.loading import read_and_load
from gitkb.core.models import LoadedText
from gitkb.core.tokenizer import count_tokens
from gitkb.services.derived.embedding_inputs import SPECIAL_TOKENS, embedding_input

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text("utf-8")
AWSDOCS = REPO.parent / "shared" / "data" / "awsdocs" / "docs"
WHOLE = MAX_INPUT_TOKENS - SPECIAL_TOKENS["fastembed"]  # pieces of text the default model reads whole


def _chunking_section() -> str:
    m = re.search(r"^## Chunking\n(.*?)^## ", README, re.S | re.M)
    assert m, "README has a Chunking section"
    return " ".join(m.group(1).split())


def _measure(paths: list[Path], root: Path) -> tuple[list[LoadedText], list[int], list[int]]:
    """(documents, word pieces of each default chunk, word pieces of what the model reads for it)."""
    cfg, _ = resolve_config(None, None, None)
    docs = [read_and_load(p, p.relative_to(root).as_posix()) for p in paths]
    spans = chunk_many([(d.text, cfg, d.kind == "markdown") for d in docs])
    pieces = [c.token_count for s in spans for c in s]
    inputs = [
        embedding_input(c.text, d.title, list(c.heading_path))
        for d, s in zip(docs, spans, strict=True)
        for c in s
    ]
    return docs, pieces, count_tokens(inputs)


def test_the_numbers_in_the_section_are_the_code_s() -> None:
    text = _chunking_section()
    assert (
        AUTO_WHOLE_DOC_MAX_TOKENS == AUTO_CHUNK_SIZE == MAX_INPUT_TOKENS == 256 and AUTO_CHUNK_OVERLAP == 32
    )
    assert "of up to 256 word pieces stays one chunk" in text
    assert "windows of at most 256 with 32 of overlap" in text
    assert f"fit in {WHOLE} pieces" in text and "including its two special tokens" in text
    assert "every chunk is embedded whole" not in text  # the claim that was not true


def test_every_example_kb_chunk_is_embedded_whole() -> None:
    """README: "Every chunk of example_kb_repo fits" (one chunk per page, prefix included)."""
    root = REPO / "example_kb_repo"
    docs, pieces, inputs = _measure(sorted(root.glob("docs/**/*.md")), root)
    print(
        f"\nexample_kb_repo: {len(docs)} pages, {len(pieces)} chunks, largest model input {max(inputs)} pieces"
    )
    assert len(pieces) == len(docs) == 6  # each page is under 256 pieces: one chunk
    assert max(inputs) <= WHOLE
    assert "Every chunk of example_kb_repo fits" in _chunking_section()


@pytest.mark.skipif(not AWSDOCS.is_dir(), reason="../shared/data/awsdocs is not here")
def test_awsdocs_figures() -> None:
    """README: of the first 150 awsdocs pages' 1,239 chunks, 81 are over 254 pieces on their own
    and 309 with the prefix; none is over 256."""
    docs, pieces, inputs = _measure(sorted(AWSDOCS.glob("*/*.md"))[:150], AWSDOCS)
    over_own = sum(1 for n in pieces if n > WHOLE)
    over_input = sum(1 for n in inputs if n > WHOLE)
    print(
        f"\nawsdocs first 150 pages: {len(pieces)} chunks, largest {max(pieces)} pieces;"
        f" over {WHOLE}: {over_own} on their own, {over_input} with the title/heading prefix"
    )
    assert max(pieces) <= AUTO_CHUNK_SIZE
    assert (len(pieces), over_own, over_input) == (1239, 81, 309)
    assert (
        f"{len(pieces):,} chunks, {over_own} are over {WHOLE} pieces on their own and {over_input} with"
        in (_chunking_section())
    )
