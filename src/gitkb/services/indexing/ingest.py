"""ADD_DOCUMENTS: walk, load, chunk, write, catch the keyword index up (ADD_TEXT: ``ingest_text``).

Everything that can be checked before writing is checked first, so bad input
writes nothing. Files are written in batches of ``WRITE_BATCH`` documents,
each one SQLite transaction (document + chunks + change-log entries).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitkb.core import ids
from gitkb.core.exclusions import is_sidecar
from gitkb.core.faults import crash_point
from gitkb.core.load_errors import LoadError
from gitkb.core.loading import load_bytes
from gitkb.core.models import SKIP_CATEGORIES, ChunkConfig, ChunkSpan, LoadedText, SkippedFile, WalkEntry
from gitkb.core.walking import walk
from gitkb.services.context import Context
from gitkb.services.derived import embeddings
from gitkb.services.derived.catchup import Written, WrittenDocument, catch_up_keywords, feed_keywords
from gitkb.services.indexing.admission import Placement, admit_documents
from gitkb.services.indexing.chunk_pipeline import PARALLEL_MIN_FILES, ChunkPipeline, KeptWorker
from gitkb.stores.catalog import changes, skipped_files
from gitkb.stores.catalog import documents as doc_rows
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog.indexes import IndexRow

WRITE_BATCH = 256
# First and last batch of an ingest chunked by the worker: the first one's chunking, and the last
# one's write, have nothing to overlap them (the writer waits, then the worker does), so they are small.
EDGE_BATCH = 32
# Batches the worker may chunk ahead of the one being written: with one, it waits for the writer
# to read and submit the next batch whenever it is done first; with more it keeps busy through a
# slow write or a feed waiting for tantivy's commit (the timeline, ``bench/ingest_keyword.py
# --timeline``: 0.1-0.3 s of the worker idle with two), at the memory of more batches of texts.
CHUNK_AHEAD = 4
Progress = Callable[[int, int], None]  # (done, total)
Pending = list[tuple[WalkEntry, bytes, str, os.stat_result, LoadedText]]


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
    return answer(report, row, cfg)


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
    queued: deque[tuple[Pending, Callable[[], list[list[ChunkSpan]]], int]] = deque()

    def write(item: tuple[Pending, Callable[[], list[list[ChunkSpan]]], int]) -> None:
        nonlocal done
        pending, spans, n = item
        crash_point("ingest.before_write")
        written = _write_files(ctx, row, cfg, place, pending, spans(), report)
        crash_point("ingest.after_write")
        feed_keywords(ctx, written)  # tantivy indexes this batch while the next one is chunked
        done += n
        if progress:
            progress(done, total)

    parallel = total >= PARALLEL_MIN_FILES
    ahead = CHUNK_AHEAD if parallel else 1
    with ChunkPipeline(parallel, _kept_worker(ctx)) as pipeline, _bulk(ctx, parallel):
        for start, end in batch_bounds(total, WRITE_BATCH, EDGE_BATCH if parallel else WRITE_BATCH):
            batch = files[start:end]
            pending = _read_batch(ctx, row, batch, known, key, report, required, trust_mtime, reparse)
            # chunk this batch (on the second core for big ingests) while earlier ones are written
            spans = pipeline.submit([(loaded.text, cfg, loaded.kind == "markdown") for *_, loaded in pending])
            queued.append((pending, spans, len(batch)))
            if len(queued) > ahead:
                write(queued.popleft())
        while queued:
            write(queued.popleft())
    with ctx.catalog.write() as conn:
        skipped_files.record(
            conn,
            row.id,
            report.skipped[skipped_before:],
            ok=report.added + report.modified + report.unchanged,
        )
    report.warnings.extend(embeddings.after_write(ctx, row, report.chunk_tokens))


def _kept_worker(ctx: Context) -> KeptWorker | None:
    """This context's kept chunking worker (made now) when it keeps one between ingests."""
    if not ctx.keep_chunk_worker:
        return None
    kept = ctx.caches.chunk_worker
    if not isinstance(kept, KeptWorker):
        kept = ctx.caches.chunk_worker = KeptWorker()
    return kept


def _bulk(ctx: Context, big: bool) -> AbstractContextManager[None]:
    """A big ingest writes with a bigger catalog page cache (``documents.bulk_cache``)."""
    return doc_rows.bulk_cache(ctx.catalog.conn) if big else nullcontext()


def batch_bounds(total: int, size: int, edge: int) -> list[tuple[int, int]]:
    """(start, end) of the write batches of ``total`` files: ``size`` each, except a first and a
    last batch of ``edge`` (when ``edge < size`` and there are more than two edges' worth)."""
    if edge >= size or total <= 2 * edge:
        return [(s, min(s + size, total)) for s in range(0, total, size)]
    cuts = [0, edge]
    while cuts[-1] + size < total - edge:
        cuts.append(cuts[-1] + size)
    cuts += [total - edge, total]
    return list(zip(cuts, cuts[1:], strict=False))


def _read_batch(
    ctx: Context,
    row: IndexRow,
    batch: list[WalkEntry],
    known: dict[str, tuple[str, int, float | None, str | None]],
    key: str,
    report: IngestReport,
    required: list[str],
    trust_mtime: bool,
    reparse: bool,
) -> Pending:
    """Read, hash and load the files of one batch; unchanged, unreadable and unloadable ones go to
    ``report`` (an unchanged file with a new mtime gets it recorded)."""
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
    return pending


def _write_files(
    ctx: Context,
    row: IndexRow,
    cfg: ChunkConfig,
    place: Placement,
    pending: list[tuple[WalkEntry, bytes, str, os.stat_result, LoadedText]],
    spans: list[list[ChunkSpan]],
    report: IngestReport,
) -> Written | None:
    """Write one batch in one transaction; returns its chunk texts for the keyword feed."""
    if not pending:
        return None
    crash_point("ingest.chunked")
    texts: dict[int, WrittenDocument] = {}
    with ctx.catalog.write() as conn:
        after = changes.head(conn)
        for (entry, data, h, st, loaded), chunks in zip(pending, spans, strict=True):
            status, rowid, cids = doc_rows.write_document(
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
            chunk_texts = [(c.text, c.heading_path) for c in chunks]
            texts[rowid] = WrittenDocument(row.id, place.tenant, loaded.title, chunk_texts, cids)
        upto = changes.head(conn)
    return Written(after, upto, texts)


def answer(report: IngestReport, row: IndexRow, cfg: ChunkConfig) -> dict[str, Any]:
    """What ADD_DOCUMENTS and ADD_TEXT's batch form answer: the report, its summary, the config."""
    out: dict[str, Any] = {
        "Message": summary(report),
        "index_name": row.name,
        **report.as_dict(),
        "chunk_config": cfg.as_dict(),
    }
    if report.warnings:
        out["Warnings"] = report.warnings
    return out


def summary(r: IngestReport) -> str:
    return (
        f"{len(r.added)} added, {len(r.modified)} modified, {len(r.unchanged)} unchanged, "
        f"{len(r.skipped)} skipped; {r.chunks_written} chunks written"
    )
