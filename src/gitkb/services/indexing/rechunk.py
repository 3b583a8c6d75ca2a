"""RECHUNK: cut every document of an index again, in a temporary index, then swap it in.

1. Mark the index as being rebuilt (a catalog row, plus an OS file lock held
   for the duration, so a marker left by a killed process is recognised as
   stale) and create a hidden temporary index ``.rechunk.<index id>.<token>``.
2. Re-chunk each document's stored text (the catalog keeps the full text of
   files and of ADD_TEXT entries, so nothing is reassembled or approximated)
   into the temporary index, keeping document ids: unchanged chunk texts get
   the same chunk ids, and their vectors are reused by content hash.
3. Swap in one catalog transaction: the old documents go, the new ones move
   to the original index id (delete-then-rename), the change log gets the
   new chunks' adds before the old chunks' removes (so vectors are reused
   before they are deleted), the temporary index is dropped. Just before, the
   keyword index switches from the old chunks to the new ones in one commit,
   so a search never finds the index empty (``catchup.switch_keywords``).

Writes to the index during the rebuild get ``conflict``. On failure, or after
a crash, the original index is untouched; the temporary index is dropped (now
or at the next write or RECHUNK that finds the stale marker).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Callable
from typing import Any

from gitkb.core import ids
from gitkb.core.chunk_config import resolve_config
from gitkb.core.chunking import chunk_many
from gitkb.core.errors import Conflict, GitkbError, InvalidArgument
from gitkb.core.faults import crash_point
from gitkb.core.models import ChunkConfig
from gitkb.services.context import Context
from gitkb.services.derived import embeddings
from gitkb.services.derived.catchup import catch_up_keywords, switch_keywords
from gitkb.services.derived.index_lookup import get_index
from gitkb.services.derived.rebuild_guard import (
    _drop_temp as _drop_temp,
)
from gitkb.services.derived.rebuild_guard import (
    _lock_path as _lock_path,
)
from gitkb.services.derived.rebuild_guard import (
    _release as _release,
)
from gitkb.services.derived.rebuild_guard import (
    _try_lock as _try_lock,
)
from gitkb.stores.catalog import changes
from gitkb.stores.catalog import documents as doc_rows
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import vector_state as vs
from gitkb.stores.catalog.indexes import IndexRow

BATCH = 64  # documents re-chunked per transaction
Progress = Callable[[int, int], None]


def rechunk(
    ctx: Context,
    index_name: Any,
    *,
    chunk_size: Any = None,
    chunk_overlap: Any = None,
    chunk_strategy: Any = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """RECHUNK an index with new chunk parameters (falling back to the index defaults, then the core's)."""
    row = get_index(ctx, index_name)
    for name, v in (("chunk_size", chunk_size), ("chunk_overlap", chunk_overlap)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise InvalidArgument(f"{name} must be an integer, got {v!r}")
    cfg, warnings = resolve_config(chunk_strategy, chunk_size, chunk_overlap, defaults=row.chunk_defaults)
    lock = _try_lock(_lock_path(ctx, row.id))
    if lock is None:
        rb = vs.get_rebuild(ctx.catalog.conn, row.id)
        raise Conflict(
            f"index {row.name!r} is already being rebuilt"
            + (f" (temporary index {rb.temp_index_name!r})" if rb else ""),
            details={"index_name": row.name},
        )
    rb = None
    try:
        with ctx.write_lock:
            stale = vs.get_rebuild(ctx.catalog.conn, row.id)
            if stale is not None:  # left by a process that died: we hold the lock, so it is stale
                _drop_temp(ctx, stale)
            embeddings.prepare_write(ctx, row)
            rb = vs.Rebuild(
                row.id,
                ids.new_index_id(),
                f".rechunk.{row.id}.{secrets.token_hex(4)}",
                os.getpid(),
                time.time(),
            )
            _insert_temp(ctx, row, rb, cfg)
        before = index_rows.stats(ctx.catalog.conn, row.id)["chunk_count"]
        docs, tokens = _build(ctx, row, rb, cfg, progress)
        crash_point("rechunk.before_swap")
        with ctx.write_lock:
            conn = ctx.catalog.conn
            # Keywords first, in one commit: searches go from the old chunks to the new ones, never to none.
            switch_keywords(
                ctx,
                row.id,
                vs.chunk_cids_of_index(conn, row.id),
                vs.chunk_cids_of_index(conn, rb.temp_index_id),
            )
            crash_point("rechunk.after_keywords")
            _swap(ctx, row, rb, cfg)
            catch_up_keywords(ctx)
    except BaseException as exc:
        if rb is not None:
            with contextlib.suppress(Exception):  # the original error matters more
                _drop_temp(ctx, rb)
        if isinstance(exc, GitkbError):
            exc.details.setdefault("temporary_index", rb.temp_index_name if rb else None)
            exc.message = f"RECHUNK of {row.name!r} failed, the index is unchanged: {exc.message}"
            exc.args = (exc.message,)
        raise
    finally:
        _release(lock)
    warnings += embeddings.after_write(ctx, index_rows.get_by_id(ctx.catalog.conn, row.id) or row, tokens)
    after = index_rows.stats(ctx.catalog.conn, row.id)["chunk_count"]
    out: dict[str, Any] = {
        "Message": f"Index {row.name!r} re-chunked: {docs} document(s), {before} -> {after} chunks; "
        "searchable by keyword now, vectors for new chunk texts follow",
        "index_name": row.name,
        "docs_rechunked": docs,
        "chunks_before": before,
        "chunks_after": after,
        "chunk_config": cfg.as_dict(),
        "temporary_index": rb.temp_index_name,
        "Warnings": warnings,
    }
    return out


def _insert_temp(ctx: Context, row: IndexRow, rb: vs.Rebuild, cfg: ChunkConfig) -> None:
    """The hidden temporary index the rebuild writes into, and the rebuild row that names it."""
    with ctx.catalog.write() as w:
        index_rows.insert(
            w,
            index_id=rb.temp_index_id,
            name=rb.temp_index_name,
            chunk=cfg,
            embeddings=False,
            embedding_identity=None,
            settings=row.settings,
            hidden=True,
        )
        vs.set_rebuild(w, rb)


def _build(
    ctx: Context, row: IndexRow, rb: vs.Rebuild, cfg: ChunkConfig, progress: Progress | None
) -> tuple[int, list[int]]:
    """Write every document of ``row``, re-chunked with ``cfg``, into the temporary index."""
    conn = ctx.catalog.conn
    rowids = doc_rows.rowids_of_index(conn, row.id)
    tokens: list[int] = []
    for start in range(0, len(rowids), BATCH):
        part = rowids[start : start + BATCH]
        docs = doc_rows.with_text(conn, part)
        spans = chunk_many([(text, cfg, d.kind == "markdown") for d, text in docs])
        with ctx.catalog.write() as w:
            for (d, text), chunks in zip(docs, spans, strict=True):
                doc_rows.upsert(
                    w,
                    doc_rows.NewDocument(
                        index_id=rb.temp_index_id,
                        path=d.path,
                        text=text,
                        content_hash=d.content_hash,
                        size=d.size,
                        kind=d.kind,
                        origin=d.origin,
                        chunks=chunks,
                        chunk_config=cfg,
                        title=d.title,
                        origin_path=d.origin_path,
                        source_uri=d.source_uri,
                        mtime=d.mtime,
                        metadata=d.metadata,
                        tenant=d.tenant,
                        tier=d.tier,
                        expires_at=d.expires_at,
                        document_id=d.id,
                    ),
                )
                tokens.extend(c.token_count for c in chunks)
        crash_point("rechunk.batch")
        if progress:
            progress(min(start + BATCH, len(rowids)), len(rowids))
    return len(rowids), tokens


def _swap(ctx: Context, row: IndexRow, rb: vs.Rebuild, cfg: Any) -> None:
    """Delete-then-rename in one transaction: the rebuilt documents take the original index's place."""
    with ctx.catalog.write() as w:
        # Adds before removes: the vector side copies vectors of unchanged texts before deleting the old ones.
        old = doc_rows.swap_index(w, row.id, rb.temp_index_id)  # logs the adds
        vs.log_removes(w, old)
        changes.log_drop_index(w, rb.temp_index_id)
        index_rows.delete(w, rb.temp_index_id)
        index_rows.set_chunk_defaults(w, row.id, cfg)
        vs.clear_rebuild(w, row.id)
