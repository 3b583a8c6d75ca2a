"""What ADD_DOCUMENTS and ADD_TEXT check before anything is written (the service and the preflight
before a job is queued run the same checks): the index, its chunk config, the placement (tenant,
tier, expiry), the path or the text and its size.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitkb.core.chunk_config import resolve_config
from gitkb.core.errors import InvalidArgument, NotFound, TooLarge
from gitkb.core.models import ChunkConfig
from gitkb.core.paths import check_stored_path, escape_name
from gitkb.services.context import Context
from gitkb.services.indexing.guard import ensure_not_managed
from gitkb.services.indexing.indexes import get_index
from gitkb.services.retrieval.tenancy import check_tenant
from gitkb.stores.catalog.indexes import IndexRow

TIERS = ("hot", "warm", "cold")


@dataclass(frozen=True)
class Placement:
    """Where new documents go and what they carry besides their text."""

    tenant: str | None = None
    tier: str | None = None
    expires_at: float | None = None


def placement(tenant: Any = None, tier: Any = None, ttl_seconds: Any = None) -> Placement:
    if tenant is not None and (not isinstance(tenant, str) or not tenant.strip()):
        raise InvalidArgument("tenant must be a non-empty string when given")
    tenant = check_tenant(tenant)  # no control characters (tenancy.check_tenant)
    if tier is not None and tier not in TIERS:
        raise InvalidArgument(f"tier must be one of {', '.join(TIERS)}, got {tier!r}")
    expires = None
    if ttl_seconds is not None:
        if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int | float) or ttl_seconds <= 0:
            raise InvalidArgument(f"ttl_seconds must be a positive number of seconds, got {ttl_seconds!r}")
        expires = time.time() + float(ttl_seconds)
    return Placement(tenant, tier, expires)


def chunk_config_for(row: IndexRow, size: Any, overlap: Any, strategy: Any) -> tuple[ChunkConfig, list[str]]:
    for name, v in (("chunk_size", size), ("chunk_overlap", overlap)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise InvalidArgument(f"{name} must be an integer, got {v!r}")
    if strategy is not None and not isinstance(strategy, str):
        raise InvalidArgument(f"chunk_strategy must be a string, got {strategy!r}")
    return resolve_config(strategy, size, overlap, defaults=row.chunk_defaults)


def admit_documents(
    ctx: Context,
    *,
    index_name: Any = None,
    filepath: Any = None,
    chunk_size: Any = None,
    chunk_overlap: Any = None,
    chunk_strategy: Any = None,
    tenant: Any = None,
    tier: Any = None,
    ttl_seconds: Any = None,
    **_: Any,  # the action's other parameters (base_path, progress) need no check
) -> tuple[IndexRow, ChunkConfig, list[str], Placement, Path]:
    """ADD_DOCUMENTS' checks, before anything is written (also run before its job is queued):
    (index, chunk config, warnings, placement, target path)."""
    row = get_index(ctx, index_name)
    ensure_not_managed(ctx, row, "ADD_DOCUMENTS")
    cfg, warnings = chunk_config_for(row, chunk_size, chunk_overlap, chunk_strategy)
    place = placement(tenant, tier, ttl_seconds)
    if not isinstance(filepath, str | os.PathLike) or not str(filepath).strip():
        raise InvalidArgument("filepath is required: a file or directory to add")
    target = Path(filepath).expanduser()
    if not target.exists():
        raise NotFound(
            f"path {escape_name(str(filepath))!r} does not exist",
            next_steps=["check the path; it is read by this process"],
        )
    return row, cfg, list(warnings), place, target


def check_text_size(text: str, max_bytes: int, *, field: str = "text") -> None:
    """ADD_TEXT is capped like a file (``max_file_bytes``, 10 MB by default): over it, ``too_large``.
    A text that is not valid Unicode (lone surrogates) is ``invalid_argument``."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidArgument(
            f"{field} is not valid Unicode (a lone surrogate at character {exc.start}); nothing was written"
        ) from exc
    if size > max_bytes:
        raise TooLarge(
            f"{field} is {size} bytes, over the limit of {max_bytes} bytes for one document; nothing was written",
            next_steps=["split the text into several documents of at most that size"],
            details={"size": size, "limit": max_bytes},
        )


def admit_text(
    ctx: Context,
    *,
    index_name: Any = None,
    text: Any = None,
    metadata: Any = None,
    filepath: Any = None,
    chunk_size: Any = None,
    chunk_overlap: Any = None,
    chunk_strategy: Any = None,
    tenant: Any = None,
    tier: Any = None,
    ttl_seconds: Any = None,
    **_: Any,
) -> tuple[IndexRow, ChunkConfig, list[str], Placement]:
    """ADD_TEXT's checks, before anything is written (also run before its job is queued)."""
    row = get_index(ctx, index_name)
    ensure_not_managed(ctx, row, "ADD_TEXT")
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgument("text must be a non-empty string")
    check_text_size(text, ctx.settings.max_file_bytes)
    if metadata is not None and not isinstance(metadata, dict):
        raise InvalidArgument('metadata must be a JSON object, e.g. {"title": "On-call handbook"}')
    cfg, warnings = chunk_config_for(row, chunk_size, chunk_overlap, chunk_strategy)
    place = placement(tenant, tier, ttl_seconds)
    if filepath is not None:
        check_stored_path(filepath)
    return row, cfg, list(warnings), place
