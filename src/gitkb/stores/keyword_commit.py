"""A commit of the keyword index on a thread of its own (``KeywordIndex.start_commit``).

tantivy releases the GIL while it commits, so the writer goes on writing the catalog meanwhile. The
next write, commit or close of the index waits for it first (``join``); ``finish`` says it is durable
and hands back what its caller tagged it with. A commit that failed is raised once: by ``finish``,
or by the write that waited for it (then ``finish`` raises that it failed); the caller applies what
it held again from its watermark.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from gitkb.core.errors import StoreUnavailable


class BackgroundCommit:
    def __init__(self) -> None:
        self.thread: threading.Thread | None = None
        self._tag: int | None = None
        self._error: BaseException | None = None
        self._failed = False  # raised by a waiting write, until ``finish`` says so

    def start(self, tag: int, commit: Callable[[], None]) -> None:
        """Run ``commit`` on a new thread, tagged ``tag`` (the caller has joined the last one)."""

        def run() -> None:
            try:
                commit()
            except BaseException as exc:  # raised again by whoever waits for it
                self._error = exc

        self._tag, self._error, self._failed = tag, None, False
        self.thread = threading.Thread(target=run, name="gitkb-keyword-commit", daemon=True)
        self.thread.start()

    def join(self) -> None:
        """Wait for a commit still running; its error is raised here (the tag stays for ``finish``)."""
        t = self.thread
        if t is None:
            return
        t.join()
        self.thread = None
        if self._error is None:
            return
        exc, self._error, self._failed = self._error, None, True
        raise exc

    def finish(self, path: Path) -> int | None:
        """Wait for the last commit; its tag (it is durable), or None when none ran since the last
        ``finish``. A failed one raises here, also when a write waiting for it raised it first."""
        try:
            self.join()
        except BaseException:
            self._tag, self._failed = None, False  # raised now, once
            raise
        tag, self._tag = self._tag, None
        if self._failed:
            self._failed = False
            raise StoreUnavailable(
                f"a commit of the keyword index at {path} failed; what it held is applied again"
            )
        return tag
