"""SciFact train: other semantic sides fused with the keyword list, offline, and the per-query ceiling.

Not a test: prints nDCG@10. The lists are SEARCH's own (``keyword_hits`` / ``semantic_hits``, 200
deep as a hybrid search of top_n 100 makes them), fused by ``fusion.document_fusion`` (share 1.0,
semantic weight 0.4, documents by their best chunk) as SEARCH does, so "whole + whole" repeats
``gitkb eval beir --mode hybrid`` (0.7369). Rows:

- semantic side from ``auto`` windows (``--windows-home``: a home holding ``scifact-auto``), keyword
  side from the whole abstracts: BM25 keeps its document length, the embedder reads every window;
- a second vector per document from its title alone (embedded here, ~25 s), as the max of the two
  cosines or as a third list;
- the per-query ceiling: each claim at its best semantic weight in 0, 0.1, ..., 1 (what a rule
  choosing the weight per query could at most reach), the claims no weight helps, and how well
  signals a rule could use (the query terms' mean and highest idf, each list's drop from its 1st to
  its 10th score over the 1st, the two top tens' overlap) rank the claims by which list wins
  (Spearman's rho with keyword nDCG@10 - semantic nDCG@10, over the claims where the weight matters).

    .venv/bin/python bench/scifact_sides.py --home COPY_ONE_CHUNK [--windows-home COPY_WITH_AUTO]
"""

from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path
from typing import Any

from gitkb import Workspace
from gitkb.services.evaluation import datasets, metrics
from gitkb.services.retrieval import fusion
from gitkb.services.retrieval import search as search_service
from gitkb.services.retrieval.query_words import keyword_query
from gitkb.services.retrieval.semantic import embedder_for, plan_modes, query_vector, semantic_hits
from gitkb.stores.catalog.documents import chunks_by_cids
from gitkb.stores.catalog.indexes import get_by_name
from gitkb.stores.keywords import analyze

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
DEPTH = 200
Lists = dict[str, list[tuple[str, float]]]  # query id -> (document id, score) best first


def doc_ids(ws: Workspace, cids: list[int]) -> dict[int, str]:
    return {
        c: str(datasets.doc_id_from_path(d.path))
        for c, (_, d) in chunks_by_cids(ws.ctx.catalog.conn, cids).items()
    }


def keyword_lists(ws: Workspace, index: str, queries: dict[str, str]) -> Lists:
    rows = search_service.resolve_indexes(ws.ctx, index)
    out: Lists = {}
    for qid, text in queries.items():
        hits = search_service.keyword_hits(ws.ctx, text, rows, DEPTH)
        ids = doc_ids(ws, [c.cid for c, _ in hits])
        out[qid] = [(ids[c.cid], s) for c, s in hits]
    return out


def semantic_lists(ws: Workspace, index: str, queries: dict[str, str]) -> tuple[Lists, str]:
    rows = search_service.resolve_indexes(ws.ctx, index)
    ((identity, group),) = plan_modes(ws.ctx, rows, "semantic").groups.items()
    out: Lists = {}
    for qid, text in queries.items():
        hits = semantic_hits(ws.ctx, text, identity, group, DEPTH)
        ids = doc_ids(ws, [c.cid for c, _ in hits])
        out[qid] = [(ids[c.cid], s) for c, s in hits]
    return out, identity


def fuse(qrels: Any, lists: dict[str, Lists], weights: dict[str, float]) -> dict[str, float]:
    """Per-query nDCG@10 of SEARCH's fusion of the named lists."""
    run = {}
    for qid in next(iter(lists.values())):
        scored: dict[str, list[tuple[tuple[str, int], float]]] = {}
        document_of: dict[tuple[str, int], str] = {}
        for name, per_query in lists.items():
            scored[name] = []
            for i, (doc, score) in enumerate(per_query[qid]):
                document_of[(name, i)] = doc
                scored[name].append(((name, i), score))
        tie = {k: (d, k) for k, d in document_of.items()}
        fused = fusion.document_fusion(scored, document_of, weights=weights, share=1.0, tie=tie)
        run[qid] = [d for d in dict.fromkeys(document_of[f.key] for f in fused) if d != qid][:100]
    per = metrics.per_query(qrels, run, ["ndcg@10"])
    return {q: per[q]["ndcg@10"] if q in per else 0.0 for q in run}


def mean(per: dict[str, float]) -> float:
    return round(statistics.fmean(per.values()), 4)


def title_lists(ws: Workspace, identity: str, beir: Any) -> Lists:
    import numpy as np  # heavy: numpy, for the exact cosines of 809 claims x 5,183 titles

    embedder = embedder_for(ws.ctx, identity)
    titles = [d.title or "" for d in beir.corpus]
    tv = np.array([v for i in range(0, len(titles), 256) for v in embedder.embed_batch(titles[i : i + 256])])
    qv = np.array([query_vector(ws.ctx, identity, t) for t in beir.queries.values()])
    tv /= np.linalg.norm(tv, axis=1, keepdims=True)
    qv /= np.linalg.norm(qv, axis=1, keepdims=True)
    sims = qv @ tv.T
    out: Lists = {}
    for row, qid in enumerate(beir.queries):
        top = np.argsort(-sims[row])[:DEPTH]
        out[qid] = [(beir.corpus[j].id, float(sims[row, j])) for j in top]
    return out


