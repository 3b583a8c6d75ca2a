"""Action reviews: the gate in front of every push. Approving needs the ``review``
scope, and the token's name is the reviewer the audit log records. A review whose push
would overwrite commits gitkb did not push (``overwrites``) is approved only with
``{"overwrite": true}``; the body is optional otherwise."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse

from gitkb.http.auth import Principal, require
from gitkb.http.calls import Body, call, has

router = APIRouter(tags=["reviews"])
READ = [Depends(require("read"))]


class Deny(Body):
    reason: str


class Approve(Body):
    overwrite: bool = False


if has("list_audit"):

    @router.get("/audit", dependencies=[Depends(require("admin"))], summary="The audit log, newest first")
    async def audit(
        request: Request, target: str | None = Query(None), limit: int | None = Query(None, ge=1, le=1000)
    ) -> JSONResponse:
        return await call(request, "list_audit", target=target, limit=limit)


if has("list_reviews"):

    @router.get("/reviews", dependencies=READ, summary="Reviews (pending first)")
    async def list_reviews(
        request: Request, state: str | None = Query(None), source: str | None = Query(None)
    ) -> JSONResponse:
        return await call(request, "list_reviews", state=state, source=source)


if has("show_review"):

    @router.get(
        "/reviews/{review_id}", dependencies=READ, summary="One review: diff, changed_files, decision"
    )
    async def show_review(request: Request, review_id: str) -> JSONResponse:
        return await call(request, "show_review", review_id=review_id)


if has("approve_review"):

    @router.post("/reviews/{review_id}/approve", summary="Approve: push with lease and open/update the PR")
    async def approve(
        request: Request,
        review_id: str,
        body: Approve | None = None,
        who: Principal = Depends(require("review")),  # noqa: B008
    ) -> JSONResponse:
        overwrite = bool(body and body.overwrite)
        return await call(
            request, "approve_review", write=True, review_id=review_id, reviewer=who.name, overwrite=overwrite
        )


if has("deny_review"):

    @router.post("/reviews/{review_id}/deny", summary="Deny with a reason: nothing is pushed")
    async def deny(
        request: Request,
        review_id: str,
        body: Deny,
        who: Principal = Depends(require("review")),  # noqa: B008
    ) -> JSONResponse:
        return await call(
            request, "deny_review", write=True, review_id=review_id, reason=body.reason, reviewer=who.name
        )
