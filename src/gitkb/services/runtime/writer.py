"""The single index writer of a workspace.

The writer is a lease: a catalog row with a heartbeat (``gitkb.stores.node_lease``), which
any node sharing the catalog may hold, taken only by the process holding its home's local
guard (an OS file lock on ``<home>/writer.lock``, ``gitkb.stores.lease``). Whoever holds it is the only process that writes the catalog, the keyword
index and the vectors; it runs queued jobs on a background thread. A process
that doesn't hold it enqueues its writes and waits for the holder to run them.

On taking the lease the writer first recovers: jobs left ``running`` by a
process that died are requeued when they are safe to run again (every job
kind is idempotent unless registered otherwise) or marked failed with the
reason; then the derived indexes catch up from their watermarks: keywords at
once when only a short backlog waits (another process's last write), else on
the writer thread before its first job; vectors on the embedding worker. Taking
the lease never makes the caller wait for a crash's derived work. ``stop``
hands a job it interrupts back to the queue; a CLI process that recovered work
and closes before finishing it leaves it to a detached ``gitkb.resume``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from gitkb.services.context import Context
from gitkb.services.derived.catchup import catch_up_keywords
from gitkb.services.derived.embeddings import resume_if_pending
from gitkb.services.derived.vector_wants import wanted_identities, watermark_name
from gitkb.services.runtime import jobs, nodes
from gitkb.services.runtime.retention import prune_jobs, prune_retired
from gitkb.stores.catalog import changes
from gitkb.stores.catalog import jobs as job_rows
from gitkb.stores.catalog.engine import Conn
from gitkb.stores.node_lease import WriterLease as WriterLease

log = logging.getLogger("gitkb.writer")

IDLE_POLL_SECONDS = 0.5
SYNC_KEYWORD_BACKLOG = 2000  # change-log entries the keyword index catches up with before the lease returns


class WriterThread:
    """Runs queued jobs one at a time while this process holds the lease."""

    def __init__(
        self,
        run_next: Callable[[threading.Event], bool],
        first: Callable[[], object] | None = None,
        recovered: dict[str, list[str]] | None = None,
    ) -> None:
        self._run_next = run_next  # (stop: threading.Event) -> bool: ran a job?
        self._first = first  # () -> None: run once on the thread before the first job
        self.recovered = recovered or {"requeued": [], "failed": []}  # what taking the lease found left over
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="gitkb-writer", daemon=True)
            self._thread.start()

    def notify(self) -> None:
        self._wake.set()

    def _loop(self) -> None:
        if self._first is not None:
            try:
                self._first()
            except Exception:  # noqa: BLE001 - searches catch up on their own; jobs must still run
                log.exception("writer start-up catch-up")
        while not self._stop.is_set():
            try:
                ran = self._run_next(self._stop)
            except Exception:  # noqa: BLE001 - the loop must survive a bug in one job
                log.exception("writer loop")
                ran = False
            if not ran:
                self._wake.wait(IDLE_POLL_SECONDS)
                self._wake.clear()

    def request_stop(self) -> None:
        """Ask the thread to stop without waiting: the job it runs is handed back to the queue at its next step."""
        self._stop.set()
        self._wake.set()

    def stop(self, timeout: float = 30.0) -> None:
        self.request_stop()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None


_BECOMING = threading.Lock()  # a waiter and the heartbeat may both try: one recovers, one thread runs


def become_writer(ctx: Context) -> bool:
    """Take the lease if it is free; then recover, catch up and start the writer thread."""
    with _BECOMING:
        if ctx.lease.held:
            return True
        if not ctx.lease.try_acquire():
            return False
        _start_writing(ctx)
    return True


def open_node(ctx: Context) -> None:
    """Register this process's node, take the lease if it is free, start the heartbeat (``services.nodes``)."""
    nodes.register(ctx)
    ctx.join_ef_search()  # before any vector call: a new node sets no collection's ef_search
    become_writer(ctx)
    ctx.heartbeat = beats = nodes.NodeHeartbeat(ctx, ctx.take_lease)
    beats.start()


def _start_writing(ctx: Context) -> None:
    outcome = jobs.recover(ctx)
    if outcome["requeued"] or outcome["failed"]:
        log.warning("recovered jobs after a crash: %s", outcome)

    def catch_up() -> None:
        with ctx.write_lock:  # as every catch-up: never between an ingest's fed and committed batches
            catch_up_keywords(ctx)

    # A short keyword backlog (another process's last write) is caught up here, so the caller's first
    # search sees it; a crash's long one on the writer thread, so opening never waits for it.
    small = changes.pending(ctx.catalog.conn, ctx.keywords_mark) <= SYNC_KEYWORD_BACKLOG
    if small:
        catch_up()
    ctx.writer = WriterThread(
        lambda stop: jobs.run_next(ctx, stop), first=None if small else catch_up, recovered=outcome
    )
    ctx.writer.start()
    try:  # retired chunks past [catalog] retired_days: a one-shot CLI writer never idles into maintenance
        prune_retired(ctx)
    except Exception as exc:  # noqa: BLE001 - taking the lease never fails on the retention
        log.warning("could not prune retired chunks: %s", exc)
    try:  # finished jobs past [catalog] jobs_days, as the idle maintenance does
        prune_jobs(ctx)
    except Exception as exc:  # noqa: BLE001 - taking the lease never fails on the retention
        log.warning("could not prune finished jobs: %s", exc)
    try:  # vectors a dead writer left behind catch up now, not at the next write (a lease taken later)
        resume_if_pending(ctx)
    except Exception as exc:  # noqa: BLE001 - taking the lease never fails on the derived vectors
        log.warning("could not resume background embedding: %s", exc)


def _jobs_active(conn: Conn) -> bool:
    return bool(job_rows.count_state(conn, "queued") or job_rows.running(conn))


def work_left(ctx: Context) -> bool:
    """Queued or running jobs, or a derived index (keywords, vectors) behind the change log."""
    conn = ctx.catalog.conn
    if _jobs_active(conn):
        return True
    head = changes.head(conn)
    if changes.watermark(conn, ctx.keywords_mark) < head:
        return True
    return any(changes.watermark(conn, watermark_name(i)) < head for i in wanted_identities(ctx))


RESUME_LEASE_WAIT_SECONDS = 30.0
RESUME_MAX_SECONDS = 6 * 3600.0


def finish_left_work(ctx: Context, *, poll: float = 0.5) -> str:
    """In a detached ``gitkb.resume`` process: take the lease, run what is left, return why it stopped."""
    deadline = time.monotonic() + RESUME_LEASE_WAIT_SECONDS
    while not become_writer(ctx):
        if time.monotonic() > deadline:
            return "another process holds the writer lease; it resumes the work"
        time.sleep(poll)
    ctx.notify_writer()
    end = time.monotonic() + RESUME_MAX_SECONDS
    while work_left(ctx):
        worker = ctx.embedding_worker
        if worker.last_error is not None and not _jobs_active(ctx.catalog.conn):
            return f"stopped: background embedding fails ({worker.last_error.get('Error')})"
        if time.monotonic() > end:
            return "stopped after the time limit with work left"
        worker.kick()  # vectors behind the log: the worker catches them up (a no-op when it is busy)
        time.sleep(poll)
    return "caught up"
