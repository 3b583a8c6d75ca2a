"""What became of the vectors of the chunks a call wrote: counted from ``vector_outcomes`` once they
are all stored, whichever worker embedded them; ``pending`` (with the range to wait for) until then."""

from __future__ import annotations

from typing import Any

from gitkb.services.context import Context
from gitkb.services.derived.vector_wants import asks_in_range, watermark_name
from gitkb.stores.catalog import changes
from gitkb.stores.catalog import vector_outcomes as outcomes


def counts_answer(got: outcomes.RangeCounts) -> dict[str, Any]:
    """``vectors: ready`` with the true counts of a range of chunks."""
    out: dict[str, Any] = {
        "vectors": "ready",
        "chunks_embedded": got.embedded,
        "chunks_reused": got.reused,
        "chunks_had_vector": got.had,
        "cost": {"texts": got.texts, "tokens": got.tokens, "seconds": round(got.seconds, 3)},
    }
    if got.gone:
        out["chunks_gone"] = got.gone  # deleted before they got a vector
    return out


def range_vectors(ctx: Context, after_seq: int, upto_seq: int) -> dict[str, Any]:
    """The vectors of the chunks written by change-log entries ``after_seq < seq <= upto_seq``:
    ``{}`` when none needs one, ``vectors: ready`` with the true counts once all are stored,
    else ``vectors: pending`` with how many are still waiting and the range to wait for."""
    asks = asks_in_range(ctx, after_seq, upto_seq)
    if not asks:
        return {}
    conn = ctx.catalog.conn
    got = outcomes.counts(conn, asks, after_seq, upto_seq)
    if all(changes.watermark(conn, watermark_name(i)) >= upto_seq for i in asks):
        return counts_answer(got)
    total = sum(asks.values())
    return {
        "vectors": "pending",
        "vectors_pending": max(total - got.done, 0),
        "vectors_total": total,
        "vectors_range": [after_seq, upto_seq],
    }
