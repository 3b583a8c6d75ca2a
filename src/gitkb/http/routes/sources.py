"""Git sources: add, list, sync, remove (issue: git sources). A sync is long work and may
answer with a job_id.

A source's secret is a ``credential`` named in ``[[credentials]]`` of gitkb.toml (the library
refuses ``auth``/``forge`` secret references). A local-path or ``file://`` URL reads this
server's disk: ``admin`` only, and inside ``[server] allowed_roots``."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, urlsplit

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from gitkb.core.errors import InvalidArgument
from gitkb.core.hosts import is_local_url, url_authority
from gitkb.http.auth import authenticated
from gitkb.http.calls import COUNT, START, ActionBody, Body, call
from gitkb.http.limits import may_run, server_path
from gitkb.http.state import get_state
from gitkb.services.access.principals import Principal

AUTH = [Depends(authenticated)]  # who is calling; the policy decides what they may do
router = APIRouter(tags=["sources"])


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
    credential: str | None = Field(None, description="a [[credentials]] entry of gitkb.toml, bound to hosts")
    auth: dict[str, Any] | None = Field(None, description="refused: name a credential instead")
    webhook_secret: str | None = Field(
        None,
        description="verifies this source's forge webhooks (else GITKB_WEBHOOK_SECRET); never shown again",
        json_schema_extra={"writeOnly": True},
    )


_HELPER = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*::")


def checked_url(request: Request, url: str) -> str:
    """A remote URL as is; a local path or ``file://`` URL (it reads this server's disk) only with
    the ``admin`` class (as every source_add) and inside ``[server] allowed_roots`` -- the resolved path is
    what is cloned."""
    if _HELPER.match(url.strip()):
        raise InvalidArgument("git remote helpers (transport::address) are not accepted over HTTP")
    if not is_local_url(url):
        if url_authority(url) is None:
            raise InvalidArgument(f"url {url!r} names no host: use https://, ssh:// or git://")
        return url
    # Adding any source is admin (the policy checks it when the library runs); here only where it may
    # read, and only for a caller who may add one (else nothing is said of the disk: the library refuses).
    who = getattr(request.state, "principal", None)
    if not may_run(who if isinstance(who, Principal) else None, "source_add"):
        return url
    path = url.strip()
    if "://" in path:
        parts = urlsplit(path)
        if parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
            raise InvalidArgument("a file:// url must be file:///absolute/path")
        path = unquote(parts.path)
    return server_path(get_state(request).cfg, path, name="url")


class SyncSource(Body):
    commit: str | None = Field(
        None, description="sync to this commit of the tracked branch instead of its head (never an older one)"
    )
    full: bool = Field(False, description="compare whole trees instead of the history")


@router.get("/sources", dependencies=AUTH, summary="Registered sources (secrets never shown)")
async def list_sources(
    request: Request, start: int | None = START, count: int | None = COUNT
) -> JSONResponse:
    return await call(request, "source_list", start=start, count=count)


@router.post("/sources", dependencies=AUTH, summary="Register a git source (creates its index if missing)")
async def add_source(request: Request, body: AddSource) -> JSONResponse:
    params = body.params()
    params["url"] = checked_url(request, body.url)
    return await call(request, "source_add", write=True, **params)


@router.post("/sources/{source}/sync", dependencies=AUTH, summary="Fetch and re-index what changed; long")
async def sync_source(request: Request, source: str, body: SyncSource | None = None) -> JSONResponse:
    extra = body.params() if body else {}
    return await call(request, "source_sync", write=True, long=True, source=source, **extra)


class RollbackSource(Body):
    commit: str = Field(description="an older commit of the tracked branch to move the indexes back to")


@router.post(
    "/sources/{source}/rollback",
    dependencies=AUTH,
    summary="Admin: move a source's indexes back to an older commit of its branch; long",
)
async def rollback_source(request: Request, source: str, body: RollbackSource) -> JSONResponse:
    return await call(request, "source_rollback", write=True, long=True, source=source, **body.params())


@router.delete("/sources/{source}", dependencies=AUTH, summary="Remove a source (and its documents)")
async def remove_source(request: Request, source: str, keep_documents: bool = False) -> JSONResponse:
    return await call(request, "source_remove", write=True, source=source, keep_documents=keep_documents)
