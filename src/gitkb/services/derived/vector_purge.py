"""Purging an index's vectors from every collection: recorded in the catalog first, then tried,
retried by every catch-up and by DELETE_INDEX run again until no collection holds them.
"""

from __future__ import annotations

import threading
from typing import Any

from gitkb.core.errors import GitkbError, NotFound, StoreUnavailable
from gitkb.services.context import Context
from gitkb.stores.catalog import vector_state as vs

_purge_lock = threading.Lock()


def has_vectors(ctx: Context) -> bool:
    return (
        bool(ctx.settings.chroma_host) or ctx.caches.vectors is not None or ctx.settings.vectors_path.exists()
    )


def purge_index(ctx: Context, index_id: str, index_name: str) -> None:
    """Record that ``index_id`` must leave every collection, then try; StoreUnavailable names survivors."""
    if not has_vectors(ctx):
        return
    try:
        idents = [c["identity"] for c in ctx.vectors.list_collections()]
    except GitkbError as exc:
        raise StoreUnavailable(
            f"index {index_name!r} was removed from the catalog, but the vector store could not be listed "
            f"to purge its vectors ({exc.message}); run DELETE_INDEX {index_name!r} again to finish",
            details={"surviving_collections": ["*"], "index_name": index_name},
        ) from exc
    with ctx.catalog.write() as w:
        vs.add_purges(w, index_id, index_name, idents)
    left = retry_purges(ctx, index_id)
    if left:
        names = [ctx.vectors.collection_name(p.identity) for p in left]
        raise StoreUnavailable(
            f"index {index_name!r} was removed from the catalog, but its vectors could not be purged from "
            f"collection(s) {', '.join(names)} ({left[0].error}); run DELETE_INDEX {index_name!r} again to finish",
            next_steps=[f"retry DELETE_INDEX {index_name!r} when the vector store is reachable"],
            details={"surviving_collections": names, "index_name": index_name},
        )


def retry_purges(ctx: Context, index_id: str | None = None) -> list[vs.Purge]:
    """Try every pending purge (of ``index_id``, or all); returns those still failing."""
    left = []
    with _purge_lock:
        for p in vs.purges(ctx.catalog.conn):
            if index_id is not None and p.index_id != index_id:
                continue
            try:
                ctx.vectors.delete_where(p.identity, {"index_id": p.index_id})
            except GitkbError as exc:
                with ctx.catalog.write() as w:
                    vs.purge_failed(w, p.index_id, p.identity, exc.message)
                left.append(vs.Purge(p.index_id, p.index_name, p.identity, exc.message))
                continue
            with ctx.catalog.write() as w:
                vs.purge_done(w, p.index_id, p.identity)
    return left


def finish_deleted_index(ctx: Context, index_name: str) -> dict[str, Any] | None:
    """DELETE_INDEX retry for a name no longer in the catalog: finish its pending purges."""
    pend = [p for p in vs.purges(ctx.catalog.conn) if p.index_name == index_name]
    if not pend:
        return None
    ids = {p.index_id for p in pend}
    for ix in ids:
        left = retry_purges(ctx, ix)
        if left:
            names = [ctx.vectors.collection_name(p.identity) for p in left]
            raise StoreUnavailable(
                f"the vectors of deleted index {index_name!r} still could not be purged from {', '.join(names)} "
                f"({left[0].error}); run DELETE_INDEX {index_name!r} again later",
                details={"surviving_collections": names, "index_name": index_name},
            )
    return {"Message": "Index deleted successfully", "index_name": index_name, "index_id": sorted(ids)[0]}


def not_found_unless_pending(ctx: Context, exc: NotFound, index_name: Any) -> dict[str, Any]:
    if isinstance(index_name, str):
        done = finish_deleted_index(ctx, index_name.strip())
        if done is not None:
            return done
    raise exc
