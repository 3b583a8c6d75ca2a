"""The single index writer of a workspace.

The writer is a lease: an OS file lock (``flock``) on ``<home>/writer.lock``.
Whoever holds it is the only process that writes the catalog, the keyword
index and the vectors; it runs queued jobs on a background thread. A process
that doesn't hold it enqueues its writes and waits for the holder to run them.

On taking the lease the writer first recovers: jobs left ``running`` by a
process that died are requeued when they are safe to run again (every job
kind is idempotent unless registered otherwise) or marked failed with the
reason; then the derived indexes catch up from their watermarks.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import threading
import time
from pathlib import Path
from typing import IO, Any

from gitkb.core.files import open_private

log = logging.getLogger("gitkb.writer")

IDLE_POLL_SECONDS = 0.5


class WriterLease:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[str] | None = None

    @property
    def held(self) -> bool:
        return self._fh is not None

    def try_acquire(self) -> bool:
        if self._fh is not None:
            return True
        fh = open_private(self.path, "a+")  # 0600; held for the process lifetime
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            return False
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}))
        fh.flush()
        self._fh = fh
        return True

    def holder(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.path.read_text("utf-8") or "null")
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def release(self) -> None:
        if self._fh is not None:
            try:
                fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            finally:
                self._fh.close()
                self._fh = None


def runner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


class WriterThread:
    """Runs queued jobs one at a time while this process holds the lease."""

    def __init__(self, run_next: Any) -> None:
        self._run_next = run_next  # (stop: threading.Event) -> bool: ran a job?
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
        while not self._stop.is_set():
            try:
                ran = self._run_next(self._stop)
            except Exception:  # noqa: BLE001 - the loop must survive a bug in one job
                log.exception("writer loop")
                ran = False
            if not ran:
                self._wake.wait(IDLE_POLL_SECONDS)
                self._wake.clear()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None


def become_writer(ctx: Any) -> bool:
    """Take the lease if it is free; then recover, catch up and start the writer thread."""
    from gitkb.services import jobs
    from gitkb.services.catchup import catch_up_keywords

    if ctx.lease.held:
        return True
    if not ctx.lease.try_acquire():
        return False
    outcome = jobs.recover(ctx)
    if outcome["requeued"] or outcome["failed"]:
        log.warning("recovered jobs after a crash: %s", outcome)
    catch_up_keywords(ctx)
    ctx.writer = WriterThread(lambda stop: jobs.run_next(ctx, stop))
    ctx.writer.start()
    return True
