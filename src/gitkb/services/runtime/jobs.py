"""The persistent job queue behind every index write.

A job kind is a plain function ``fn(ctx, params, progress) -> dict`` in a
``JobKind``; the kinds are one list (``gitkb.services.dispatch.job_kinds.JOB_KINDS``) that
the composition root hands to ``load_kinds`` (the registry is ``job_registry``, its names are
re-exported here). Three ways to run one:

* ``run_inline`` — library calls: the caller waits. In the lease holder it runs
  in the caller's thread (recorded as a job row); elsewhere it is queued and
  the caller waits for the holder to run it.
* ``submit`` + ``wait`` — the MCP/HTTP surfaces and ``--no-wait``: queue it,
  wait up to the promotion threshold, else answer ``status: working``.
* the writer thread — runs whatever is queued (including jobs enqueued by
  webhooks, merges, or other processes, and jobs recovered after a crash).

The writer runs jobs fenced by its lease (``WriterLease.fence``, ``CatalogStore.fenced``): claiming,
every write of the job and finishing it. Once another node took the lease over, the next of those
writes fails with ``lease_lost`` and writes nothing; the job is left as it is in the catalog (the new
writer requeued it on taking the lease and runs it), this process stops writing, and an inline caller
waits for the new writer's result.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from typing import Any

from gitkb.core import errors
from gitkb.core.action_table import ACTIONS as ACTION_TABLE
from gitkb.core.errors import Busy, GitkbError, LeaseLost
from gitkb.core.paging import page_fields, page_of
from gitkb.services.context import Context
from gitkb.services.derived.vector_counts import range_vectors
from gitkb.services.runtime.job_registry import Check as Check
from gitkb.services.runtime.job_registry import JobFn as JobFn
from gitkb.services.runtime.job_registry import JobKind as JobKind
from gitkb.services.runtime.job_registry import Progress as Progress
from gitkb.services.runtime.job_registry import add_kind as add_kind
from gitkb.services.runtime.job_registry import kind_of as kind_of
from gitkb.services.runtime.job_registry import load_kinds as load_kinds
from gitkb.services.runtime.job_registry import preflight as preflight
from gitkb.services.runtime.job_registry import remove_kind as remove_kind
from gitkb.services.runtime.job_registry import split_staged
from gitkb.services.runtime.nodes import compact, lost_lease
from gitkb.services.runtime.retention import prune_jobs, prune_retired, unknown_job
from gitkb.services.runtime.ttl import count_expired
from gitkb.stores.catalog import changes
from gitkb.stores.catalog import jobs as job_rows
from gitkb.stores.catalog.jobs import JobRow
from gitkb.stores.node_lease import LeaseFence

log = logging.getLogger("gitkb.jobs")

MAX_ATTEMPTS = 3
PROGRESS_EVERY_SECONDS = 0.2
DEFAULT_CALLER_LIMIT = 4


class CancelRequested(Exception):
    """``cancel_job`` asked the running job to stop (seen at its next progress report)."""


class Interrupted(Exception):
    """The process is shutting down; the job goes back to the queue."""


_ERRORS_BY_CODE: dict[str, type[GitkbError]] = {cls.code: cls for cls in errors.ALL_ERRORS}


def error_from_row(job: JobRow) -> GitkbError:
    """The error a failed or cancelled job answers with, under its recorded code (a cancelled job's
    is ``cancelled``)."""
    cls = _ERRORS_BY_CODE.get(job.error_code or "internal", GitkbError)
    details = {
        k: v for k, v in (job.result or {}).items() if k not in ("Success", "Error", "code", "next_steps")
    }
    steps = (job.result or {}).get("next_steps") or []
    message = job.error or "job failed"
    if job.state == "cancelled":
        message = f"job {job.id} was {message}"  # "cancelled on request", "cancelled before it started"
        details.setdefault("job_id", job.id)
    exc = cls.__new__(cls)
    GitkbError.__init__(exc, message, next_steps=steps, details=details)
    return exc


# -- running ---------------------------------------------------------------


# Staged on an interrupted job: the change-log head when its first run began, so the run that
# completes it summarises the vectors of everything the job wrote (not only its own last run).
WROTE_FROM = "_wrote_from_seq"
RESUMED_NOTE = (
    "this job was interrupted and resumed: its counts are those of its last run (what an earlier run"
    " wrote counts as unchanged); the vectors summary covers every run"
)


def runner_name() -> str:
    """Who runs a job: host, process and thread."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def _lease_lost(ctx: Context, fence: LeaseFence) -> None:
    """A fenced write found the lease taken over: this process stops being the writer."""
    if ctx.lease.lost(fence):
        lost_lease(ctx)


