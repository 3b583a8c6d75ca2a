"""Keyword-side variants of issue 20, measured through ``gitkb eval`` in-process (not kept in SEARCH).

Not a test: prints one line per variant and corpus, the figures ``gitkb eval`` prints (SciFact train
nDCG@10; awsdocs dev R@1 / R@5 / R@10 / MRR@10 and ASK cites gold / lead recall), and for feedback
the extra time of the expansion step (catalog read, analysis, second tantivy query) per query::

    .venv/bin/python bench/keyword_variants.py --home COPY --corpus scifact --index scifact \\
        --modes keyword,hybrid --variants base,rm3:3:30:0.1,fused-rm3:3:30:0.2,one-field,index-idf

Run it on a copy of an evaluation home (``cp -a``; opening takes the writer lease). Variants:

- ``rm3:K:T:L``: RM3 pseudo-relevance feedback (Lavrenko and Croft 2001; Anserini's form): the first
  K keyword hits' terms, P(w|R) = sum over hits of (score / sum of scores) x tf(w) / |hit|, terms of
  at most one character, digits only or in over 10% of the chunks left out, the best T kept and
  normalised; the query searched again as (1 - L) x the original query + L x |query| x P(w|R).
- ``fused-rm3:K:T:L``: the same from the first K *fused* hybrid documents; the second keyword list
  re-ranks the first one's chunks (what feedback costs: the keyword side then waits for the vectors).
- ``one-field``: a second tantivy index of the same chunks in a temp dir whose text field holds
  title + heading path + text (no title field): one length normalisation, BM25F-like.
- ``own-index:NAME``: a temp tantivy index holding only index NAME's chunks as they are: BM25's
  statistics (document frequencies, average length) of that index alone, as a tantivy index per
  gitkb index would have them.
- ``index-idf``: each query term's idf counted within the searched indexes (a filtered count
  query per term and field) instead of over the whole keyword index, applied as a boost of
  idf_index / idf_home per term; tantivy's average length stays the home's.
- the keyword query built term by term: ``parser`` (tantivy's parser's own scores: one per
  distinct word), ``term-once`` (one per distinct analysed term: "adult adults" once),
  ``qtf`` (each term weighted by how often the query holds it, as Anserini's bag of words),
  ``no-numbers`` (numbers out), ``more-stop`` (41 more function words out, ``MORE_STOP``).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import tantivy

from gitkb import Workspace
from gitkb.services.derived.catchup import _keyword_docs
from gitkb.services.retrieval import fusion
from gitkb.services.retrieval import search as search_service
from gitkb.services.retrieval.query_words import keyword_query
from gitkb.stores import keyword_schema as kws
from gitkb.stores import keywords as kw
from gitkb.stores.catalog.documents import chunks_by_cids, live_chunks

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
_DIGITS = re.compile(r"^\d+$")
ORIGINAL = kw.KeywordIndex.search
Hits = list[tuple[int, float]]
spent: list[float] = []  # ms of the expansion step, per query


def relevance_model(index: Any, conn: Any, top: Hits, terms: int) -> list[tuple[str, float]]:
    """RM3's P(w|R) over ``top`` (cid, weight), its ``terms`` best terms, normalised to sum 1."""
    rows = chunks_by_cids(conn, [c for c, _ in top])
    searcher = index.index.searcher()
    n_docs = max(1, int(searcher.num_docs))
    total = sum(w for _, w in top) or 1.0
    rel: Counter[str] = Counter()
    for cid, w in top:
        if cid not in rows:
            continue
        words = kws.analyze(rows[cid][0].text)
        for t, n in Counter(words).items():
            rel[t] += (w / total) * n / len(words)
    kept: list[tuple[str, float]] = []
    for t, p in rel.most_common():
        if len(t) < 2 or _DIGITS.match(t) or searcher.doc_freq("text", t) / n_docs > 0.1:
            continue
        kept.append((t, p))
        if len(kept) >= terms:
            break
    z = sum(p for _, p in kept) or 1.0
    return [(t, p / z) for t, p in kept]


