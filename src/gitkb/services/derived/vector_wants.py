"""Which chunks want a vector, in which identity: the live bindings, the identities they need, the
chunks still waiting after an identity's watermark (``vectors:<identity>``), the asks of a range.
"""

from __future__ import annotations

from collections.abc import Collection

from gitkb.services.context import Context
from gitkb.services.derived.identity import identity_state
from gitkb.stores.catalog import changes
from gitkb.stores.catalog import documents as doc_rows
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import vector_state as vs


def watermark_name(identity: str) -> str:
    return f"vectors:{identity}"


def live_bindings(ctx: Context) -> dict[str, vs.Binding]:
    """Bindings of embedding indexes that are not stranded: index_id -> binding.

    An index is stranded when its binding differs from its effective identity
    (its pin, else the active identity): its vectors wait for a re-embed.
    """
    conn = ctx.catalog.conn
    active = identity_state(ctx).identity
    out = {}
    binds = vs.bindings(conn)
    for row in index_rows.list_all(conn, include_hidden=True):
        b = binds.get(row.id)
        if not row.embeddings or b is None:
            continue
        if b.identity == (row.embedding_identity or active):
            out[row.id] = b
    return out


def wanted_identities(ctx: Context) -> list[str]:
    return sorted({b.identity for b in live_bindings(ctx).values()})


def pending_chunks(ctx: Context, identity: str, index_ids: Collection[str] | None = None) -> int:
    """Chunks still waiting for a vector in ``identity`` (an estimate for progress bars); with
    ``index_ids``, those of these indexes only (an agent's status)."""
    conn = ctx.catalog.conn
    wm = changes.watermark(conn, watermark_name(identity))
    total = 0
    for b in live_bindings(ctx).values():
        if b.identity != identity or (index_ids is not None and b.index_id not in index_ids):
            continue
        total += vs.plain_adds_after(conn, b.index_id, wm, b.since_seq)
        if vs.has_reembed_after(conn, b.index_id, wm, b.since_seq):
            total += doc_rows.chunk_count_of_index(conn, b.index_id)
    return total


def asks_in_range(ctx: Context, after_seq: int, upto_seq: int) -> dict[str, int]:
    """identity -> how many chunk vectors the entries ``after_seq < seq <= upto_seq`` ask for
    (adds of live-bound indexes; a re-embed entry asks for every chunk of its index)."""
    conn = ctx.catalog.conn
    out: dict[str, int] = {}
    for b in live_bindings(ctx).values():
        lo = max(after_seq, b.since_seq - 1)
        if lo >= upto_seq:
            continue
        n = vs.adds_in_range(conn, b.index_id, lo, upto_seq)
        reembeds = vs.reembeds_in_range(conn, b.index_id, lo, upto_seq)
        if reembeds:
            n += reembeds * doc_rows.chunk_count_of_index(conn, b.index_id)
        if n:
            out[b.identity] = out.get(b.identity, 0) + n
    return out
