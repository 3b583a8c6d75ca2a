"""Git sources: add, list, sync, remove (issue: git sources). Routes appear once the
library offers the method; a sync is long work and may answer with a job_id."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from gitkb.http.auth import require
from gitkb.http.calls import COUNT, START, ActionBody, Body, call, has

router = APIRouter(tags=["sources"])
READ = [Depends(require("read"))]
WRITE = [Depends(require("write"))]


class AddSource(ActionBody):
    """Fields as ``Workspace.source_add`` takes them; unknown ones are refused with the list."""

    name: str
    url: str = Field(description="a local path, file://, git://, https:// or ssh URL")
    branch: str | None = None
    documents_root: str | None = None
    index: str | list[str] | None = None
    include: list[str] | None = None
    exclude: list[str] | None = None
    forge: dict[str, Any] | None = Field(
        None, description="kind, repo, api_url, token_env, ... (references only)"
    )
    auth: dict[str, Any] | None = Field(None, description="token_env, secrets_file, ... (references only)")


class SyncSource(Body):
    commit: str | None = Field(None, description="sync to this commit instead of the branch head")
    full: bool = Field(False, description="compare whole trees instead of the history")


if has("source_list"):

    @router.get("/sources", dependencies=READ, summary="Registered sources (secrets never shown)")
    async def list_sources(request: Request, start: int | None = START, count: int | None = COUNT) -> JSONResponse:
        return await call(request, "source_list", start=start, count=count)


if has("source_add"):

    @router.post(
        "/sources", dependencies=WRITE, summary="Register a git source (creates its index if missing)"
    )
    async def add_source(request: Request, body: AddSource) -> JSONResponse:
        return await call(request, "source_add", write=True, **body.params())


if has("source_sync"):

    @router.post("/sources/{name}/sync", dependencies=WRITE, summary="Fetch and re-index what changed; long")
    async def sync_source(request: Request, name: str, body: SyncSource | None = None) -> JSONResponse:
        extra = body.params() if body else {}
        return await call(request, "source_sync", write=True, long=True, source=name, **extra)


if has("source_remove"):

    @router.delete("/sources/{name}", dependencies=WRITE, summary="Remove a source (and its documents)")
    async def remove_source(request: Request, name: str, keep_documents: bool = False) -> JSONResponse:
        return await call(request, "source_remove", write=True, source=name, keep_documents=keep_documents)