def expanded_search(
    index: Any,
    query: str,
    model: list[tuple[str, float]],
    lam: float,
    ids: Sequence[str] | None,
    tenant: Any,
    limit: int,
) -> Hits:
    words = kws._QUERY_WORDS.findall(query)
    parsed, _ = index.index.parse_query_lenient(
        " ".join(words), default_field_names=["text", "title"], field_boosts={"title": kws.TITLE_BOOST}
    )
    should = [(tantivy.Occur.Should, tantivy.Query.boost_query(parsed, 1.0 - lam))]
    for t, p in model:
        for field, boost in (("text", 1.0), ("title", kws.TITLE_BOOST)):
            term = tantivy.Query.term_query(index.schema, field, t, index_option="freq")
            should.append(
                (tantivy.Occur.Should, tantivy.Query.boost_query(term, lam * len(set(words)) * p * boost))
            )
    clauses = [(tantivy.Occur.Must, tantivy.Query.boolean_query(should))]
    if ids is not None:
        clauses.append((tantivy.Occur.Must, index._filter_query("index_id", ids)))
    clauses.append((tantivy.Occur.Must, kws.filter_query(index.schema, "tenant", [tenant or kws.NO_TENANT])))
    searcher = index.index.searcher()
    hits = searcher.search(tantivy.Query.boolean_query(clauses), limit=limit, count=False).hits
    return [(int(searcher.doc(a)["cid"][0]), float(s)) for s, a in hits]


@contextmanager
def rm3(ws: Workspace, k: int, terms: int, lam: float) -> Iterator[None]:
    def search(
        self: Any, query: str, *, index_ids: Any, limit: int, tenant: Any = None, bm25: Any = None
    ) -> Hits:
        first = ORIGINAL(self, query, index_ids=index_ids, limit=max(limit, k), tenant=tenant, bm25=bm25)
        if not first:
            return first
        t0 = time.perf_counter()
        model = relevance_model(self, ws.ctx.catalog.conn, first[:k], terms)
        out = expanded_search(self, query, model, lam, index_ids, tenant, limit)
        spent.append((time.perf_counter() - t0) * 1000)
        return out

    kw.KeywordIndex.search = search  # type: ignore[method-assign]
    try:
        yield
    finally:
        kw.KeywordIndex.search = ORIGINAL  # type: ignore[method-assign]


@contextmanager
def fused_rm3(ws: Workspace, k: int, terms: int, lam: float) -> Iterator[None]:
    """Feedback from the first fused documents: the keyword list searched again and fused again."""
    original_fusion, original_results = fusion.document_fusion, search_service.fused_results
    asked: dict[str, Any] = {}

    def results(ctx: Any, q: str, rows: Any, *args: Any, **kwargs: Any) -> Any:
        asked.update(q=q, ids=[r.id for r in rows])
        return original_results(ctx, q, rows, *args, **kwargs)

    def fuse(scored: Any, document_of: Any, **kwargs: Any) -> Any:
        fused = original_fusion(scored, document_of, **kwargs)
        if "keyword" not in scored:
            return fused
        t0 = time.perf_counter()
        index = ws.ctx.keywords
        model = relevance_model(index, ws.ctx.catalog.conn, [(f.key, f.score) for f in fused[:k]], terms)
        depth = len(scored["keyword"])
        raw = expanded_search(
            index, keyword_query(asked["q"]), model, lam, asked["ids"], None, depth * 2 + 10
        )
        live = live_chunks(ws.ctx.catalog.conn, [c for c, _ in raw])
        again = [(c, s) for c, s in raw if c in live and c in document_of][:depth]
        spent.append((time.perf_counter() - t0) * 1000)
        return original_fusion({**scored, "keyword": again}, document_of, **kwargs)

    fusion.document_fusion, search_service.fused_results = fuse, results  # type: ignore[assignment]
    try:
        yield
    finally:
        fusion.document_fusion, search_service.fused_results = original_fusion, original_results


