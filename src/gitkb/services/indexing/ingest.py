"""ADD_DOCUMENTS and ADD_TEXT: walk, load, chunk, write, catch the keyword index up.

Everything that can be checked before writing is checked first, so bad input
writes nothing. Files are written in batches of ``WRITE_BATCH`` documents,
each one SQLite transaction (document + chunks + change-log entries).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitkb.core import ids
from gitkb.core.chunk_config import resolve_config
from gitkb.core.chunking import chunk_many
from gitkb.core.errors import InvalidArgument, NotFound, TooLarge
from gitkb.core.exclusions import is_sidecar
from gitkb.core.faults import crash_point
from gitkb.core.load_errors import LoadError
from gitkb.core.loading import load_bytes
from gitkb.core.models import SKIP_CATEGORIES, ChunkConfig, ChunkSpan, LoadedText, SkippedFile, WalkEntry
from gitkb.core.paths import check_stored_path, escape_name
from gitkb.core.walking import walk
from gitkb.services.context import Context
from gitkb.services.derived import embeddings
from gitkb.services.derived.catchup import catch_up_keywords, feed_keywords
from gitkb.services.indexing.chunk_pipeline import PARALLEL_MIN_FILES, ChunkPipeline
from gitkb.services.indexing.guard import ensure_not_managed
from gitkb.services.indexing.indexes import get_index
from gitkb.stores.catalog import documents as doc_rows
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import skipped_files
from gitkb.stores.catalog.indexes import IndexRow

WRITE_BATCH = 256
TIERS = ("hot", "warm", "cold")
Progress = Callable[[int, int], None]  # (done, total)


@dataclass
class IngestReport:
    added: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    chunks_written: int = 0
    warnings: list[str] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)  # word pieces of each chunk written (clip warnings)

    def as_dict(self) -> dict[str, Any]:
        counts = {c: 0 for c in SKIP_CATEGORIES}
        for s in self.skipped:
            counts[s.category] = counts.get(s.category, 0) + 1
        return {
            "added": self.added,
            "modified": self.modified,
            "unchanged": self.unchanged,
            "skipped": [s.as_dict() for s in self.skipped],
            "counts": {
                "added": len(self.added),
                "modified": len(self.modified),
                "unchanged": len(self.unchanged),
                "skipped": len(self.skipped),
                **{f"skipped_{k}": v for k, v in counts.items()},
            },
            "chunks_written": self.chunks_written,
        }


@dataclass(frozen=True)
class Placement:
    """Where new documents go and what they carry besides their text."""

    tenant: str | None = None
    tier: str | None = None
    expires_at: float | None = None


def placement(tenant: Any = None, tier: Any = None, ttl_seconds: Any = None) -> Placement:
    if tenant is not None and (not isinstance(tenant, str) or not tenant.strip()):
        raise InvalidArgument("tenant must be a non-empty string when given")
    if tier is not None and tier not in TIERS:
        raise InvalidArgument(f"tier must be one of {', '.join(TIERS)}, got {tier!r}")
    expires = None
    if ttl_seconds is not None:
        if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int | float) or ttl_seconds <= 0:
            raise InvalidArgument(f"ttl_seconds must be a positive number of seconds, got {ttl_seconds!r}")
        expires = time.time() + float(ttl_seconds)
    return Placement(tenant.strip() if isinstance(tenant, str) else None, tier, expires)


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


def add_documents(
    ctx: Context,
    index_name: Any,
    filepath: Any,
    *,
    chunk_size: Any = None,
    chunk_overlap: Any = None,
    chunk_strategy: Any = None,
    base_path: Any = None,
    tenant: Any = None,
    tier: Any = None,
    ttl_seconds: Any = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    row, cfg, warnings, place, target = admit_documents(
        ctx,
        index_name=index_name,
        filepath=filepath,
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        chunk_strategy=chunk_strategy,
        tenant=tenant,
        tier=tier,
        ttl_seconds=ttl_seconds,
    )
    base = (Path(base_path).expanduser() if base_path else target.absolute().parent).absolute()
    entries = list(walk(target.absolute(), base=base, max_bytes=ctx.settings.max_file_bytes))
    entries = leave_out_sidecars(row, entries)
    report = IngestReport(warnings=list(warnings))
    with ctx.write_lock:
        ingest_entries(ctx, row, entries, cfg, place, report, progress=progress)
        with ctx.catalog.write() as conn:
            index_rows.remember_root(conn, row.id, str(target.absolute()), str(base))  # for reindex
            doc_rows.clear_overrides(
                conn, row.id, [str(e.abs_path) for e in entries if isinstance(e, WalkEntry)]
            )
        catch_up_keywords(ctx)
    out = {
        "Message": _summary(report),
        "index_name": row.name,
        **report.as_dict(),
        "chunk_config": cfg.as_dict(),
    }
    if report.warnings:
        out["Warnings"] = report.warnings
    return out


def leave_out_sidecars(
    row: IndexRow, entries: list[WalkEntry | SkippedFile]
) -> list[WalkEntry | SkippedFile]:
    """Walked sidecars (``gitkb.yml``, ``kb-manifest.json``) as ``sidecar`` skips: they configure
    ingestion and are not documents, unless the index's ``settings.include_sidecars`` is true."""
    if row.settings.get("include_sidecars") is True:
        return entries
    detail = "configures ingestion, not a document; an index created with settings include_sidecars=true indexes it"
    return [
        SkippedFile(e.rel_path, "sidecar", detail)
        if isinstance(e, WalkEntry) and is_sidecar(e.rel_path)
        else e
        for e in entries
    ]


