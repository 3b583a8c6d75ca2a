"""A SEARCH's keyword hits as the catalog lets them count, taken one by one (``search.keyword_candidates``).

Each hit is checked against the catalog: gone, expired, of another tier, of another tenant, or of
an index not searched (an entry misfiled in a searched index's folder) does not count, and a cid held
by two folders counts once. Tiers and expiry filter after the fact, so a fetch can run out before
the caller has its ``top_n`` while the index holds more: then a fetch ``FETCH_GROWTH`` times as deep
follows, up to ``MAX_KEYWORD_FETCH`` hits (tiers=[cold] under 300 better-ranked hot documents
answered nothing before; red team round 21).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace

from gitkb.services.context import Context
from gitkb.services.retrieval.tenancy import tier_matches
from gitkb.stores.catalog.documents import LiveChunk, live_chunks

FETCH_GROWTH = 4
MAX_KEYWORD_FETCH = 20_000

Raw = list[tuple[int, float]]


def live_keyword_hits(
    ctx: Context,
    raw: Raw,
    limit: int,
    rebuilt: dict[str, str],
    searched: set[str],
    tenant: str | None,
    tiers: frozenset[str] | None,
) -> Iterator[tuple[LiveChunk, float]]:
    """The hits of ``raw`` that count, in order, under the index they were searched as (``rebuilt``:
    a RECHUNK's temporary index -> its index). The first ``limit`` are read in one go; the rest only
    when those fall short (gone, expired...)."""
    live = live_chunks(ctx.catalog.conn, [cid for cid, _ in raw[:limit]])
    now = time.time()
    for pos, (cid, score) in enumerate(raw):
        if pos == limit:
            live.update(live_chunks(ctx.catalog.conn, [c for c, _ in raw[limit:]]))
        chunk = live.get(cid)
        if chunk is None:
            continue
        if chunk.index_id in rebuilt:  # rebuilt by RECHUNK, not swapped in yet
            chunk = replace(chunk, index_id=rebuilt[chunk.index_id])
        if chunk.index_id not in searched:  # kept in a searched index's folder, yet another index's
            continue
        if chunk.tenant != (tenant or None):  # the catalog's tenant, as the semantic side checks it
            continue
        if chunk.expires_at is not None and chunk.expires_at <= now:
            continue
        if not tier_matches(chunk, tiers):
            continue
        yield chunk, score


def rounds(
    search: Callable[[int], Raw], fetch: int, live: Callable[[Raw], Iterator[tuple[LiveChunk, float]]]
) -> Iterator[tuple[LiveChunk, float]]:
    """``live`` of ``search(fetch)``'s hits; asked for more once they are used up and the index had
    more, of the hits a search ``FETCH_GROWTH`` times as deep adds; each cid once."""
    seen: set[int] = set()
    given: set[int] = set()
    while True:
        raw = search(fetch)
        fresh = [(cid, score) for cid, score in raw if cid not in seen]
        seen.update(cid for cid, _ in raw)
        for chunk, score in live(fresh):
            if chunk.cid not in given:  # one cid in two folders (misfiled): once
                given.add(chunk.cid)
                yield chunk, score
        if len(raw) < fetch or fetch >= MAX_KEYWORD_FETCH:
            return
        fetch = min(fetch * FETCH_GROWTH, MAX_KEYWORD_FETCH)
