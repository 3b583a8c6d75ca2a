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

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, fields
from typing import Any

from gitkb.core.embedders import Embedder, count_tokens, fingerprint
from gitkb.core.faults import crash_point
from gitkb.services.context import Context
from gitkb.services.identity import embedder_for, identity_state
from gitkb.stores.catalog import changes
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import vector_state as vs
from gitkb.stores.catalog.vector_state import VectorSource

LOG_BATCH = 2000  # change-log entries per step
READ_BATCH = 512  # chunks read from the catalog (and looked up in the store) at once
EMBED_BATCH = 64  # texts per model call, vectors per upsert
# Special tokens the model adds around each text ([CLS] ... [SEP]) but chunk token counts leave out.
SPECIAL_TOKENS = {"fastembed": 2}

Progress = Callable[[int, int], None]
_locks_lock = threading.Lock()


def watermark_name(identity: str) -> str:
    return f"vectors:{identity}"


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


def _identity_lock(ctx: Context, identity: str) -> threading.RLock:
    with _locks_lock:
        locks: dict[str, threading.RLock] = ctx.extras.setdefault("vector_locks", {})
        return locks.setdefault(identity, threading.RLock())


@contextmanager
def identity_locks(ctx: Context, identities: Iterable[str]) -> Iterator[None]:
    """Hold the catch-up locks of ``identities`` (sorted, so two holders never deadlock)."""
    with ExitStack() as stack:
        for identity in sorted(set(identities)):
            stack.enter_context(_identity_lock(ctx, identity))
        yield


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


def pending_chunks(ctx: Context, identity: str) -> int:
    """Chunks still waiting for a vector in ``identity`` (an estimate for progress bars)."""
    conn = ctx.catalog.conn
    wm = changes.watermark(conn, watermark_name(identity))
    total = 0
    for b in live_bindings(ctx).values():
        if b.identity != identity:
            continue
        r = conn.execute(
            "SELECT COUNT(*) FROM changes WHERE index_id = ? AND seq > ? AND seq >= ? AND op = 'add'",
            (b.index_id, wm, b.since_seq),
        ).fetchone()
        total += int(r[0])
        if conn.execute(
            "SELECT 1 FROM changes WHERE index_id = ? AND seq > ? AND seq >= ? AND op = ? LIMIT 1",
            (b.index_id, wm, b.since_seq, vs.REEMBED_OP),
        ).fetchone():
            total += int(conn.execute("SELECT COUNT(*) FROM chunks WHERE index_id = ?", (b.index_id,)).fetchone()[0])
    return total


def catch_up_identity(
    ctx: Context,
    identity: str,
    *,
    progress: Progress | None = None,
    stop: threading.Event | None = None,
) -> CatchupStats:
    """Apply every pending change-log entry to ``identity``'s collection. Blocks; thread-safe."""
    stats = CatchupStats()
    name = watermark_name(identity)
    with _identity_lock(ctx, identity):
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
            adds: list[int] = []
            removes: list[str] = []
            drops: list[str] = []
            for c in batch:
                b = bound.get(c.index_id or "")
                if c.op == "add" and c.cid is not None and b is not None and c.seq >= b.since_seq:
                    adds.append(c.cid)
                elif c.op == vs.REEMBED_OP and b is not None and c.seq >= b.since_seq:
                    adds.extend(vs.chunk_cids_of_index(conn, b.index_id))
                elif c.op == "remove" and c.cid is not None:
                    removes.append(str(c.cid))
                elif c.op == "drop_index" and c.index_id:
                    drops.append(c.index_id)
            if not _apply_adds(ctx, identity, list(dict.fromkeys(adds)), stats, step, stop):
                break  # stopped mid-way: the watermark stays, redoing skips what is stored
            if removes or drops:
                vectors = ctx.vectors
                vectors.delete(identity, removes)
                for ix in dict.fromkeys(drops):
                    vectors.delete_where(identity, {"index_id": ix})
                stats.removed += len(removes)
            with ctx.catalog.write() as w:
                changes.set_watermark(w, name, batch[-1].seq)
        if stats.embedded or stats.reused:
            with ctx.catalog.write() as w:
                vs.add_event(w, "embedding", {"identity": identity, **stats.as_dict()})
    return stats


def _apply_adds(
    ctx: Context,
    identity: str,
    cids: list[int],
    stats: CatchupStats,
    step: Callable[[int], None],
    stop: threading.Event | None,
) -> bool:
    """Give every live chunk in ``cids`` a vector; False when ``stop`` interrupted."""
    if not cids:
        return True
    vectors = ctx.vectors
    emb: Embedder | None = None
    for start in range(0, len(cids), READ_BATCH):
        if stop is not None and stop.is_set():
            return False
        sources = vs.vector_sources(ctx.catalog.conn, cids[start : start + READ_BATCH])
        have = set(vectors.get_vectors(identity, [str(s.cid) for s in sources])) if sources else set()
        todo = [s for s in sources if str(s.cid) not in have]
        stats.skipped += len(sources) - len(todo)
        step(len(sources) - len(todo))
        if not todo:
            continue
        emb = emb or embedder_for(ctx, identity)
        fp = fingerprint(emb)
        reuse = vectors.find_by_content_hash(identity, [s.content_hash for s in todo])
        reused = [s for s in todo if s.content_hash in reuse]
        if reused:
            _upsert(ctx, identity, fp, reused, [reuse[s.content_hash] for s in reused])
            stats.reused += len(reused)
            step(len(reused))
        fresh = [s for s in todo if s.content_hash not in reuse]
        by_hash: dict[str, list[VectorSource]] = {}
        for s in fresh:
            by_hash.setdefault(s.content_hash, []).append(s)
        groups = list(by_hash.values())
        for g0 in range(0, len(groups), EMBED_BATCH):
            if stop is not None and stop.is_set():
                return False
            part = groups[g0 : g0 + EMBED_BATCH]
            texts = [g[0].text for g in part]
            vecs = _embed(emb, texts, stats)
            flat = [(s, v) for g, v in zip(part, vecs, strict=True) for s in g]
            _upsert(ctx, identity, fp, [s for s, _ in flat], [v for _, v in flat])
            stats.embedded += len(flat)
            crash_point("vectors.after_upsert")
            step(len(flat))
    return True


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


def _upsert(ctx: Context, identity: str, fp: str, sources: list[VectorSource], vecs: list[list[float]]) -> None:
    metas: list[dict[str, str | int | float | bool | None]] = [
        {"index_id": s.index_id, "document_id": s.document_id, "content_hash": s.content_hash, "tenant": s.tenant}
        for s in sources
    ]
    ctx.vectors.upsert(fp, [str(s.cid) for s in sources], vecs, metas)


def clipped_count(emb: Embedder, token_counts: list[int]) -> int:
    """How many chunks of these word-piece counts exceed the embedder's input window."""
    extra = SPECIAL_TOKENS.get(emb.identity.split("/", 1)[0], 0)
    return sum(1 for n in token_counts if n + extra > emb.max_input_tokens)
