"""How much of the question a hit's document title and heading path hold (a hybrid ranking bonus).

The keyword side already searches the title field (weight 0.3, ``stores/keywords``) and the
semantic side reads each chunk after its "Title > Section" prefix; this bonus gives a page whose
title names what is asked for its due after fusion: ``weight`` x the share of the keyword query's
terms (question words out, ``query_words``) found in the title and heading path.
"""

from __future__ import annotations

from collections.abc import Mapping

from gitkb.services.retrieval.query_words import keyword_query
from gitkb.stores.catalog.documents import ChunkRow, DocumentRow
from gitkb.stores.keywords import analyze


def title_bonus(
    query: str, hits: Mapping[int, tuple[ChunkRow, DocumentRow]], weight: float
) -> dict[int, float]:
    """cid -> ``weight`` x the share of the query's terms in its document title and heading path."""
    qterms = set(analyze(keyword_query(query)))
    if not qterms or weight == 0:
        return {}
    seen: dict[tuple[str, tuple[str, ...]], float] = {}
    out: dict[int, float] = {}
    for cid, (chunk, doc) in hits.items():
        key = (doc.title or "", chunk.heading_path)
        if key not in seen:
            terms = set(analyze(" ".join((key[0], *key[1]))))
            seen[key] = weight * len(qterms & terms) / len(qterms)
        out[cid] = seen[key]
    return out
