"""Knowledge bases (named bundles of indexes) and the agents they are assigned to.

A knowledge base is created from index names or ids and stores the ``kidx_``
ids, so it follows its indexes across renames. An agent is bound to knowledge
bases, each binding read-write or read-only; what an agent may touch is
resolved by ``gitkb.services.dispatch.scope``. Usage (query embeddings, searches) is
recorded per agent as events.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from gitkb.core.action_table import MAX_TOP_K
from gitkb.core.errors import Conflict, InvalidArgument, NotFound
from gitkb.core.names import validate_index_name
from gitkb.services.context import Context
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import knowledge as kb_rows
from gitkb.stores.catalog.indexes import IndexRow
from gitkb.stores.catalog.knowledge import KbRow

AGENT_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@:-]{0,127}")
KIDX_RE = re.compile(r"kidx_[0-9a-f]{32}")
DEFAULT_TOP_K = 10


def validate_agent_id(agent_id: object) -> str:
    if not isinstance(agent_id, str) or not AGENT_ID_RE.fullmatch(agent_id):
        raise InvalidArgument(
            f"invalid agent id {agent_id!r}: use 1-128 characters, letters, digits, '_', '.', '@', ':', '-',"
            " starting with a letter or digit"
        )
    return agent_id


def _names(values: object, what: str) -> list[str]:
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list | tuple) or not values:
        raise InvalidArgument(f"{what} must be a non-empty list")
    if not all(isinstance(v, str) and v.strip() for v in values):
        raise InvalidArgument(f"{what} must be a list of non-empty strings")
    return [v.strip() for v in values]


def resolve_index_ref(ctx: Context, ref: str) -> IndexRow | None:
    """An index by ``kidx_`` id or by name; None when there is none (hidden ones included for ids)."""
    conn = ctx.catalog.conn
    if KIDX_RE.fullmatch(ref):
        return index_rows.get_by_id(conn, ref)
    row = index_rows.get_by_name(conn, ref)
    return None if row is None or row.hidden else row


def get_kb(ctx: Context, name: object) -> KbRow:
    n = validate_index_name(name, field="knowledge base name")
    row = kb_rows.kb_by_name(ctx.catalog.conn, n)
    if row is None:
        known = [k.name for k in kb_rows.kb_list(ctx.catalog.conn)]
        raise NotFound(
            f"knowledge base {n!r} does not exist" + (f" (known: {', '.join(known[:20])})" if known else ""),
            next_steps=["create it with kb_create (CLI: gitkb kb create NAME --index INDEX)"],
        )
    return row


def kb_view(ctx: Context, kb: KbRow) -> dict[str, Any]:
    conn = ctx.catalog.conn
    indexes = []
    missing = []
    for ix in kb.index_ids:
        row = index_rows.get_by_id(conn, ix)
        if row is None:
            missing.append(ix)
        else:
            indexes.append({"index_id": row.id, "index_name": row.name})
    out: dict[str, Any] = {
        "name": kb.name,
        "kb_id": kb.id,
        "indexes": indexes,
        "index_ids": list(kb.index_ids),
        "agents": kb_rows.kb_agents(conn, kb.id),
        "created_at": kb.created_at,
    }
    if missing:
        out["missing_index_ids"] = missing
    return out


def kb_create(ctx: Context, name: object, indexes: object) -> dict[str, Any]:
    n = validate_index_name(name, field="knowledge base name")
    refs = _names(indexes, "indexes")
    ids: list[str] = []
    unknown: list[str] = []
    for ref in refs:
        row = resolve_index_ref(ctx, ref)
        if row is None:
            unknown.append(ref)
            continue
        if row.id in ids:
            raise InvalidArgument(
                f"index {ref!r} ({row.id}) is listed twice; a knowledge base holds each index once"
            )
        ids.append(row.id)
    if unknown:
        raise NotFound(
            f"unknown index(es): {', '.join(repr(u) for u in unknown)}",
            next_steps=["LIST_INDICES shows the index names and ids (CLI: gitkb index list)"],
        )
    with ctx.catalog.write() as conn:
        if kb_rows.kb_by_name(conn, n) is not None:
            raise Conflict(
                f"knowledge base {n!r} already exists",
                next_steps=["choose another name, or kb_delete it first"],
            )
        kb_rows.kb_insert(conn, "kb_" + uuid.uuid4().hex, n, ids)
    kb = kb_rows.kb_by_name(ctx.catalog.conn, n)
    assert kb is not None
    return {"Message": f"Knowledge base {n!r} created with {len(ids)} index(es)", **kb_view(ctx, kb)}


def kb_list(ctx: Context) -> dict[str, Any]:
    kbs = [kb_view(ctx, k) for k in kb_rows.kb_list(ctx.catalog.conn)]
    return {"KnowledgeBases": kbs, "count": len(kbs), "Message": f"{len(kbs)} knowledge base(s)"}


def kb_delete(ctx: Context, name: object, *, force: bool = False) -> dict[str, Any]:
    kb = get_kb(ctx, name)
    with ctx.catalog.write() as conn:
        agents = kb_rows.kb_agents(conn, kb.id)
        if agents and not force:
            raise Conflict(
                f"knowledge base {kb.name!r} is assigned to agent(s) {', '.join(agents)}",
                next_steps=["delete it with force=True (CLI: --force) to unassign it from them too"],
            )
        kb_rows.kb_delete(conn, kb.id)
    return {
        "Message": f"Knowledge base {kb.name!r} deleted",
        "name": kb.name,
        "kb_id": kb.id,
        "unassigned": agents,
    }


MODES = ("read", "propose", "write")
MODE_RANK = {m: i for i, m in enumerate(MODES)}


def binding_mode(mode: object, read_only: object) -> str:
    """The binding mode from ``mode`` or the older ``read_only`` flag (default ``propose``)."""
    if not isinstance(read_only, bool):
        raise InvalidArgument("read_only must be true or false")
    if mode is None:
        return "read" if read_only else "propose"
    if mode not in MODES:
        raise InvalidArgument(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if read_only and mode != "read":
        raise InvalidArgument(f"read_only contradicts mode {mode!r}; give one of them")
    return str(mode)


def agent_assign(
    ctx: Context,
    agent_id: object,
    kbs: object,
    *,
    mode: object = None,
    read_only: bool = False,
    default_top_n: object = None,
) -> dict[str, Any]:
    aid = validate_agent_id(agent_id)
    names = _names(kbs, "kbs")
    if len(set(names)) != len(names):
        dup = sorted({x for x in names if names.count(x) > 1})
        raise InvalidArgument(f"knowledge base(s) listed twice: {', '.join(dup)}; bind each once")
    chosen = binding_mode(mode, read_only)
    top_k = None
    if default_top_n is not None:
        if (
            isinstance(default_top_n, bool)
            or not isinstance(default_top_n, int)
            or not 1 <= default_top_n <= MAX_TOP_K
        ):
            raise InvalidArgument(f"default_top_n must be an integer from 1 to {MAX_TOP_K}")
        top_k = default_top_n
    rows = [get_kb(ctx, n) for n in names]
    with ctx.catalog.write() as conn:
        kb_rows.agent_upsert(conn, aid, top_k)
        for kb in rows:
            kb_rows.bind(conn, aid, kb.id, chosen)
    return {"Message": f"Agent {aid!r} bound to {', '.join(names)} (mode {chosen})", **agent_show(ctx, aid)}


def agent_unassign(ctx: Context, agent_id: object, kbs: object) -> dict[str, Any]:
    aid = validate_agent_id(agent_id)
    names = _names(kbs, "kbs")
    rows = [get_kb(ctx, n) for n in names]
    with ctx.catalog.write() as conn:
        removed = [kb.name for kb in rows if kb_rows.unbind(conn, aid, kb.id)]
    return {"Message": f"Agent {aid!r} unbound from {', '.join(removed) or 'nothing'}", "unassigned": removed}


def agent_show(ctx: Context, agent_id: object) -> dict[str, Any]:
    aid = validate_agent_id(agent_id)
    conn = ctx.catalog.conn
    agent = kb_rows.agent_get(conn, aid)
    if agent is None:
        raise NotFound(
            f"agent {aid!r} has no knowledge bases assigned",
            next_steps=["assign some with agent_assign (CLI: gitkb agent assign AGENT_ID KB...)"],
        )
    kbs = []
    index_access: dict[str, dict[str, Any]] = {}
    for b in kb_rows.bindings(conn, aid):
        kb = kb_rows.kb_by_name(conn, b.kb_name)
        assert kb is not None
        view = kb_view(ctx, kb)
        kbs.append(
            {
                "name": b.kb_name,
                "kb_id": b.kb_id,
                "mode": b.mode,
                "read_only": b.read_only,
                "indexes": view["indexes"],
            }
        )
        for ix in view["indexes"]:
            cur = index_access.setdefault(
                ix["index_id"], {**ix, "mode": "read", "read_only": True, "via": []}
            )
            cur["via"].append(b.kb_name)
            if MODE_RANK[b.mode] > MODE_RANK[cur["mode"]]:
                cur["mode"] = b.mode
            cur["read_only"] = cur["mode"] == "read"
    return {
        "agent_id": aid,
        "default_top_n": agent.default_top_k,
        "KnowledgeBases": kbs,
        "Indexes": sorted(index_access.values(), key=lambda d: d["index_name"]),
        "read_only": all(k["read_only"] for k in kbs) if kbs else True,
        "created_at": agent.created_at,
    }


def agent_usage(ctx: Context, agent_id: object) -> dict[str, Any]:
    aid = validate_agent_id(agent_id)
    conn = ctx.catalog.conn
    if kb_rows.agent_get(conn, aid) is None and not kb_rows.usage_totals(conn, aid):
        raise NotFound(
            f"agent {aid!r} is unknown", next_steps=["gitkb agent assign AGENT_ID KB... creates it"]
        )
    totals = kb_rows.usage_totals(conn, aid)
    emb = next((t for t in totals if t["kind"] == "query_embedding"), None)
    return {
        "agent_id": aid,
        "embedding_events": emb["events"] if emb else 0,
        "embeddings": emb["count"] if emb else 0,
        "tokens": emb["tokens"] if emb else 0,
        "duration_ms": round(emb["duration_ms"], 2) if emb else 0.0,
        "ByKind": totals,
        "Recent": kb_rows.recent_events(conn, aid, "query_embedding"),
        "Message": (
            f"{emb['events']} query embedding event(s): {emb['count']} embedding(s), {emb['tokens']} token(s)"
            if emb
            else "no query embeddings recorded"
        ),
    }


def list_knowledge_bases(ctx: Context, agent_id: object = None) -> dict[str, Any]:
    """All knowledge bases, or (with an agent) only the ones bound to it, with its access to each."""
    if agent_id is None:
        return kb_list(ctx)
    aid = validate_agent_id(agent_id)
    conn = ctx.catalog.conn
    out = []
    for b in kb_rows.bindings(conn, aid):
        kb = kb_rows.kb_by_name(conn, b.kb_name)
        assert kb is not None
        view = kb_view(ctx, kb)
        out.append(
            {
                "name": kb.name,
                "kb_id": kb.id,
                "mode": b.mode,
                "read_only": b.read_only,
                "indexes": view["indexes"],
            }
        )
    msg = f"{len(out)} knowledge base(s) for agent {aid!r}"
    if not out:
        msg += "; an operator assigns some with: gitkb agent assign AGENT_ID KB"
    return {"agent_id": aid, "KnowledgeBases": out, "count": len(out), "Message": msg}
