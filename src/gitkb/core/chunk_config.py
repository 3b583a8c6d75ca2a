"""Chunk parameters: what a call's, an index's and the fallback values add up to, and the window
a ``sentence`` pass gets (``auto`` keeps short documents whole; see :mod:`gitkb.core.chunking`)."""

from __future__ import annotations

from gitkb.core.errors import InvalidArgument
from gitkb.core.models import (
    CHUNK_STRATEGIES,
    FALLBACK_CHUNK_OVERLAP,
    FALLBACK_CHUNK_SIZE,
    ChunkConfig,
)

AUTO_WHOLE_DOC_MAX_TOKENS = 256
AUTO_CHUNK_SIZE = 256
AUTO_CHUNK_OVERLAP = 32


def resolve_config(
    strategy: str | None,
    size: int | None,
    overlap: int | None,
    *,
    defaults: ChunkConfig | None = None,
) -> tuple[ChunkConfig, list[str]]:
    """Merge explicit chunk parameters, the index's stored defaults and the fallbacks; validate.

    Explicit values win, then ``defaults`` (the index's stored ones). When no
    parameter is given anywhere (or only ``strategy="auto"``; stored defaults
    of ``auto`` with no size count as nothing given), the result is
    ``ChunkConfig("auto", None, None)``. Otherwise missing values fall back to
    ``sentence``, size 1024 and overlap 200 (a fallback overlap that would not
    be smaller than the size becomes size // 5, with a warning); ``auto`` with
    a size keeps whole the documents of at most ``AUTO_WHOLE_DOC_MAX_TOKENS``
    pieces and cuts the others with that size. ``one_chunk_per_doc`` drops
    size and overlap, with a warning when they were passed. Returns the config
    and the warnings for the caller to show.
    """
    warnings: list[str] = []
    if strategy is not None and not isinstance(strategy, str):
        raise InvalidArgument(f"chunk_strategy must be one of {', '.join(CHUNK_STRATEGIES)}.")
    strat = strategy.strip().lower() if strategy is not None else None
    if strat is not None and strat not in CHUNK_STRATEGIES:
        raise InvalidArgument(
            f"Unknown chunk_strategy {strategy!r}: use one of {', '.join(CHUNK_STRATEGIES)}."
        )
    for name, value, low in (("chunk_size", size, 1), ("chunk_overlap", overlap, 0)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise InvalidArgument(
                f"{name} must be an integer >= {low} (got {value!r}); pass a value >= {low}."
            )
    d = defaults or ChunkConfig(strategy="", size=None, overlap=None)
    if d == ChunkConfig("auto", None, None):
        d = ChunkConfig(strategy="", size=None, overlap=None)  # stored "nothing given" is nothing given
    strat = strat or (d.strategy or None)
    if strat == "one_chunk_per_doc":
        for name, value in (("chunk_size", size), ("chunk_overlap", overlap)):
            if value is not None:
                warnings.append(f"{name} is ignored with chunk_strategy one_chunk_per_doc")
        return ChunkConfig("one_chunk_per_doc", None, None), warnings
    size_v = size if size is not None else d.size
    overlap_v = overlap if overlap is not None else d.overlap
    if strat is None and size_v is None and overlap_v is None:
        return ChunkConfig("auto", None, None), warnings
    if strat == "auto" and size_v is None and overlap_v is None:
        return ChunkConfig("auto", None, None), warnings
    strat = strat or "sentence"
    if size_v is None:
        size_v = FALLBACK_CHUNK_SIZE
    if overlap_v is None:
        overlap_v = _fallback_overlap(size_v)
        if overlap_v != FALLBACK_CHUNK_OVERLAP:
            warnings.append(
                f"chunk_overlap defaults to {overlap_v} because the usual {FALLBACK_CHUNK_OVERLAP} "
                f"is not smaller than chunk_size {size_v}"
            )
    config = ChunkConfig(strat, size_v, overlap_v)
    check_config(config)
    return config, warnings


def _fallback_overlap(size: int) -> int:
    return FALLBACK_CHUNK_OVERLAP if size > FALLBACK_CHUNK_OVERLAP else size // 5


def check_config(config: ChunkConfig) -> None:
    if config.strategy not in CHUNK_STRATEGIES:
        raise InvalidArgument(
            f"Unknown chunk_strategy {config.strategy!r}: use one of {', '.join(CHUNK_STRATEGIES)}."
        )
    if config.size is not None and config.size < 1:
        raise InvalidArgument(f"chunk_size must be >= 1 (got {config.size}); pass a positive chunk_size.")
    if config.overlap is not None and config.overlap < 0:
        raise InvalidArgument(f"chunk_overlap must be >= 0 (got {config.overlap}); pass 0 for no overlap.")
    if config.size is not None and config.overlap is not None and config.overlap >= config.size:
        raise InvalidArgument(
            f"chunk_overlap ({config.overlap}) must be smaller than chunk_size ({config.size}); "
            "lower chunk_overlap or raise chunk_size."
        )


def sentence_size_overlap(config: ChunkConfig) -> tuple[int, int]:
    """Size and overlap a ``sentence`` pass uses under ``config``."""
    if config.strategy == "auto" and config.size is None:
        size = AUTO_CHUNK_SIZE
        overlap = AUTO_CHUNK_OVERLAP if config.overlap is None else config.overlap
    else:
        size = config.size if config.size is not None else FALLBACK_CHUNK_SIZE
        overlap = config.overlap if config.overlap is not None else _fallback_overlap(size)
    return size, min(overlap, size - 1)


def sentence_window(config: ChunkConfig, counts: list[int]) -> tuple[int, int] | None:
    """(size, overlap) of the sentence pass a document of units ``counts`` gets, or None to keep it whole."""
    strategy = config.strategy
    if strategy == "one_chunk_per_doc":
        return None
    if strategy == "auto" and sum(counts) <= AUTO_WHOLE_DOC_MAX_TOKENS:
        return None
    return sentence_size_overlap(config)