def idfs(ws: Workspace, queries: dict[str, str], index_name: str) -> dict[str, list[float]]:
    row = get_by_name(ws.ctx.catalog.conn, index_name)
    searcher = ws.ctx.keywords.searcher(row.id) if row is not None else None
    if searcher is None:
        return {qid: [0.0] for qid in queries}
    n_docs = int(searcher.num_docs)
    out = {}
    for qid, text in queries.items():
        dfs = [searcher.doc_freq("text", t) for t in analyze(keyword_query(text))]
        out[qid] = [math.log(1 + (n_docs - n + 0.5) / (n + 0.5)) for n in dfs if n > 0] or [0.0]
    return out


def spearman(a: list[float], b: list[float]) -> float:
    def ranks(x: list[float]) -> list[int]:
        order = sorted(range(len(x)), key=lambda i: x[i])
        r = [0] * len(x)
        for k, i in enumerate(order):
            r[i] = k
        return r

    return statistics.correlation(ranks(a), ranks(b))


def drop(hits: list[tuple[str, float]]) -> float:
    return (hits[0][1] - hits[9][1]) / hits[0][1] if len(hits) > 9 and hits[0][1] else 0.0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--home", type=Path, required=True, help="a home holding the one-chunk index")
    ap.add_argument("--index", default="scifact")
    ap.add_argument("--windows-home", type=Path, default=None)
    ap.add_argument("--windows-index", default="scifact-auto")
    args = ap.parse_args(argv)
    beir = datasets.load_beir(args.data, "train")
    with Workspace(args.home) as ws:
        kw = keyword_lists(ws, args.index, beir.queries)
        sem, identity = semantic_lists(ws, args.index, beir.queries)
        titles = title_lists(ws, identity, beir)
        query_idfs = idfs(ws, beir.queries, args.index)
    two = {"keyword": 0.6, "semantic": 0.4}
    base = fuse(beir.qrels, {"keyword": kw, "semantic": sem}, two)
    print(f"whole + whole (SEARCH)                     {mean(base)}")
    if args.windows_home is not None:
        with Workspace(args.windows_home) as ws:
            windows, _ = semantic_lists(ws, args.windows_index, beir.queries)
        print(
            f"keyword whole + semantic windows           {mean(fuse(beir.qrels, {'keyword': kw, 'semantic': windows}, two))}"
        )
    both = {}
    for qid in beir.queries:
        best = dict(sem[qid])
        for doc, s in titles[qid]:
            best[doc] = max(best.get(doc, -1.0), s)
        both[qid] = sorted(best.items(), key=lambda x: -x[1])[:DEPTH]
    print(
        f"semantic = max(abstract, title) cosine     {mean(fuse(beir.qrels, {'keyword': kw, 'semantic': both}, two))}"
    )
    three = {"keyword": kw, "semantic:abstract": sem, "semantic:title": titles}
    w3 = {"keyword": 0.6, "semantic:abstract": 0.2, "semantic:title": 0.2}
    print(f"title as a third list (0.6 / 0.2 / 0.2)    {mean(fuse(beir.qrels, three, w3))}")
    grid = [i / 10 for i in range(11)]
    per = {
        w: fuse(beir.qrels, {"keyword": kw, "semantic": sem}, {"keyword": 1 - w, "semantic": w}) for w in grid
    }
    ceiling = {q: max(per[w][q] for w in grid) for q in base}
    print(f"ceiling: each claim at its best weight     {mean(ceiling)}")
    print(
        f"claims at nDCG@10 0 whatever the weight    {sum(1 for v in ceiling.values() if v == 0)} of {len(ceiling)}"
    )
    matters = [q for q in base if max(per[w][q] for w in grid) > min(per[w][q] for w in grid)]
    wins = [per[0.0][q] - per[1.0][q] for q in matters]
    signals = {
        "mean idf": lambda q: statistics.fmean(query_idfs[q]),
        "highest idf": lambda q: max(query_idfs[q]),
        "keyword drop": lambda q: drop(kw[q]),
        "semantic drop": lambda q: drop(sem[q]),
        "top-10 overlap": lambda q: len({d for d, _ in kw[q][:10]} & {d for d, _ in sem[q][:10]}) / 10,
    }
    print(f"which list wins, {len(matters)} claims where the weight matters (Spearman's rho):")
    for name, signal in signals.items():
        print(f"  {name:<16} {spearman([signal(q) for q in matters], wins):+.3f}")


if __name__ == "__main__":
    main()
