"""LIST_DOCUMENTS, GET_DOCUMENT, DELETE_DOCUMENT, RENAME_DOCUMENT."""

from __future__ import annotations

import posixpath
import time
from typing import Any

from gitkb.core.errors import Conflict, InvalidArgument, NotFound
from gitkb.core.names import normalize_stored_path, validate_new_filename
from gitkb.core.paging import page_fields, page_of
from gitkb.services.context import Context
from gitkb.services.derived.catchup import catch_up_keywords
from gitkb.services.indexing.guard import ensure_not_managed
from gitkb.services.indexing.indexes import get_index
from gitkb.services.runtime.ttl import is_expired
from gitkb.stores.catalog import documents as doc_rows
from gitkb.stores.catalog.documents import DocumentRow
from gitkb.stores.catalog.indexes import IndexRow
from gitkb.stores.keyword_schema import analyze

MAX_PAGE = 50
DEFAULT_COUNT = {"lines": 100, "chars": 10_000, "chunks": 20}
CHUNKS_PER_ENTRY = 20  # chunk details per LIST_DOCUMENTS entry (GET_DOCUMENT pages the rest)


def _int_param(name: str, value: Any, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name} must be an integer, got {value!r}")
    if value < 0:
        raise InvalidArgument(f"{name} must be >= 0, got {value}")
    return value


def doc_summary(d: DocumentRow) -> dict[str, Any]:
    return {
        "file_id": d.id,
        "path": d.path,
        "title": d.title,
        "size": d.size,
        "kind": d.kind,
        "origin": d.origin,
        "source_uri": d.source_uri,
        "created_at": d.created_at,
        "updated_at": d.updated_at,
        "metadata": d.metadata,
        "tenant": d.tenant,
        "tier": d.tier,
        "expires_at": d.expires_at,
    }


def list_documents(
    ctx: Context,
    index_name: Any,
    *,
    path_filter: Any = None,
    query: Any = None,
    show_files_only: Any = False,
    start: Any = 0,
    count: Any = MAX_PAGE,
) -> dict[str, Any]:
    """A page of an index's documents, by path.

    ``path_filter``: a glob over the whole path (``docs/*.md``), else any part of the path
    (``runbooks``, ``docs/``). ``query``: documents whose content (text, title or headings) holds
    every word, answered from the keyword index. Each entry is the document's file-level fields
    (``filepath`` is ``path`` under the name SEARCH and GET_DOCUMENT use) with ``chunk_count``; unless ``show_files_only``, also ``chunks`` (id, ordinal, lines, headings;
    the first ``CHUNKS_PER_ENTRY``)."""
    row = get_index(ctx, index_name)
    page = page_of(start, count, default=MAX_PAGE, limit=MAX_PAGE)
    start_i, count_i = page.start, page.count
    if path_filter is not None and not isinstance(path_filter, str):
        raise InvalidArgument(
            "path_filter must be a string (part of a path such as 'runbooks/', or a glob such as 'docs/*.md')"
        )
    if query is not None and not isinstance(query, str):
        raise InvalidArgument("query must be a string")
    if show_files_only is not None and not isinstance(show_files_only, bool):
        raise InvalidArgument(f"show_files_only must be true or false, got {show_files_only!r}")
    pf = path_filter.strip() if path_filter else None
    if pf and not any(ch in pf for ch in "*?["):
        pf = pf.lstrip("/") or None  # stored paths have no leading slash; a trailing one means a folder
    now = time.time()
    rowids = _content_matches(ctx, row, query) if query and query.strip() else None
    with ctx.catalog.read() as conn:
        total = doc_rows.count(conn, row.id, path_filter=pf, rowids=rowids, live_at=now)
        docs = doc_rows.page(
            conn, row.id, start=start_i, count=count_i, path_filter=pf, rowids=rowids, live_at=now
        )
        counts = doc_rows.chunk_counts(conn, [d.rowid for d in docs])
        outline = (
            {} if show_files_only else doc_rows.chunk_outline(conn, [d.rowid for d in docs], CHUNKS_PER_ENTRY)
        )
    actual = len(docs)
    fields = page_fields(page, total, actual)
    has_more = fields["has_more"]
    remaining = max(total - start_i - actual, 0)
    if total == 0:
        msg = "No documents match." if (pf or rowids is not None) else "The index has no documents."
    elif start_i == 0:
        msg = f"Showing first {actual} of {total} items." + (
            f" {remaining} more items exist." if has_more else ""
        )
    else:
        msg = f"Showing items {start_i + 1}-{start_i + actual} of {total}." + (
            f" {remaining} more items exist." if has_more else ""
        )
    out: dict[str, Any] = {
        "index_name": row.name,
        "TotalCount": total,  # the spec's name; total_count is every list's
        **fields,
        "Message": msg,
    }
    entries = []
    for d in docs:
        e = {**doc_summary(d), "filepath": d.path, "chunk_count": counts.get(d.rowid, 0)}
        if not show_files_only:
            e["chunks"] = [
                {
                    "id": c.id,
                    "ordinal": c.ordinal,
                    "line_start": c.line_start,
                    "line_end": c.line_end,
                    "heading_path": list(c.heading_path),
                }
                for c in outline.get(d.rowid, [])
            ]
        entries.append(e)
    out["Documents"] = entries
    return out


