"""Python's GIL switch interval under a hybrid search, paired query by query in one process (so every
variant sees the same load), on a workspace that has vectors.

A hybrid search runs its keyword side on a search thread while the caller's thread embeds the query
and asks the ANN (both release the GIL). When one thread wants the GIL back while the other runs
Python (the keyword side's catalog checks, the semantic side's resolve), it waits for the holder to
release it, at most the switch interval (CPython's default 5 ms) before asking it to. The variants
set ``sys.setswitchinterval`` before each query; every query is embedded anew for each; the answers
must be identical. Prints p50/p95 wall and CPU of each with the load average. Run by hand on a home
with vectors (opening takes its lease):

    .venv/bin/python bench/switch_interval.py --home /tmp/gitkb-scale/scale --index scale [--reps 3] [--intervals 0.005,0.001,0.0005]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # noqa: E402
from _common import pct  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--index", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--intervals", default="0.005,0.001,0.0005")
    ap.add_argument("--mode", choices=("hybrid", "semantic", "keyword"), default="hybrid")
    args = ap.parse_args()
    from gitkb import Workspace

    intervals = [float(x) for x in args.intervals.split(",") if x]
    qs = scale.queries("awsdocs", scale.DATA / "awsdocs", args.queries // 2) + scale.queries(
        "scifact", scale.DATA / "scifact", args.queries - args.queries // 2
    )
    took: dict[float, list[tuple[float, float]]] = {iv: [] for iv in intervals}
    default = sys.getswitchinterval()
    with Workspace(args.home) as ws:
        ws.ctx.embedding_worker.close()

        def run(iv: float, q: str) -> list[Any]:
            sys.setswitchinterval(iv)
            ws.ctx.caches.query_vectors.clear()
            t, c = time.perf_counter(), time.process_time()
            r = ws.document_index("SEARCH", query=q, index_name=args.index, mode=args.mode)
            took[iv].append(((time.perf_counter() - t) * 1000, (time.process_time() - c) * 1000))
            assert r["Success"] and r["mode"] == args.mode, r
            return [(x["id"], x["score"]) for x in r["Results"]]

        for q in qs[:5]:
            for iv in intervals:
                run(iv, q + " warm")
        for v in took.values():
            v.clear()
        for rep in range(args.reps):
            for i, q in enumerate(qs):
                k = (i + rep) % len(intervals)
                order = intervals[k:] + intervals[:k]
                answers = [run(iv, q) for iv in order]
                assert all(a == answers[0] for a in answers), q
        sys.setswitchinterval(default)
    for iv, v in took.items():
        w, c = [x for x, _ in v], [y for _, y in v]
        print(
            f"switch interval {iv * 1000:5.2f} ms: p50 {pct(w, 50):.2f} ms, p95 {pct(w, 95):.2f} ms, "
            f"CPU p50 {pct(c, 50):.2f} ms ({len(v)} queries)"
        )
    print(f"identical answers; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
