"""What the model reads for a chunk, and the key its vector is stored and reused under.

``embedding_input``: the chunk's text after the title and headings it does not start with;
``model_inputs``: one such text per chunk, or its sentence windows when it overflows the model and
``POOL_WINDOWS`` is on; ``input_key``: the content hash of exactly what the model read;
``clipped_count``: how many chunks exceed the model's input window.
"""

from __future__ import annotations

import re

from gitkb.core import ids
from gitkb.core.chunk_config import AUTO_CHUNK_OVERLAP, AUTO_CHUNK_SIZE
from gitkb.core.chunking import chunk_text
from gitkb.core.embedders import Embedder
from gitkb.core.models import ChunkConfig
from gitkb.services.context import Context
from gitkb.stores.catalog import vector_state as vs
from gitkb.stores.catalog.vector_state import VectorSource

# Special tokens the model adds around each text ([CLS] ... [SEP]) but chunk token counts leave out.
SPECIAL_TOKENS = {"fastembed": 2}
# What the model reads for a chunk (measured with the default model, README "Performance"): the
# document title and heading path the chunk's text does not start with ("Title > Section"), a blank
# line, then the text (SciFact train, semantic nDCG@10 of 256-piece windows: 0.673 -> 0.677; one
# mean-pooled vector per abstract: 0.650 -> 0.666). With POOL_WINDOWS, a chunk longer than the
# model's window is cut into sentence windows (POOL_WINDOW/POOL_OVERLAP pieces) embedded the same
# way and their vectors averaged; off by default: on whole SciFact abstracts it read 1.86x the
# texts for semantic 0.661 -> 0.666 and hybrid 0.739 -> 0.735 (the ``auto`` chunking already
# keeps chunks within the window).
EMBED_CONTEXT = True
POOL_WINDOWS = False
POOL_WINDOW = AUTO_CHUNK_SIZE
POOL_OVERLAP = AUTO_CHUNK_OVERLAP
_LEAD = re.compile(r"^[\s#>*_`]+")


def context_path(text: str, title: str | None, heading_path: list[str]) -> list[str]:
    """Title, then headings (repeats dropped), less the trailing ones ``text`` already starts with."""
    parts: list[str] = []
    for p in [title or "", *heading_path]:
        p = " ".join(str(p).split())
        if p and (not parts or parts[-1].casefold() != p.casefold()):
            parts.append(p)
    head = _LEAD.sub("", text[:400]).casefold()
    while parts and head.startswith(parts[-1].casefold()):
        parts.pop()
    return parts


def embedding_input(text: str, title: str | None, heading_path: list[str]) -> str:
    """What the model reads for one text: ``"Title > Section\\n\\n" + text`` (just ``text`` with no context)."""
    parts = context_path(text, title, heading_path) if EMBED_CONTEXT else []
    return f"{' > '.join(parts)}\n\n{text}" if parts else text


def model_inputs(ctx: Context, emb: Embedder, sources: list[VectorSource]) -> dict[int, list[str]]:
    """cid -> the texts embedded for that chunk: one, or its windows when it overflows the model."""
    ctxs = vs.embedding_contexts(ctx.catalog.conn, [s.cid for s in sources])
    # Windows of the model's input size, never finer than POOL_WINDOW pieces.
    window = max(emb.max_input_tokens - SPECIAL_TOKENS.get(emb.identity.split("/", 1)[0], 0), POOL_WINDOW)
    out: dict[int, list[str]] = {}
    for s in sources:
        title, hp, n = ctxs.get(s.cid, (None, [], None))
        if POOL_WINDOWS and n is not None and n > window:
            windows = [w.text for w in chunk_text(s.text, ChunkConfig("sentence", window, POOL_OVERLAP))]
        else:
            windows = [s.text]
        out[s.cid] = [embedding_input(w, title, hp) for w in windows]
    return out


def input_key(source: VectorSource, inputs: list[str]) -> str:
    """The content-hash key a vector is stored and reused under: the chunk's own hash when the
    model reads just its text, else a hash of exactly what it reads."""
    return source.content_hash if inputs == [source.text] else ids.content_hash("\x00".join(inputs))


def clipped_count(emb: Embedder, token_counts: list[int]) -> int:
    """How many chunks of these word-piece counts exceed the embedder's input window."""
    extra = SPECIAL_TOKENS.get(emb.identity.split("/", 1)[0], 0)
    return sum(1 for n in token_counts if n + extra > emb.max_input_tokens)
