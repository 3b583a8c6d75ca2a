"""Rank fusion: several ranked lists into one, by rank, never by raw score.

Reciprocal-rank fusion (Cormack, Clarke and Buettcher, SIGIR 2009): an item's
fused score is ``sum(weight / (k + rank))`` over the lists it appears in
(rank 1 = best). Scores of different retrievers (BM25, cosine) and of
different embedding models are not comparable; ranks are. ``k`` damps the
head of each list: larger ``k`` flattens the differences between top ranks.

``score_fusion`` (the hybrid default) adds each list's min-max normalised
scores instead, weighted: it keeps how far apart the scores are, which rank
fusion throws away, and measured better on SciFact (see ``DEFAULT_FUSION``).

Pure functions, no I/O: tuned and tested with plain lists.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

DEFAULT_RRF_K = 60.0
FUSIONS = ("score", "rrf")
# Hybrid's default, measured (gitkb eval, default model, one list depth 2 x top_n, see README
# "Performance"): SciFact train nDCG@10 RRF k=60 0.718, best k (5) 0.727; score fusion with
# semantic weight 0.3 / 0.4 / 0.5 / 0.6: 0.730 / 0.739 / 0.738 / 0.723 (top 100), 0.735 at top 10.
DEFAULT_FUSION = "score"
DEFAULT_SEMANTIC_WEIGHT = 0.4
# Document-aware score fusion (``document_fusion``) in hybrid search, measured (README "Retrieval
# quality"; SciFact train in auto chunks / awsdocs dev): share 0 -> nDCG@10 0.7327 / R@1 0.60, MRR@10
# 0.775; 0.5 -> 0.7348 / 0.60, 0.772; 0.75 -> - / 0.65, 0.792; 1.0 -> 0.7359 / 0.65, 0.802 (R@5 1.00).
DOCUMENT_SHARE = 1.0

K = TypeVar("K", bound=Hashable)


@dataclass
class Fused(Generic[K]):
    key: K
    score: float
    ranks: dict[str, int] = field(default_factory=dict)  # list name -> 1-based rank in that list

    @property
    def retrievers(self) -> list[str]:
        """Retriever names (the part of each list name before ``:``), in first-seen order."""
        return list(dict.fromkeys(name.split(":", 1)[0] for name in self.ranks))


def rrf(
    lists: Mapping[str, Sequence[K]],
    *,
    k: float = DEFAULT_RRF_K,
    weights: Mapping[str, float] | None = None,
) -> list[Fused[K]]:
    """Fuse named ranked lists (best first). Ties break by best single rank, then first appearance.

    A list name's weight is ``weights[name]``, else ``weights[retriever]`` (the
    part before ``:``), else 1. Duplicates within a list count once, at their best rank.
    """
    if k < 0:
        raise ValueError(f"rrf k must be >= 0, got {k}")
    w = dict(weights or {})
    fused: dict[K, Fused[K]] = {}
    order: dict[K, int] = {}
    for name, items in lists.items():
        weight = w.get(name, w.get(name.split(":", 1)[0], 1.0))
        seen: set[K] = set()
        for rank, key in enumerate(items, 1):
            if key in seen:
                continue
            seen.add(key)
            f = fused.get(key)
            if f is None:
                f = fused[key] = Fused(key, 0.0)
                order[key] = len(order)
            f.score += weight / (k + rank)
            f.ranks[name] = rank
    return sorted(fused.values(), key=lambda f: (-f.score, min(f.ranks.values()), order[f.key]))


def score_fusion(
    lists: Mapping[str, Sequence[tuple[K, float]]],
    *,
    weights: Mapping[str, float] | None = None,
) -> list[Fused[K]]:
    """Fuse named ``(key, score)`` lists (best first) by a weighted sum of min-max normalised scores.

    Each list's scores are mapped to [0, 1] over that list (its best item 1,
    its last 0; a list whose scores are all equal gives 1 to each), so BM25
    and cosine become comparable. An item absent from a list gets 0 there.
    Weights as in ``rrf`` (name, then retriever, else 1). Ties break by best
    single rank, then first appearance. Duplicates count once, at their best rank.
    """
    w = dict(weights or {})
    fused: dict[K, Fused[K]] = {}
    order: dict[K, int] = {}
    for name, items in lists.items():
        weight = w.get(name, w.get(name.split(":", 1)[0], 1.0))
        best: dict[K, tuple[int, float]] = {}
        for rank, (key, score) in enumerate(items, 1):
            if key not in best:
                best[key] = (rank, float(score))
        if not best:
            continue
        lo = min(s for _, s in best.values())
        hi = max(s for _, s in best.values())
        for key, (rank, score) in best.items():
            f = fused.get(key)
            if f is None:
                f = fused[key] = Fused(key, 0.0)
                order[key] = len(order)
            f.score += weight * ((score - lo) / (hi - lo) if hi > lo else 1.0)
            f.ranks[name] = rank
    return sorted(fused.values(), key=lambda f: (-f.score, min(f.ranks.values()), order[f.key]))


def document_fusion(
    lists: Mapping[str, Sequence[tuple[K, float]]],
    document_of: Mapping[K, Hashable],
    *,
    weights: Mapping[str, float] | None = None,
    share: float = 0.5,
    tie: Mapping[K, Any] | None = None,
) -> list[Fused[K]]:
    """``score_fusion`` where a chunk also gets its document's best evidence.

    In each list, a chunk's min-max normalised score becomes ``(1 - share) * own + share * best``,
    ``best`` being the best normalised score of any chunk of its document in that list (own is 0
    when the chunk is absent): a page whose one chunk matches the words and another the meaning
    ranks on both. ``share`` 0 is ``score_fusion``; 1 ranks documents, their chunks tied (ties as
    in ``score_fusion``: best single rank, then first appearance).

    With ``tie`` (a sortable key per item; SEARCH gives the catalog's index, document and chunk row),
    equal scores within a list share one rank and a tie left after that breaks by ``tie``: equal hits
    then come in the catalog's order, never in the order a store happened to return them in.
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"document share must be in [0, 1], got {share}")
    w = dict(weights or {})
    norm: dict[str, dict[K, float]] = {}
    ranks: dict[K, dict[str, int]] = {}
    order: dict[K, int] = {}
    for name, items in lists.items():
        best: dict[K, tuple[int, float]] = {}
        last: tuple[float, int] | None = None  # (score, rank) of the item before
        for rank, (key, score) in enumerate(items, 1):
            if tie is not None and last is not None and float(score) == last[0]:
                rank = last[1]  # equal scores, one rank
            last = (float(score), rank)
            if key not in best:
                best[key] = (rank, float(score))
        if not best:
            continue
        lo = min(s for _, s in best.values())
        hi = max(s for _, s in best.values())
        norm[name] = {k: ((s - lo) / (hi - lo) if hi > lo else 1.0) for k, (_, s) in best.items()}
        for key, (rank, _) in best.items():
            order.setdefault(key, len(order))
            ranks.setdefault(key, {})[name] = rank
    doc_best: dict[str, dict[Hashable, float]] = {}
    for name, scores in norm.items():
        per_doc = doc_best[name] = {}
        for k, v in scores.items():
            d = document_of[k]
            per_doc[d] = max(v, per_doc.get(d, 0.0))
    fused: list[Fused[K]] = []
    for key in order:
        total = 0.0
        for name, scores in norm.items():
            weight = w.get(name, w.get(name.split(":", 1)[0], 1.0))
            top = doc_best[name].get(document_of[key], 0.0)
            total += weight * ((1.0 - share) * scores.get(key, 0.0) + share * top)
        fused.append(Fused(key, total, ranks[key]))
    if tie is not None:
        return sorted(fused, key=lambda f: (-f.score, min(f.ranks.values()), tie[f.key]))
    return sorted(fused, key=lambda f: (-f.score, min(f.ranks.values()), order[f.key]))