def _execute(
    ctx: Context,
    job: JobRow,
    caller_progress: Progress | None,
    *,
    stop: threading.Event | None,
    fence: LeaseFence | None = None,
) -> JobRow:
    """Run a claimed job under the lease's fence (the one the caller claimed it under, else the lease
    held now); once the lease is lost the job is left to the new writer, as the catalog holds it
    (nothing more is written)."""
    fence = fence if fence is not None else ctx.lease.fence()
    try:
        with ctx.catalog.fenced(fence):
            return _run(ctx, job, caller_progress, stop=stop)
    except LeaseLost:
        log.warning("job %s (%s): the writer lease was taken over; the new writer runs it", job.id, job.kind)
        _lease_lost(ctx, fence)
    got = job_rows.get(ctx.catalog.conn, job.id)
    assert got is not None
    return got


def _run(
    ctx: Context, job: JobRow, caller_progress: Progress | None, *, stop: threading.Event | None
) -> JobRow:
    spec = kind_of(job.kind)
    last = [0.0]

    def progress(done: int, total: int, note: str | None = None) -> None:
        if caller_progress is not None:
            caller_progress(done, total)
        now = time.monotonic()
        if now - last[0] < PROGRESS_EVERY_SECONDS and done < total:
            return
        last[0] = now
        with ctx.catalog.write() as conn:
            cancel = job_rows.set_progress(conn, job.id, done, total, note)
        if cancel:
            raise CancelRequested()
        if stop is not None and stop.is_set():
            raise Interrupted()

    state, result, err, code = "completed", None, None, None
    seq0: int | None = None
    try:
        if spec is None:
            raise errors.InvalidArgument(f"unknown job kind {job.kind!r}")
        params = job_rows.params_for_run(ctx.catalog.conn, job)
        first = params.pop(WROTE_FROM, None)
        with ctx.write_lock:
            seq0 = changes.head(ctx.catalog.conn)
            result = spec.fn(ctx, params, progress)
            result = _with_vectors(ctx, result, first if isinstance(first, int) else seq0)
            if isinstance(first, int) and isinstance(result, dict):
                result = {**result, "Warnings": [*(result.get("Warnings") or []), RESUMED_NOTE]}
    except CancelRequested:
        state, err, code = "cancelled", "cancelled on request", "cancelled"
    except LeaseLost:
        raise  # _execute: nothing more is written, the new writer runs it
    except Interrupted:
        with ctx.catalog.write() as conn:
            if seq0 is not None:  # what this run wrote counts in the vectors summary of the run that ends it
                job_rows.stage_once(conn, job.id, WROTE_FROM, seq0)
            now = job_rows.get(conn, job.id)
            if now is not None and now.state == "running" and now.runner == job.runner:  # not taken over
                job_rows.requeue(conn, job.id, "interrupted by shutdown; will resume")
        got = job_rows.get(ctx.catalog.conn, job.id)
        assert got is not None
        return got
    except GitkbError as exc:
        state, err, code, result = "failed", exc.message, exc.code, exc.to_response()
    except Exception as exc:  # noqa: BLE001 - recorded on the job, never lost
        log.exception("job %s (%s) failed", job.id, job.kind)
        state, err, code = "failed", f"internal error ({type(exc).__name__}: {exc})", "internal"
    with ctx.catalog.write() as conn:
        job_rows.finish(conn, job.id, state, result=result, error=err, error_code=code)
        job_rows.bump_generation(conn)
    done = job_rows.get(ctx.catalog.conn, job.id)
    assert done is not None
    return done


