"""Hybrid search with its keyword side on a search thread against both sides one after the other,
paired query by query in one process (so both see the same load), on a workspace that has vectors.

For each query (each embedded anew): hybrid sequential (the keyword side run inline, as before
issue 20), hybrid parallel, semantic alone, keyword alone, in alternating order; the two hybrid
answers must be identical. Prints p50/p95 of each, the parallel/sequential ratio and the load
average. Run by hand on a workspace of a corpus (a copy: opening it takes its writer lease):

    .venv/bin/python bench/hybrid_pair.py --home /tmp/aws-copy --index awsdocs [--reps 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pct, queries_from_dev  # noqa: E402

DATA = REPO.parent / "shared" / "data"


class Inline:
    """An executor that runs what it is given at once: the keyword side before the semantic one."""

    def submit(self, fn: Any, *a: Any, **k: Any) -> Future[Any]:
        f: Future[Any] = Future()
        f.set_result(fn(*a, **k))
        return f


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--index", required=True)
    ap.add_argument("--queries", choices=("awsdocs", "scifact"), default="awsdocs")
    ap.add_argument("--reps", type=int, default=1)
    args = ap.parse_args()
    import gitkb.services.retrieval.search as search
    from gitkb import Workspace

    if args.queries == "awsdocs":
        qs = queries_from_dev(DATA / "awsdocs" / "questions.dev.jsonl")
    else:
        lines = (DATA / "scifact" / "queries.train.jsonl").read_text().splitlines()
        qs = [json.loads(x)["text"] for x in lines if x.strip()][:100]
    real_pool = search.search_pool
    took: dict[str, list[float]] = {"sequential": [], "parallel": [], "semantic": [], "keyword": []}
    modes = {"sequential": "hybrid", "parallel": "hybrid", "semantic": "semantic", "keyword": "keyword"}
    with Workspace(args.home) as ws:
        ws.ctx.embedding_worker.close()

        def run(kind: str, q: str) -> list[str]:
            ws.ctx.caches.query_vectors.clear()
            search.search_pool = (lambda ctx: Inline()) if kind == "sequential" else real_pool  # type: ignore[assignment,return-value]
            t = time.perf_counter()
            r = ws.document_index("SEARCH", query=q, index_name=args.index, mode=modes[kind])
            took[kind].append((time.perf_counter() - t) * 1000)
            assert r["Success"] and r["mode"] == modes[kind], r
            return [x["id"] for x in r["Results"]]

        for q in qs[:5]:
            run("parallel", q + " warm")
        took["parallel"].clear()
        for _ in range(args.reps):
            for i, q in enumerate(qs):
                order = list(took) if i % 2 == 0 else list(reversed(took))
                ids = {k: run(k, q) for k in order}
                assert ids["sequential"] == ids["parallel"], q
    search.search_pool = real_pool
    for k, v in took.items():
        print(f"{k}: p50 {pct(v, 50):.2f} ms, p95 {pct(v, 95):.2f} ms ({len(v)} queries)")
    ratio = pct(took["parallel"], 50) / pct(took["sequential"], 50)
    print(
        f"hybrid parallel/sequential p50 {ratio:.2f}; identical answers; load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
