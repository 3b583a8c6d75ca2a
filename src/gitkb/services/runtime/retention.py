"""The writer's prune of ``retired_chunks`` (``[catalog] retired_days``, default
:data:`gitkb.core.config.DEFAULT_RETIRED_DAYS`).

Every chunk that leaves an index is kept, text included, so an old citation can say what its lines
say now (``cite_check`` answers ``stale``). A KB synced many times a day would keep every old chunk
forever: the writer removes the rows older than the retention (a chunk id keeps one row, its latest
retirement: ``stores.catalog.retired.prune``) when it takes the lease and with its idle maintenance (``jobs.schedule_maintenance``,
at most once a minute, next to the change-log compaction). One indexed DELETE: cheap.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from gitkb.services.context import Context
from gitkb.stores.catalog import retired

log = logging.getLogger("gitkb.retention")

DAY_SECONDS = 86_400.0


def prune_retired(ctx: Context) -> dict[str, Any]:
    """Prune the retired chunks past ``ctx.settings.catalog_retired_days`` (the writer only)."""
    if not ctx.is_writer:
        return {"pruned": False, "removed": 0}
    before = time.time() - ctx.settings.catalog_retired_days * DAY_SECONDS
    with ctx.catalog.write() as conn:
        removed = retired.prune(conn, before=before)
    if removed:
        log.info("pruned %d retired chunks past the retention", removed)
    return {"pruned": True, "removed": removed}


def retired_view(ctx: Context) -> dict[str, Any]:
    """For ``gitkb status``: the retired rows kept, the retention, and what the prunes removed."""
    s = retired.stats(ctx.catalog.conn)
    return {
        "rows": s.rows,
        "retention_days": ctx.settings.catalog_retired_days,
        "pruned_before": s.pruned_before,
        "pruned": s.pruned,
    }