@contextmanager
def one_field(ws: Workspace, only: str | None = None) -> Iterator[None]:
    """``only`` (an index name): a temp index of that index's chunks as they are (own statistics)."""
    original = ws.ctx.keywords
    only_id = None if only is None else search_service.resolve_indexes(ws.ctx, only)[0].id
    with tempfile.TemporaryDirectory(prefix="gitkb-one-field-") as tmp:
        index = kw.KeywordIndex(Path(tmp))
        cids = sorted(original.all_cids())
        for i in range(0, len(cids), 5000):
            docs = _keyword_docs(ws.ctx.catalog.conn, cids[i : i + 5000])
            if only_id is not None:
                index.apply(removes=[], adds=[d for d in docs if d.index_id == only_id])
                continue
            index.apply(
                removes=[],
                adds=[
                    kws.KeywordDoc(
                        d.cid, d.index_id, d.tenant, "", f"{d.title}\n{d.text}" if d.title else d.text
                    )
                    for d in docs
                ],
            )
        index.commit()
        ws.ctx.keywords = index
        try:
            yield
        finally:
            ws.ctx.keywords = original


# Function words the English stop list and the question words (query_words) leave in a query.
MORE_STOP = frozenset(
    "about above after again against all any because before below between both during each few from further"
    " here its itself just more most nor off once only other over own same so some than them themselves"
    " those through too under until up very while".split()
)


def query_terms(query: str, rule: str) -> list[tuple[list[str], float]]:
    """(analysed terms of a word, weight) per query word as ``rule`` counts them; tantivy's parser
    (every rule but ``term-once`` / ``qtf``) counts each distinct word once, a word of several
    terms (a dotted identifier) being a phrase."""
    words = kws._QUERY_WORDS.findall(query)
    if rule == "no-numbers":
        words = [w for w in words if not re.fullmatch(r"[\d.]+", w)] or words
    if rule == "more-stop":
        words = [w for w in words if w.lower() not in MORE_STOP] or words
    if rule in ("term-once", "qtf"):
        counted = Counter(tuple(t) for w in words if (t := kws.analyze(w)))
        return [(list(t), float(n) if rule == "qtf" else 1.0) for t, n in counted.items()]
    return [(t, 1.0) for w in dict.fromkeys(words) if (t := kws.analyze(w))]


@contextmanager
def manual(ws: Workspace, rule: str) -> Iterator[None]:
    """The keyword query built term by term (the parser's scores when ``rule`` changes nothing);
    ``index-idf``: each term's idf counted within the searched indexes, as a boost."""

    def count(searcher: Any, q: Any) -> int:
        return int(searcher.search(q, limit=1, count=True).count)

    def search(
        self: Any, query: str, *, index_ids: Any, limit: int, tenant: Any = None, bm25: Any = None
    ) -> Hits:
        self._reload()
        searcher = self.index.searcher()
        ixf = self._filter_query("index_id", index_ids) if index_ids is not None else None
        n_all = int(searcher.num_docs)
        n_ix = count(searcher, ixf) if ixf is not None and rule == "index-idf" else n_all
        should = []
        for toks, weight in query_terms(query, rule):
            for field, boost in (("text", weight), ("title", weight * kws.TITLE_BOOST)):
                if len(toks) > 1:
                    q = tantivy.Query.phrase_query(self.schema, field, toks)
                else:
                    q = tantivy.Query.term_query(self.schema, field, toks[0], index_option="freq")
                    if ixf is not None and rule == "index-idf":
                        n = searcher.doc_freq(field, toks[0])
                        must = [(tantivy.Occur.Must, q), (tantivy.Occur.Must, ixf)]
                        ni = count(searcher, tantivy.Query.boolean_query(must)) if n else 0
                        if ni == 0:
                            continue
                        home = math.log(1 + (n_all - n + 0.5) / (n + 0.5))
                        boost *= math.log(1 + (n_ix - ni + 0.5) / (ni + 0.5)) / home
                should.append((tantivy.Occur.Should, tantivy.Query.boost_query(q, boost)))
        if not should:
            return []
        clauses = [(tantivy.Occur.Must, tantivy.Query.boolean_query(should))]
        if ixf is not None:
            clauses.append((tantivy.Occur.Must, ixf))
        clauses.append(
            (tantivy.Occur.Must, kws.filter_query(self.schema, "tenant", [tenant or kws.NO_TENANT]))
        )
        hits = searcher.search(tantivy.Query.boolean_query(clauses), limit=limit, count=False).hits
        return [(int(searcher.doc(a)["cid"][0]), float(s)) for s, a in hits]

    kw.KeywordIndex.search = search  # type: ignore[method-assign]
    try:
        yield
    finally:
        kw.KeywordIndex.search = ORIGINAL  # type: ignore[method-assign]


