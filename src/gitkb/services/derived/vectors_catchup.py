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
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, fields
from typing import Any

from gitkb.core import ids
from gitkb.core.chunk_config import AUTO_CHUNK_OVERLAP, AUTO_CHUNK_SIZE
from gitkb.core.chunking import chunk_text
from gitkb.core.embedders import Embedder, count_tokens, fingerprint
from gitkb.core.faults import crash_point
from gitkb.core.models import ChunkConfig
from gitkb.services.context import Context
from gitkb.services.derived.identity import embedder_for, identity_state
from gitkb.stores.catalog import changes
from gitkb.stores.catalog import documents as doc_rows
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import vector_outcomes as outcomes
from gitkb.stores.catalog import vector_state as vs
from gitkb.stores.catalog.vector_state import VectorSource

LOG_BATCH = 2000  # change-log entries per step
READ_BATCH = 512  # chunks read from the catalog (and looked up in the store) at once
EMBED_BATCH = 64  # texts per model call, vectors per upsert
# Special tokens the model adds around each text ([CLS] ... [SEP]) but chunk token counts leave out.
SPECIAL_TOKENS = {"fastembed": 2}
# What the model reads for a chunk (measured with the default model, README "Performance"): the
# document title and heading path the chunk's text does not start with ("Title > Section"), a blank
# line, then the text (SciFact train, semantic nDCG@10 of 256-piece windows: 0.673 -> 0.677; one
# mean-pooled vector per abstract: 0.650 -> 0.666). With POOL_WINDOWS, a chunk longer than the
# model's window is cut into sentence windows (POOL_WINDOW/POOL_OVERLAP pieces) embedded the same
# way and their vectors averaged; off by default: on whole SciFact abstracts it read 1.86x the
# texts for semantic 0.661 -> 0.666 and hybrid 0.739 -> 0.735 (the ``auto`` chunking already
# keeps chunks within the window).
EMBED_CONTEXT = True
POOL_WINDOWS = False
POOL_WINDOW = AUTO_CHUNK_SIZE
POOL_OVERLAP = AUTO_CHUNK_OVERLAP
_LEAD = re.compile(r"^[\s#>*_`]+")

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
        locks = ctx.caches.vector_locks
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


def running_builds(ctx: Context) -> list[outcomes.Build]:
    """Catch-up runs going on now (their process is alive): one per identity at most."""
    return [b for b in outcomes.builds(ctx.catalog.conn) if _alive(b.pid)]


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def try_identity_locks(ctx: Context, identities: Iterable[str]) -> list[threading.RLock] | None:
    """The catch-up locks of ``identities`` if all are free now (the caller releases them), else None."""
    got: list[threading.RLock] = []
    for identity in sorted(set(identities)):
        lock = _identity_lock(ctx, identity)
        if not lock.acquire(blocking=False):
            for held in reversed(got):
                held.release()
            return None
        got.append(lock)
    return got


def catch_up_identity(
    ctx: Context,
    identity: str,
    *,
    progress: Progress | None = None,
    stop: threading.Event | None = None,
) -> CatchupStats:
    """Apply every pending change-log entry to ``identity``'s collection. Blocks; thread-safe."""
    with _identity_lock(ctx, identity):
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
    vectors = ctx.vectors
    emb: Embedder | None = None

    def record(rows: list[outcomes.Row]) -> None:
        if rows:
            with ctx.catalog.write() as w:
                outcomes.record(w, identity, rows)

    for start in range(0, len(cids), READ_BATCH):
        if stop is not None and stop.is_set():
            return False
        part = cids[start : start + READ_BATCH]
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
        record(
            [(seq_of[c], c, outcomes.GONE, 0, 0, 0.0) for c in part if c not in live]
            + [(seq_of[s.cid], s.cid, outcomes.HAD, 0, 0, 0.0) for s in sources if str(s.cid) in have]
        )
        stats.skipped += len(sources) - len(todo)
        step(len(sources) - len(todo))
        if not todo:
            continue
        emb = emb or embedder_for(ctx, identity)
        fp = fingerprint(emb)
        inputs = model_inputs(ctx, emb, todo)
        keys = {s.cid: input_key(s, inputs[s.cid]) for s in todo}
        reuse = vectors.find_by_content_hash(identity, list(dict.fromkeys(keys.values())))
        reused = [s for s in todo if keys[s.cid] in reuse]
        if reused:
            _upsert(ctx, identity, fp, reused, [reuse[keys[s.cid]] for s in reused], keys)
            record([(seq_of[s.cid], s.cid, outcomes.REUSED, 0, 0, 0.0) for s in reused])
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
            ctx.meters.embedded(
                identity, stats.texts - texts0, stats.tokens - cost0[0], stats.seconds - cost0[1]
            )
            flat = [(s, v) for g, v in zip(part_groups, vecs, strict=True) for s in g]
            _upsert(ctx, identity, fp, [s for s, _ in flat], [v for _, v in flat], keys)
            record(
                _embedded_rows(part_groups, inputs, seq_of, stats.tokens - cost0[0], stats.seconds - cost0[1])
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


def context_path(text: str, title: str | None, heading_path: list[str]) -> list[str]:
    """Title, then headings (repeats dropped), less the trailing ones ``text`` already starts with."""
    parts: list[str] = []
    for p in [title or "", *heading_path]:
        p = " ".join(str(p).split())
        if p and (not parts or parts[-1].casefold() != p.casefold()):
            parts.append(p)
    head = _LEAD.sub("", text[:400]).casefold()
    while parts and head.startswith(parts[-1].casefold()):
        parts.pop()
    return parts


def embedding_input(text: str, title: str | None, heading_path: list[str]) -> str:
    """What the model reads for one text: ``"Title > Section\\n\\n" + text`` (just ``text`` with no context)."""
    parts = context_path(text, title, heading_path) if EMBED_CONTEXT else []
    return f"{' > '.join(parts)}\n\n{text}" if parts else text


def model_inputs(ctx: Context, emb: Embedder, sources: list[VectorSource]) -> dict[int, list[str]]:
    """cid -> the texts embedded for that chunk: one, or its windows when it overflows the model."""
    ctxs = vs.embedding_contexts(ctx.catalog.conn, [s.cid for s in sources])
    # Windows of the model's input size, never finer than POOL_WINDOW pieces.
    window = max(emb.max_input_tokens - SPECIAL_TOKENS.get(emb.identity.split("/", 1)[0], 0), POOL_WINDOW)
    out: dict[int, list[str]] = {}
    for s in sources:
        title, hp, n = ctxs.get(s.cid, (None, [], None))
        if POOL_WINDOWS and n is not None and n > window:
            windows = [w.text for w in chunk_text(s.text, ChunkConfig("sentence", window, POOL_OVERLAP))]
        else:
            windows = [s.text]
        out[s.cid] = [embedding_input(w, title, hp) for w in windows]
    return out


def input_key(source: VectorSource, inputs: list[str]) -> str:
    """The content-hash key a vector is stored and reused under: the chunk's own hash when the
    model reads just its text, else a hash of exactly what it reads."""
    return source.content_hash if inputs == [source.text] else ids.content_hash("\x00".join(inputs))


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


def clipped_count(emb: Embedder, token_counts: list[int]) -> int:
    """How many chunks of these word-piece counts exceed the embedder's input window."""
    extra = SPECIAL_TOKENS.get(emb.identity.split("/", 1)[0], 0)
    return sum(1 for n in token_counts if n + extra > emb.max_input_tokens)