def ingest_entries(
    ctx: Context,
    row: IndexRow,
    entries: list[WalkEntry | SkippedFile],
    cfg: ChunkConfig,
    place: Placement,
    report: IngestReport,
    *,
    progress: Progress | None = None,
    trust_mtime: bool = False,
    reparse: bool = False,
) -> None:
    """Load, chunk and write walked files in batches; fills ``report``.

    Unchanged files (same content hash and chunking) cost a read and a hash;
    with ``trust_mtime`` the same size and mtime skip even that (reindex);
    with ``reparse`` every file is loaded and chunked again (forced reindex).
    """
    required = list(row.settings.get("required_frontmatter", []))
    embeddings.prepare_write(ctx, row)  # fails closed before anything is written
    known = doc_rows.hashes_by_path(ctx.catalog.conn, row.id)
    files = [e for e in entries if isinstance(e, WalkEntry)]
    skipped_before = len(report.skipped)
    report.skipped.extend(e for e in entries if isinstance(e, SkippedFile))
    total = len(files)
    done = 0
    key = doc_rows.state_key(cfg, place.tenant, place.tier, place.expires_at)
    Pending = list[tuple[WalkEntry, bytes, str, os.stat_result, LoadedText]]
    queued: tuple[Pending, Callable[[], list[list[ChunkSpan]]], int] | None = None

    def write(item: tuple[Pending, Callable[[], list[list[ChunkSpan]]], int]) -> None:
        nonlocal done
        pending, spans, n = item
        crash_point("ingest.before_write")
        _write_files(ctx, row, cfg, place, pending, spans(), report)
        crash_point("ingest.after_write")
        feed_keywords(ctx)  # tantivy indexes this batch while the next one is chunked
        done += n
        if progress:
            progress(done, total)

    with ChunkPipeline(parallel=total >= PARALLEL_MIN_FILES) as pipeline:
        for start in range(0, total, WRITE_BATCH):
            batch = files[start : start + WRITE_BATCH]
            pending: Pending = []
            for entry in batch:
                prev = known.get(entry.rel_path)
                try:
                    st = entry.abs_path.stat()
                    if (
                        trust_mtime
                        and prev is not None
                        and prev[1] == st.st_size
                        and prev[2] == st.st_mtime
                        and prev[3] == key
                    ):
                        report.unchanged.append(entry.rel_path)
                        continue
                    data = entry.abs_path.read_bytes()
                except OSError as exc:
                    report.skipped.append(
                        SkippedFile(entry.rel_path, "unreadable", f"cannot read: {exc.strerror or exc}")
                    )
                    continue
                h = ids.bytes_hash(data)
                if not reparse and prev is not None and prev[0] == h and prev[3] == key:
                    report.unchanged.append(entry.rel_path)
                    if prev[2] != st.st_mtime:
                        with ctx.catalog.write() as conn:
                            doc_rows.set_mtime(conn, row.id, entry.rel_path, st.st_mtime)
                    continue
                try:
                    loaded = load_bytes(entry.rel_path, data, required_frontmatter=required)
                except LoadError as exc:
                    report.skipped.append(SkippedFile(entry.rel_path, exc.category, exc.detail))
                    continue
                pending.append((entry, data, h, st, loaded))
            # chunk this batch (on the second core for big ingests) while the previous one is written
            spans = pipeline.submit([(loaded.text, cfg, loaded.kind == "markdown") for *_, loaded in pending])
            if queued is not None:
                write(queued)
            queued = (pending, spans, len(batch))
        if queued is not None:
            write(queued)
    with ctx.catalog.write() as conn:
        skipped_files.record(
            conn,
            row.id,
            report.skipped[skipped_before:],
            ok=report.added + report.modified + report.unchanged,
        )
    report.warnings.extend(embeddings.after_write(ctx, row, report.chunk_tokens))


