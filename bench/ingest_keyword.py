"""Keyword-only ingest and search benchmark on ../shared/data/awsdocs (issue: document index core).

Prints docs/s, chunks/s and, on the same line, the CPU each part spent (the writer's main
thread; tantivy's threads, sampled from /proc; the other threads of the process: the pool's
feeder and result threads, the heartbeat; the chunking worker process), then peak RSS and keyword search p50/p95 over 100 queries made from the
20 dev questions, with the load average beside every figure. Run by hand:

    .venv/bin/python bench/ingest_keyword.py [--docs ../shared/data/awsdocs/docs] [--runs 3]
    .venv/bin/python bench/ingest_keyword.py --runs 3 --baseline /path/to/older/tree

``--timeline`` prints, for one ingest, when each batch was read, chunked (in the worker), waited
for, written and fed to tantivy, every tantivy commit and the final catch-up, each stream's busy and
idle time, and the CPU of the writer's main thread, tantivy's threads and the worker per 100 ms
(``bench/_timeline.py``).

``--twice`` measures instead the second of two ingests in one workspace (a long-running process;
its chunking worker, kept or not, counted live), alone (JSON) or with ``--baseline``.

``--baseline TREE`` alternates fresh processes of this tree and of ``TREE`` (this script run with
``PYTHONPATH=TREE/src``; ingest only), ``--runs`` pairs, and prints each pair's docs/s, CPU and
ratio, then the median ratio: on a busy machine wall-clock figures mean little, so compare the
CPU figures and ratios measured in the same session.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pct, queries_from_dev  # noqa: E402
from _timeline import tantivy_thread_cpu  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "awsdocs"


def _children_cpu() -> float:
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    return child.ru_utime + child.ru_stime


TAIL: list[float] = []
FEED: list[float] = []  # writer-thread CPU of each keyword feed of the ingest (``feed_keywords``)


class TantivyCpu:
    """CPU of tantivy's threads during the ``with`` block, read from ``/proc/self/task`` every 10 ms:
    they end at every commit, so a thread's last <10 ms (and the clock tick) is missed. ``nan``
    where there is no ``/proc``. ``own`` is the sampler's own CPU (part of the process's)."""

    def __init__(self) -> None:
        self.seen: dict[str, float] = {}
        self.own = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)

    def _sample(self) -> None:
        self.seen.update(tantivy_thread_cpu())

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self._sample()
        self.own = time.thread_time()

    @property
    def total(self) -> float:
        return sum(self.seen.values()) if Path("/proc/self/task").is_dir() else float("nan")

    def __enter__(self) -> TantivyCpu:
        if Path("/proc/self/task").is_dir():
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join()


def _time_final_catch_up() -> None:
    """Record the process CPU of ADD_DOCUMENTS' final keyword catch-up: it runs after the last
    batch, with nothing else to overlap it, so the wall time includes it whole."""
    import importlib

    for name in ("gitkb.services.indexing.ingest", "gitkb.services.ingest"):  # an older tree: the second
        try:
            ingest = importlib.import_module(name)
            break
        except ModuleNotFoundError:
            continue
    else:
        return
    real = getattr(ingest, "catch_up_keywords", None)
    if real is None:  # an older tree (--baseline) names it otherwise: not timed
        return

    def timed(ctx: object) -> int:
        c = time.process_time()
        try:
            return real(ctx)  # type: ignore[arg-type]
        finally:
            TAIL.append(time.process_time() - c)

    ingest.catch_up_keywords = timed  # type: ignore[assignment]
    feed = getattr(ingest, "feed_keywords", None)
    if feed is None:
        return

    def timed_feed(*args: object) -> None:
        c = time.thread_time()
        try:
            feed(*args)
        finally:
            FEED.append(time.thread_time() - c)

    ingest.feed_keywords = timed_feed


def run_timeline(docs_dir: Path) -> None:
    """One ingest with its timeline (``bench/_timeline.py``) printed."""
    from _timeline import Timeline

    from gitkb import Workspace

    tl = Timeline()
    tl.install()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp, Workspace(Path(tmp) / "ws") as ws:
        assert ws.document_index("CREATE_INDEX", index_name="aws", embeddings=False)["Success"]
        load0 = os.getloadavg()[0]
        c0 = time.process_time()
        with tl:
            r = ws.document_index("ADD_DOCUMENTS", index_name="aws", filepath=str(docs_dir))
        assert r["Success"], r
        print(tl.report())
        print(
            f"{r['counts']['added']} docs, {r['chunks_written']} chunks in {tl.t1 - tl.t0:.2f} s, this process's CPU "
            f"{time.process_time() - c0:.2f} s + worker {tl.worker_cpu:.2f} s (load average {load0:.1f} -> "
            f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
        )


def run_once(docs_dir: Path, questions: Path, search: bool, as_json: bool = False) -> None:
    from gitkb import Workspace

    # ignore_cleanup_errors: a tantivy merge thread may still write while the directory goes
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp, Workspace(Path(tmp) / "ws") as ws:
        assert ws.document_index("CREATE_INDEX", index_name="aws", embeddings=False)["Success"]
        load0 = os.getloadavg()[0]
        with TantivyCpu() as tv:
            t0, c0, m0, k0 = time.perf_counter(), time.process_time(), time.thread_time(), _worker_cpu()
            r = ws.document_index("ADD_DOCUMENTS", index_name="aws", filepath=str(docs_dir))
            dt, cpu = time.perf_counter() - t0, time.process_time() - c0
            main, worker = time.thread_time() - m0, _worker_cpu() - k0  # a kept worker is still running
        cpu -= tv.own  # the sampler is the bench's, not the ingest's
        tantivy = tv.total
        load1 = os.getloadavg()[0]
        assert r["Success"], r
        docs = r["counts"]["added"]
        chunks = r["chunks_written"]
        load = f"load average {load0:.1f} -> {load1:.1f} on {os.cpu_count()} cores"
        tail = TAIL[-1] if TAIL else float("nan")
        fed, FEED[:] = sum(FEED) if FEED else float("nan"), []
        if as_json:
            figures = {"docs": docs, "chunks": chunks, "wall": dt, "main": main, "threads": cpu - main}
            more = {"tantivy": tantivy, "worker": worker, "tail": tail, "feed": fed, "load": [load0, load1]}
            print(json.dumps({**figures, **more}))
            return
        print(
            f"ingest: {docs} docs, {chunks} chunks in {dt:.2f} s -> {docs / dt:.0f} docs/s, "
            f"{chunks / dt:.0f} chunks/s; CPU {cpu + worker:.2f} s = writer main thread {main:.2f} + "
            f"tantivy's threads ~{tantivy:.2f} + other writer threads ~{cpu - main - tantivy:.2f} + "
            f"chunking worker {worker:.2f}; keyword feeds {fed:.2f} (writer thread); after the last batch {tail:.2f} ({load})"
        )
        print(f"skipped: {r['counts']['skipped']}")
        if not search:
            return
        qs = queries_from_dev(questions)
        for q in qs[:5]:  # warm-up
            ws.document_index("SEARCH", query=q, index_name="aws")
        lat = []
        for q in qs:
            t = time.perf_counter()
            res = ws.document_index("SEARCH", query=q, index_name="aws", top_n=10)
            lat.append((time.perf_counter() - t) * 1000)
            assert res["Success"], res
        print(
            f"keyword search over {len(qs)} queries: p50 {pct(lat, 50):.2f} ms, p95 {pct(lat, 95):.2f} ms "
            f"(load average {os.getloadavg()[0]:.1f})"
        )


def _worker_cpu() -> float:
    """CPU of this process's children: those ended (reaped) and those still running (a chunking
    worker a long-running process keeps between ingests is only reaped when the workspace closes)."""
    import psutil  # the test dependency; only --twice needs it

    live = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            t = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        live += t.user + t.system
    return _children_cpu() + live


def run_twice(docs_dir: Path) -> None:
    """Ingest ``docs_dir`` into two indexes of one workspace (a long-running process's second big
    ingest) and print, as JSON, the second ingest's figures (``run_once``'s keys, no tantivy split)."""
    from gitkb import Workspace

    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp, Workspace(Path(tmp) / "ws") as ws:
        for name in ("first", "second"):
            assert ws.document_index("CREATE_INDEX", index_name=name, embeddings=False)["Success"]
        assert ws.document_index("ADD_DOCUMENTS", index_name="first", filepath=str(docs_dir))["Success"]
        load0 = os.getloadavg()[0]
        t0, c0, m0, k0 = time.perf_counter(), time.process_time(), time.thread_time(), _worker_cpu()
        r = ws.document_index("ADD_DOCUMENTS", index_name="second", filepath=str(docs_dir))
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        main, worker = time.thread_time() - m0, _worker_cpu() - k0
        assert r["Success"], r
        figures = {"docs": r["counts"]["added"], "chunks": r["chunks_written"], "wall": dt, "main": main}
        more = {"threads": cpu - main, "worker": worker, "load": [load0, os.getloadavg()[0]]}
        print(json.dumps({**figures, **more}))


def baseline_pairs(tree: Path, runs: int, docs_dir: Path, twice: bool = False) -> None:
    """Alternate fresh processes of this tree and of ``tree``; print each pair and the median ratio."""
    here = Path(__file__).resolve()

    def one(src: Path) -> dict[str, float]:
        env = {**os.environ, "PYTHONPATH": str(src)}
        cmd = [sys.executable, str(here), "--no-search", "--json", "--docs", str(docs_dir)]
        cmd += ["--twice"] if twice else []
        done = subprocess.run(cmd, env=env, check=False, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{src}: the ingest failed:\n{done.stderr[-2000:]}")
        return dict(json.loads(done.stdout.splitlines()[0]))

    def line(name: str, r: dict[str, float]) -> str:
        total = r["main"] + r["threads"] + r["worker"]
        tv = r.get("tantivy", float("nan"))
        return (
            f"{name}: {r['docs'] / r['wall']:5.0f} docs/s, CPU {total:.2f} s = main {r['main']:.2f} + "
            f"tantivy ~{tv:.2f} + other threads ~{r['threads'] - tv:.2f} + worker {r['worker']:.2f}, "
            f"feeds {r.get('feed', float('nan')):.2f} "
            f"(load {r['load'][0]:.1f})"
        )

    ratios, cpu_ratios = [], []
    for k in range(runs):
        order = [("this", REPO / "src"), ("base", tree / "src")]
        got = {name: one(src) for name, src in (order if k % 2 == 0 else order[::-1])}
        this, base = got["this"], got["base"]
        ratios.append(base["wall"] / this["wall"])
        cpu = [r["main"] + r["threads"] + r["worker"] for r in (base, this)]
        cpu_ratios.append(cpu[0] / cpu[1])
        print(
            f"pair {k + 1}: {line('this', this)}; {line('base', base)}; ratio x{ratios[-1]:.2f}, CPU x{cpu_ratios[-1]:.2f}"
        )
        sys.stdout.flush()
    print(
        f"median over {runs} pairs: docs/s ratio x{statistics.median(ratios):.2f}, "
        f"CPU ratio x{statistics.median(cpu_ratios):.2f} (this against {tree})"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=Path, default=DATA / "docs")
    ap.add_argument("--questions", type=Path, default=DATA / "questions.dev.jsonl")
    ap.add_argument(
        "--runs", type=int, default=1, help="fresh ingests in a row, or pairs with --baseline (default 1)"
    )
    ap.add_argument("--no-search", action="store_true", help="ingest only")
    ap.add_argument(
        "--baseline", type=Path, help="another tree: alternate fresh processes of both, print ratios"
    )
    ap.add_argument(
        "--twice",
        action="store_true",
        help="with --baseline: the second of two ingests in one workspace (two indexes), CPU incl. a kept worker",
    )
    ap.add_argument(
        "--timeline", action="store_true", help="one ingest: print its timeline (bench/_timeline.py)"
    )
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one figures line (--baseline)
    args = ap.parse_args()
    if args.baseline is not None:
        baseline_pairs(args.baseline.resolve(), args.runs, args.docs, args.twice)
        return
    if args.twice:
        run_twice(args.docs)
        return
    if args.timeline:
        run_timeline(args.docs)
        return
    _time_final_catch_up()
    for _ in range(args.runs):
        run_once(args.docs, args.questions, not (args.no_search or args.json), args.json)
    if args.json:
        return
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: {rss:.0f} MiB")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
