"""``metrics``: what the catalog says now, for ``GET /metrics`` (read at scrape time).

Jobs by kind and state, the queue depth, who holds the writer lease, documents and chunks per
index, dirty paths and embeddings, reviews by state, recorded webhook deliveries; plus this
process's in-process counters (``Context.meters``), which the HTTP layer renders itself.
Counts only: no document text, no diff, no secret, no path.
"""

from __future__ import annotations

import os
from typing import Any

from gitkb.services.context import Context
from gitkb.services.operations.status import dirty_embeddings
from gitkb.stores.catalog import changes
from gitkb.stores.catalog import metrics as rows


def writer_view(ctx: Context) -> dict[str, Any]:
    """Who holds the writer lease: this process, another one (its pid), or nobody."""
    if ctx.is_writer:
        return {"held": True, "this_process": True, "pid": os.getpid()}
    holder = ctx.lease.holder()
    pid = holder.get("pid") if holder else None
    return {"held": holder is not None, "this_process": False, "pid": pid if isinstance(pid, int) else None}


def snapshot(ctx: Context) -> dict[str, Any]:
    conn = ctx.catalog.conn
    jobs = rows.jobs_by_kind_state(conn)
    return {
        "jobs": [{"kind": k, "state": s, "count": n} for (k, s), n in sorted(jobs.items())],
        "queue_depth": sum(n for (_, s), n in jobs.items() if s == "queued"),
        "writer": writer_view(ctx),
        "documents": rows.documents_by_index(conn),
        "chunks": rows.chunks_by_index(conn),
        "dirty_paths": changes.dirty_documents(conn, ctx.keywords_mark),
        "dirty_embeddings": dirty_embeddings(ctx),
        "reviews": rows.reviews_by_state(conn),
        "webhook_deliveries": [
            {"provider": p, "outcome": o, "count": n}
            for (p, o), n in sorted(rows.deliveries_by_provider(conn).items())
        ],
    }