def _with_vectors(ctx: Context, result: dict[str, Any], seq0: int) -> dict[str, Any]:
    """A job that wrote chunks says what became of their vectors: ``vectors: pending`` with how
    many (and ``vectors_range`` to wait for), or ``ready`` with true counts; never a bare 0."""
    if not isinstance(result, dict) or "vectors" in result or "chunks_embedded" in result:
        return result
    try:
        extra = range_vectors(ctx, seq0, changes.head(ctx.catalog.conn))
    except GitkbError as exc:  # the write happened; only the vector summary is missing
        log.warning("could not summarise vectors: %s", exc.message)
        return result
    return {**result, **extra}


def run_inline(
    ctx: Context,
    kind: str,
    params: dict[str, Any],
    *,
    progress: Progress | None = None,
    caller: str | None = None,
) -> dict[str, Any]:
    """Run a job and return its result; raise its GitkbError on failure."""
    done: JobRow | None = None
    if ctx.is_writer:
        kept, staged = split_staged(kind, params)
        fence = ctx.lease.fence()
        with ctx.write_lock, ctx.catalog.fenced(fence):  # in order with the writer thread
            preflight(ctx, kind, params)
            try:
                with ctx.catalog.write() as conn:
                    job = job_rows.insert(
                        conn, kind, kept, caller=caller, state="running", runner=runner_name(), staged=staged
                    )
            except LeaseLost:  # taken over since: queue it for the new writer, as a non-writer does
                _lease_lost(ctx, fence)
            else:
                done = _execute(ctx, job, progress, stop=None, fence=fence)
    if done is None:
        job = submit(ctx, kind, params, caller=caller, check_limit=False)
        done = wait(ctx, job.id, timeout=None, progress=progress)
    elif done.state not in job_rows.FINISHED:  # the lease was lost mid-way: the new writer finishes it
        done = wait(ctx, done.id, timeout=None, progress=progress)
    if done.state == "completed":
        return done.result or {}
    raise error_from_row(done)  # a cancelled job: ``cancelled``


def submit(
    ctx: Context,
    kind: str,
    params: dict[str, Any],
    *,
    caller: str | None = None,
    dedupe_key: str | None = None,
    check_limit: bool = True,
) -> JobRow:
    """Queue a job (or return the active one with the same dedupe key); refused parameters raise
    before anything is queued."""
    preflight(ctx, kind, params)
    limit = int(ctx.settings.section("jobs").get("per_caller_limit", DEFAULT_CALLER_LIMIT))
    with ctx.catalog.write() as conn:
        if dedupe_key:
            existing = job_rows.find_active_by_dedupe(conn, dedupe_key)
            if existing is not None:
                return existing
        if check_limit and caller and job_rows.count_active_for_caller(conn, caller) >= limit:
            raise Busy(
                f"{caller} already has {limit} background jobs queued or running; nothing was queued",
                next_steps=["poll the running jobs with get_job_result, then retry"],
            )
        kept, staged = split_staged(kind, params)
        job = job_rows.insert(conn, kind, kept, caller=caller, dedupe_key=dedupe_key, staged=staged)
    ctx.notify_writer()
    return job


def wait(ctx: Context, job_id: str, *, timeout: float | None, progress: Progress | None = None) -> JobRow:
    """Poll until the job finishes or ``timeout`` passes; returns the latest row."""
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.01
    while True:
        if not ctx.is_writer:  # the holder may have gone: then we run it ourselves
            ctx.take_lease()
        job = job_rows.get(ctx.catalog.conn, job_id)
        if job is None:
            raise unknown_job(ctx, job_id)
        if progress is not None and job.progress_total:
            progress(job.progress_done, job.progress_total)
        if job.state in job_rows.FINISHED:
            return job
        if deadline is not None and time.monotonic() >= deadline:
            return job
        time.sleep(delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic())))
        delay = min(delay * 1.5, 0.25)


