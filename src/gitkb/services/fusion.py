"""Rank fusion: several ranked lists into one, by rank, never by raw score.

Reciprocal-rank fusion (Cormack, Clarke and Buettcher, SIGIR 2009): an item's
fused score is ``sum(weight / (k + rank))`` over the lists it appears in
(rank 1 = best). Scores of different retrievers (BM25, cosine) and of
different embedding models are not comparable; ranks are. ``k`` damps the
head of each list: larger ``k`` flattens the differences between top ranks.

Pure functions, no I/O: tuned and tested with plain lists.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

DEFAULT_RRF_K = 60.0

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
