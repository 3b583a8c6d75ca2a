"""Probe: Chroma's HNSW search depth (``[chroma] ef_search``) against exact cosine, and its effect on the
evaluation figures at a user's search depth. Not a test: prints figures. Run it on COPIES of homes
(it sets each collection's ef_search, which Chroma keeps). Usage:

    .venv/bin/python bench/ann_depth.py recall --home /tmp/ann20/scale [--ef 100,200,400]
    .venv/bin/python bench/ann_depth.py eval --scifact-home /tmp/ann20/q20-scifact \\
        --qa-home /tmp/ann20/q20-awsdocs [--ef 100,200,400]

Chroma reads ef_search when it loads a collection's index, so every ef runs in a process of its own.

``recall``: 200 queries (``bench/scale.py``'s: 100 awsdocs questions, 100 SciFact claims) embedded with
the home's model; recall@20 of Chroma's answer against exact cosine over every vector of the home's
collection (matched by similarity, 1e-4, so identical vectors count once each), how often the true top
hit is missed, and the ANN's CPU per query (``n_results`` 40, what a top_n 10 search asks; 5 rounds).

``eval``: SciFact nDCG@10 / R@10 / MRR@10 (index ``scifact``) and awsdocs R@1/R@5/R@10/MRR@10 (index
``awsdocs``), semantic and hybrid, as ``gitkb eval`` scores them but searched with top_n 10. ``gitkb
eval`` searches 50 / 100 deep and so asks Chroma for 110-210 neighbours: HNSW searches at least as deep
as the neighbours asked for, so its figures hardly move with ef_search at all.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT / "bench"))


def _collection(home: str, ef: int) -> object:
    import chromadb  # heavy: chromadb
    from chromadb.config import Settings  # heavy: chromadb

    cl = chromadb.PersistentClient(path=f"{home}/vectors", settings=Settings(anonymized_telemetry=False))
    col = cl.list_collections()[0]
    col.modify(configuration={"hnsw": {"ef_search": ef}})
    return cl.get_collection(col.name)


def recall_one(home: str, ef: int) -> None:
    import scale  # bench/scale.py: its query set

    from gitkb.core.embedders.fastembed_minilm import FastEmbedMiniLM

    qs = scale.queries("awsdocs", DATA / "awsdocs", 100) + scale.queries("scifact", DATA / "scifact", 100)
    emb = FastEmbedMiniLM(Path(home) / "models")
    vecs = np.asarray([emb.embed_query(q) for q in qs], dtype=np.float32)
    col: object = _collection(home, ef)
    parts, off = [], 0
    while True:
        r = col.get(limit=5000, offset=off, include=["embeddings"])  # type: ignore[attr-defined]
        if not r["ids"]:
            break
        parts.append(np.asarray(r["embeddings"], dtype=np.float32))
        off += len(r["ids"])
    every = np.vstack(parts)
    every /= np.linalg.norm(every, axis=1, keepdims=True)
    rec, missed = [], 0
    for v in vecs:
        exact = np.sort(every @ (v / np.linalg.norm(v)))[::-1][:20]
        got = col.query(query_embeddings=v[None], n_results=20, include=["distances"])  # type: ignore[attr-defined]
        pool = [1 - d for d in got["distances"][0]]
        found = 0
        for s in exact:
            j = next((k for k, h in enumerate(pool) if abs(h - s) < 1e-4), None)
            if j is not None:
                found += 1
                pool.pop(j)
        rec.append(found / 20)
        missed += 1 - got["distances"][0][0] < exact[0] - 1e-4
    cpu = []
    for _ in range(5):
        for v in vecs:
            c0 = time.process_time()
            col.query(query_embeddings=v[None], n_results=40, include=["distances"])  # type: ignore[attr-defined]
            cpu.append((time.process_time() - c0) * 1e3)
    print(
        f"{len(every)} vectors, ef {ef}: recall@20 {np.mean(rec):.3f} (awsdocs questions {np.mean(rec[:100]):.3f},"
        f" SciFact claims {np.mean(rec[100:]):.3f}), top hit missed {missed}/{len(vecs)}, ANN CPU p50 "
        f"{np.median(cpu):.2f} ms, load {os.getloadavg()[0]:.1f}"
    )


def eval_one(home: str, kind: str, ef: int) -> None:
    from gitkb import Workspace
    from gitkb.services.evaluation import runners
    from gitkb.services.evaluation.datasets import doc_id_from_path, load_beir, load_qa
    from gitkb.services.evaluation.metrics import evaluate

    with Workspace(home, chroma_ef_search=ef) as w:
        for mode in ("semantic", "hybrid"):
            if kind == "beir":
                data = load_beir(DATA / "scifact")
                run, _ = runners._run_queries(
                    w.ctx, data.queries, "scifact", mode, 10, doc_id_from_path, None
                )
                run = {q: [d for d in docs if d != q] for q, docs in run.items()}
                s = evaluate(data.qrels, run, ["ndcg@10", "recall@10", "mrr@10"])
            else:
                qa = load_qa(DATA / "awsdocs")
                qrels = {q.id: {q.doc: 1} for q in qa.questions}
                asked = {q.id: q.question for q in qa.questions}
                run, _ = runners._run_queries(w.ctx, asked, "awsdocs", mode, 10, lambda p: p, None)
                s = evaluate(qrels, run, runners.QA_MEASURES)
            figures = ", ".join(f"{k} {v:.4f}" for k, v in s.items() if k != "queries")
            print(f"ef {w.ctx.vectors.ef_search} {kind} {mode} top_n 10: {figures}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["recall", "eval", "_recall", "_eval"])
    ap.add_argument("--home")
    ap.add_argument("--scifact-home")
    ap.add_argument("--qa-home")
    ap.add_argument("--kind")
    ap.add_argument("--ef", default="100,200,400")
    a = ap.parse_args()
    if a.what == "_recall":
        return recall_one(a.home, int(a.ef))
    if a.what == "_eval":
        return eval_one(a.home, a.kind, int(a.ef))
    for ef in a.ef.split(","):
        jobs = (
            [["_recall", "--home", a.home]]
            if a.what == "recall"
            else [
                ["_eval", "--home", h, "--kind", k]
                for h, k in ((a.scifact_home, "beir"), (a.qa_home, "qa"))
                if h
            ]
        )
        for job in jobs:
            subprocess.run([sys.executable, __file__, *job, "--ef", ef], check=True)


if __name__ == "__main__":
    main()
