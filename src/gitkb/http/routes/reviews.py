"""Action reviews: the gate in front of every push. Approving needs the ``review``
scope, and the token's name is the reviewer the audit log records. A review whose push
would overwrite commits gitkb did not push (``overwrites``) is approved only with
``{"overwrite": true}``; the body is optional otherwise."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse

from gitkb.http.auth import Principal, authenticated
from gitkb.http.calls import COUNT, START, Body, call

AUTH = [Depends(authenticated)]  # who is calling; the policy decides what they may do
router = APIRouter(tags=["reviews"])


class Deny(Body):
    reason: str


class Approve(Body):
    overwrite: bool = False


@router.get("/audit", dependencies=[Depends(authenticated)], summary="The audit log, newest first")
async def audit(
    request: Request,
    target: str | None = Query(None),
    start: int | None = START,
    count: int | None = COUNT,
    limit: int | None = Query(None, include_in_schema=False),  # the older spelling of count
) -> JSONResponse:
    count = count if count is not None else limit
    return await call(request, "list_audit", target=target, start=start, count=count)


@router.get("/reviews", dependencies=AUTH, summary="Reviews (pending first)")
async def list_reviews(
    request: Request,
    state: str | None = Query(None),
    source: str | None = Query(None),
    start: int | None = START,
    count: int | None = COUNT,
) -> JSONResponse:
    return await call(request, "list_reviews", state=state, source=source, start=start, count=count)


@router.get("/reviews/{review_id}", dependencies=AUTH, summary="One review: diff, changed_files, decision")
async def show_review(request: Request, review_id: str) -> JSONResponse:
    return await call(request, "show_review", review_id=review_id)


@router.post("/reviews/{review_id}/approve", summary="Approve: push with lease and open/update the PR")
async def approve(
    request: Request,
    review_id: str,
    body: Approve | None = None,
    who: Principal = Depends(authenticated),  # noqa: B008
) -> JSONResponse:
    overwrite = bool(body and body.overwrite)
    return await call(
        request, "approve_review", write=True, review_id=review_id, reviewer=who.name, overwrite=overwrite
    )


@router.post("/reviews/{review_id}/deny", summary="Deny with a reason: nothing is pushed")
async def deny(
    request: Request,
    review_id: str,
    body: Deny,
    who: Principal = Depends(authenticated),  # noqa: B008
) -> JSONResponse:
    return await call(
        request, "deny_review", write=True, review_id=review_id, reason=body.reason, reviewer=who.name
    )
