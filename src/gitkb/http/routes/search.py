"""``POST /search`` and ``POST /ask`` (the SEARCH and ASK actions, with this server's caps)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from gitkb.core.action_table import MAX_TOP_K, MAX_TOP_N
from gitkb.http.auth import authenticated
from gitkb.http.calls import ActionBody, action
from gitkb.http.routes.actions import guard_params

AUTH = [Depends(authenticated)]  # who is calling; the policy decides what they may do
router = APIRouter(tags=["search"])


class SearchBody(ActionBody):
    query: str
    index_name: str | None = None
    indexes: list[str] | None = Field(
        None, description="several index names; all indexes when neither is given"
    )
    mode: str | None = Field(
        None, description="keyword, semantic or hybrid (default: hybrid when embeddings exist)"
    )
    top_n: int | None = Field(
        None,
        description=f"results wanted, 1-{MAX_TOP_N}; for an agent (a token bound to one) 1-{MAX_TOP_K}"
        " (the action table's limits); this server's [server] max_top_n, when set, lowers both",
    )
    tenant: str | None = None


class AskBody(SearchBody):
    pass


@router.post("/search", dependencies=AUTH, summary="Search: every hit is a citation")
async def search(request: Request, body: SearchBody) -> JSONResponse:
    params = await guard_params(request, "SEARCH", body.params())
    return await action(request, "SEARCH", write=False, **params)


@router.post("/ask", dependencies=AUTH, summary="Ask: an answer with citations (ASK)")
async def ask(request: Request, body: AskBody) -> JSONResponse:
    params = await guard_params(request, "ASK", body.params())
    return await action(request, "ASK", write=False, **params)
