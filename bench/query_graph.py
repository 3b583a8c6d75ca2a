"""The default model's query embedding on its two graphs: the documents' (fp32 products) and the int8
query graph (``core/embedders/minilm_query.py``), alternating in one process, one thread each.

Prints CPU per query for random word-piece sequences of a few lengths and for the real queries
(awsdocs dev questions and SciFact train claims), the cosine between the two graphs' vectors, and
the load average beside each figure.

    .venv/bin/python bench/query_graph.py [--rounds 3] [--reps 100]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from gitkb.core.embedders.registry import create_embedder

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def real_queries() -> list[str]:
    aws = [json.loads(x)["question"] for x in (DATA / "awsdocs" / "questions.dev.jsonl").open()]
    sf = [json.loads(x)["text"] for x in (DATA / "scifact" / "queries.train.jsonl").open()]
    return aws + sf


def cpu_ms(fn: object, items: list[object], reps: int) -> float:
    t = time.process_time()
    for _ in range(reps):
        for it in items:
            fn(it)  # type: ignore[operator]
    return (time.process_time() - t) / (reps * len(items)) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=100)
    args = ap.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="gitkb-query-graph-"))
    exact = create_embedder(
        "fastembed", "all-minilm-l6-v2", cache_dir=cache, options={"query_graph": "exact"}
    )
    int8 = create_embedder("fastembed", "all-minilm-l6-v2", cache_dir=cache, options={})
    assert int8.query_graph == "int8", int8.query_graph_error
    rng = np.random.default_rng(0)
    for n in (12, 24, 128):
        ids = [101, *rng.integers(2000, 20000, n - 2).tolist(), 102]
        enc = type("Enc", (), {"ids": ids, "attention_mask": [1] * n})()
        for r in range(args.rounds):
            a = cpu_ms(lambda e: exact._run([e]), [enc], args.reps)
            b = cpu_ms(lambda e: int8._run([e], int8._query_session), [enc], args.reps)
            print(
                f"{n:>4} pieces round {r + 1}: documents' graph {a:.2f} ms, int8 query graph {b:.2f} ms CPU ({load()})"
            )
    qs = real_queries()
    cos = np.array([float(np.array(int8.embed_query(q)) @ np.array(exact.embed_query(q))) for q in qs])
    print(f"{len(qs)} real queries: cosine min {cos.min():.5f} mean {cos.mean():.5f}")
    for r in range(args.rounds):
        a = cpu_ms(exact.embed_query, list(qs), 1)
        b = cpu_ms(int8.embed_query, list(qs), 1)
        print(
            f"real queries round {r + 1}: documents' graph {a:.2f} ms, int8 query graph {b:.2f} ms CPU each ({load()})"
        )


if __name__ == "__main__":
    main()
