"""Index lifecycle: create, rename, delete, list, stats."""

from __future__ import annotations

from typing import Any

from gitkb.core import ids
from gitkb.core.chunking import resolve_config
from gitkb.core.errors import Conflict, NotFound
from gitkb.core.names import validate_index_name
from gitkb.services.catchup import catch_up_keywords
from gitkb.services.context import Context
from gitkb.stores.catalog import changes
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog.indexes import IndexRow


def get_index(ctx: Context, name: object, *, field: str = "index_name") -> IndexRow:
    name = validate_index_name(name, field=field)
    row = index_rows.get_by_name(ctx.catalog.conn, name)
    if row is None or row.hidden:
        known = [r.name for r in index_rows.list_all(ctx.catalog.conn)]
        hint = f"known indexes: {', '.join(known[:20])}" if known else "no index exists yet"
        raise NotFound(
            f"index {name!r} does not exist ({hint})",
            next_steps=["create it with CREATE_INDEX (CLI: gitkb index create NAME)", "or pick one from LIST_INDICES"],
        )
    return row


def create_index(
    ctx: Context,
    index_name: object,
    *,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    chunk_strategy: str | None = None,
    embeddings: bool = True,
    embedding_identity: str | None = None,
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    name = validate_index_name(index_name)
    given = any(v is not None for v in (chunk_size, chunk_overlap, chunk_strategy))
    warnings: list[str] = []
    cfg = None
    if given:
        cfg, warnings = resolve_config(chunk_strategy, chunk_size, chunk_overlap)
    with ctx.write_lock, ctx.catalog.write() as conn:
        existing = index_rows.get_by_name(conn, name)
        if existing is not None:
            raise Conflict(
                f"index {name!r} already exists",
                next_steps=["choose another name, or DELETE_INDEX it first", "ADD_DOCUMENTS adds to the existing one"],
            )
        row = index_rows.insert(
            conn,
            index_id=ids.new_index_id(),
            name=name,
            chunk=cfg,
            embeddings=embeddings,
            embedding_identity=embedding_identity,
            settings=settings,
        )
    out: dict[str, Any] = {"Message": f"Index {name!r} created", "index_name": name, "index_id": row.id}
    if cfg is not None:
        out["chunk_config"] = cfg.as_dict()
    out["embeddings"] = embeddings
    if warnings:
        out["Warnings"] = warnings
    return out


def rename_index(ctx: Context, index_name: object, new_index_name: object) -> dict[str, Any]:
    new = validate_index_name(new_index_name, field="new_index_name")
    with ctx.write_lock:
        row = get_index(ctx, index_name)
        with ctx.catalog.write() as conn:
            if index_rows.get_by_name(conn, new) is not None:
                raise Conflict(f"cannot rename {row.name!r} to {new!r}: an index named {new!r} already exists")
            index_rows.rename(conn, row.id, new)
    return {"Message": f"Index renamed from {row.name!r} to {new!r}", "index_name": new, "index_id": row.id}


def delete_index(ctx: Context, index_name: object) -> dict[str, Any]:
    with ctx.write_lock:
        row = get_index(ctx, index_name)
        with ctx.catalog.write() as conn:
            changes.log_drop_index(conn, row.id)
            index_rows.delete(conn, row.id)
        catch_up_keywords(ctx)
    return {"Message": "Index deleted successfully", "index_name": row.name, "index_id": row.id}


def index_details(ctx: Context, row: IndexRow) -> dict[str, Any]:
    st = index_rows.stats(ctx.catalog.conn, row.id)
    return {
        "index_id": row.id,
        "file_count": st["file_count"],
        "chunk_count": st["chunk_count"],
        "total_bytes": st["total_bytes"],
        "token_count": st["token_count"],
        "created_at": row.created_at,
        "last_updated": st["last_updated"],
        "embeddings": row.embeddings,
        "chunk_config": row.chunk_config_dict(),
    }


def list_indices(ctx: Context) -> dict[str, Any]:
    rows = index_rows.list_all(ctx.catalog.conn)
    return {
        "Indices": [r.name for r in rows],
        "IndexDetails": {r.name: index_details(ctx, r) for r in rows},
        "Message": f"{len(rows)} index(es)",
    }


def indices_stats(ctx: Context) -> dict[str, Any]:
    out = {}
    for r in index_rows.list_all(ctx.catalog.conn):
        st = index_rows.stats(ctx.catalog.conn, r.id)
        out[r.name] = {
            "index_id": r.id,
            "file_count": st["file_count"],
            "chunk_count": st["chunk_count"],
            "created_at": r.created_at,
            "needs_reindex": False,
            "chunk_config": r.chunk_config_dict(),
        }
    return {"Stats": out, "Message": f"{len(out)} index(es)"}