def _content_matches(ctx: Context, row: IndexRow, query: str) -> set[int]:
    """Rowids of the documents of ``row`` that hold every word of ``query`` (in any of their chunks)."""
    terms = list(dict.fromkeys(analyze(query)))
    if not terms:
        raise InvalidArgument(
            f"query {query!r} has no searchable words (only stop words or punctuation)",
            next_steps=["give content words, or use path_filter to match paths"],
        )
    found: set[int] | None = None
    conn = ctx.catalog.conn
    for term in terms:
        docs = doc_rows.document_rowids_of_chunks(conn, ctx.keywords.cids_with_term(term, [row.id]))
        found = docs if found is None else found & docs
        if not found:
            return set()
    return found or set()


def resolve_document(ctx: Context, row: IndexRow, file_id: Any, filepath: Any) -> DocumentRow:
    if (file_id is None or file_id == "") == (filepath is None or filepath == ""):
        raise InvalidArgument("give exactly one of file_id or filepath (LIST_DOCUMENTS shows both)")
    conn = ctx.catalog.conn
    if file_id:
        if not isinstance(file_id, str):
            raise InvalidArgument("file_id must be a string such as 'doc_…'")
        doc = doc_rows.get_by_id(conn, row.id, file_id.strip())
        what = f"file_id {file_id!r}"
    else:
        path = normalize_stored_path(filepath)
        doc = doc_rows.get_by_path(conn, row.id, path)
        what = f"filepath {path!r}"
    if doc is None or is_expired(doc):  # past its TTL: gone for readers, even before the purge
        raise NotFound(
            f"no document with {what} in index {row.name!r}",
            next_steps=["LIST_DOCUMENTS shows the stored paths and file ids"],
        )
    return doc


