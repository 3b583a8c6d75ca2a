"""Ranking metrics computed by trec_eval itself (``pytrec-eval-terrier``, imported lazily).

Names: ``ndcg@k`` (trec_eval ``ndcg_cut.k``), ``recall@k`` (``recall.k``),
``mrr@k`` (``recip_rank`` over the run cut to its first k documents, as BEIR
and ir_measures' ``RR@k`` do), ``precision@k`` (``P.k``).

Two choices make the numbers reproducible:

* trec_eval re-sorts a run by score and breaks ties by document id; a run
  here is a ranked list, so it is handed over with strictly decreasing
  scores (``n - rank``) and trec_eval evaluates exactly our order;
* the mean is over every judged query, a query with no hits counting 0
  (``trec_eval -c``), not only over the queries that returned something.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from gitkb.core.errors import InvalidArgument

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Sequence[str]]  # query id -> document ids, best first

_NAME = re.compile(r"(ndcg|recall|mrr|precision)@(\d{1,4})")
_TREC = {"ndcg": "ndcg_cut", "recall": "recall", "precision": "P"}


def parse_measure(name: str) -> tuple[str, int]:
    m = _NAME.fullmatch(name)
    if not m or int(m.group(2)) < 1:
        raise InvalidArgument(f"unknown measure {name!r}; use ndcg@k, recall@k, mrr@k or precision@k")
    return m.group(1), int(m.group(2))


def _scored(ranked: Sequence[str], cut: int | None = None) -> dict[str, float]:
    docs = list(dict.fromkeys(ranked))[:cut]
    n = len(docs)
    return {d: float(n - i) for i, d in enumerate(docs)}


def per_query(qrels: Qrels, run: Run, measures: Sequence[str]) -> dict[str, dict[str, float]]:
    """query id -> measure -> value, for every query in ``qrels`` (0 where the run has nothing)."""
    import pytrec_eval  # heavy: pytrec_eval (~45 ms), only when a run is scored

    parsed = {m: parse_measure(m) for m in measures}
    clean_qrels = {q: {d: int(s) for d, s in docs.items()} for q, docs in qrels.items() if docs}
    out: dict[str, dict[str, float]] = {q: dict.fromkeys(measures, 0.0) for q in clean_qrels}
    plain = {f"{_TREC[k]}.{n}" for k, n in parsed.values() if k != "mrr"}
    if plain:
        ev = pytrec_eval.RelevanceEvaluator(clean_qrels, plain)
        res = ev.evaluate({q: _scored(run.get(q, ())) for q in clean_qrels if run.get(q)})
        for q, vals in res.items():
            for m, (kind, n) in parsed.items():
                if kind != "mrr":
                    out[q][m] = float(vals[f"{_TREC[kind]}_{n}"])
    for m, (kind, n) in parsed.items():
        if kind != "mrr":
            continue
        ev = pytrec_eval.RelevanceEvaluator(clean_qrels, {"recip_rank"})
        res = ev.evaluate({q: _scored(run.get(q, ()), n) for q in clean_qrels if run.get(q)})
        for q, vals in res.items():
            out[q][m] = float(vals["recip_rank"])
    return out


def evaluate(qrels: Qrels, run: Run, measures: Sequence[str]) -> dict[str, Any]:
    """Mean of each measure over the judged queries, plus ``queries`` (how many)."""
    pq = per_query(qrels, run, measures)
    n = len(pq)
    if n == 0:
        raise InvalidArgument("no judged queries to evaluate")
    means: dict[str, Any] = {m: sum(v[m] for v in pq.values()) / n for m in measures}
    means["queries"] = n
    return means
