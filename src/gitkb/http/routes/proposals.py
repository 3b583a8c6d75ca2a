"""Proposals (staged edits on a source's proposal branch) and pull requests.

``POST /proposals`` stages an edit (``propose_kb_edit``); ``POST /pulls`` sends
the staged branch for review (``open_kb_pull_request``: nothing is pushed until
a reviewer approves).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse

from gitkb.http.auth import authenticated
from gitkb.http.calls import COUNT, START, ActionBody, call

AUTH = [Depends(authenticated)]  # who is calling; the policy decides what they may do
router = APIRouter(tags=["proposals and pull requests"])


class Propose(ActionBody):
    source_id_or_index: str
    relative_path: str
    content: str | None = None
    search: str | None = None
    replace: str | None = None
    note: str | None = None


class ProposeDelete(ActionBody):
    source_id_or_index: str
    relative_path: str
    note: str | None = None


class ProposeRename(ProposeDelete):
    new_relative_path: str


class OpenPull(ActionBody):
    source_id_or_index: str
    target_index: str | None = None
    title: str | None = None
    body: str | None = None
    commit_message: str | None = None
    proposal_ids: list[str] | None = None


class Refresh(ActionBody):
    source: str


@router.post("/proposals", dependencies=AUTH, summary="Stage an edit (propose_kb_edit)")
async def propose(request: Request, body: Propose) -> JSONResponse:
    return await call(request, "propose_kb_edit", write=True, **body.params())


@router.post("/proposals/delete", dependencies=AUTH, summary="Stage a file deletion (propose_kb_delete)")
async def propose_delete(request: Request, body: ProposeDelete) -> JSONResponse:
    return await call(request, "propose_kb_delete", write=True, **body.params())


@router.post("/proposals/rename", dependencies=AUTH, summary="Stage a file rename (propose_kb_rename)")
async def propose_rename(request: Request, body: ProposeRename) -> JSONResponse:
    return await call(request, "propose_kb_rename", write=True, **body.params())


@router.post(
    "/proposals/refresh",
    dependencies=AUTH,
    summary="Make the staged proposals again on the target branch's head (refresh_proposals)",
)
async def refresh(request: Request, body: Refresh) -> JSONResponse:
    return await call(request, "refresh_proposals", write=True, **body.params())


@router.get("/proposals", dependencies=AUTH, summary="Proposals (staged by default)")
async def list_proposals(
    request: Request,
    source: str | None = Query(None),
    state: str | None = Query(None),
    start: int | None = START,
    count: int | None = COUNT,
) -> JSONResponse:
    return await call(request, "list_proposals", source=source, state=state, start=start, count=count)


@router.get("/proposals/{proposal_id}", dependencies=AUTH, summary="One proposal with its diff")
async def show_proposal(request: Request, proposal_id: str) -> JSONResponse:
    return await call(request, "show_proposal", proposal_id=proposal_id)


@router.delete("/proposals/{proposal_id}", dependencies=AUTH, summary="Discard a staged proposal")
async def discard_proposal(request: Request, proposal_id: str) -> JSONResponse:
    return await call(request, "discard_proposal", write=True, proposal_id=proposal_id)


@router.post("/pulls", dependencies=AUTH, summary="Open (or update) a pull request: creates a pending review")
async def open_pull(request: Request, body: OpenPull) -> JSONResponse:
    # who asks is the caller's principal, never a field of the body
    return await call(
        request, "open_kb_pull_request", write=True, **{**body.params(), "requested_by": requester(request)}
    )


def requester(request: Request) -> str:
    """``token:<name>`` for a token, ``agent:<id>`` for an agent-bound one, else the local principal."""
    p = getattr(request.state, "principal", None)
    if p is None or not getattr(p, "authenticated", False):
        return str(getattr(p, "name", "") or "") or "local:unknown"
    return f"agent:{p.agent}" if p.agent else f"token:{p.name}"


@router.get("/pulls", dependencies=AUTH, summary="Change requests of a source")
async def list_pulls(
    request: Request, source: str = Query(...), state: str | None = Query(None)
) -> JSONResponse:
    return await call(request, "list_pull_requests", source=source, state=state)


@router.post(
    "/pulls/{source}/{number}/merge",
    dependencies=AUTH,
    summary="Local forge: merge a change request into its base; the sync is queued like a webhook's",
)
async def merge_pull(request: Request, source: str, number: int) -> JSONResponse:
    return await call(request, "forge_merge", write=True, source=source, number=number, wait=False)


@router.post("/pulls/{source}/{number}/close", dependencies=AUTH, summary="Local forge: close unmerged")
async def close_pull(request: Request, source: str, number: int) -> JSONResponse:
    return await call(request, "forge_close", write=True, source=source, number=number)
