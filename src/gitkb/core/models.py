"""Plain dataclasses shared by every layer. No I/O here."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHUNK_STRATEGIES = ("sentence", "one_chunk_per_doc", "auto")

# The seed's fallback when a caller passes only some chunk parameters.
FALLBACK_CHUNK_SIZE = 1024
FALLBACK_CHUNK_OVERLAP = 200


@dataclass(frozen=True)
class ChunkConfig:
    """How a document is cut into chunks.

    ``strategy``: ``sentence`` (token windows on sentence boundaries with
    overlap), ``one_chunk_per_doc``, or ``auto`` (the default when no parameter
    is given anywhere: whole documents of modest size stay one chunk, long ones
    are cut into sentence windows; see ``gitkb.core.chunking``).
    ``size``/``overlap`` are counted in the embedding model's word pieces.
    """

    strategy: str = "auto"
    size: int | None = None
    overlap: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"chunk_strategy": self.strategy, "chunk_size": self.size, "chunk_overlap": self.overlap}


@dataclass(frozen=True)
class ChunkSpan:
    """One chunk as the chunker cuts it: ``text == document[char_start:char_end]``.

    Lines are 1-based and inclusive; ``line_end`` is the line of the chunk's last
    non-newline character. Consecutive chunks of a document are contiguous or
    overlap: ``next.char_start <= prev.char_end``.
    """

    text: str
    char_start: int
    char_end: int
    line_start: int
    line_end: int
    heading_path: tuple[str, ...] = ()
    token_count: int = 0


@dataclass(frozen=True)
class LoadedText:
    """A file turned into text: what the chunker and the catalog store."""

    text: str
    kind: str  # "markdown" | "text" | "code" | "pdf"
    title: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)  # front matter, PDF info


SKIP_CATEGORIES = (
    "excluded",
    "binary",
    "too_large",
    "encoding_error",
    "parse_error",
    "missing_frontmatter",
    "internal_error",
    "bad_name",  # not valid UTF-8, or a control character: it cannot be stored or shown as is
    "too_deep",  # a folder below the walk's depth cap
    "unreadable",  # permission denied, or vanished while it was walked
    "special_file",  # a FIFO, socket or device
    "sidecar",  # gitkb.yml / kb-manifest.json: configuration, not a document (index setting include_sidecars)
)


@dataclass(frozen=True)
class SkippedFile:
    path: str
    category: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "category": self.category, "detail": self.detail}


@dataclass(frozen=True)
class WalkEntry:
    """A file to load: where it is, and the path it is stored under."""

    abs_path: Path
    rel_path: str  # '/'-separated stored path
