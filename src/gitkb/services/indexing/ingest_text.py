"""ADD_TEXT: one text, or many (``add_texts``), stored under a path, chunked, written, keyword-indexed."""

from __future__ import annotations

from typing import Any

from gitkb.core import ids
from gitkb.core.chunking import chunk_many
from gitkb.core.errors import InvalidArgument
from gitkb.core.models import ChunkConfig, ChunkSpan
from gitkb.core.paths import check_stored_path
from gitkb.services.context import Context
from gitkb.services.derived import embeddings
from gitkb.services.derived.catchup import catch_up_keywords
from gitkb.services.indexing.admission import Placement, admit_text, check_text_size, chunk_config_for
from gitkb.services.indexing.guard import ensure_not_managed
from gitkb.services.indexing.indexes import get_index
from gitkb.services.indexing.ingest import WRITE_BATCH, IngestReport, Progress, answer
from gitkb.stores.catalog import documents as doc_rows
from gitkb.stores.catalog.indexes import IndexRow


def add_text(
    ctx: Context,
    index_name: Any,
    text: Any,
    *,
    metadata: Any = None,
    filepath: Any = None,
    chunk_size: Any = None,
    chunk_overlap: Any = None,
    chunk_strategy: Any = None,
    tenant: Any = None,
    tier: Any = None,
    ttl_seconds: Any = None,
) -> dict[str, Any]:
    row, cfg, warnings, place = admit_text(
        ctx,
        index_name=index_name,
        text=text,
        metadata=metadata,
        filepath=filepath,
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        chunk_strategy=chunk_strategy,
        tenant=tenant,
        tier=tier,
        ttl_seconds=ttl_seconds,
    )
    metadata = metadata or {}
    h = ids.content_hash(text)
    path = check_stored_path(filepath) if filepath is not None else f"texts/{h[:16]}.txt"
    title = metadata.get("title") if isinstance(metadata.get("title"), str) else None
    if title is None:
        first = text.strip().splitlines()[0].lstrip("# ").strip()
        title = first[:80]
    with ctx.write_lock:
        prev = doc_rows.get_by_path(ctx.catalog.conn, row.id, path)
        if prev is not None and _unchanged(prev, h, cfg, metadata, place):
            return {
                "Message": "Text unchanged",
                "index_name": row.name,
                "filepath": path,
                "file_id": prev.id,
                "status": "unchanged",
                "chunks_written": 0,
            }
        embeddings.prepare_write(ctx, row)
        [chunks] = chunk_many([(text, cfg, False)])
        with ctx.catalog.write() as conn:
            status, doc = doc_rows.upsert(
                conn, _text_document(row, path, text, h, cfg, chunks, title, metadata, place)
            )
        catch_up_keywords(ctx)
        warnings = warnings + embeddings.after_write(ctx, row, [c.token_count for c in chunks])
    out: dict[str, Any] = {
        "Message": f"Text {status} as {path!r} with {len(chunks)} chunk(s)",
        "index_name": row.name,
        "filepath": path,
        "file_id": doc.id,
        "status": status,
        "chunks_written": len(chunks),
        "chunk_config": cfg.as_dict(),
    }
    if warnings:
        out["Warnings"] = warnings
    return out


def _unchanged(
    prev: doc_rows.DocumentRow, h: str, cfg: ChunkConfig, metadata: dict[str, Any], place: Placement
) -> bool:
    """The stored text at that path is this one, chunked and placed the same way (no expiry)."""
    return (
        prev.content_hash == h
        and prev.chunk_config == cfg
        and prev.metadata == metadata
        and (prev.tenant, prev.tier, prev.expires_at, place.expires_at)
        == (place.tenant, place.tier, None, None)
    )


def _text_document(
    row: IndexRow,
    path: str,
    text: str,
    h: str,
    cfg: ChunkConfig,
    chunks: list[ChunkSpan],
    title: str | None,
    metadata: dict[str, Any],
    place: Placement,
) -> doc_rows.NewDocument:
    return doc_rows.NewDocument(
        index_id=row.id,
        path=path,
        text=text,
        content_hash=h,
        size=len(text.encode("utf-8")),
        kind="text",
        origin="text",
        chunks=chunks,
        chunk_config=cfg,
        title=title,
        metadata=metadata,
        tenant=place.tenant,
        tier=place.tier,
        expires_at=place.expires_at,
    )


