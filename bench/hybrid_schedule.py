"""How many onnxruntime threads a hybrid search's query embedding gets, paired query by query in one process (so every
variant sees the same load), on a workspace that has vectors:

* ``one_thread_beside``: the query embedded on one onnxruntime thread while the keyword side runs on
  a search thread (today's default);
* ``two_threads_beside``: the same with two non-spinning onnxruntime threads (tried and not kept: see the README).

(Embedding on two threads first and running the keyword side beside the nearest-neighbour query
instead was tried: 7.31-7.34 against 5.95-6.01 ms p50 at 106k chunks, and dropped.)

Each query is embedded anew for every variant; the answers must be identical. Prints p50/p95 wall
and CPU of each and the load average. Run by hand on a copy of a home (opening takes its lease):

    .venv/bin/python bench/hybrid_schedule.py --home /tmp/gitkb-scale/scale --index scale [--reps 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pct, queries_from_dev  # noqa: E402

DATA = REPO.parent / "shared" / "data"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--index", required=True)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--mode", choices=("hybrid", "semantic"), default="hybrid")
    args = ap.parse_args()
    import onnxruntime as ort

    from gitkb import Workspace
    from gitkb.services.derived.identity import effective_identity, embedder_for
    from gitkb.services.derived.index_lookup import get_index

    qs = queries_from_dev(DATA / "awsdocs" / "questions.dev.jsonl")
    with Workspace(args.home) as ws:
        ws.ctx.embedding_worker.close()
        emb: Any = embedder_for(ws.ctx, effective_identity(ws.ctx, get_index(ws.ctx, args.index)))
        default = emb._session

        def session(threads: int) -> Any:
            opts = ort.SessionOptions()
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            return ort.InferenceSession(str(emb.model_dir / "model.onnx"), sess_options=opts)

        one, two = session(1), session(2)
        variants = {
            "one_thread_beside": one,
            "two_threads_beside": two,
        }
        took: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}

        def run(kind: str, q: str) -> list[Any]:
            emb._session = variants[kind]
            ws.ctx.caches.query_vectors.clear()
            t, c = time.perf_counter(), time.process_time()
            r = ws.document_index("SEARCH", query=q, index_name=args.index, mode=args.mode)
            took[kind].append(((time.perf_counter() - t) * 1000, (time.process_time() - c) * 1000))
            assert r["Success"] and r["mode"] == args.mode, r
            return [(x["id"], x["score"]) for x in r["Results"]]

        for q in qs[:5]:
            for k in variants:
                run(k, q + " warm")
        for v in took.values():
            v.clear()
        for rep in range(args.reps):
            for i, q in enumerate(qs):
                order = list(variants) if (i + rep) % 2 == 0 else list(reversed(variants))
                answers = {k: run(k, q) for k in order}
                first = next(iter(answers.values()))
                assert all(a == first for a in answers.values()), q
        emb._session = default
    for k, v in took.items():
        w, c = [x for x, _ in v], [y for _, y in v]
        print(
            f"{k:20s} p50 {pct(w, 50):.2f} ms, p95 {pct(w, 95):.2f} ms, CPU p50 {pct(c, 50):.2f} ms ({len(v)} queries)"
        )
    print(f"identical answers; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
