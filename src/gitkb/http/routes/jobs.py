"""Status, embeddings, reindex, build embeddings and jobs.

Long work (reindex, build embeddings) answers inline when it is quick, else
with ``{"status": "working", "job_id", "poll_with": "get_job_result"}``: poll
``GET /jobs/{job_id}``.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse

from gitkb.core.errors import InvalidArgument
from gitkb.http.auth import authenticated
from gitkb.http.calls import COUNT, START, Body, call

AUTH = [Depends(authenticated)]  # who is calling; the policy decides what they may do
router = APIRouter(tags=["status and jobs"])


class Reindex(Body):
    force: bool = False
    index_name: str | None = None


class BuildEmbeddings(Body):
    force: bool = False


class Verify(Body):
    index_name: str | None = None
    repair: bool = False


@router.get(
    "/status", dependencies=AUTH, summary="Index status: queryable/building/failed, queue, dirty counts"
)
async def status(request: Request) -> JSONResponse:
    return await call(request, "get_index_status")


@router.get("/embeddings", dependencies=AUTH, summary="Embeddings status: provider, vector count, path")
async def embeddings_status(request: Request) -> JSONResponse:
    return await call(request, "embeddings_status")


@router.post(
    "/reindex", dependencies=AUTH, summary="Re-index directory-fed indexes; long: may answer a job_id"
)
async def reindex(request: Request, body: Reindex) -> JSONResponse:
    # held to [server] allowed_roots (the caller's view, calls.caller_view): queued and run
    return await call(request, "reindex", write=True, long=True, **body.params())


@router.post("/embeddings/build", dependencies=AUTH, summary="Embed what lags; long: may answer a job_id")
async def build_embeddings(request: Request, body: BuildEmbeddings) -> JSONResponse:
    return await call(request, "build_embeddings", write=True, long=True, **body.params())


@router.post(
    "/verify",
    dependencies=AUTH,
    summary="Do the keyword index, vectors, clones and watermarks agree with the catalog? repair: fix them",
)
async def verify(request: Request, body: Verify) -> JSONResponse:
    return await call(request, "verify", write=body.repair, **body.params())


@router.get("/jobs", dependencies=AUTH, summary="Recent jobs, newest first")
async def list_jobs(
    request: Request,
    state: str | None = None,
    start: int | None = START,
    count: int | None = COUNT,
    limit: int | None = Query(None, include_in_schema=False),  # the older spelling of count
) -> JSONResponse:
    if count is not None and limit is not None:  # one of them would be dropped silently
        raise InvalidArgument("give count only (limit is its older spelling), not both")
    count = count if count is not None else limit
    return await call(request, "list_jobs", state=state, start=start, count=count)


@router.get("/jobs/{job_id}", dependencies=AUTH, summary="A job: status, progress, result or error")
async def get_job(request: Request, job_id: str) -> JSONResponse:
    return await call(request, "get_job_result", job_id=job_id)


@router.post("/jobs/{job_id}/cancel", dependencies=AUTH, summary="Cancel a queued or running job")
async def cancel_job(request: Request, job_id: str) -> JSONResponse:
    return await call(request, "cancel_job", write=True, job_id=job_id)
