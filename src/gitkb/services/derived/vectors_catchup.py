"""Vectors catch up with the catalog's change log, one embedding identity at a time.

Each identity ``X`` has a watermark ``vectors:X``. Catching up reads the log
after it, in order, and applies each batch idempotently by chunk id (the
vector id is the catalog chunk row id, ``cid``, as a string):

* ``add`` of a chunk whose index is bound to ``X`` (see ``index_vectors``) and
  still live: give it a vector unless it has one. A vector already stored for
  the same content hash is copied instead of embedding the text again, so
  re-adding, renaming or re-chunking unchanged text costs no embedding.
* ``reembed_index``: every live chunk of that index, the same way.
* ``remove`` / ``drop_index``: delete the vectors.

Adds are applied before removes within a batch (and the writers log adds
before removes), so a chunk that replaces another with the same text can
reuse its vector before it goes. The watermark moves only after a whole batch
is applied: a crash loses nothing, and redoing costs no embedding (chunks
that already have a vector are skipped). Each run records its cost (texts,
tokens, seconds) in the catalog ``events`` table.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

from gitkb.core.embedders import Embedder, count_tokens, fingerprint
from gitkb.core.faults import crash_point
from gitkb.services.context import Context
from gitkb.services.derived.embedding_inputs import input_key, model_inputs
from gitkb.services.derived.identity import embedder_for
from gitkb.services.derived.vector_locks import identity_lock
from gitkb.services.derived.vector_wants import live_bindings, pending_chunks, watermark_name
from gitkb.stores.catalog import changes
from gitkb.stores.catalog import vector_outcomes as outcomes
from gitkb.stores.catalog import vector_state as vs
from gitkb.stores.catalog.vector_state import VectorSource

LOG_BATCH = 2000  # change-log entries per step
READ_BATCH = 512  # chunks read from the catalog (and looked up in the store) at once
EMBED_BATCH = 64  # texts per model call, vectors per upsert

Progress = Callable[[int, int], None]


@dataclass
class CatchupStats:
    """What a catch-up did. ``embedded``: chunks whose vector came from the model."""

    embedded: int = 0
    reused: int = 0
    skipped: int = 0
    removed: int = 0
    texts: int = 0
    tokens: int = 0
    clipped: int = 0
    seconds: float = 0.0

    def add(self, other: CatchupStats) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["seconds"] = round(self.seconds, 3)
        return d

    def cost(self) -> dict[str, Any]:
        return {"texts": self.texts, "tokens": self.tokens, "seconds": round(self.seconds, 3)}


def catch_up_identity(
    ctx: Context,
    identity: str,
    *,
    progress: Progress | None = None,
    stop: threading.Event | None = None,
) -> CatchupStats:
    """Apply every pending change-log entry to ``identity``'s collection. Blocks; thread-safe."""
    with identity_lock(ctx, identity):
        conn = ctx.catalog.conn
        wm0 = changes.watermark(conn, watermark_name(identity))
        if wm0 >= changes.head(conn):
            return CatchupStats()
        with ctx.catalog.write() as w:  # status names this build and its progress while it runs
            outcomes.start_build(w, identity, wm0, os.getpid())
        try:
            return _catch_up_locked(ctx, identity, progress=progress, stop=stop)
        finally:
            with ctx.catalog.write() as w:
                outcomes.end_build(w, identity)


def _catch_up_locked(
    ctx: Context, identity: str, *, progress: Progress | None, stop: threading.Event | None
) -> CatchupStats:
    stats = CatchupStats()
    name = watermark_name(identity)
    total = pending_chunks(ctx, identity) if progress else 0
    done = [0]

    def step(n: int) -> None:
        done[0] += n
        if progress:
            progress(min(done[0], max(total, done[0])), max(total, done[0]))

    while stop is None or not stop.is_set():
        conn = ctx.catalog.conn
        wm = changes.watermark(conn, name)
        batch = changes.since(conn, wm, LOG_BATCH)
        if not batch:
            break
        bound = {k: b for k, b in live_bindings(ctx).items() if b.identity == identity}
        if not bound:  # no live index wants it any more (a model change since this round began): a
            break  # stranded index resumes from this watermark on a switch back, so it must not move
        asks: list[tuple[int, int]] = []  # (seq, cid): the entry that asked for the chunk's vector
        removes: list[str] = []
        drops: list[str] = []
        for c in batch:
            b = bound.get(c.index_id or "")
            if c.op == "add" and c.cid is not None and b is not None and c.seq >= b.since_seq:
                asks.append((c.seq, c.cid))
            elif c.op == vs.REEMBED_OP and b is not None and c.seq >= b.since_seq:
                asks.extend((c.seq, cid) for cid in vs.chunk_cids_of_index(conn, b.index_id))
            elif c.op == "remove" and c.cid is not None:
                removes.append(str(c.cid))
            elif c.op == "drop_index" and c.index_id:
                drops.append(c.index_id)
        seq_of: dict[int, int] = {}
        repeats: list[outcomes.Row] = []  # a chunk asked for twice in one batch is done once
        for seq, cid in asks:
            if cid in seq_of:
                repeats.append((seq, cid, outcomes.HAD, 0, 0, 0.0))
            else:
                seq_of[cid] = seq
        if not _apply_adds(ctx, identity, seq_of, stats, step, stop):
            break  # stopped mid-way: the watermark stays, redoing skips what is stored
        if removes or drops:
            vectors = ctx.vectors
            vectors.delete(identity, removes)
            for ix in dict.fromkeys(drops):
                vectors.delete_where(identity, {"index_id": ix})
            stats.removed += len(removes)
        with ctx.catalog.write() as w:
            outcomes.record(w, identity, repeats)
            changes.set_watermark(w, name, batch[-1].seq)
    if stats.embedded or stats.reused:
        with ctx.catalog.write() as w:
            vs.add_event(w, "embedding", {"identity": identity, **stats.as_dict()})
            outcomes.prune(w)
    return stats


