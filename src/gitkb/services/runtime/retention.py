"""The writer's prune of ``retired_chunks`` (``[catalog] retired_days``, default
:data:`gitkb.core.config.DEFAULT_RETIRED_DAYS`).

Every chunk that leaves an index is kept, text included, so an old citation can say what its lines
say now (``cite_check`` answers ``stale``). A KB synced many times a day would keep every old chunk
forever: the writer removes the rows older than the retention (a chunk id keeps one row, its latest
retirement), and the rows of chunks still live (a changed document retires all its chunks, also the
unchanged ones: ``stores.catalog.retired.prune``), when it takes the lease and in its idle
maintenance (``jobs.schedule_maintenance``, at most once a minute, next to the change-log
compaction). Indexed DELETEs: cheap (``bench/retired_prune.py``).
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
        return {"pruned": False, "removed": 0, "live": 0}
    before = time.time() - ctx.settings.catalog_retired_days * DAY_SECONDS
    with ctx.catalog.write() as conn:
        aged, live = retired.prune(conn, before=before, days=ctx.settings.catalog_retired_days)
    if aged or live:
        log.info("pruned retired chunks: %d past the retention, %d still live", aged, live)
    return {"pruned": True, "removed": aged, "live": live}


def retired_view(ctx: Context) -> dict[str, Any]:
    """For ``gitkb status``: the retired rows kept, this node's retention, what the prunes removed
    and the retention of the prune that set ``pruned_before`` (``pruned_with_days``: on a shared
    catalog the writer prunes with its own, which may be another node's)."""
    s = retired.stats(ctx.catalog.conn)
    return {
        "rows": s.rows,
        "retention_days": ctx.settings.catalog_retired_days,
        "pruned_before": s.pruned_before,
        "pruned": s.pruned,
        "pruned_with_days": s.pruned_days,
    }
