"""Semantic retrieval for SEARCH: which indexes can be searched by meaning, the
query vector (embedded once per identity, LRU-cached), and nearest chunks
checked against the catalog.

Mode rules (``plan_modes``):

* ``keyword``: no vectors involved, never fails closed.
* default (``mode`` None): an index whose vectors are caught up is searched
  hybrid; one still building, stranded by a model change, keyword-only, or
  without a resolvable identity is searched by keyword, with a warning (none
  for keyword-only indexes: that was a choice).
* ``semantic`` / ``hybrid``: fail closed (``embedding_not_configured``) when an
  embedding index's identity does not resolve; a building index is searched
  with the vectors it has (warning); a stranded or keyword-only one gets no
  semantic list (warning). ``semantic`` with no index left to search fails.
"""

from __future__ import annotations

import re
import threading
import time
from array import array
from dataclasses import dataclass, field
from typing import Any

from gitkb.core.embedders.base import embed_query
from gitkb.core.errors import Conflict, EmbeddingNotConfigured, InvalidArgument
from gitkb.services.context import Context
from gitkb.services.derived.embeddings import REEMBED_HINT, index_vector_state
from gitkb.services.derived.identity import embedder_for, identity_state
from gitkb.services.retrieval.tenancy import tier_matches
from gitkb.stores.catalog import vector_state as vs
from gitkb.stores.catalog.documents import LiveChunk, chunk_counts_by_index, live_chunks
from gitkb.stores.catalog.indexes import IndexRow

MODES = ("keyword", "semantic", "hybrid")
QUERY_CACHE_SIZE = 512
TEXT_CACHE_SIZE = 4096  # ASK's candidate sentences: 3 KiB a vector of 384 dims (doubles), 12 MiB at most
FILTER_BELOW_SHARE = 0.25  # the searched indexes' share of a collection under which Chroma filters
# Neighbours fetched ran out before top_n counted (tiers, expiry): this many times as many again,
# up to MAX_SEMANTIC_FETCH.
FETCH_GROWTH = 4
MAX_SEMANTIC_FETCH = 4000
_cache_lock = threading.Lock()
_SPACES = re.compile(r"[ \t\r\n]+")


@dataclass
class Plan:
    mode: str  # what actually runs: keyword | semantic | hybrid
    groups: dict[str, list[IndexRow]] = field(default_factory=dict)  # identity -> indexes searched by meaning
    warnings: list[str] = field(default_factory=list)


def plan_modes(ctx: Context, rows: list[IndexRow], mode: Any) -> Plan:
    if mode is not None and mode not in MODES:
        raise InvalidArgument(
            f"mode must be one of {', '.join(MODES)} (default: hybrid when vectors exist), got {mode!r}"
        )
    if mode == "keyword":
        return Plan("keyword")
    plan = Plan(mode or "hybrid")
    explicit = mode is not None
    if explicit and not (rows and all(r.embeddings and r.embedding_identity for r in rows)):
        st_all = identity_state(ctx)
        if st_all.identity is None:  # fail closed: these indexes would need the active identity
            raise EmbeddingNotConfigured(
                f"{mode} search needs an embedding identity: {st_all.error}",
                next_steps=["search with mode='keyword'", "or configure GITKB_EMBEDDING_PROVIDER / _MODEL"],
            )
    unsearchable: list[str] = []
    for r in rows:
        st = index_vector_state(ctx, r)
        state = st["vectors"]
        if state == "off":
            unsearchable.append(f"{r.name!r} is keyword-only (created with embeddings=False)")
            if explicit:
                plan.warnings.append(f"index {r.name!r} is keyword-only: it has no {mode} results")
        elif state == "unresolved":
            if explicit:
                st_all = identity_state(ctx)
                raise EmbeddingNotConfigured(
                    f"{mode} search needs an embedding identity: {st_all.error}",
                    next_steps=[
                        "search with mode='keyword'",
                        "or configure GITKB_EMBEDDING_PROVIDER / _MODEL",
                    ],
                )
            plan.warnings.append(
                f"no embedding identity resolves; index {r.name!r} is searched by keyword only"
            )
        elif state == "stranded":
            hint = REEMBED_HINT.format(name=r.name)
            unsearchable.append(f"{r.name!r} needs re-embedding")
            plan.warnings.append(
                f"index {r.name!r} needs re-embedding after the embedding model changed "
                f"(its vectors are in {st['vectors_identity']}); searching it by keyword only; {hint}"
            )
        elif state == "building":
            if explicit:
                plan.warnings.append(
                    f"index {r.name!r}: vectors are still building ({st['pending_embeddings']} change(s) pending); "
                    "semantic results cover only the chunks embedded so far"
                )
                plan.groups.setdefault(st["embedding_identity"], []).append(r)
            else:
                plan.warnings.append(
                    f"index {r.name!r}: vectors are still building ({st['pending_embeddings']} change(s) pending); "
                    "searched by keyword for now (build_embeddings() waits for them)"
                )
        else:
            plan.groups.setdefault(st["embedding_identity"], []).append(r)
    if not plan.groups:
        if mode == "semantic" and rows:
            raise (InvalidArgument if all("keyword-only" in u for u in unsearchable) else Conflict)(
                f"no selected index can be searched semantically: {'; '.join(unsearchable)}",
                next_steps=["search with mode='keyword' or 'hybrid'"],
            )
        plan.mode = "keyword" if mode is None or mode == "hybrid" else plan.mode
    return plan


def query_key(identity: str, query: str) -> tuple[str, str]:
    """The query-vector cache's key: the identity and the query with its runs of spaces, tabs and
    line breaks made one space (what is embedded: word-piece tokenizers split there, so the vector
    is the same; other Unicode spaces are left as they are)."""
    return identity, _SPACES.sub(" ", query.strip())


