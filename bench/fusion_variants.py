"""The fusion rows of the README's "What was tried" table, from one embedded BEIR index.

Not a test: prints nDCG@10 per variant. Every variant fuses the same two lists per query, as
SEARCH makes them (keyword and semantic, each ``2 x top_n`` deep, from the index), so the
figures differ only by the fusion rule; documents are ranked by their best chunk, as
``gitkb eval beir`` does. The title-weight rows re-run the keyword list with tantivy's title
boost set to each value. Builds the index with ``gitkb eval beir --mode hybrid`` when ``--home``
does not hold it yet (SciFact: ~8 min of embedding on 2 cores), then reuses it::

    .venv/bin/python bench/fusion_variants.py [--data ../shared/data/scifact] [--home /tmp/ev]
        [--index scifact] [--split train] [--top-n 100,10] [--queries N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gitkb import Workspace
from gitkb.services.evaluation import datasets, metrics
from gitkb.services.retrieval import fusion
from gitkb.stores import keyword_schema

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "scifact"
Hits = list[tuple[str, float]]  # (chunk id, score) best first
Fuse = Callable[[Hits, Hits], list[str]]  # keyword list, semantic list -> chunk ids best first


def minmax(hits: Hits) -> dict[str, float]:
    if not hits:
        return {}
    lo, hi = min(s for _, s in hits), max(s for _, s in hits)
    return {c: (s - lo) / (hi - lo) if hi > lo else 1.0 for c, s in hits}


def max_norm(hits: Hits) -> dict[str, float]:
    hi = max((s for _, s in hits), default=0.0)
    return {c: s / hi if hi > 0 else 1.0 for c, s in hits}


def dbsf(hits: Hits) -> dict[str, float]:
    """Distribution-based score fusion's normalisation: (s - (mean - 3 sd)) / 6 sd, clipped to [0, 1]."""
    if len(hits) < 2:
        return {c: 1.0 for c, _ in hits}
    scores = [s for _, s in hits]
    mu, sd = statistics.fmean(scores), statistics.pstdev(scores)
    if sd == 0:
        return {c: 1.0 for c, _ in hits}
    return {c: min(1.0, max(0.0, (s - (mu - 3 * sd)) / (6 * sd))) for c, s in hits}


def raw(hits: Hits) -> dict[str, float]:
    return dict(hits)


def weighted(
    norm_kw: Callable[[Hits], dict[str, float]], norm_sem: Callable[[Hits], dict[str, float]], w: float
) -> Fuse:
    def fuse(kw: Hits, sem: Hits) -> list[str]:
        a, b = norm_kw(kw), norm_sem(sem)
        order: dict[str, int] = {}
        for c, _ in [*kw, *sem]:
            order.setdefault(c, len(order))  # ties: first seen, keyword list first
        total = {c: (1 - w) * a.get(c, 0.0) + w * b.get(c, 0.0) for c in {*a, *b}}
        return sorted(total, key=lambda c: (-total[c], order[c]))

    return fuse


def rrf(k: float) -> Fuse:
    def fuse(kw: Hits, sem: Hits) -> list[str]:
        lists = {"keyword": [c for c, _ in kw], "semantic": [c for c, _ in sem]}
        return [f.key for f in fusion.rrf(lists, k=k)]

    return fuse


def default_fusion(w: float) -> Fuse:
    """SEARCH's own score fusion (gitkb.services.retrieval.fusion.score_fusion), semantic weight ``w``."""

    def fuse(kw: Hits, sem: Hits) -> list[str]:
        lists = {"keyword": kw, "semantic": sem}
        return [f.key for f in fusion.score_fusion(lists, weights={"keyword": 1 - w, "semantic": w})]

    return fuse


def lists(ws: Workspace, index: str, query: str, depth: int, mode: str) -> tuple[Hits, dict[str, str]]:
    res = ws.document_index("SEARCH", query=query, index_name=index, top_n=depth, mode=mode)
    assert res["Success"], res
    hits = [(h["id"], float(h["score"])) for h in res["Results"]]
    return hits, {h["id"]: h["filepath"] for h in res["Results"]}


