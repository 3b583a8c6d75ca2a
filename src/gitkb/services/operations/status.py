"""get_index_status: is the index current, and if not, why.

The index has caught up when status is ``queryable``, ``queue_depth`` is 0,
``in_flight`` is None and both dirty counts are 0. While vectors are being built (by the
background embedder or a build) with no job running, ``in_flight`` is ``build_embeddings`` and
``in_flight_job`` / ``vector_build`` carry its progress (``job_id`` None, ``background`` True).
"""

from __future__ import annotations

from typing import Any

from gitkb.core.action_table import DOCUMENT_INDEX, METHODS
from gitkb.services.context import Context
from gitkb.services.derived.vector_locks import running_builds
from gitkb.services.derived.vector_wants import asks_in_range, pending_chunks, wanted_identities
from gitkb.services.operations.ef_search import ef_search_view
from gitkb.services.runtime.retention import jobs_view, retired_view
from gitkb.services.runtime.ttl import count_expired
from gitkb.stores.catalog import changes, skipped_files
from gitkb.stores.catalog import documents as doc_rows
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import jobs as job_rows
from gitkb.stores.catalog import vector_outcomes as outcomes
from gitkb.stores.catalog.engine import Conn, catalog_errors
from gitkb.stores.keyword_schema import REPAIR

BUILD_KINDS = tuple(a.name for a in METHODS if a.builds)  # job kinds that make an index "building"
BUILDING_ACTIONS = tuple(a.name for a in DOCUMENT_INDEX if a.builds)
EMBEDDING_KINDS = tuple(k for k in BUILD_KINDS if "embed" in k)
STATUS_SKIP_CATEGORIES = (
    "parse_error",
    "encoding_error",
    "missing_frontmatter",
    "internal_error",
    "bad_name",
    "too_deep",
    "unreadable",
)


def _last_error(conn: Conn, kinds: tuple[str, ...]) -> str | None:
    last = job_rows.last_finished(conn, kinds)
    return last.error if last is not None and last.state == "failed" else None


def probe_catalog(ctx: Context) -> str:
    """Read the catalog once (``/readyz``); raises when it cannot be read. Returns its engine."""
    index_rows.probe(ctx.catalog.conn)
    return str(ctx.catalog.backend["engine"])


def dirty_embeddings(ctx: Context) -> int:
    """Chunks without a vector for their index's identity."""
    return sum(pending_chunks(ctx, identity) for identity in wanted_identities(ctx))


def index_status(ctx: Context) -> dict[str, Any]:
    conn = ctx.catalog.conn
    out: dict[str, Any] = {}
    try:
        out["documents_indexed"] = doc_rows.count_all(conn)
        out["documents_indexed_error"] = None
    except catalog_errors() as exc:
        out["documents_indexed"] = 0
        out["documents_indexed_error"] = str(exc)
    running = job_rows.running(conn)
    in_flight = running[0] if running else None
    vector_build = vector_build_view(ctx)
    queue_depth = job_rows.count_state(conn, "queued")
    dirty_paths = changes.dirty_documents(conn, ctx.keywords_mark)
    dirty_emb = dirty_embeddings(ctx)
    last_build = job_rows.last_finished(conn, BUILD_KINDS)
    error = last_build.error if last_build is not None and last_build.state == "failed" else None
    if in_flight is not None and (
        in_flight.kind != "action" or in_flight.params.get("action") in BUILDING_ACTIONS
    ):
        status = "building"
    elif error is not None:
        status = "failed"
    else:
        status = "queryable"
    if ctx.keywords.damage is not None:  # the workspace opened, searches cannot: say how to repair
        status = "failed"
        error = f"the keyword index is damaged ({ctx.keywords.damage}); run `{REPAIR}` to rebuild it"
    skipped = skipped_files.in_categories(conn, STATUS_SKIP_CATEGORIES)
    vectors, warnings = ef_search_view(ctx)
    if warnings:
        out["Warnings"] = warnings
    out.update(
        {
            "status": status,
            "error": None if status == "building" else error,
            "last_reindex_error": _last_error(conn, ("reindex",)),
            "last_build_embeddings_error": _last_error(conn, EMBEDDING_KINDS),
            "queue_depth": queue_depth,
            "in_flight": in_flight.kind if in_flight else (vector_build["kind"] if vector_build else None),
            "in_flight_job": in_flight.as_dict() if in_flight else vector_build,
            "vector_build": vector_build,
            "dirty_paths": dirty_paths,
            "dirty_embeddings": dirty_emb,
            "write_generation": int(job_rows.get_state(conn, "write_generation", "0") or 0),
            "pending_purge": count_expired(ctx),
            "skipped_files": skipped,
            "caught_up": status == "queryable"
            and queue_depth == 0
            and in_flight is None
            and vector_build is None
            and dirty_paths == 0
            and dirty_emb == 0,
            "writer": {**(ctx.lease.holder() or {}), "this_process": True}
            if ctx.is_writer
            else ctx.lease.holder(),
            "catalog": ctx.catalog.backend,  # engine, and its path or URL without the password
            "vectors": vectors,  # [chroma] ef_search, and the depth collections search at where it differs
            "retired_chunks": retired_view(ctx),  # kept [catalog] retired_days for old citations
            "jobs": jobs_view(ctx),  # finished jobs kept [catalog] jobs_days
            "query_embedding": query_embedding_view(ctx),
        }
    )
    job = out["in_flight_job"]
    flight = "nothing"
    if job:
        p = job.get("progress") or {}
        flight = str(job["kind"]) + (f" ({p.get('done') or 0}/{p['total']})" if p.get("total") else "")
    out["Message"] = (
        "caught up"
        if out["caught_up"]
        else f"{status}; queue {queue_depth}, in flight {flight}, dirty paths {dirty_paths}, "
        f"dirty embeddings {dirty_emb}"
    )
    return out


def query_embedding_view(ctx: Context) -> dict[str, Any]:
    """How queries are embedded: the configured graph (``[embedding] query_graph``) and, for each
    embedder this process has loaded, the graph it really uses (``exact`` with the reason when the
    int8 query graph could not be built)."""
    loaded: dict[str, dict[str, str | None]] = {}
    for identity, emb in sorted(ctx.caches.embedders.items()):
        graph = getattr(emb, "query_graph", None)  # the default model's embedders only
        if graph is not None:
            loaded[identity] = {"graph": str(graph), "error": getattr(emb, "query_graph_error", None)}
    return {"configured": ctx.settings.embed_query_graph, "loaded": loaded}


def vector_build_view(ctx: Context) -> dict[str, Any] | None:
    """The vector build running now (the background embedder, a build or a waiting caller), in the
    shape of a job (``job_id`` None, ``background`` True) with its progress: the chunks asked for
    since the run started, and how many of them have their vector."""
    conn = ctx.catalog.conn
    live = running_builds(ctx)
    if not live:
        return None
    head = changes.head(conn)
    total = done = 0
    for b in live:
        total += asks_in_range(ctx, b.from_seq, head).get(b.identity, 0)
        done += outcomes.counts(conn, [b.identity], b.from_seq, head).done
    identities = ", ".join(b.identity for b in live)
    return {
        "job_id": None,
        "kind": "build_embeddings",
        "status": "running",
        "background": True,
        "identity": identities,
        "progress": {"done": min(done, total), "total": total, "note": f"vectors in {identities}"},
        "started_at": min(b.started_at for b in live),
    }