def get_document(
    ctx: Context,
    index_name: Any,
    *,
    file_id: Any = None,
    filepath: Any = None,
    pagination_mode: Any = None,
    start: Any = 0,
    count: Any = None,
) -> dict[str, Any]:
    row = get_index(ctx, index_name)
    mode = pagination_mode or "chunks"
    if mode not in ("lines", "chars", "chunks"):
        raise InvalidArgument(
            f"pagination_mode must be 'lines', 'chars' or None (chunks), got {pagination_mode!r}"
        )
    start_i = _int_param("start", start, 0)
    count_i = _int_param("count", count, DEFAULT_COUNT[mode])
    doc = resolve_document(ctx, row, file_id, filepath)
    out: dict[str, Any] = {
        "index_name": row.name,
        "file_id": doc.id,
        "filepath": doc.path,
        "title": doc.title,
        "source_uri": doc.source_uri,
        "pagination_mode": pagination_mode,
        "start": start_i,
        "count": count_i,
    }
    conn = ctx.catalog.conn
    if mode == "chunks":
        total = doc_rows.chunk_count_of(conn, doc.rowid)
        chunks = doc_rows.chunks_of(conn, doc.rowid, start=start_i, count=count_i)
        out["Chunks"] = [
            {
                "id": c.id,
                "ordinal": c.ordinal,
                "text": c.text,
                "location": {
                    "line_start": c.line_start,
                    "line_end": c.line_end,
                    "char_start": c.char_start,
                    "char_end": c.char_end,
                },
                "heading_path": list(c.heading_path),
            }
            for c in chunks
        ]
        actual = len(chunks)
    else:
        text = doc_rows.get_text(conn, doc.rowid)
        if mode == "chars":
            total = len(text)
            piece = text[start_i : start_i + count_i]
            actual = len(piece)
        else:
            lines = text.splitlines(keepends=True)
            total = len(lines)
            sel = lines[start_i : start_i + count_i]
            piece = "".join(sel)
            actual = len(sel)
            out["line_start"] = start_i + 1 if sel else None
            out["line_end"] = start_i + actual if sel else None
        out["Content"] = piece
    if start_i > 0 and start_i >= total:
        unit = {"lines": "lines", "chars": "characters", "chunks": "chunks"}[mode]
        raise InvalidArgument(
            f"start {start_i} is past the end ({total} {unit})",
            next_steps=[f"give a start below {total}" if total else "the document is empty: use start 0"],
        )
    out["total"] = total
    out["actual_count"] = actual
    out["has_more"] = start_i + actual < total
    out["next_start"] = start_i + actual if out["has_more"] else None
    return out


def delete_document(
    ctx: Context, index_name: Any, *, file_id: Any = None, filepath: Any = None
) -> dict[str, Any]:
    with ctx.write_lock:
        row = get_index(ctx, index_name)
        ensure_not_managed(ctx, row, "DELETE_DOCUMENT")
        doc = resolve_document(ctx, row, file_id, filepath)
        with ctx.catalog.write() as conn:
            doc_rows.delete(conn, doc.rowid)
            if doc.origin == "file" and doc.origin_path:  # reindex must not bring the file back
                doc_rows.set_override(conn, row.id, doc.origin_path, None)
        catch_up_keywords(ctx)
    return {
        "Message": f"Document {doc.path!r} deleted",
        "index_name": row.name,
        "filepath": doc.path,
        "file_id": doc.id,
    }


def rename_document(ctx: Context, index_name: Any, *, filepath: Any, new_filename: Any) -> dict[str, Any]:
    new_name = validate_new_filename(new_filename)
    with ctx.write_lock:
        row = get_index(ctx, index_name)
        ensure_not_managed(ctx, row, "RENAME_DOCUMENT")
        doc = resolve_document(ctx, row, None, filepath)
        folder = posixpath.dirname(doc.path)
        new_path = f"{folder}/{new_name}" if folder else new_name
        if new_path == doc.path:
            raise InvalidArgument(f"{doc.path!r} already has the name {new_name!r}")
        with ctx.catalog.write() as conn:
            if doc_rows.get_by_path(conn, row.id, new_path) is not None:
                raise Conflict(
                    f"cannot rename to {new_path!r}: a document with that path exists in {row.name!r}"
                )
            doc_rows.rename(conn, doc.rowid, new_path)
            if doc.origin == "file" and doc.origin_path:  # reindex keeps the new name
                doc_rows.set_override(conn, row.id, doc.origin_path, new_path)
    return {
        "Message": f"Document renamed from {doc.path!r} to {new_path!r}",
        "index_name": row.name,
        "old_filepath": doc.path,
        "filepath": new_path,
        "file_id": doc.id,
    }
