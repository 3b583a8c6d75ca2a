"""The writer's prune of ``retired_chunks`` (``[catalog] retired_days``, default
:data:`gitkb.core.config.DEFAULT_RETIRED_DAYS`).

Every chunk that leaves an index is kept, text included, so an old citation can say what its lines
say now (``cite_check`` answers ``stale``). A KB synced many times a day would keep every old chunk
forever: the writer removes the rows older than the retention (a chunk id keeps one row, its latest
retirement), and the rows of chunks still live (a changed document retires all its chunks, also the
unchanged ones: ``stores.catalog.retired.prune``), when it takes the lease and in its idle
maintenance (``jobs.schedule_maintenance``, at most once a minute, next to the change-log
compaction). Indexed DELETEs: cheap (``bench/retired_prune.py``).

Finished jobs (``[catalog] jobs_days``, default :data:`gitkb.core.config.DEFAULT_JOBS_DAYS`) are
pruned at the same moments (:func:`prune_jobs`, ``stores.catalog.job_retention``): never a queued or
running job, and the newest finished job of each kind and index is kept however old, so status's
last build stays what it was. A removed job's id answers ``not_found`` saying it was removed
(:func:`unknown_job`); an id never made here keeps the answer "no job".
"""

from __future__ import annotations

import logging
import time
from typing import Any

from gitkb.core.errors import NotFound
from gitkb.services.context import Context
from gitkb.stores.catalog import job_retention, retired

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


def prune_jobs(ctx: Context, *, now: float | None = None) -> dict[str, Any]:
    """Remove the finished jobs past ``ctx.settings.catalog_jobs_days`` (the writer only); ``now``
    is the clock's time (tests age every job by passing a later one)."""
    if not ctx.is_writer:
        return {"pruned": False, "removed": 0}
    before = (time.time() if now is None else now) - ctx.settings.catalog_jobs_days * DAY_SECONDS
    planned = job_retention.plan(ctx.catalog.conn, before=before)  # read outside the write lock
    if planned is None:
        return {"pruned": True, "removed": 0}
    with ctx.catalog.write() as conn:
        removed = job_retention.apply(conn, planned)
    if removed:
        log.info("pruned %d finished jobs past the retention", removed)
    return {"pruned": True, "removed": removed}


def jobs_view(ctx: Context) -> dict[str, Any]:
    """For ``gitkb status``: the jobs kept, the retention, and what the prunes removed."""
    s = job_retention.stats(ctx.catalog.conn)
    return {
        "rows": s.rows,
        "finished": s.finished,
        "retention_days": ctx.settings.catalog_jobs_days,
        "pruned_before": s.pruned_before,
        "pruned": s.pruned,
    }


def unknown_job(ctx: Context, job_id: str) -> NotFound:
    """The answer for an id no job has. An id whose time digits date it before the last prune's
    horizon says so (it was removed, or never was: an id alone cannot tell, so the message holds
    for both), else "no job" as ever."""
    before = job_retention.removed_before(ctx.catalog.conn, job_id)
    if before is None:
        return NotFound(f"no job {job_id!r}", next_steps=["list jobs with `gitkb jobs list`"])
    days = ctx.settings.catalog_jobs_days
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(before))
    return NotFound(
        f"no job {job_id!r} now: its id dates from before {when}, when the jobs that had finished"
        f" were removed (finished jobs are kept {days} days, [catalog] jobs_days); if it ran, its"
        " outcome is in what it changed (get_index_status, the documents)",
        next_steps=["list the jobs kept with `gitkb jobs list`"],
        details={"jobs_pruned_before": before, "jobs_days": days},
    )