def _apply_adds(
    ctx: Context,
    identity: str,
    seq_of: dict[int, int],
    stats: CatchupStats,
    step: Callable[[int], None],
    stop: threading.Event | None,
) -> bool:
    """Give every live chunk in ``seq_of`` (cid -> the entry asking) a vector, recording how
    each got it (``vector_outcomes``) as soon as it is stored; False when ``stop`` interrupted."""
    if not seq_of:
        return True
    cids = list(seq_of)
    emb: Embedder | None = None
    for start in range(0, len(cids), READ_BATCH):
        if stop is not None and stop.is_set():
            return False
        todo = _settle_stored(ctx, identity, cids[start : start + READ_BATCH], seq_of, stats, step)
        if not todo:
            continue
        emb = emb or embedder_for(ctx, identity)
        if not _embed_todo(ctx, identity, emb, todo, seq_of, stats, step, stop):
            return False
    return True


def _record(ctx: Context, identity: str, rows: list[outcomes.Row]) -> None:
    if rows:
        with ctx.catalog.write() as w:
            outcomes.record(w, identity, rows)


def _settle_stored(
    ctx: Context,
    identity: str,
    part: list[int],
    seq_of: dict[int, int],
    stats: CatchupStats,
    step: Callable[[int], None],
) -> list[VectorSource]:
    """Of the chunks ``part``, record the gone ones and those that have a vector (relabelled if
    they moved); returns the live ones still without a vector."""
    vectors = ctx.vectors
    sources = vs.vector_sources(ctx.catalog.conn, part)
    have = vectors.get_metadata(identity, [str(s.cid) for s in sources]) if sources else {}
    _relabel(
        ctx,
        identity,
        [s for s in sources if str(s.cid) in have and not _placed(have[str(s.cid)], s)],
        have,
    )
    todo = [s for s in sources if str(s.cid) not in have]
    live = {s.cid for s in sources}
    _record(
        ctx,
        identity,
        [(seq_of[c], c, outcomes.GONE, 0, 0, 0.0) for c in part if c not in live]
        + [(seq_of[s.cid], s.cid, outcomes.HAD, 0, 0, 0.0) for s in sources if str(s.cid) in have],
    )
    stats.skipped += len(sources) - len(todo)
    step(len(sources) - len(todo))
    return todo


def _embed_todo(
    ctx: Context,
    identity: str,
    emb: Embedder,
    todo: list[VectorSource],
    seq_of: dict[int, int],
    stats: CatchupStats,
    step: Callable[[int], None],
    stop: threading.Event | None,
) -> bool:
    """Vectors for ``todo``: copied where one is stored for the same input, else from the model
    (``EMBED_BATCH`` groups per call); False when ``stop`` interrupted."""
    vectors = ctx.vectors
    fp = fingerprint(emb)
    inputs = model_inputs(ctx, emb, todo)
    keys = {s.cid: input_key(s, inputs[s.cid]) for s in todo}
    reuse = vectors.find_by_content_hash(identity, list(dict.fromkeys(keys.values())))
    reused = [s for s in todo if keys[s.cid] in reuse]
    if reused:
        _upsert(ctx, identity, fp, reused, [reuse[keys[s.cid]] for s in reused], keys)
        _record(ctx, identity, [(seq_of[s.cid], s.cid, outcomes.REUSED, 0, 0, 0.0) for s in reused])
        stats.reused += len(reused)
        step(len(reused))
    fresh = [s for s in todo if keys[s.cid] not in reuse]
    by_key: dict[str, list[VectorSource]] = {}
    for s in fresh:
        by_key.setdefault(keys[s.cid], []).append(s)
    groups = list(by_key.values())
    for g0 in range(0, len(groups), EMBED_BATCH):
        if stop is not None and stop.is_set():
            return False
        part_groups = groups[g0 : g0 + EMBED_BATCH]
        cost0 = (stats.tokens, stats.seconds)
        texts0 = stats.texts
        try:
            vecs = _embed_pooled(emb, [inputs[g[0].cid] for g in part_groups], stats)
        except Exception:
            ctx.meters.embedding_failed(identity)
            raise
        ctx.meters.embedded(identity, stats.texts - texts0, stats.tokens - cost0[0], stats.seconds - cost0[1])
        flat = [(s, v) for g, v in zip(part_groups, vecs, strict=True) for s in g]
        _upsert(ctx, identity, fp, [s for s, _ in flat], [v for _, v in flat], keys)
        _record(
            ctx,
            identity,
            _embedded_rows(part_groups, inputs, seq_of, stats.tokens - cost0[0], stats.seconds - cost0[1]),
        )
        stats.embedded += len(flat)
        crash_point("vectors.after_upsert")
        step(len(flat))
    return True


