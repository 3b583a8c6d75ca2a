"""Knowledge bases (named bundles of indexes) and agent bindings (issue: MCP).

Managing them is ``admin``, reading them ``read`` (the action table says so).
``POST /search_index`` is the agent-scoped search: a token bound to an agent
(``agent = "ID"`` in its ``[[server.tokens]]`` entry) only ever searches that
agent's indexes; other tokens may name an ``agent_id``.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import AliasChoices, Field

from gitkb.http.auth import Principal, authenticated
from gitkb.http.calls import ActionBody, Body, call
from gitkb.http.limits import run_blocking
from gitkb.http.routes.actions import agent_default, guard_params
from gitkb.http.state import get_state
from gitkb.services.access.knowledge import DEFAULT_TOP_K

AUTH = [Depends(authenticated)]  # who is calling; the policy decides what they may do
router = APIRouter(tags=["knowledge bases"])


class CreateKb(Body):
    name: str
    indexes: list[str] = Field(description="index names or kidx_ ids")


class Assign(Body):
    kbs: list[str]
    mode: str | None = Field(None, description="read, propose (default) or write")
    read_only: bool | None = None
    default_top_n: int | None = Field(
        None,
        validation_alias=AliasChoices("default_top_n", "default_top_k"),  # the older spelling works
    )


class Unassign(Body):
    kbs: list[str]


class SearchIndex(ActionBody):
    query: str
    indexes: list[str] | None = Field(
        None, description="names or kidx_ ids; ids outside the agent's set are ignored"
    )
    top_n: int | None = Field(None, validation_alias=AliasChoices("top_n", "top_k"))  # top_k: older spelling
    tenant: str | None = None
    tiers: list[str] | None = None
    mode: str | None = None
    agent_id: str | None = Field(None, description="ignored for agent-bound tokens (they use their own)")


@router.get("/kbs", dependencies=AUTH, summary="Knowledge bases (all, or one agent's)")
async def list_kbs(request: Request, agent_id: str | None = Query(None)) -> JSONResponse:
    return await call(request, "list_knowledge_bases", agent_id=agent_id)


@router.post("/kbs", dependencies=AUTH, summary="Create a knowledge base from index names")
async def create_kb(request: Request, body: CreateKb) -> JSONResponse:
    return await call(request, "kb_create", write=True, **body.params())


@router.delete("/kbs/{name}", dependencies=AUTH, summary="Delete a knowledge base (force: unassign it first)")
async def delete_kb(request: Request, name: str, force: bool = False) -> JSONResponse:
    return await call(request, "kb_delete", write=True, name=name, force=force)


@router.get("/agents/{agent_id}", dependencies=AUTH, summary="An agent's knowledge bases and bindings")
async def show_agent(request: Request, agent_id: str) -> JSONResponse:
    return await call(request, "agent_show", agent_id=agent_id)


@router.get("/agents/{agent_id}/usage", dependencies=AUTH, summary="An agent's query-embedding usage")
async def agent_usage(request: Request, agent_id: str) -> JSONResponse:
    return await call(request, "agent_usage", agent_id=agent_id)


@router.post("/agents/{agent_id}/assign", dependencies=AUTH, summary="Bind an agent to knowledge bases")
async def assign(request: Request, agent_id: str, body: Assign) -> JSONResponse:
    return await call(request, "agent_assign", write=True, agent_id=agent_id, **body.params())


@router.post("/agents/{agent_id}/unassign", dependencies=AUTH, summary="Unbind knowledge bases")
async def unassign(request: Request, agent_id: str, body: Unassign) -> JSONResponse:
    return await call(request, "agent_unassign", write=True, agent_id=agent_id, **body.params())


@router.post("/search_index", summary="Agent-scoped search with citations (search_index)")
async def search_index(
    request: Request,
    body: SearchIndex,
    who: Principal = Depends(authenticated),  # noqa: B008
) -> JSONResponse:
    params = body.params()
    default = None
    if params.get("top_n") is None and get_state(request).cfg.max_top_n is not None:
        # the binding's default (the operator's, with no agent), which may lie over this server's cap
        agent = await run_blocking(get_state(request), agent_default, request, params.get("agent_id"))
        default = agent or DEFAULT_TOP_K
    params = await guard_params(request, "SEARCH", params, top_n_default=default)
    return await call(request, "search_index", **params)
