"""Derived indexes catch up with the catalog's change log.

The keyword index reads change-log entries after its watermark, applies them
idempotently (every cid touched is deleted, then re-added from the catalog if
the chunk still exists), commits, then stores the new watermark. A crash
between the tantivy commit and the watermark only means re-applying.

A big ingest also *feeds* the keyword index batch by batch (``feed_keywords``:
applied, not committed) while the next batch is being chunked, so the final
catch-up only commits. Fed but uncommitted entries are invisible to searches and
are lost by a crash like any uncommitted write: the watermark has not moved, so
they are applied again.
"""

from __future__ import annotations

import json
import sqlite3

from gitkb.core.faults import crash_point
from gitkb.services.context import Context
from gitkb.stores.catalog import changes
from gitkb.stores.catalog.documents import all_chunk_cids, keyword_rows
from gitkb.stores.keywords import KeywordDoc

KEYWORDS = "keywords"
BATCH = 20000
_FED = "keywords_fed"  # ctx.extras: the last change-log seq applied to the open tantivy writer


def keyword_title(doc_title: str | None, heading_path: tuple[str, ...]) -> str:
    parts = [doc_title or ""] + [h for h in heading_path if h and h != doc_title]
    return " / ".join(p for p in parts if p)


def _keyword_docs(conn: sqlite3.Connection, cids: list[int]) -> list[KeywordDoc]:
    return [
        KeywordDoc(cid, index_id, tenant, keyword_title(title, tuple(json.loads(heading))), text)
        for cid, index_id, tenant, title, heading, text in keyword_rows(conn, cids)
    ]


def _apply(ctx: Context, conn: sqlite3.Connection, batch: list[changes.Change]) -> None:
    drops = [c.index_id for c in batch if c.op == "drop_index" and c.index_id]
    cids = sorted({c.cid for c in batch if c.cid is not None})
    ctx.keywords.apply(removes=cids, adds=_keyword_docs(conn, cids), drop_indexes=drops)


def feed_keywords(ctx: Context) -> None:
    """Apply, without committing, the change-log entries past the watermark (or past what was
    fed before); the next ``catch_up_keywords`` commits them and moves the watermark."""
    with ctx.keyword_lock:
        conn = ctx.catalog.conn
        fed = max(int(ctx.extras.get(_FED) or 0), changes.watermark(conn, KEYWORDS))
        while batch := changes.since(conn, fed, BATCH):
            _apply(ctx, conn, batch)
            fed = batch[-1].seq
        ctx.extras[_FED] = fed


def catch_up_keywords(ctx: Context) -> int:
    """Apply every pending change to the keyword index; returns entries applied."""
    applied = 0
    with ctx.keyword_lock:
        conn = ctx.catalog.conn
        wm = changes.watermark(conn, KEYWORDS)
        fed = ctx.extras.pop(_FED, None)
        if fed is not None and fed > wm:  # fed earlier: commit it first
            ctx.keywords.commit()
            crash_point("keywords.after_commit")
            with ctx.catalog.write() as w:
                changes.set_watermark(w, KEYWORDS, fed)
            wm = fed
        while True:
            batch = changes.since(conn, wm, BATCH)
            if not batch:
                break
            _apply(ctx, conn, batch)
            ctx.keywords.commit()
            crash_point("keywords.after_commit")
            wm = batch[-1].seq
            with ctx.catalog.write() as w:
                changes.set_watermark(w, KEYWORDS, wm)
            applied += len(batch)
    return applied


def rebuild_keywords(ctx: Context) -> int:
    """Drop the keyword index and rebuild it from the catalog."""
    with ctx.keyword_lock:
        ctx.extras.pop(_FED, None)  # whatever was fed is dropped with the rest
        ctx.keywords.clear()
        conn = ctx.catalog.conn
        head = changes.head(conn)
        cids = all_chunk_cids(conn)
        for i in range(0, len(cids), BATCH):
            ctx.keywords.apply(removes=[], adds=_keyword_docs(conn, cids[i : i + BATCH]))
        ctx.keywords.commit()
        with ctx.catalog.write() as w:
            changes.set_watermark(w, KEYWORDS, head)
    return len(cids)