def _embedded_rows(
    groups: list[list[VectorSource]],
    inputs: dict[int, list[str]],
    seq_of: dict[int, int],
    tokens: int,
    seconds: float,
) -> list[outcomes.Row]:
    """EMBEDDED rows for one model call: each group's first chunk carries its texts and a share
    of the call's tokens and seconds (the shares add up to the call's cost exactly)."""
    rows: list[outcomes.Row] = []
    n = len(groups)
    for i, g in enumerate(groups):
        share_tokens = tokens // n + (1 if i < tokens % n else 0)
        for j, s in enumerate(g):
            first = j == 0
            rows.append(
                (
                    seq_of[s.cid],
                    s.cid,
                    outcomes.EMBEDDED,
                    len(inputs[g[0].cid]) if first else 0,
                    share_tokens if first else 0,
                    seconds / n if first else 0.0,
                )
            )
    return rows


def _placed(meta: dict[str, Any], s: VectorSource) -> bool:
    """Does a stored vector's metadata still say where its chunk is (index, document, tenant)?"""
    return (meta.get("index_id"), meta.get("document_id"), meta.get("tenant") or None) == (
        s.index_id,
        s.document_id,
        s.tenant,
    )


def _relabel(ctx: Context, identity: str, moved: list[VectorSource], have: dict[str, dict[str, Any]]) -> None:
    """Chunks whose text stayed but whose placement changed (a document re-added under another
    tenant): same vector, metadata rewritten, so a tenant-filtered search finds them."""
    fp = ctx.vectors.fingerprint_of(identity) if moved else None
    if not moved or fp is None:
        return
    vecs = ctx.vectors.get_vectors(identity, [str(s.cid) for s in moved])
    keep = [s for s in moved if str(s.cid) in vecs]
    keys = {s.cid: str(have[str(s.cid)].get("content_hash") or s.content_hash) for s in keep}
    _upsert(ctx, identity, fp, keep, [vecs[str(s.cid)] for s in keep], keys)


def _embed_pooled(emb: Embedder, inputs: list[list[str]], stats: CatchupStats) -> list[list[float]]:
    """One vector per entry of ``inputs``: the mean of its texts' vectors, normalised."""
    flat = [t for texts in inputs for t in texts]
    vecs = _embed(emb, flat, stats)
    out: list[list[float]] = []
    i = 0
    for texts in inputs:
        group = vecs[i : i + len(texts)]
        i += len(texts)
        if len(group) == 1:
            out.append(group[0])
            continue
        mean = [sum(col) / len(group) for col in zip(*group, strict=True)]
        norm = sum(x * x for x in mean) ** 0.5 or 1.0
        out.append([x / norm for x in mean])
    return out


def _embed(emb: Embedder, texts: list[str], stats: CatchupStats) -> list[list[float]]:
    t0 = time.perf_counter()
    vecs = emb.embed_batch(texts)
    stats.seconds += time.perf_counter() - t0
    cap = emb.max_input_tokens
    counts = count_tokens(emb, texts)
    stats.texts += len(texts)
    stats.tokens += sum(min(n, cap) for n in counts)
    stats.clipped += sum(1 for n in counts if n > cap)
    return vecs


def _upsert(
    ctx: Context,
    identity: str,
    fp: str,
    sources: list[VectorSource],
    vecs: list[list[float]],
    keys: dict[int, str],
) -> None:
    metas: list[dict[str, str | int | float | bool | None]] = [
        # "" rather than None: Chroma merges metadata on upsert, so a dropped key would keep an old tenant.
        {
            "index_id": s.index_id,
            "document_id": s.document_id,
            "content_hash": keys[s.cid],
            "tenant": s.tenant or "",
        }
        for s in sources
    ]
    ctx.vectors.upsert(fp, [str(s.cid) for s in sources], vecs, metas)