def run_next(ctx: Context, stop: threading.Event) -> bool:
    """The writer thread's step: claim and run the oldest queued job (fenced by the lease)."""
    fence = ctx.lease.fence()
    with ctx.write_lock, ctx.catalog.fenced(fence):
        try:
            with ctx.catalog.write() as conn:
                job = job_rows.claim_next(conn, runner_name())
            if job is None:
                schedule_maintenance(ctx)
                return False
        except LeaseLost:
            _lease_lost(ctx, fence)
            stop.set()
            return False
        _execute(ctx, job, None, stop=stop, fence=fence)
    return True


MAINTENANCE_EVERY_SECONDS = 60.0


def schedule_maintenance(ctx: Context) -> None:
    """When idle, at most once a minute: compact the change log (``services.nodes.compact``), prune the
    retired chunks and the finished jobs (``services.runtime.retention``) and queue a
    purge of expired documents if any are due."""
    now = time.monotonic()
    if now - ctx.caches.maintenance_at < MAINTENANCE_EVERY_SECONDS:
        return
    ctx.caches.maintenance_at = now
    compact(ctx)
    prune_retired(ctx)  # retired chunks past [catalog] retired_days
    prune_jobs(ctx)  # finished jobs past [catalog] jobs_days
    if count_expired(ctx) > 0:
        submit(ctx, "purge_expired", {}, caller="gitkb", dedupe_key="purge_expired", check_limit=False)


def _resumes(job: JobRow) -> bool:
    """An ``action`` job resumes only when the action table says the action is safe to repeat."""
    if job.kind != "action":
        return True
    spec = ACTION_TABLE.get(str((job.params or {}).get("action")))
    return spec is not None and spec.resumable


def recover(ctx: Context) -> dict[str, list[str]]:
    """Called once when this process takes the lease: nothing left running is lost."""
    requeued, failed = [], []
    with ctx.catalog.write() as conn:
        for job in job_rows.running(conn):
            spec = kind_of(job.kind)
            if spec is not None and spec.resumable and job.attempts < MAX_ATTEMPTS and _resumes(job):
                job_rows.requeue(conn, job.id, f"resumed after the process running it ({job.runner}) stopped")
                requeued.append(job.id)
            else:
                reason = (
                    f"interrupted: the process running it ({job.runner}) stopped"
                    + (
                        ""
                        if spec is None or spec.resumable
                        else "; this kind is not safe to repeat, run it again"
                    )
                    + ("" if job.attempts < MAX_ATTEMPTS else f"; gave up after {job.attempts} attempts")
                )
                job_rows.finish(conn, job.id, "failed", error=reason, error_code="internal")
                failed.append(job.id)
    return {"requeued": requeued, "failed": failed}


def cancel(ctx: Context, job_id: str) -> dict[str, Any]:
    with ctx.catalog.write() as conn:
        job = job_rows.get(conn, job_id)
        if job is None:
            raise unknown_job(ctx, job_id)
        if job.state == "queued":
            job_rows.finish(
                conn, job_id, "cancelled", error="cancelled before it started", error_code="cancelled"
            )
        elif job.state == "running":
            job_rows.request_cancel(conn, job_id)
        else:
            raise errors.Conflict(f"job {job_id} already {job.state}; nothing to cancel")
    got = job_rows.get(ctx.catalog.conn, job_id)
    assert got is not None
    return {"job_id": job_id, "status": got.state, "cancel_requested": got.state == "running"}


def job_result(ctx: Context, job_id: Any) -> dict[str, Any]:
    if not isinstance(job_id, str) or not job_id:
        raise errors.InvalidArgument("job_id must be the id a promoted call returned (job_…)")
    job = job_rows.get(ctx.catalog.conn, job_id)
    if job is None:
        raise unknown_job(ctx, job_id)
    return job.as_dict()


def list_jobs(
    ctx: Context, *, limit: Any = None, state: str | None = None, start: Any = None, count: Any = None
) -> dict[str, Any]:
    """Recent jobs, newest first, a page at a time (``limit`` is the older name of ``count``)."""
    page = page_of(start, count if count is not None else limit, default=50)
    states = (state,) if state else None
    conn = ctx.catalog.conn
    rows = job_rows.list_recent(conn, limit=page.count, offset=page.start, states=states)
    total = job_rows.count_recent(conn, states=states)
    return {"Jobs": [j.as_dict() for j in rows], **page_fields(page, total, len(rows))}
