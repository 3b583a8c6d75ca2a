"""Chunk a big ingest on the second core while the writer writes the previous batch.

Chunking (tokenizer counts, sentence packing) is most of an ingest's CPU and
holds the GIL, so a thread doesn't help: one worker process does it, spawned
only for ingests of at least ``PARALLEL_MIN_FILES`` files (its start-up costs
about half a second). Small ingests chunk in-process, as before.

The worker needs nothing from the caller's ``__main__``, so it is spawned with
``__main__`` hidden: a library script without an ``if __name__ == "__main__":``
guard would otherwise be run again inside it. When the worker cannot start or
dies, chunking goes on in-process: slower, never lost.

The worker dies with its parent: a thread in it polls its parent pid and exits
as soon as the parent is gone (a ``kill -9`` of ``gitkb add`` leaves no orphan
behind; multiprocessing's resource tracker then sees its pipe close and exits
too). Polling, not ``PR_SET_PDEATHSIG``: that signal follows the *thread* that
spawned the worker, and a pool is spawned from whichever thread submits first.

A long-running process (a server, the MCP server, a library ``Workspace`` doing several ingests) keeps
its worker between big ingests (``KeptWorker``, in ``ctx.caches.chunk_worker``): the next one then
finds the worker's word cache warm (bounded by ``tokenizer.WORD_CACHE_MAX`` entries) instead of
learning every word again (~0.45 s of CPU on awsdocs). It ends with the context's ``close()``, after
``IDLE_SECONDS`` unused, or when it breaks. A CLI command (``ctx.keep_chunk_worker`` false) starts
and ends one per ingest, as before.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager

from gitkb.core.chunking import chunk_many, chunk_rows
from gitkb.core.models import ChunkConfig, ChunkSpan

log = logging.getLogger(__name__)

PARALLEL_MIN_FILES = 400
PARENT_POLL_SECONDS = 0.2
IDLE_SECONDS = 300.0  # a kept worker unused this long ends (a new one starts with the next big ingest)
Items = Sequence[tuple[str, ChunkConfig, bool]]
_MAIN_LOCK = threading.Lock()


@contextmanager
def _main_hidden() -> Iterator[None]:
    """While a worker is spawned, ``__main__`` is a bare module: multiprocessing's spawn
    re-imports the parent's main script in the child unless it has no file to import."""
    with _MAIN_LOCK:
        real = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            if real is not None:
                sys.modules["__main__"] = real


def _watch_parent(parent_pid: int) -> None:
    """In the worker: exit the moment the process that started it is gone."""
    while os.getppid() == parent_pid:
        time.sleep(PARENT_POLL_SECONDS)
    os._exit(1)  # no clean-up owed: the worker holds nothing but its input


def _worker_init(parent_pid: int) -> None:
    if os.getppid() != parent_pid:  # the parent died while this worker started
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="gitkb-parent-watch", daemon=True).start()


# A chunk as the worker sends it back: (char_start, char_end, line_start, line_end, heading path
# number, token_count). Its text is a slice of the document the caller holds, and a heading path is
# sent once per document: a twentieth of the bytes of ChunkSpans to pickle, send and unpickle.
Packed = tuple[list[tuple[int, int, int, int, int, int]], list[tuple[str, ...]]]


def chunk_packed(items: Items) -> list[Packed]:
    """In the worker: ``chunk_many`` of ``items``, each document's chunks packed without their text
    (``chunk_rows``: never cut out of the document in the first place)."""
    out: list[Packed] = []
    for spans in chunk_rows(list(items)):
        paths: dict[tuple[str, ...], int] = {}
        rows = [(cs, ce, ls, le, paths.setdefault(path, len(paths)), n) for cs, ce, ls, le, path, n in spans]
        out.append((rows, list(paths)))
    return out


