"""Expiry (TTL) of documents: the one "is it live" check, the pending count, the purge.

A document added with ``ttl_seconds`` carries ``expires_at``. From that moment
it is never returned by any read path (SEARCH, LIST_DOCUMENTS, GET_DOCUMENT,
citations), even before it is purged. ``purge_expired`` deletes expired
documents through the normal write path (change log, so the keyword and
vector indexes drop their chunks too); the writer schedules it as a job and
status reports ``count_expired`` as pending purge.
"""

from __future__ import annotations

import time
from typing import Any

from gitkb.services.context import Context
from gitkb.services.derived.catchup import catch_up_keywords
from gitkb.stores.catalog import documents as doc_rows
from gitkb.stores.catalog.documents import DocumentRow

PURGE_BATCH = 500


def is_expired(doc: DocumentRow, now: float | None = None) -> bool:
    return doc.expires_at is not None and doc.expires_at <= (time.time() if now is None else now)


def count_expired(ctx: Context, index_id: str | None = None) -> int:
    """Documents past their TTL and not yet purged (all indexes, or one)."""
    return doc_rows.count_expired(ctx.catalog.conn, time.time(), index_id)


def purge_expired(ctx: Context) -> dict[str, Any]:
    """Delete every expired document (in batches, one transaction each); returns counts."""
    purged = 0
    by_index: dict[str, int] = {}
    with ctx.write_lock:
        while True:
            now = time.time()
            rows = doc_rows.expired_batch(ctx.catalog.conn, now, PURGE_BATCH)
            if not rows:
                break
            with ctx.catalog.write() as conn:
                for rowid, _index_id, name in rows:
                    doc_rows.delete(conn, rowid)
                    by_index[name] = by_index.get(name, 0) + 1
            purged += len(rows)
        if purged:
            catch_up_keywords(ctx)
    return {
        "purged": purged,
        "by_index": by_index,
        "pending_purge": count_expired(ctx),
        "Message": f"{purged} expired document(s) purged",
    }
