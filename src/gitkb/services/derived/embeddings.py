"""Embeddings as a service: what writes must check, the per-index vector state,
building and re-embedding, status, and purging an index from every collection.

Long operations (``build_embeddings``, ``reembed``) are plain functions
``fn(ctx, ..., progress=None) -> dict`` so a job runner can call them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from gitkb.core.embedders import fingerprint, split_identity
from gitkb.core.errors import EmbeddingNotConfigured, GitkbError, InvalidArgument
from gitkb.services.context import Context
from gitkb.services.derived.embedding_inputs import clipped_count
from gitkb.services.derived.identity import active_identity, effective_identity, embedder_for, identity_state
from gitkb.services.derived.index_lookup import get_index
from gitkb.services.derived.rebuild_guard import ensure_not_rebuilding
from gitkb.services.derived.vector_counts import counts_answer as counts_answer
from gitkb.services.derived.vector_counts import range_vectors as range_vectors
from gitkb.services.derived.vector_locks import identity_locks, running_builds, try_identity_locks
from gitkb.services.derived.vector_purge import has_vectors, retry_purges
from gitkb.services.derived.vector_wants import (
    asks_in_range,
    live_bindings,
    pending_chunks,
    wanted_identities,
    watermark_name,
)
from gitkb.services.derived.vectors_catchup import CatchupStats, Progress, catch_up_identity
from gitkb.stores.catalog import changes
from gitkb.stores.catalog import documents as doc_rows
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import vector_outcomes as outcomes
from gitkb.stores.catalog import vector_state as vs
from gitkb.stores.catalog.engine import Conn
from gitkb.stores.catalog.indexes import IndexRow

REEMBED_HINT = "re-embed it: Workspace.reembed(index_name) or `gitkb embeddings reembed --index {name}`"


# -- writes ------------------------------------------------------------------------------------


def prepare_write(ctx: Context, row: IndexRow) -> str | None:
    """Before writing chunks to ``row``: refuse during a RECHUNK, fail closed, bind the index. Returns its identity.

    None for a keyword-only index. Raises EmbeddingNotConfigured when the
    index embeds but no identity resolves. An index still empty follows a
    changed identity silently; one with chunks stays stranded until re-embedded.
    """
    ensure_not_rebuilding(ctx, row)  # every ingest path (actions, reindex, sync) comes through here
    if not row.embeddings:
        return None
    identity = row.embedding_identity or active_identity(ctx, save=True)
    conn = ctx.catalog.conn
    b = vs.binding_of(conn, row.id)
    if b is None or (b.identity != identity and index_rows.stats(conn, row.id)["chunk_count"] == 0):
        with ctx.catalog.write() as w:
            vs.bind(w, row.id, identity, changes.head(w) if b is not None else 0)
    return identity


def bind_new_index(conn: Conn, index_id: str, identity: str) -> None:
    """CREATE_INDEX: the new index's vectors go to ``identity`` from now on (inside the caller's transaction)."""
    vs.bind(conn, index_id, identity, changes.head(conn))


def resume_if_pending(ctx: Context) -> bool:
    """On opening a workspace as its writer: wake the embedder when vectors lag behind the log."""
    conn = ctx.catalog.conn
    head = changes.head(conn)
    for identity in wanted_identities(ctx):
        if changes.watermark(conn, watermark_name(identity)) < head:
            ctx.embedding_worker.kick()
            return True
    return False


def after_write(ctx: Context, row: IndexRow, token_counts: list[int]) -> list[str]:
    """After writing chunks: warnings (clipped chunks, stranded index), and wake the embedder."""
    if not row.embeddings:
        return []
    warnings: list[str] = []
    try:
        identity = effective_identity(ctx, row)
        b = vs.binding_of(ctx.catalog.conn, row.id)
        if b is not None and b.identity != identity:
            warnings.append(
                f"index {row.name!r} needs re-embedding: its vectors are in {b.identity}, the active identity is "
                f"{identity}; new chunks get vectors after you {REEMBED_HINT.format(name=row.name)}"
            )
        if token_counts:
            emb = embedder_for(ctx, identity)
            n = clipped_count(emb, token_counts)
            if n:
                warnings.append(
                    f"{n} chunk(s) are longer than the embedding model's input window "
                    f"({emb.max_input_tokens} tokens): they are embedded from their leading part only "
                    "(the full text is stored and returned); a smaller chunk_size avoids this"
                )
    except GitkbError as exc:
        warnings.append(f"embeddings are unavailable, keyword search works: {exc.message}")
        return warnings
    if token_counts:
        ctx.embedding_worker.kick()
    return warnings


# -- per-index state ----------------------------------------------------------------------------


def index_vector_state(ctx: Context, row: IndexRow, chunk_count: int | None = None) -> dict[str, Any]:
    """``embedding_identity`` (effective), ``vectors_identity`` (bound), ``needs_reindex``, ``vectors`` state.

    ``vectors``: ``off`` (keyword-only), ``unresolved``, ``stranded``, ``building``, ``ready``.
    """
    if not row.embeddings:
        return {
            "embedding_identity": None,
            "vectors_identity": None,
            "needs_reindex": False,
            "vectors": "off",
        }
    conn = ctx.catalog.conn
    try:
        identity = effective_identity(ctx, row)
    except EmbeddingNotConfigured:
        identity = None
    b = vs.binding_of(conn, row.id)
    n = _has_chunks(conn, row.id) if chunk_count is None else chunk_count
    out: dict[str, Any] = {
        "embedding_identity": identity,
        "vectors_identity": b.identity if b else identity,
        "needs_reindex": False,
        "pending_embeddings": 0,
    }
    if identity is None:
        out["vectors"] = "unresolved"
    elif b is not None and b.identity != identity and n > 0:
        out["needs_reindex"] = True
        out["vectors"] = "stranded"
    else:
        wm = changes.watermark(conn, watermark_name(identity))
        pending = vs.pending_adds(conn, wm, row.id, b.since_seq if b else 0) if n else 0
        out["pending_embeddings"] = pending
        out["vectors"] = "building" if pending else "ready"
    return out


def _has_chunks(conn: Conn, index_id: str) -> int:
    return 1 if doc_rows.has_chunks(conn, index_id) else 0


# -- catching up, building, re-embedding ---------------------------------------------------------


def catch_up_all(
    ctx: Context, *, stop: threading.Event | None = None, progress: Progress | None = None
) -> CatchupStats:
    """Catch every identity some live index is bound to up; retry pending purges."""
    _bind_unbound(ctx)
    total = CatchupStats()
    for identity in wanted_identities(ctx):
        if stop is not None and stop.is_set():
            break
        total.add(catch_up_identity(ctx, identity, progress=progress, stop=stop))
    if vs.purges(ctx.catalog.conn):
        retry_purges(ctx)
    return total


def _bind_unbound(ctx: Context) -> None:
    """Indexes created before bindings existed (or by code that skipped them) follow their identity."""
    conn = ctx.catalog.conn
    binds = vs.bindings(conn)
    missing = [r for r in index_rows.list_all(conn) if r.embeddings and r.id not in binds]
    if not missing:
        return
    active = identity_state(ctx).identity
    with ctx.catalog.write() as w:
        for r in missing:
            identity = r.embedding_identity or active
            if identity:
                vs.bind(w, r.id, identity, 0)


def build_embeddings(ctx: Context, force: bool = False, progress: Progress | None = None) -> dict[str, Any]:
    """Block until every chunk of every embedding index has its vector; ``force`` re-embeds from scratch.

    The counts are those of the chunks that were waiting when the call started (plus, with
    ``force``, every chunk), whoever embedded them: the background embedder may be doing that
    work while this call waits for it, and its work is counted here too (``vector_outcomes``).
    A background run already going when the call starts (opening the workspace starts one) is
    counted from its own start; work finished before that (a redo's first run) is not."""
    t0 = time.time()
    identity = active_identity(ctx, save=True)
    _bind_unbound(ctx)
    binds = live_bindings(ctx)
    idents = sorted({b.identity for b in binds.values()})
    conn = ctx.catalog.conn
    running = {b.identity: b for b in running_builds(ctx)}
    start = {
        i: running[i].from_seq if i in running else changes.watermark(conn, watermark_name(i)) for i in idents
    }
    since = {i: min(running[i].started_at, t0) if i in running else t0 for i in idents}
    report = range_reporter(ctx, start, progress, since=since)
    # Holding the catch-up locks keeps the background thread out once it finishes its batch.
    held = locks_reporting(ctx, idents, report)
    try:
        if force:
            for ident in idents:
                ctx.vectors.drop_collection(ident)
            with ctx.catalog.write() as w:
                for b in binds.values():
                    vs.bind(w, b.index_id, b.identity, vs.log_reembed(w, b.index_id))
        report.refresh_total()
        stats = catch_up_all(ctx, progress=lambda _d, _t: report())
    finally:
        for lock in reversed(held):
            lock.release()
    report.at = 0.0  # the last count always reaches the caller's bar, however soon after the one before
    report()
    upto = changes.head(conn)
    got = outcomes.RangeCounts()
    for i in idents:
        c = outcomes.counts(conn, [i], start[i], upto, since=since[i])
        for f in ("embedded", "reused", "had", "gone", "texts", "tokens", "seconds"):
            setattr(got, f, getattr(got, f) + getattr(c, f))
    stranded = [
        r.name for r in index_rows.list_all(ctx.catalog.conn) if index_vector_state(ctx, r)["needs_reindex"]
    ]
    out: dict[str, Any] = {
        "identity": identity,
        **counts_answer(got),
        "chunks_clipped": stats.clipped,
        "Message": f"{got.embedded} chunk(s) embedded, {got.reused} reused"
        + (f", {got.had} already had a vector" if got.had else ""),
    }
    if stranded:
        out["Warnings"] = [
            f"index(es) {', '.join(stranded)} need re-embedding after the model change: "
            + REEMBED_HINT.format(name=stranded[0])
        ]
    return out


class range_reporter:  # noqa: N801 - used like a function
    """progress(done, total) for the chunks after each identity's start watermark, read from
    ``vector_outcomes`` so the background embedder's work shows as well; throttled."""

    def __init__(
        self,
        ctx: Context,
        start: dict[str, int],
        progress: Progress | None,
        since: dict[str, float] | None = None,
    ) -> None:
        self.ctx, self.start, self.progress, self.since = ctx, start, progress, since or {}
        self.total = 0
        self.at = 0.0
        if progress is not None:
            self.refresh_total()

    def refresh_total(self) -> None:
        if self.progress is None:
            return
        head = changes.head(self.ctx.catalog.conn)
        self.total = sum(asks_in_range(self.ctx, a, head).get(i, 0) for i, a in self.start.items())

    def __call__(self) -> None:
        now = time.monotonic()
        if self.progress is None or now - self.at < 0.1:
            return
        self.at = now
        conn = self.ctx.catalog.conn
        head = changes.head(conn)
        done = sum(
            outcomes.counts(conn, [i], a, head, since=self.since.get(i, 0.0)).done
            for i, a in self.start.items()
        )
        self.progress(min(done, max(self.total, done)), max(self.total, done))


def locks_reporting(ctx: Context, identities: list[str], report: Callable[[], None]) -> list[threading.RLock]:
    """Wait for the catch-up locks (the background embedder may hold one for a batch), reporting progress."""
    while True:
        held = try_identity_locks(ctx, identities)
        if held is not None:
            return held
        report()
        time.sleep(0.05)


def reembed(ctx: Context, index_name: Any = None, progress: Progress | None = None) -> dict[str, Any]:
    """Re-embed an index (default: every stranded one) from the catalog's text into its effective identity."""
    if index_name not in (None, ""):
        targets = [get_index(ctx, index_name)]
        if not targets[0].embeddings:
            raise InvalidArgument(
                f"index {targets[0].name!r} is keyword-only (created with embeddings=False)"
            )
    else:
        targets = [
            r for r in index_rows.list_all(ctx.catalog.conn) if index_vector_state(ctx, r)["needs_reindex"]
        ]
    idents = {r.id: effective_identity(ctx, r) for r in targets}
    before = {r.id: vs.binding_of(ctx.catalog.conn, r.id) for r in targets}
    stats = CatchupStats()
    # write_lock first (as a job holds it), then the catch-up locks: the background thread waits.
    with ctx.write_lock, identity_locks(ctx, idents.values()):
        with ctx.catalog.write() as w:
            for r in targets:
                vs.bind(w, r.id, idents[r.id], vs.log_reembed(w, r.id))
        for ident in sorted(set(idents.values())):
            stats.add(catch_up_identity(ctx, ident, progress=progress))
    for r in targets:  # the old collection no longer holds this index (keeps unfiltered queries exact)
        old = before[r.id]
        if old is not None and old.identity != idents[r.id]:
            ctx.vectors.delete_where(old.identity, {"index_id": r.id})
    names = [r.name for r in targets]
    return {
        "reembedded": names,
        "chunks_embedded": stats.embedded,
        "chunks_reused": stats.reused,
        "chunks_clipped": stats.clipped,
        "cost": stats.cost(),
        "Message": f"re-embedded {len(names)} index(es): {stats.embedded} chunk(s) embedded, {stats.reused} reused"
        if names
        else "no index needs re-embedding",
    }


def embeddings_status(ctx: Context) -> dict[str, Any]:
    st = identity_state(ctx)
    conn = ctx.catalog.conn
    out: dict[str, Any] = {
        "available": False,
        "identity": st.identity,
        "provider": None,
        "model": None,
        "fingerprint": None,
        "EmbeddingIdentityState": st.as_dict(),
        "path": str(ctx.settings.vectors_path) if not ctx.settings.chroma_host else None,
    }
    if st.identity:
        out["provider"], out["model"] = split_identity(st.identity)
        try:
            out["fingerprint"] = fingerprint(embedder_for(ctx, st.identity))
            out["available"] = True
        except GitkbError as exc:
            out["error"] = exc.message
    rows = index_rows.list_all(conn)
    per_index = {}
    chunk_count = 0
    for r in rows:
        n = index_rows.stats(conn, r.id)["chunk_count"]
        state = index_vector_state(ctx, r, n)
        per_index[r.name] = {"chunk_count": n, **state}
        if r.embeddings:
            chunk_count += n
    out["chunk_count"] = chunk_count
    out["pending_embeddings"] = sum(pending_chunks(ctx, i) for i in wanted_identities(ctx))
    out["indexes"] = per_index
    try:
        cols = ctx.vectors.list_collections() if has_vectors(ctx) else []
        out["collections"] = cols
        out["path"] = ctx.vectors.location if has_vectors(ctx) else out["path"]
    except GitkbError as exc:
        out["collections"] = []
        out["vector_store_error"] = exc.message
    out["worker"] = (
        ctx.embedding_worker.as_dict() if ctx.caches.embedding_worker is not None else {"running": False}
    )
    out["last_runs"] = vs.events(conn, "embedding", limit=5)
    out["Message"] = (
        f"{st.identity or 'no identity'}: {chunk_count} chunk(s), {out['pending_embeddings']} waiting for vectors"
    )
    return out
