"""The per-process background embedder: a thread that catches vectors up.

Started lazily (``Context.embedding_worker.kick()``) when a write leaves
embedding work; it then sleeps until kicked again or ``POLL_SECONDS`` pass
(another process may have written). ``close`` stops it between batches and
joins it; a batch that was not finished is redone next time (idempotent).
Errors never escape the thread: the last one is kept for ``embeddings_status``
and the worker retries after a back-off.

It catches up only while this process holds the writer lease, fenced by it as jobs are
(``WriterLease.fence``): once another node took the lease over, its next catalog write fails with
``lease_lost``, this process stops writing, and the new writer's embedder carries on.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from gitkb.core.errors import GitkbError, LeaseLost
from gitkb.services.context import Context
from gitkb.services.derived.embeddings import catch_up_all
from gitkb.services.runtime.nodes import lost_lease

log = logging.getLogger("gitkb.embeddings")

POLL_SECONDS = 2.0
BACKOFF_SECONDS = (1.0, 5.0, 30.0)


def _exiting(exc: Exception) -> bool:
    """The model's thread pool refuses work once the interpreter began exiting (before ``atexit``
    handlers such as the one closing open workspaces run): that is no crash to report."""
    return isinstance(exc, RuntimeError) and "after interpreter shutdown" in str(exc)


class EmbeddingWorker:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.last_error: dict[str, Any] | None = None
        self.busy = False
        self.runs = 0

    @property
    def running(self) -> bool:
        t = self._thread
        return t is not None and t.is_alive()

    def kick(self) -> None:
        """Wake the worker, starting its thread the first time."""
        with self._lock:
            if self._stop.is_set():
                return
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="gitkb-embedder", daemon=True)
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            self._wake.clear()
            self.busy = True
            try:
                self._round()
                self.last_error = None
                failures = 0
            except GitkbError as exc:
                failures += 1
                self.last_error = {"Error": exc.message, "code": exc.code, "at": time.time()}
                log.warning("background embedding failed: %s", exc.message)
            except Exception as exc:  # noqa: BLE001 - a background thread must not die silently
                if _exiting(exc) or self._stop.is_set():  # a script exiting without close(), or a
                    # close() racing this round (the model's pool shut: "cannot schedule new futures
                    # after shutdown"): no crash; nothing half-written, the next opener redoes the batch
                    log.debug("background embedding stopped while closing: %s", exc)
                    return
                failures += 1
                self.last_error = {
                    "Error": f"{type(exc).__name__}: {exc}",
                    "code": "internal",
                    "at": time.time(),
                }
                log.exception("background embedding crashed")
            finally:
                self.busy = False
                self.runs += 1
            wait = BACKOFF_SECONDS[min(failures, len(BACKOFF_SECONDS)) - 1] if failures else POLL_SECONDS
            self._wake.wait(wait)

    def _round(self) -> None:
        """One catch-up, fenced by the writer lease; nothing while another process holds it."""
        ctx = self._ctx
        if not ctx.is_writer:
            return
        fence = ctx.lease.fence()
        try:
            with ctx.catalog.fenced(fence):
                catch_up_all(ctx, stop=self._stop)
        except LeaseLost:
            log.warning("background embedding stopped: the writer lease was taken over by another node")
            if ctx.lease.lost(fence):
                lost_lease(ctx)

    def close(self) -> None:
        with self._lock:
            self._stop.set()
            self._wake.set()
            t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join()

    def as_dict(self) -> dict[str, Any]:
        return {"running": self.running, "busy": self.busy, "runs": self.runs, "last_error": self.last_error}