def _write_files(
    ctx: Context,
    row: IndexRow,
    cfg: ChunkConfig,
    place: Placement,
    pending: list[tuple[WalkEntry, bytes, str, os.stat_result, LoadedText]],
    spans: list[list[ChunkSpan]],
    report: IngestReport,
) -> None:
    if not pending:
        return
    crash_point("ingest.chunked")
    with ctx.catalog.write() as conn:
        for (entry, data, h, st, loaded), chunks in zip(pending, spans, strict=True):
            status, _ = doc_rows.upsert(
                conn,
                doc_rows.NewDocument(
                    index_id=row.id,
                    path=entry.rel_path,
                    text=loaded.text,
                    content_hash=h,
                    size=len(data),
                    kind=loaded.kind,
                    origin="file",
                    chunks=chunks,
                    chunk_config=cfg,
                    title=loaded.title,
                    origin_path=str(entry.abs_path),
                    source_uri=entry.abs_path.as_uri(),
                    mtime=st.st_mtime,
                    metadata=loaded.metadata,
                    tenant=place.tenant,
                    tier=place.tier,
                    expires_at=place.expires_at,
                ),
            )
            (report.added if status == "added" else report.modified).append(entry.rel_path)
            report.chunks_written += len(chunks)
            report.chunk_tokens.extend(c.token_count for c in chunks)


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
        if (
            prev is not None
            and prev.content_hash == h
            and prev.chunk_config == cfg
            and prev.metadata == metadata
            and (prev.tenant, prev.tier, prev.expires_at, place.expires_at)
            == (place.tenant, place.tier, None, None)
        ):
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
                conn,
                doc_rows.NewDocument(
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
                ),
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


def _summary(r: IngestReport) -> str:
    return (
        f"{len(r.added)} added, {len(r.modified)} modified, {len(r.unchanged)} unchanged, "
        f"{len(r.skipped)} skipped; {r.chunks_written} chunks written"
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
                    status, _ = doc_rows.upsert(
                        conn,
                        doc_rows.NewDocument(
                            index_id=row.id,
                            path=path,
                            text=text,
                            content_hash=h,
                            size=len(text.encode("utf-8")),
                            kind="text",
                            origin="text",
                            chunks=chunks,
                            chunk_config=cfg,
                            title=title or text.strip().splitlines()[0].lstrip("# ").strip()[:80],
                            metadata=meta,
                        ),
                    )
                    (report.added if status == "added" else report.modified).append(path)
                    report.chunks_written += len(chunks)
                    report.chunk_tokens.extend(c.token_count for c in chunks)
            done += len(batch)
            if progress:
                progress(done, len(prepared))
        catch_up_keywords(ctx)
        report.warnings.extend(embeddings.after_write(ctx, row, report.chunk_tokens))
    out = {
        "Message": _summary(report),
        "index_name": row.name,
        **report.as_dict(),
        "chunk_config": cfg.as_dict(),
    }
    if report.warnings:
        out["Warnings"] = report.warnings
    return out
