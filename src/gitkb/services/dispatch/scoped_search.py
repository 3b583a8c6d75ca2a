"""SEARCH for an agent (``search_index``): only the indexes its scope can read, citations out.

Requested indexes outside the scope (ids or names, known or not) are listed under ``ignored`` and
never searched; an all-ignored request searches nothing. ``top_n`` is an integer from 1 to
``MAX_TOP_K`` (default from the binding). An agent's query embeddings are recorded as its usage.
"""

from __future__ import annotations

from typing import Any

from gitkb.core.action_table import MAX_TOP_K
from gitkb.core.errors import InvalidArgument
from gitkb.services.context import Context
from gitkb.services.dispatch import actions
from gitkb.services.dispatch.scope import AgentScope, resolve_refs
from gitkb.services.operations import usage
from gitkb.services.retrieval import search, tenancy


def validate_top_n(top_n: Any, default: int) -> int:
    if top_n is None:
        return default
    if isinstance(top_n, bool) or not isinstance(top_n, int):
        raise InvalidArgument(f"top_n must be an integer from 1 to {MAX_TOP_K}, got {top_n!r}")
    if not 1 <= top_n <= MAX_TOP_K:
        raise InvalidArgument(f"top_n must be from 1 to {MAX_TOP_K}, got {top_n}")
    return top_n


def citation(hit: dict[str, Any]) -> dict[str, Any]:
    loc = hit.get("location") or {}
    out = {
        "id": hit["id"],
        "index_id": hit["index_id"],
        "index_name": hit.get("index_name"),
        "filepath": hit["filepath"],
        "file_id": hit.get("file_id"),
        "document_title": hit.get("document_title"),
        "source_uri": hit.get("source_uri"),
        "location": {"line_start": loc.get("line_start"), "line_end": loc.get("line_end")},
        "snippet": hit.get("snippet"),
        "score": hit.get("score"),
    }
    if hit.get("retrievers"):
        out["retrievers"] = hit["retrievers"]
    return out


def search_index(
    ctx: Context,
    scope: AgentScope,
    query: Any,
    *,
    indexes: Any = None,
    top_n: Any = None,
    tenant: Any = None,
    tiers: Any = None,
    mode: Any = None,
) -> dict[str, Any]:
    q = search.validate_query(query)
    k = validate_top_n(top_n, scope.default_top_k)
    tenant = tenancy.check_tenant(tenant)  # as SEARCH takes it: the warnings speak of the tenant searched
    rows, ignored = resolve_refs(ctx, scope, indexes)
    warnings: list[str] = []
    cost = usage.QueryCost()
    if not rows:
        warnings.append(
            "none of the requested indexes is available to this agent; nothing was searched"
            if ignored
            else "no index is available to search"
        )
        res: dict[str, Any] = {"Results": [], "mode": mode}
    else:
        params: dict[str, Any] = {"query": q, "indexes": [r.name for r in rows], "top_n": k, "mode": mode}
        params["tenant"] = tenant
        if tiers is not None:
            params["tiers"] = tiers
        if scope.scoped:  # the agent's spend: query embeddings made now (cache hits are free)
            cost = usage.embed_query(ctx, rows, mode, q)
        res = actions.run_action(ctx, "SEARCH", params)
        warnings.extend(res.get("Warnings") or [])
        for w in tenancy.tenant_warnings(ctx, rows, tenant):
            if w not in warnings:
                warnings.append(w)
    results = [citation(h) for h in res.get("Results", [])]
    out: dict[str, Any] = {
        "query": q,
        "mode": res.get("mode"),
        "top_n": k,
        "indexes": [{"index_id": r.id, "index_name": r.name} for r in rows],
        "ignored": ignored,
        "Results": results,
        "count": len(results),
        "Message": f"{len(results)} result(s)"
        + (f"; ignored {len(ignored)} index(es) outside scope" if ignored else ""),
        "next_steps": ["read a passage's document with document_index GET_DOCUMENT (index_name, file_id)"],
    }
    if warnings:
        out["Warnings"] = warnings
    if scope.scoped and rows:
        usage.record(
            ctx, scope.agent_id or "", cost, mode=res.get("mode"), indexes=len(rows), results=len(results)
        )
    return out