def query_vector(ctx: Context, identity: str, query: str) -> list[float]:
    """The query's vector under ``identity``, from an LRU cache of ``QUERY_CACHE_SIZE`` vectors keyed
    by ``query_key``; a miss is embedded on the embedder's query path (``embed_query``)."""
    key = query_key(identity, query)
    with _cache_lock:
        cache = ctx.caches.query_vectors
        vec = cache.get(key)
        if vec is not None:
            cache.move_to_end(key)
            return vec
    vec = embed_query(embedder_for(ctx, identity), key[1])
    with _cache_lock:
        cache[key] = vec
        while len(cache) > QUERY_CACHE_SIZE:
            cache.popitem(last=False)
    return vec


def text_vectors(ctx: Context, identity: str, texts: list[str]) -> list[list[float]]:
    """Vectors of ``texts`` under ``identity`` (ASK's candidate sentences), from an LRU cache of
    ``TEXT_CACHE_SIZE`` vectors keyed by (identity, text); the texts not in it are embedded in one
    ``embed_batch`` call (a text repeated in ``texts`` once)."""
    found: dict[str, list[float]] = {}
    with _cache_lock:
        cache = ctx.caches.text_vectors
        for t in texts:
            hit = cache.get((identity, t))
            if hit is not None:
                cache.move_to_end((identity, t))
                found[t] = hit.tolist()
    missing = [t for t in dict.fromkeys(texts) if t not in found]
    if missing:
        fresh = embedder_for(ctx, identity).embed_batch(missing)
        with _cache_lock:
            for t, vec in zip(missing, fresh, strict=True):
                found[t] = vec
                cache[(identity, t)] = array("d", vec)
            while len(cache) > TEXT_CACHE_SIZE:
                cache.popitem(last=False)
    return [found[t] for t in texts]


def semantic_hits(
    ctx: Context,
    query: str,
    identity: str,
    rows: list[IndexRow],
    limit: int,
    *,
    tenant: str | None = None,
    tiers: frozenset[str] | None = None,
) -> list[tuple[LiveChunk, float]]:
    """Live, unexpired nearest chunks of ``rows`` under ``identity``: (chunk, cosine similarity), best first."""
    vec = query_vector(ctx, identity, query)
    ids = {r.id for r in rows}
    fetch = limit + 10 if tiers is None and tenant is None else limit * 5 + 50
    # Chroma's metadata filter scans (about 50 ms at 10k vectors, against 2 ms unfiltered). Skip it
    # when the searched indexes hold most of the collection: fetch more, keep ours (hits are checked
    # against the catalog anyway); filter only when they are a small part of it.
    others = {b.index_id for b in vs.bindings(ctx.catalog.conn).values() if b.identity == identity} - ids
    share = _share(ctx, ids, others) if others else 1.0
    where = {"tenant": tenant} if tenant else None
    if share >= FILTER_BELOW_SHARE:
        n = min(int(fetch / share) + 10, 10 * fetch)
        raw = ctx.vectors.query(identity, vec, n, where=where)
        out = _resolve(ctx, raw, ids, tenant, tiers, limit)
        if len(out) >= limit or len(raw) < n:  # enough, or the collection has no more
            return out
        if not others:  # filtering to the searched indexes would change nothing: fetch more at once
            fetch = min(n * FETCH_GROWTH, MAX_SEMANTIC_FETCH)
    # Filtered to the searched indexes; when the neighbours fetched run out before ``limit`` count
    # (other tiers, expired, gone) and there are more, FETCH_GROWTH times as many are fetched.
    while True:
        raw = ctx.vectors.query(identity, vec, fetch, index_ids=sorted(ids), where=where)
        out = _resolve(ctx, raw, ids, tenant, tiers, limit)
        if len(out) >= limit or len(raw) < fetch or fetch >= MAX_SEMANTIC_FETCH:
            return out
        fetch = min(fetch * FETCH_GROWTH, MAX_SEMANTIC_FETCH)


def _share(ctx: Context, ids: set[str], others: set[str]) -> float:
    """The searched indexes' share of the chunks bound to the collection."""
    counts = chunk_counts_by_index(ctx.catalog.conn, sorted(ids | others))
    mine = sum(counts.get(i, 0) for i in ids)
    total = mine + sum(counts.get(i, 0) for i in others)
    return mine / total if total else 1.0


def _resolve(
    ctx: Context,
    raw: list[tuple[str, float]],
    ids: set[str],
    tenant: str | None,
    tiers: frozenset[str] | None,
    limit: int,
) -> list[tuple[LiveChunk, float]]:
    # The catalog is asked about the first ``limit`` neighbours, then (when some of them are not
    # ours, deleted or expired) about the rest: most often the first read is the only one.
    cids = [int(vid) for vid, _ in raw]
    live = live_chunks(ctx.catalog.conn, cids[:limit])
    now = time.time()
    out = []
    for pos, (cid, (_, distance)) in enumerate(zip(cids, raw, strict=True)):
        if pos == limit:
            live.update(live_chunks(ctx.catalog.conn, cids[limit:]))
        chunk = live.get(cid)
        if chunk is None:
            continue  # deleted, not yet removed from the vectors
        if chunk.index_id not in ids or chunk.tenant != (tenant or None):
            continue
        if (chunk.expires_at is not None and chunk.expires_at <= now) or not tier_matches(chunk, tiers):
            continue
        out.append((chunk, 1.0 - distance))
        if len(out) >= limit:
            break
    return out
