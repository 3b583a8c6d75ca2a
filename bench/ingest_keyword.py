"""Keyword-only ingest and search benchmark on ../shared/data/awsdocs (issue: document index core).

Prints docs/s, chunks/s, peak RSS and keyword search p50/p95 over 100 queries
made from the 20 dev questions. Run by hand:

    .venv/bin/python bench/ingest_keyword.py [--docs ../shared/data/awsdocs/docs]
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=Path, default=DATA / "docs")
    ap.add_argument("--questions", type=Path, default=DATA / "questions.dev.jsonl")
    args = ap.parse_args()
    from gitkb import Workspace

    with tempfile.TemporaryDirectory() as tmp, Workspace(Path(tmp) / "ws") as ws:
        assert ws.document_index("CREATE_INDEX", index_name="aws", embeddings=False)["Success"]
        t0, c0 = time.perf_counter(), time.process_time()
        r = ws.document_index("ADD_DOCUMENTS", index_name="aws", filepath=str(args.docs))
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        assert r["Success"], r
        docs = r["counts"]["added"]
        chunks = r["chunks_written"]
        qs = queries_from_dev(args.questions)
        for q in qs[:5]:  # warm-up
            ws.document_index("SEARCH", query=q, index_name="aws")
        lat = []
        for q in qs:
            t = time.perf_counter()
            res = ws.document_index("SEARCH", query=q, index_name="aws", top_n=10)
            lat.append((time.perf_counter() - t) * 1000)
            assert res["Success"], res
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"ingest: {docs} docs, {chunks} chunks in {dt:.2f} s -> {docs / dt:.0f} docs/s, {chunks / dt:.0f} chunks/s")
        child = resource.getrusage(resource.RUSAGE_CHILDREN)
        print(
            f"ingest CPU: writer process {cpu:.2f} s, chunking worker {child.ru_utime + child.ru_stime:.2f} s"
            " (on an idle 2-core machine the wall time tends to the larger of the two)"
        )
        print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print(f"skipped: {r['counts']['skipped']}")
        print(f"keyword search over {len(qs)} queries: p50 {pct(lat, 50):.2f} ms, p95 {pct(lat, 95):.2f} ms")
        print(f"peak RSS: {rss:.0f} MiB")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