@contextmanager
def base(ws: Workspace) -> Iterator[None]:
    yield


# Variants written against the single keyword index of the home (``KeywordIndex.index``, an index_id
# filter), as it was when they were measured; ``base``, ``one-field`` and ``own-index`` run on both.
SINGLE_INDEX = frozenset(
    {"rm3", "fused-rm3", "parser", "index-idf", "term-once", "qtf", "no-numbers", "more-stop"}
)


def variant(ws: Workspace, spec: str) -> Any:
    name, *args = spec.split(":")
    makers: dict[str, Callable[..., Any]] = {
        "base": base,
        "rm3": rm3,
        "fused-rm3": fused_rm3,
        "one-field": one_field,
    }
    if name in SINGLE_INDEX and not hasattr(ws.ctx.keywords, "index"):
        sys.exit(
            f"variant {name!r} builds its queries on the single keyword index of the home that gitkb had"
            " before one tantivy index per gitkb index (kwidx20): run it with PYTHONPATH at that tree's"
            " src (git archive 25e1326), as its README figures were measured"
        )
    if name in ("parser", "index-idf", "term-once", "qtf", "no-numbers", "more-stop"):
        return manual(ws, name)
    if name == "own-index":
        return one_field(ws, args[0])
    if args:
        return makers[name](ws, int(args[0]), int(args[1]), float(args[2]))
    return makers[name](ws)


def measure(ws: Workspace, corpus: str, index: str, mode: str) -> str:
    if corpus == "scifact":
        o = ws.eval_beir(str(DATA / "scifact"), split="train", mode=mode, index_name=index)
        assert o["Success"], o
        return f"nDCG@10 {o['ndcg@10']:.4f}, R@100 {o['recall@100']:.3f}"
    o = ws.eval_qa(str(DATA / "awsdocs"), mode=mode, index_name=index, ask=mode != "keyword")
    assert o["Success"], o
    out = f"{o['recall@1']:.2f} / {o['recall@5']:.2f} / {o['recall@10']:.2f} / {o['mrr@10']:.3f}"
    return out + (
        f", ASK {o['ask_cites_gold']:.2f} / {o['ask_lead_recall']:.3f}" if mode != "keyword" else ""
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--corpus", choices=("scifact", "awsdocs"), default="scifact")
    ap.add_argument("--index", default=None, help="default: the corpus name")
    ap.add_argument("--modes", default="keyword,hybrid")
    ap.add_argument("--variants", default="base,rm3:3:30:0.1,fused-rm3:3:30:0.2,one-field,index-idf")
    args = ap.parse_args(argv)
    with Workspace(args.home) as ws:
        for spec in args.variants.split(","):
            with variant(ws, spec):
                for mode in args.modes.split(","):
                    spent.clear()
                    figures = measure(ws, args.corpus, args.index or args.corpus, mode)
                    extra = f"; expansion p50 {sorted(spent)[len(spent) // 2]:.2f} ms" if spent else ""
                    print(f"{spec:<22} {args.corpus} {mode:<8} {figures}{extra}", flush=True)


if __name__ == "__main__":
    main()
