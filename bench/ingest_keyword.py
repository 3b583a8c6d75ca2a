"""Keyword-only ingest and search benchmark on ../shared/data/awsdocs (issue: document index core).

Prints docs/s, chunks/s, the CPU each thread spent (the writer's main thread, the other
threads of the process: tantivy's indexing threads and the pool's feeder, and the chunking
worker process), peak RSS and keyword search p50/p95 over 100 queries made from the 20 dev
questions, with the load average beside every figure. Run by hand:

    .venv/bin/python bench/ingest_keyword.py [--docs ../shared/data/awsdocs/docs] [--runs 3]

On a busy machine wall-clock figures mean little: compare the CPU figures, and ratios to a
baseline measured in the same session (run the baseline tree's copy of this script with its own
``PYTHONPATH=<tree>/src``, alternating).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pct, queries_from_dev  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "awsdocs"


def _children_cpu() -> float:
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    return child.ru_utime + child.ru_stime


TAIL: list[float] = []


def _time_final_catch_up() -> None:
    """Record the process CPU of ADD_DOCUMENTS' final keyword catch-up: it runs after the last
    batch, with nothing else to overlap it, so the wall time includes it whole."""
    import gitkb.services.indexing.ingest as ingest

    real = ingest.catch_up_keywords

    def timed(ctx: object) -> int:
        c = time.process_time()
        try:
            return real(ctx)  # type: ignore[arg-type]
        finally:
            TAIL.append(time.process_time() - c)

    ingest.catch_up_keywords = timed  # type: ignore[assignment]


def run_once(docs_dir: Path, questions: Path, search: bool) -> None:
    from gitkb import Workspace

    with tempfile.TemporaryDirectory() as tmp, Workspace(Path(tmp) / "ws") as ws:
        assert ws.document_index("CREATE_INDEX", index_name="aws", embeddings=False)["Success"]
        load0 = os.getloadavg()[0]
        t0, c0, m0, k0 = time.perf_counter(), time.process_time(), time.thread_time(), _children_cpu()
        r = ws.document_index("ADD_DOCUMENTS", index_name="aws", filepath=str(docs_dir))
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        main, worker = time.thread_time() - m0, _children_cpu() - k0
        load1 = os.getloadavg()[0]
        assert r["Success"], r
        docs = r["counts"]["added"]
        chunks = r["chunks_written"]
        load = f"load average {load0:.1f} -> {load1:.1f} on {os.cpu_count()} cores"
        print(
            f"ingest: {docs} docs, {chunks} chunks in {dt:.2f} s -> {docs / dt:.0f} docs/s, "
            f"{chunks / dt:.0f} chunks/s ({load})"
        )
        print(
            f"ingest CPU: writer main thread {main:.2f} s, other writer threads (tantivy, pool) {cpu - main:.2f} s, "
            f"chunking worker {worker:.2f} s; total {cpu + worker:.2f} s; of it after the last batch "
            f"(final keyword catch-up) {TAIL[-1] if TAIL else float('nan'):.2f} s ({load})"
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=Path, default=DATA / "docs")
    ap.add_argument("--questions", type=Path, default=DATA / "questions.dev.jsonl")
    ap.add_argument("--runs", type=int, default=1, help="fresh ingests in a row (default 1)")
    ap.add_argument("--no-search", action="store_true", help="ingest only")
    args = ap.parse_args()
    _time_final_catch_up()
    for _ in range(args.runs):
        run_once(args.docs, args.questions, not args.no_search)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: {rss:.0f} MiB")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