def unpack(items: Items, packed: list[Packed]) -> list[list[ChunkSpan]]:
    """The ChunkSpans ``chunk_packed`` stood for, their text cut from the documents of ``items``."""
    return [
        [ChunkSpan(text[cs:ce], cs, ce, ls, le, paths[h], n) for cs, ce, ls, le, h, n in rows]
        for (text, _cfg, _md), (rows, paths) in zip(items, packed, strict=True)
    ]


def _new_pool() -> ProcessPoolExecutor:
    return ProcessPoolExecutor(
        max_workers=1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_worker_init,
        initargs=(os.getpid(),),
    )


class KeptWorker:
    """One chunking worker kept between the big ingests of a long-running process: started by the
    first, lent to one ``ChunkPipeline`` at a time, ended by ``close()``, by ``IDLE_SECONDS`` unused
    or when it broke."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS) -> None:
        self.idle_seconds = idle_seconds
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._lent = False
        self._timer: threading.Timer | None = None
        self._closed = False

    @property
    def alive(self) -> bool:
        return self._pool is not None

    def lend(self) -> ProcessPoolExecutor | None:
        """The kept pool (started now when there is none); None while it is lent or after close."""
        with self._lock:
            if self._closed or self._lent:
                return None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._pool is None:
                self._pool = _new_pool()
            self._lent = True
            return self._pool

    def give_back(self, pool: ProcessPoolExecutor, broken: bool) -> None:
        end = None
        with self._lock:
            self._lent = False
            if broken or self._closed or pool is not self._pool:
                end = pool
                if pool is self._pool:
                    self._pool = None
            else:
                self._timer = threading.Timer(self.idle_seconds, self._end_idle)
                self._timer.daemon = True
                self._timer.name = "gitkb-chunk-worker-idle"
                self._timer.start()
        if end is not None:
            end.shutdown(wait=True, cancel_futures=True)

    def _end_idle(self) -> None:
        with self._lock:
            if self._lent or self._pool is None:
                return
            pool, self._pool, self._timer = self._pool, None, None
        pool.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._lent:  # the pipeline holding it ends it when it gives it back
                pool = None
            else:
                pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


class ChunkPipeline:
    def __init__(self, parallel: bool, kept: KeptWorker | None = None) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._kept: KeptWorker | None = None
        self._broken = False
        self._futures: list[Future[list[Packed]]] = []
        if parallel:
            try:
                pool = kept.lend() if kept is not None else None
                if pool is not None:
                    self._pool, self._kept = pool, kept
                else:
                    self._pool = _new_pool()
            except (OSError, RuntimeError) as exc:  # its queues could not be made (a resource tracker
                # gone: BrokenPipeError; no file descriptors left): chunk here, slower, never failed
                log.warning("the chunking worker could not start (%s); chunking in this process", exc)
                self._pool = None

    def submit(self, items: Items) -> Callable[[], list[list[ChunkSpan]]]:
        """Start chunking ``items``; call the returned function for the result."""
        if not items:
            return list
        batch = list(items)
        if self._pool is not None:
            try:
                with _main_hidden():  # the pool spawns its worker inside submit
                    future = self._pool.submit(chunk_packed, batch)
            except (RuntimeError, OSError, BrokenProcessPool):
                self._broken = True
                self.close()  # could not start the worker: chunk here from now on
            else:
                self._futures.append(future)

                def result() -> list[list[ChunkSpan]]:
                    try:
                        return unpack(batch, future.result())
                    except BrokenProcessPool:  # the worker died (killed, out of memory)
                        self._broken = True
                        self.close()
                        return chunk_many(batch)

                return result
        done = chunk_many(batch)
        return lambda: done

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if self._kept is None:
            pool.shutdown(wait=True, cancel_futures=True)
            return
        for f in self._futures:  # an ingest that failed half-way: its batches are not chunked for nobody
            f.cancel()
        if not all(f.done() for f in self._futures):  # one is running: wait, the worker is busy until then
            wait(self._futures)
        self._futures = []
        self._kept.give_back(pool, self._broken)

    def __enter__(self) -> ChunkPipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
