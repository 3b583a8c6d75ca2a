"""Knowledge bases (named bundles of indexes) and agent bindings (issue: MCP).
Routes appear once the library offers the method."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from gitkb.http.auth import require
from gitkb.http.calls import ActionBody, call, has

router = APIRouter(tags=["knowledge bases"])
READ = [Depends(require("read"))]
ADMIN = [Depends(require("admin"))]


class CreateKb(ActionBody):
    name: str
    indexes: list[str]


class AssignAgent(ActionBody):
    knowledge_bases: list[str]


if has("list_knowledge_bases"):

    @router.get("/kbs", dependencies=READ, summary="Knowledge bases")
    async def list_kbs(request: Request) -> JSONResponse:
        return await call(request, "list_knowledge_bases")


if has("create_knowledge_base"):

    @router.post("/kbs", dependencies=ADMIN, summary="Create a knowledge base from index names")
    async def create_kb(request: Request, body: CreateKb) -> JSONResponse:
        return await call(request, "create_knowledge_base", write=True, **body.params())


if has("delete_knowledge_base"):

    @router.delete("/kbs/{name}", dependencies=ADMIN, summary="Delete a knowledge base")
    async def delete_kb(request: Request, name: str) -> JSONResponse:
        return await call(request, "delete_knowledge_base", write=True, name=name)
