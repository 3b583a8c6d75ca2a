"""SEARCH: keyword (tantivy BM25) over one index, several, or all.

Every hit is resolved against the catalog (a chunk deleted but not yet removed
from a derived index is never returned) and comes back as a citation.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from functools import partial
from itertools import islice
from typing import Any

from gitkb.core.action_table import MAX_TOP_N as MAX_TOP_N  # SEARCH / ASK's limit, declared once
from gitkb.core.errors import GitkbError, InvalidArgument
from gitkb.core.faults import pause_point
from gitkb.core.snippets import make_snippet
from gitkb.services.context import Context
from gitkb.services.derived.catchup import catch_up_keywords, rebuild_aliases
from gitkb.services.derived.index_lookup import get_index
from gitkb.services.retrieval import amounts, fusion, search_settings
from gitkb.services.retrieval.fusion import rrf
from gitkb.services.retrieval.keyword_rounds import live_keyword_hits, rounds
from gitkb.services.retrieval.query_words import keyword_query
from gitkb.services.retrieval.semantic import MODES, Plan, plan_modes, semantic_hits
from gitkb.services.retrieval.tenancy import check_tenant, tenant_warnings, validate_tiers
from gitkb.stores.catalog import changes
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog.documents import CitedChunk, LiveChunk, cited_chunks
from gitkb.stores.catalog.indexes import IndexRow

MAX_QUERY_CHARS = 4000
# Keyword sides of concurrent hybrid searches that run at once (each search thread: one SQLite connection).
SEARCH_THREADS = 4
_pool_lock = threading.Lock()


def resolve_indexes(ctx: Context, index_name: Any = None, indexes: Any = None) -> list[IndexRow]:
    names: list[Any] = []
    if index_name not in (None, ""):
        names.append(index_name)
    if indexes not in (None, ""):
        if isinstance(indexes, str):
            names.append(indexes)
        elif isinstance(indexes, list | tuple):
            names.extend(indexes)
        else:
            raise InvalidArgument("indexes must be a list of index names")
    if not names:
        if isinstance(indexes, list | tuple):  # an empty list names no index: not "every index"
            raise InvalidArgument(
                "indexes is an empty list: name the indexes to search, or leave indexes out"
            )
        return index_rows.list_all(ctx.catalog.conn)
    seen: dict[str, IndexRow] = {}
    for n in names:
        row = get_index(ctx, n)
        seen[row.id] = row
    return list(seen.values())


def validate_query(query: Any) -> str:
    if not isinstance(query, str) or not query.strip():
        raise InvalidArgument("query must be a non-empty string")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidArgument(f"query is {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
    return query.strip()


def validate_top_n(top_n: Any, *, default: int = 10, name: str = "top_n") -> int:
    if top_n is None:
        return default
    if isinstance(top_n, bool) or not isinstance(top_n, int):
        raise InvalidArgument(f"{name} must be an integer between 1 and {MAX_TOP_N}, got {top_n!r}")
    if not 1 <= top_n <= MAX_TOP_N:
        raise InvalidArgument(f"{name} must be between 1 and {MAX_TOP_N}, got {top_n}")
    return top_n


def citation(chunk: CitedChunk, index_name: str, query: str, score: float) -> dict[str, Any]:
    return {
        "id": chunk.id,
        "score": score,
        "snippet": make_snippet(chunk.text, query),
        "index_name": index_name,
        "index_id": chunk.index_id,
        "filepath": chunk.path,
        "file_id": chunk.document_id,
        "document_title": chunk.title,
        "heading_path": list(chunk.heading_path),
        "source_uri": chunk.source_uri,
        "location": {
            "line_start": chunk.line_start,
            "line_end": chunk.line_end,
            "char_start": chunk.char_start,
            "char_end": chunk.char_end,
        },
    }


def catch_up_if_pending(ctx: Context) -> None:
    """Another process wrote: catch the keyword index up, if nobody else is writing here."""
    if (
        ctx.keywords_owner  # the writer, or the process keeping this node's own index
        and (changes.pending(ctx.catalog.conn, ctx.keywords_mark) > 0 or ctx.keywords.needs_rebuild)
        and ctx.write_lock.acquire(blocking=False)
    ):
        try:
            catch_up_keywords(ctx)
        finally:
            ctx.write_lock.release()


def keyword_candidates(
    ctx: Context,
    query: str,
    rows: list[IndexRow],
    limit: int,
    *,
    tenant: str | None = None,
    tiers: frozenset[str] | None = None,
    catch_up: bool = True,
) -> Iterator[tuple[LiveChunk, float]]:
    """Live, unexpired keyword hits (of the tiers asked for), best first, one by one: the first
    ``limit`` checked in one read, the rest fetched only when the caller takes more (some were gone,
    expired or of another tier). ``catch_up=False``: the caller already ran ``catch_up_if_pending``
    (on its own thread, which may hold the write lock)."""
    if catch_up:
        catch_up_if_pending(ctx)
    ids = [r.id for r in rows]
    fetch = limit * 2 + 10 if tiers is None else limit * 10 + 50  # tiers filter after the fact
    bm25 = {r.id: search_settings.bm25_of(ctx, [r]) for r in rows}  # each index its own (k1, b)
    rebuilt = rebuild_aliases(ctx.catalog.conn, ids)  # before the search: RECHUNK may swap meanwhile
    kw = partial(ctx.keywords.search, keyword_query(query), index_ids=ids, tenant=tenant, bm25=bm25)
    raw = kw(limit=fetch)  # now, not when the first hit is taken
    checks = (limit, rebuilt, set(ids), tenant, tiers)
    return rounds(
        lambda n: raw if n == fetch else kw(limit=n), fetch, lambda r: live_keyword_hits(ctx, r, *checks)
    )


def keyword_hits(
    ctx: Context, query: str, rows: list[IndexRow], limit: int, **kw: Any
) -> list[tuple[LiveChunk, float]]:
    """The first ``limit`` of ``keyword_candidates`` (the benches' keyword list)."""
    return list(islice(keyword_candidates(ctx, query, rows, limit, **kw), limit))


def full_rows(ctx: Context, hits: list[LiveChunk]) -> list[CitedChunk]:
    """What the citations of the hits to cite show, in their order (one catalog read), under the
    index id the hit was ranked under (a RECHUNK rebuild's own); a hit deleted since it was ranked is
    left out."""
    pause_point("search.full_rows")  # tests: a chunk deleted between its checks
    full = cited_chunks(ctx.catalog.conn, [h.cid for h in hits])
    out = []
    for h in hits:
        chunk = full.get(h.cid)
        if chunk is None:
            continue
        out.append(chunk if chunk.index_id == h.index_id else chunk._replace(index_id=h.index_id))
    return out


def filled_rows(
    ctx: Context, candidates: Iterator[tuple[LiveChunk, float]], n: int
) -> list[tuple[CitedChunk, float]]:
    """``full_rows`` of the first ``n`` candidates, with their scores; for each one deleted since it
    was ranked, the next candidates in order (read only then), until ``n`` rows or none left."""
    out: list[tuple[CitedChunk, float]] = []
    while len(out) < n:
        batch = list(islice(candidates, n - len(out)))
        if not batch:
            break
        score_of = {h.cid: s for h, s in batch}
        out.extend((c, score_of[c.cid]) for c in full_rows(ctx, [h for h, _ in batch]))
    return out


def search(
    ctx: Context,
    query: Any,
    *,
    index_name: Any = None,
    indexes: Any = None,
    top_n: Any = 10,
    mode: Any = None,
    tenant: Any = None,
    tiers: Any = None,
) -> dict[str, Any]:
    q = validate_query(query)
    n = validate_top_n(top_n)
    tier_set, tenant = validate_tiers(tiers), check_tenant(tenant)
    if mode is not None and mode not in MODES:
        raise InvalidArgument(
            f"mode must be one of {', '.join(MODES)} (default: hybrid when vectors exist), got {mode!r}"
        )
    rows = resolve_indexes(ctx, index_name, indexes)
    names = {r.id: r.name for r in rows}
    t0 = time.perf_counter()
    plan = plan_modes(ctx, rows, mode)
    results: list[dict[str, Any]] | None = None
    if plan.mode != "keyword":
        try:
            results = fused_results(ctx, q, rows, plan, n, names, tenant=tenant, tiers=tier_set)
        except GitkbError as exc:
            if mode is not None:
                raise
            # The default mode never fails for want of vectors: keyword search answers.
            plan.mode = "keyword"
            plan.warnings.append(
                f"semantic search is unavailable ({exc.code}: {exc.message}); searched by keyword only"
            )
    if results is None:
        found = keyword_candidates(ctx, q, rows, n, tenant=tenant, tiers=tier_set)
        results = []
        for chunk, score in filled_rows(ctx, found, n):
            c = citation(chunk, names[chunk.index_id], q, score)
            c["retrievers"] = ["keyword"]
            results.append(c)
    took = time.perf_counter() - t0
    ctx.meters.search(plan.mode, took)
    out: dict[str, Any] = {
        "query": q,
        "mode": plan.mode,
        "indexes": [r.name for r in rows],
        "Results": results,
        "count": len(results),
        "took_ms": round(took * 1000, 2),
        "Message": f"{len(results)} result(s)",
    }
    warnings = plan.warnings + tenant_warnings(ctx, rows, tenant)  # the silent-zero-results trap
    if ctx.keywords.needs_rebuild:  # the writer is rebuilding it (the layout changed, or a repair)
        warnings.append(
            "the keyword index is being rebuilt from the catalog: keyword results are incomplete until it finishes"
        )
    if warnings:
        out["Warnings"] = warnings
    return out


def search_pool(ctx: Context) -> ThreadPoolExecutor:
    """The workspace's search threads (``Caches.search_pool``), started on first use."""
    with _pool_lock:
        pool = ctx.caches.search_pool
        if pool is None:
            pool = ctx.caches.search_pool = ThreadPoolExecutor(
                SEARCH_THREADS, thread_name_prefix="gitkb-search"
            )
        return pool


def fused_results(
    ctx: Context,
    q: str,
    rows: list[IndexRow],
    plan: Plan,
    n: int,
    names: dict[str, str],
    *,
    tenant: str | None,
    tiers: frozenset[str] | None,
) -> list[dict[str, Any]]:
    """Semantic (one list per identity) and, for hybrid, keyword lists fused (``search_settings``)."""
    depth = max(n * 2, 20)  # RRF (k=60) gains little from deeper lists
    lists: dict[str, list[int]] = {}
    scored: dict[str, list[tuple[int, float]]] = {}
    hits: dict[int, LiveChunk] = {}
    scores: dict[int, dict[str, float]] = {}
    # Hybrid: the keyword side runs on a search thread while this one embeds the query and asks the
    # vectors (both sides spend most of their time outside the GIL), so a hybrid search costs little
    # more than its slower side. The lists are put together in the same order either way.
    kw_side = None
    if plan.mode == "hybrid":
        catch_up_if_pending(ctx)  # here: this thread may hold the write lock, a search thread never does
        kw_side = search_pool(ctx).submit(
            keyword_side, ctx, q, rows, depth, n, names, tenant=tenant, tiers=tiers
        )
    try:
        sems = [
            (identity, semantic_hits(ctx, q, identity, group, depth, tenant=tenant, tiers=tiers))
            for identity, group in sorted(plan.groups.items())
        ]
    except BaseException:
        if kw_side is not None:  # done when this call is done; the semantic error is the one raised
            wait([kw_side])
        raise
    pause_point("search.semantic_checked")  # tests: the semantic hits are checked live, not yet cited
    kw, ready = kw_side.result() if kw_side is not None else (None, {})
    if kw is not None:
        lists["keyword"] = [c.cid for c, _ in kw]
        scored["keyword"] = [(c.cid, s) for c, s in kw]
        for c, s in kw:
            hits[c.cid] = c
            scores.setdefault(c.cid, {})["keyword"] = s
    for identity, sem in sems:
        lists[f"semantic:{identity}"] = [c.cid for c, _ in sem]
        scored[f"semantic:{identity}"] = [(c.cid, s) for c, s in sem]
        for c, s in sem:
            hits[c.cid] = c
            scores.setdefault(c.cid, {})["semantic"] = max(s, scores.get(c.cid, {}).get("semantic", -1.0))
    single = len(lists) == 1  # one ranked list: keep its own score (cosine similarity)
    method = search_settings.setting(ctx, rows, "fusion")
    used = () if single else ("fusion", "semantic_weight" if method == "score" else "rrf_k")
    plan.warnings += search_settings.mixed(ctx, rows, used)  # one fusion for all: say when not their own
    if method == "score" and not single:
        w = float(search_settings.setting(ctx, rows, "semantic_weight"))
        document_of = {cid: c.document_rowid for cid, c in hits.items()}
        fused = fusion.document_fusion(
            scored,
            document_of,
            weights={"keyword": 1.0 - w, "semantic": w},
            share=fusion.DOCUMENT_SHARE,
            tie={cid: (c.index_id, c.document_rowid, cid) for cid, c in hits.items()},
        )
        fused = amounts.favour_amounts(
            q,
            fused,
            document_of,
            lambda cids: {c.cid: c.text for c in full_rows(ctx, [hits[k] for k in cids])},
        )
    else:
        fused = rrf(lists, k=float(search_settings.setting(ctx, rows, "rrf_k")))
    out: list[dict[str, Any]] = []
    while len(out) < n and fused:  # more than once only when a hit was deleted since it was ranked
        top, fused = fused[: n - len(out)], fused[n - len(out) :]
        out += _cite(ctx, q, top, hits, scores, ready, names, single=single)
    return out


def keyword_side(
    ctx: Context,
    q: str,
    rows: list[IndexRow],
    depth: int,
    n: int,
    names: dict[str, str],
    *,
    tenant: str | None,
    tiers: frozenset[str] | None,
) -> tuple[list[tuple[LiveChunk, float]], dict[int, dict[str, Any]]]:
    """A hybrid search's keyword side, on a search thread: its hits, and the citations of the first
    ``n`` made while the caller's thread still embeds the query (their scores are set once fused),
    so that only the semantic side's hits are read and cited after the vectors answer."""
    kw = keyword_hits(ctx, q, rows, depth, tenant=tenant, tiers=tiers, catch_up=False)
    ready = {c.cid: citation(c, names[c.index_id], q, 0.0) for c in full_rows(ctx, [h for h, _ in kw[:n]])}
    return kw, ready


def _cite(
    ctx: Context,
    q: str,
    top: list[fusion.Fused[int]],
    hits: dict[int, LiveChunk],
    scores: dict[int, dict[str, float]],
    ready: dict[int, dict[str, Any]],
    names: dict[str, str],
    *,
    single: bool,
) -> list[dict[str, Any]]:
    """The fused hits as citations: the keyword side's ready ones (when the hit is the one it cited:
    a semantic list's own row of a chunk wins, as it always did), the others read now in one go."""
    mine = {
        f.key: ready[f.key]
        for f in top
        if f.key in ready and ready[f.key]["index_id"] == hits[f.key].index_id
    }
    rows_of = {c.cid: c for c in full_rows(ctx, [hits[f.key] for f in top if f.key not in mine])}
    out = []
    for f in top:
        score = next(iter(scores[f.key].values())) if single else round(f.score, 6)
        if f.key in mine:
            cited = mine[f.key]
            cited["score"] = score
        elif f.key in rows_of:
            chunk = rows_of[f.key]
            cited = citation(chunk, names[chunk.index_id], q, score)
        else:
            continue  # deleted since it was ranked
        cited["retrievers"] = f.retrievers
        cited["scores"] = scores[f.key]
        cited["ranks"] = {name.split(":", 1)[0]: r for name, r in f.ranks.items()}
        out.append(cited)
    return out