def docs_of(chunks: Sequence[str], paths: Mapping[str, str], cut: int) -> list[str]:
    out: dict[str, None] = {}
    for c in chunks[:cut]:
        d = datasets.doc_id_from_path(paths[c])
        if d is not None:
            out.setdefault(d)
    return list(out)


def ndcg(qrels: dict[str, dict[str, int]], run: dict[str, list[str]]) -> float:
    return float(metrics.evaluate(qrels, run, ["ndcg@10"])["ndcg@10"])


def ensure_index(ws: Workspace, data: Path, split: str, index: str) -> None:
    if ws.document_index("GET_SEARCH_SETTINGS", index_name=index).get("Success"):
        return
    print(f"building index {index!r} from {data} (gitkb eval beir --mode hybrid) ...", flush=True)
    out = ws.eval_beir(str(data), split=split, mode="hybrid", index_name=index)
    assert out["Success"], out


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--home", type=Path, default=Path("/tmp/ev"))
    ap.add_argument("--index", default="scifact")
    ap.add_argument("--split", default="train")
    ap.add_argument("--top-n", default="100,10")
    ap.add_argument("--queries", type=int, default=None, help="only the first N judged queries")
    args = ap.parse_args(argv)
    beir = datasets.load_beir(args.data, args.split)
    queries = dict(list(beir.queries.items())[: args.queries])
    qrels = {q: beir.qrels[q] for q in queries}
    figures: dict[str, float] = {}
    with Workspace(args.home) as ws:
        ensure_index(ws, args.data, args.split, args.index)
        for top_n in (int(n) for n in args.top_n.split(",")):
            depth = max(2 * top_n, 20)  # each list as deep as SEARCH makes it (services/retrieval/search.py)
            got = {
                q: (lists(ws, args.index, t, depth, "keyword"), lists(ws, args.index, t, depth, "semantic"))
                for q, t in queries.items()
            }

            def score(fuse: Fuse, got: Any = got, top_n: int = top_n) -> float:
                run = {}
                for q, ((kw, p1), (sem, p2)) in got.items():
                    run[q] = docs_of(fuse(kw, sem), {**p1, **p2}, top_n)
                return ndcg(qrels, run)

            variants: dict[str, Fuse] = {f"RRF k={k:g}": rrf(k) for k in (5, 10, 20, 40, 60, 100)}
            variants |= {f"score fusion w={w}": default_fusion(w) for w in (0.3, 0.4, 0.5, 0.6)}
            variants |= {f"DBSF w={w}": weighted(dbsf, dbsf, w) for w in (0.3, 0.4, 0.5)}
            variants |= {
                f"raw cosine + min-max BM25 w={w}": weighted(minmax, raw, w) for w in (0.3, 0.4, 0.5)
            }
            variants |= {
                f"max-norm BM25 + min-max cosine w={w}": weighted(max_norm, minmax, w) for w in (0.35, 0.4)
            }
            print(
                f"\n{len(queries)} queries of {beir.name} {args.split}, top_n {top_n} (lists {depth} deep): nDCG@10"
            )
            for name, fuse in variants.items():
                figures[f"{name} @ {top_n}"] = value = score(fuse)
                print(f"  {name:<40} {value:.4f}", flush=True)
            for name, only in (
                ("keyword alone", lambda kw, sem: [c for c, _ in kw]),
                ("semantic alone", lambda kw, sem: [c for c, _ in sem]),
            ):
                figures[f"{name} @ {top_n}"] = value = score(only)
                print(f"  {name:<40} {value:.4f}")
        boost = keyword_schema.TITLE_BOOST
        print(f"\nkeyword alone by title weight (tantivy's title boost; default {boost}), top_n 100: nDCG@10")
        try:
            for tw in (2.0, 0.3, 0.0):
                keyword_schema.TITLE_BOOST = tw  # read by keyword_schema.index_hits on every query
                run = {
                    q: docs_of([c for c, _ in h], p, 100)
                    for q, t in queries.items()
                    for h, p in [lists(ws, args.index, t, 100, "keyword")]
                }
                figures[f"title weight {tw}"] = value = ndcg(qrels, run)
                print(f"  title weight {tw:<4} {value:.4f}", flush=True)
        finally:
            keyword_schema.TITLE_BOOST = boost
    sys.stdout.flush()
    return figures


if __name__ == "__main__":
    main()