def add_texts(
    ctx: Context,
    index_name: Any,
    items: Any,
    *,
    chunk_size: Any = None,
    chunk_overlap: Any = None,
    chunk_strategy: Any = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Bulk ADD_TEXT: ``items`` is a list of ``{"text", "filepath", "metadata"?}``.

    Every item is checked before anything is written (non-empty text, a path,
    no path twice); then documents are written ``WRITE_BATCH`` per transaction
    and the keyword index catches up once at the end. Unchanged texts (same
    path, text hash and chunk config) are skipped; a changed text is rewritten.
    Chunk parameters work as in ADD_TEXT (the index defaults when none is given).
    """
    row = get_index(ctx, index_name)
    ensure_not_managed(ctx, row, "ADD_TEXT")
    if not isinstance(items, list | tuple):
        raise InvalidArgument("items must be a list of {text, filepath, metadata} objects")
    cfg, warnings = chunk_config_for(row, chunk_size, chunk_overlap, chunk_strategy)
    prepared = _prepared_items(ctx, items)
    report = IngestReport(warnings=list(warnings))
    with ctx.write_lock:
        embeddings.prepare_write(ctx, row)
        known = doc_rows.hashes_by_path(ctx.catalog.conn, row.id)
        todo = []
        for path, text, meta, h in prepared:
            prev = known.get(path)
            if prev is not None and prev[0] == h and prev[3] == doc_rows.state_key(cfg, None, None, None):
                report.unchanged.append(path)
            else:
                todo.append((path, text, meta, h))
        done = len(prepared) - len(todo)
        for start in range(0, len(todo), WRITE_BATCH):
            batch = todo[start : start + WRITE_BATCH]
            spans = chunk_many([(text, cfg, False) for _, text, _, _ in batch])
            with ctx.catalog.write() as conn:
                for (path, text, meta, h), chunks in zip(batch, spans, strict=True):
                    title = meta.get("title") if isinstance(meta.get("title"), str) else None
                    title = title or text.strip().splitlines()[0].lstrip("# ").strip()[:80]
                    doc = _text_document(row, path, text, h, cfg, chunks, title, meta, Placement())
                    status, _ = doc_rows.upsert(conn, doc)
                    (report.added if status == "added" else report.modified).append(path)
                    report.chunks_written += len(chunks)
                    report.chunk_tokens.extend(c.token_count for c in chunks)
            done += len(batch)
            if progress:
                progress(done, len(prepared))
        catch_up_keywords(ctx)
        report.warnings.extend(embeddings.after_write(ctx, row, report.chunk_tokens))
    return answer(report, row, cfg)


def _prepared_items(
    ctx: Context, items: list[Any] | tuple[Any, ...]
) -> list[tuple[str, str, dict[str, Any], str]]:
    """Every item checked (non-empty text within the size limit, a path, no path twice), as
    (path, text, metadata, content hash)."""
    prepared: list[tuple[str, str, dict[str, Any], str]] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidArgument(f"items[{i}] must be an object with text and filepath")
        text, meta = item.get("text"), item.get("metadata") or {}
        if not isinstance(text, str) or not text.strip():
            raise InvalidArgument(f"items[{i}].text must be a non-empty string")
        check_text_size(text, ctx.settings.max_file_bytes, field=f"items[{i}].text")
        if not isinstance(meta, dict):
            raise InvalidArgument(f"items[{i}].metadata must be a JSON object")
        path = check_stored_path(item.get("filepath"), field=f"items[{i}].filepath")
        if path in seen:
            raise InvalidArgument(f"items[{i}].filepath {path!r} appears twice; each text needs its own path")
        seen.add(path)
        prepared.append((path, text, meta, ids.content_hash(text)))
    return prepared
