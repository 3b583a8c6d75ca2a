"""``bench/ingest_keyword.py --timeline``: where the wall time of one ADD_DOCUMENTS goes.

Wraps, in this process, the steps of ``services/indexing/ingest.py`` (reading a batch, waiting for
its chunks, writing it, feeding tantivy, every tantivy commit, the final catch-up) and, in the
chunking worker, ``chunk_pipeline.chunk_packed`` (this module is importable there: a spawned worker
gets the parent's ``sys.path``), all on ``time.monotonic`` (one clock across processes). A sampler
reads, every 10 ms, the CPU of the writer's main thread, of tantivy's threads and of the worker
process from ``/proc``, so each stream's busy and idle share per 100 ms slice can be printed beside
the events. Nothing here changes what the ingest does.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# tantivy's own threads (indexing, merging, segment updates, doc store compression), by their names
TANTIVY_THREADS = ("thrd-tantivy", "thread-tantivy", "merge_thread", "segment_update", "docstore")
_TICK = os.sysconf("SC_CLK_TCK")


def tantivy_thread_cpu() -> dict[str, float]:
    """thread id -> CPU seconds of this process's tantivy threads now (``/proc/self/task``); a thread
    that ended is absent, so samplers keep the last figure they saw of each."""
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            raw = Path(f"/proc/self/task/{tid}/stat").read_text()
        except OSError:
            continue
        name = raw[raw.index("(") + 1 : raw.rindex(")")]
        if name.startswith(TANTIVY_THREADS):
            f = raw[raw.rindex(")") + 2 :].split()
            out[tid] = (int(f[11]) + int(f[12])) / _TICK
    return out


def timed_chunk_packed(items: Any) -> tuple[float, float, float, float, Any]:
    """In the worker: ``chunk_packed`` with (start, end, process CPU at start, at end)."""
    from gitkb.services.indexing import chunk_pipeline  # the worker's own: not wrapped there

    c0, t0 = time.process_time(), time.monotonic()
    out = chunk_pipeline.chunk_packed(items)
    return t0, time.monotonic(), c0, time.process_time(), out


@dataclass
class Event:
    stream: str  # "writer", "worker", "tantivy"
    what: str
    start: float
    end: float
    n: int = 0  # files or chunks


@dataclass
class Timeline:
    events: list[Event] = field(default_factory=list)
    samples: list[tuple[float, float, float, float]] = field(default_factory=list)  # t, main, tantivy, worker
    t0: float = 0.0
    t1: float = 0.0
    worker_cpu_at_first: float = float("nan")
    _stop: threading.Event = field(default_factory=threading.Event)
    _tantivy: dict[str, float] = field(default_factory=dict)

    # -- sampling ---------------------------------------------------------
    def _cpu(self, path: str) -> float:
        raw = Path(path).read_text()
        f = raw[raw.rindex(")") + 2 :].split()
        return (int(f[11]) + int(f[12])) / _TICK

    def _sample(self) -> None:
        main = self._cpu(f"/proc/self/task/{os.getpid()}/stat")
        self._tantivy.update(tantivy_thread_cpu())  # they end at commits: keep the last
        tv = sum(self._tantivy.values())
        worker = 0.0
        for child in _children():
            try:
                worker += self._cpu(f"/proc/{child}/stat")
            except OSError:
                continue
        self.samples.append((time.monotonic(), main, tv, worker))

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self._sample()

    # -- instrumenting ----------------------------------------------------
    def install(self) -> None:
        """Wrap the ingest's steps (module globals, looked up at call time)."""
        from gitkb.services.indexing import chunk_pipeline, ingest  # the tree under test
        from gitkb.stores import keywords

        ev = self.events

        def wrap(mod: Any, name: str, stream: str, what: str, size: Callable[..., int] | None = None) -> None:
            real = getattr(mod, name)

            def timed(*a: Any, **k: Any) -> Any:
                s = time.monotonic()
                try:
                    return real(*a, **k)
                finally:
                    ev.append(Event(stream, what, s, time.monotonic(), size(*a) if size else 0))

            setattr(mod, name, timed)

        wrap(ingest, "_read_batch", "writer", "read", lambda _c, _r, batch, *_: len(batch))
        wrap(ingest, "_write_files", "writer", "write", lambda *a: sum(len(s) for s in a[5]))
        wrap(ingest, "feed_keywords", "writer", "feed")
        wrap(ingest, "catch_up_keywords", "writer", "final catch-up")
        real_commit = keywords.KeywordIndex.commit

        def commit(index: Any) -> None:
            s = time.monotonic()
            real_commit(index)
            ev.append(Event("tantivy", "commit (writer waits)", s, time.monotonic()))

        keywords.KeywordIndex.commit = commit  # type: ignore[method-assign]
        real_start = getattr(keywords.KeywordIndex, "start_commit", None)
        if real_start is not None:  # a tree that commits the feed on a thread of its own

            def start_commit(index: Any, tag: int) -> None:
                s = time.monotonic()
                real_start(index, tag)
                t = getattr(index, "_committing", None) or index._background.thread

                def watch() -> None:
                    t.join()
                    ev.append(Event("tantivy", "commit on its own thread", s, time.monotonic()))

                threading.Thread(target=watch, daemon=True).start()

            keywords.KeywordIndex.start_commit = start_commit  # type: ignore[method-assign]
            real_finish = keywords.KeywordIndex.finish_commit

            def finish_commit(index: Any) -> Any:
                s = time.monotonic()
                tag = real_finish(index)
                if tag is not None:
                    ev.append(Event("tantivy", "wait for that commit", s, time.monotonic()))
                return tag

            keywords.KeywordIndex.finish_commit = finish_commit  # type: ignore[method-assign]
        chunk_pipeline.chunk_packed = timed_chunk_packed
        real_unpack = chunk_pipeline.unpack

        def unpack(items: Any, packed: Any) -> Any:
            s, e, c0, c1, out = packed
            if not any(x.stream == "worker" for x in ev):
                self.worker_cpu_at_first = c0
            ev.append(Event("worker", f"chunk (cpu {c1 - c0:.3f})", s, e, sum(len(r) for r, _ in out)))
            return real_unpack(items, out)

        chunk_pipeline.unpack = unpack
        real_submit = chunk_pipeline.ChunkPipeline.submit

        def submit(pipe: Any, items: Any) -> Any:
            s = time.monotonic()
            got = real_submit(pipe, items)
            ev.append(Event("writer", "submit", s, time.monotonic(), len(items)))

            def result() -> Any:
                w = time.monotonic()
                out = got()
                ev.append(Event("writer", "wait for chunks", w, time.monotonic()))
                return out

            return result

        chunk_pipeline.ChunkPipeline.submit = submit  # type: ignore[method-assign]

    def __enter__(self) -> Timeline:
        self._thread = threading.Thread(target=self._run, name="bench-timeline", daemon=True)
        self._thread.start()
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.t1 = time.monotonic()
        self._sample()
        self._stop.set()
        self._thread.join()

    @property
    def worker_cpu(self) -> float:
        """The worker's CPU over the ingest (its last sample while it ran)."""
        return max((x[3] for x in self.samples), default=float("nan"))

    # -- printing ---------------------------------------------------------
    def report(self) -> str:
        t0 = self.t0
        wall = self.t1 - t0
        lines = [f"timeline (s from the call; wall {wall:.3f} s)"]
        for e in sorted(self.events, key=lambda e: e.start):
            if e.what == "submit":
                continue
            n = f" n={e.n}" if e.n else ""
            lines.append(
                f"  {e.start - t0:6.3f} {e.end - t0:6.3f} {e.end - e.start:6.3f}  {e.stream:7} {e.what}{n}"
            )
        lines += self._summary(wall)
        lines += self._slices()
        return "\n".join(lines)

    def _busy(self, stream: str, *whats: str) -> float:
        return sum(e.end - e.start for e in self.events if e.stream == stream and e.what.startswith(whats))

    def _summary(self, wall: float) -> list[str]:
        t0 = self.t0
        chunks = [e for e in self.events if e.stream == "worker"]
        writes = [e for e in self.events if e.what == "write"]
        commits = [e for e in self.events if e.stream == "tantivy"]
        out = ["summary:"]
        if chunks:
            first = min(chunks, key=lambda e: e.start)
            last = max(chunks, key=lambda e: e.end)
            out.append(
                f"  worker: first chunk starts {first.start - t0:.3f} (its start-up CPU "
                f"{self.worker_cpu_at_first:.3f} s), last ends {last.end - t0:.3f}; chunking "
                f"{self._busy('worker', 'chunk'):.3f} s, idle between batches "
                f"{last.end - first.start - self._busy('worker', 'chunk'):.3f} s"
            )
        if writes:
            out.append(
                f"  writer: read {self._busy('writer', 'read'):.3f}, wait for chunks "
                f"{self._busy('writer', 'wait'):.3f}, write {self._busy('writer', 'write'):.3f}, "
                f"feed {self._busy('writer', 'feed'):.3f} (tantivy commits inside), "
                f"final catch-up {self._busy('writer', 'final'):.3f}; first write starts "
                f"{min(e.start for e in writes) - t0:.3f}, last write ends {max(e.end for e in writes) - t0:.3f}"
            )
        if chunks and writes:
            out.append(
                f"  after the worker's last chunk: {self.t1 - max(e.end for e in chunks):.3f} s to the end"
            )
        waits = [e for e in commits if not e.what.startswith("commit on")]
        out.append(
            f"  tantivy commits: {sum(1 for e in commits if e.what.startswith('commit'))}, "
            f"writer waiting in them {sum(e.end - e.start for e in waits):.3f} s"
        )
        return out

    def _slices(self, step: float = 0.1) -> list[str]:
        """CPU share of each stream in each ``step`` of wall time (1.00 = one core busy)."""
        s = self.samples
        if len(s) < 2:
            return []
        out = ["CPU per 100 ms (1.0 = a core): t  main tantivy worker  total"]
        k = 0
        t = self.t0
        while t < self.t1:
            a = next((x for x in s[k:] if x[0] >= t), s[-1])
            b = next((x for x in s[k:] if x[0] >= t + step), s[-1])
            dt = max(b[0] - a[0], 1e-9)
            m, tv, w = ((b[i] - a[i]) / dt for i in (1, 2, 3))
            out.append(f"  {t - self.t0:5.1f}  {m:4.2f} {tv:4.2f} {w:4.2f}  {m + tv + w:4.2f}")
            t += step
        return out


def _children() -> list[int]:
    pid = os.getpid()
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except OSError:
            continue
    return out
