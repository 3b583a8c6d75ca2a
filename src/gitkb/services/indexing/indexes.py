"""Index lifecycle: create, rename, delete, list, stats."""

from __future__ import annotations

from typing import Any

from gitkb.core import ids
from gitkb.core.chunk_config import resolve_config
from gitkb.core.errors import Conflict, InvalidArgument, NotFound
from gitkb.core.names import validate_index_name
from gitkb.services.context import Context
from gitkb.services.derived import embeddings as emb_service
from gitkb.services.derived import identity as emb_identity
from gitkb.services.derived import vector_purge
from gitkb.services.derived.catchup import catch_up_keywords
from gitkb.services.derived.index_lookup import get_index as get_index
from gitkb.services.retrieval import search_settings
from gitkb.stores.catalog import changes
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog.indexes import IndexRow


def create_index(
    ctx: Context,
    index_name: object,
    *,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    chunk_strategy: str | None = None,
    embeddings: bool = True,
    embedding_identity: str | None = None,
    embedding_provider: Any = None,
    embedding_model: Any = None,
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    name = validate_index_name(index_name)
    settings = search_settings.validate_index_settings(settings)
    given = any(v is not None for v in (chunk_size, chunk_overlap, chunk_strategy))
    warnings: list[str] = []
    cfg = None
    if given:
        cfg, warnings = resolve_config(chunk_strategy, chunk_size, chunk_overlap)
    if not isinstance(embeddings, bool):
        raise InvalidArgument(f"embeddings must be true or false, got {embeddings!r}")
    pin = embedding_identity or emb_identity.pinned_identity(embedding_provider, embedding_model)
    if pin and not embeddings:
        raise InvalidArgument(
            "embedding_provider/embedding_model make no sense with embeddings=False (keyword-only)"
        )
    # Fails closed (embedding_not_configured) before anything is written.
    identity = (pin or emb_identity.active_identity(ctx, save=True)) if embeddings else None
    with ctx.write_lock, ctx.catalog.write() as conn:
        existing = index_rows.get_by_name(conn, name)
        if existing is not None:
            raise Conflict(
                f"index {name!r} already exists",
                next_steps=[
                    "choose another name, or DELETE_INDEX it first",
                    "ADD_DOCUMENTS adds to the existing one",
                ],
            )
        row = index_rows.insert(
            conn,
            index_id=ids.new_index_id(),
            name=name,
            chunk=cfg,
            embeddings=embeddings,
            embedding_identity=pin,
            settings=settings,
        )
        if identity is not None:
            emb_service.bind_new_index(conn, row.id, identity)
    out: dict[str, Any] = {"Message": f"Index {name!r} created", "index_name": name, "index_id": row.id}
    if cfg is not None:
        out["chunk_config"] = cfg.as_dict()
    out["embeddings"] = embeddings
    out["embedding_identity"] = identity
    if warnings:
        out["Warnings"] = warnings
    return out


def rename_index(ctx: Context, index_name: object, new_index_name: object) -> dict[str, Any]:
    new = validate_index_name(new_index_name, field="new_index_name")
    with ctx.write_lock:
        row = get_index(ctx, index_name)
        with ctx.catalog.write() as conn:
            if index_rows.get_by_name(conn, new) is not None:
                raise Conflict(
                    f"cannot rename {row.name!r} to {new!r}: an index named {new!r} already exists"
                )
            index_rows.rename(conn, row.id, new)
    return {"Message": f"Index renamed from {row.name!r} to {new!r}", "index_name": new, "index_id": row.id}


def delete_index(ctx: Context, index_name: object) -> dict[str, Any]:
    with ctx.write_lock:
        try:
            row = get_index(ctx, index_name)
        except NotFound as exc:  # a retry after a failed vector purge finishes it
            return vector_purge.not_found_unless_pending(ctx, exc, index_name)
        with ctx.catalog.write() as conn:
            changes.log_drop_index(conn, row.id)
            index_rows.delete(conn, row.id)
        catch_up_keywords(ctx)
        vector_purge.purge_index(ctx, row.id, row.name)  # every identity's collection
    return {"Message": "Index deleted successfully", "index_name": row.name, "index_id": row.id}


def set_search_settings(
    ctx: Context, index_name: Any, settings: Any = None, reset: Any = False
) -> dict[str, Any]:
    """Merge ``settings`` into the index's own search settings (a ``None`` value drops that key;
    ``reset`` drops them all first). Returns the index's own and effective settings."""
    if not isinstance(reset, bool):
        raise InvalidArgument(f"reset must be true or false, got {reset!r}")
    get_index(ctx, index_name)  # an unknown index is not_found, whatever else is wrong
    if settings is None and not reset:
        raise InvalidArgument(
            "give settings to change, or reset=true",
            next_steps=[f"keys: {', '.join(search_settings.DEFAULTS)}"],
        )
    if settings is not None and not isinstance(settings, dict):
        raise InvalidArgument(f"settings must be an object, got {settings!r}")
    with ctx.write_lock:
        row = get_index(ctx, index_name)
        own = {} if reset else dict(row.settings.get("search") or {})
        for k, v in (settings or {}).items():
            if v is None:
                own.pop(k, None)
            else:
                own[k] = v
        search_settings.validate(own)
        merged = {**row.settings, "search": own}
        if not own:
            merged.pop("search")
        with ctx.catalog.write() as conn:
            index_rows.update_settings(conn, row.id, merged)
    return get_search_settings(ctx, row.name)


def get_search_settings(ctx: Context, index_name: Any) -> dict[str, Any]:
    """An index's own search settings, the values that apply and where each comes from."""
    row = get_index(ctx, index_name)
    own = dict(row.settings.get("search") or {})
    return {
        "Message": f"search settings of {row.name!r}: "
        + (", ".join(f"{k}={v}" for k, v in own.items()) or "defaults"),
        "index_name": row.name,
        "search": own,
        "effective": search_settings.effective(ctx, [row]),
        "from": search_settings.origins(ctx, row),
    }


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
        **emb_service.index_vector_state(ctx, row, st["chunk_count"]),
    }


def list_indices(ctx: Context) -> dict[str, Any]:
    rows = index_rows.list_all(ctx.catalog.conn)
    return {
        "Indices": [r.name for r in rows],
        "IndexDetails": {r.name: index_details(ctx, r) for r in rows},
        "EmbeddingIdentityState": emb_identity.identity_state(ctx).as_dict(),
        "Message": f"{len(rows)} index(es)",
    }


def indices_stats(ctx: Context) -> dict[str, Any]:
    out = {}
    for r in index_rows.list_all(ctx.catalog.conn):
        st = index_rows.stats(ctx.catalog.conn, r.id)
        vec = emb_service.index_vector_state(ctx, r, st["chunk_count"])
        stranded = vec["needs_reindex"]  # vectors only in another identity's collection
        out[r.name] = {
            "index_id": r.id,
            "file_count": st["file_count"],
            "chunk_count": st["chunk_count"],
            "created_at": r.created_at,
            "embeddings": r.embeddings,
            **vec,
            "chunk_config": {k: None for k in r.chunk_config_dict()} if stranded else r.chunk_config_dict(),
            "search_settings": r.settings.get("search") or {},
        }
    return {
        "Stats": out,
        "EmbeddingIdentityState": emb_identity.identity_state(ctx).as_dict(),
        "Message": f"{len(out)} index(es)",
    }
