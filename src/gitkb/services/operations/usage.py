"""Per-agent spend on query embeddings: count, tokens, time.

Before an agent's search runs, ``embed_query`` computes the query vectors the
search is about to need (one per embedding identity of the indexes searched by
meaning), through the same LRU cache the search reads, and measures them: a
vector already cached costs nothing and is not counted. The search then finds
them in the cache. ``record`` stores one event per query for the agent
(``gitkb agent usage``). Tokens are counted in the default model's word pieces.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from gitkb.core.errors import GitkbError
from gitkb.core.tokenizer import count_tokens
from gitkb.services.context import Context
from gitkb.services.retrieval import semantic
from gitkb.stores.catalog import knowledge as kb_rows
from gitkb.stores.catalog.indexes import IndexRow


@dataclass(frozen=True)
class QueryCost:
    count: int = 0  # query embeddings computed (cache misses)
    tokens: int = 0
    duration_ms: float = 0.0
    identities: tuple[str, ...] = ()


def embed_query(ctx: Context, rows: list[IndexRow], mode: Any, query: str) -> QueryCost:
    """Embed the query for every identity the search will use; errors are left for the search to report."""
    if mode == "keyword" or not rows:
        return QueryCost()

    try:
        plan = semantic.plan_modes(ctx, rows, mode)
    except GitkbError:
        return QueryCost()
    computed = []
    t0 = time.perf_counter()
    for identity in sorted(plan.groups):
        cache = ctx.caches.query_vectors
        if semantic.query_key(identity, query) in cache:
            continue
        try:
            semantic.query_vector(ctx, identity, query)
        except GitkbError:
            continue
        computed.append(identity)
    if not computed:
        return QueryCost()

    tokens = count_tokens([query])[0] * len(computed)
    return QueryCost(len(computed), tokens, round((time.perf_counter() - t0) * 1000, 3), tuple(computed))


def record(ctx: Context, agent_id: str, cost: QueryCost, **data: Any) -> None:
    with ctx.catalog.write() as conn:
        kb_rows.record_event(
            conn,
            agent_id,
            "query_embedding",
            count=cost.count,
            tokens=cost.tokens,
            duration_ms=cost.duration_ms,
            data={**data, "identities": list(cost.identities)},
        )
