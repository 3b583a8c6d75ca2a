"""Documents of an index: add by server-side path, add text, list, get, delete, rename.

Paths inside an index contain slashes, so routes that name a document by path
take it as the tail of the URL: ``/indexes/{index}/files/{filepath:path}``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from gitkb.http.auth import authenticated
from gitkb.http.calls import ActionBody, action
from gitkb.http.routes.actions import guard_params

AUTH = [Depends(authenticated)]  # who is calling; the policy decides what they may do
router = APIRouter(tags=["documents"])


class Placement(ActionBody):
    chunk_size: int | None = None
    chunk_overlap: int | None = None
    chunk_strategy: str | None = None
    tenant: str | None = None
    tier: str | None = Field(None, description="hot, warm or cold")
    ttl_seconds: int | float | None = None


class AddDocuments(Placement):
    filepath: str = Field(description="an absolute path on the server, inside [server] allowed_roots")
    base_path: str | None = None


class AddText(Placement):
    text: str
    metadata: dict[str, Any] | None = None
    filepath: str | None = Field(None, description="the name the text is stored under")


class RenameDocument(ActionBody):
    filepath: str
    new_filename: str


async def _guarded(
    request: Request, name: str, *, write: bool, long: bool = False, **params: Any
) -> JSONResponse:
    return await action(request, name, write=write, long=long, **await guard_params(request, name, params))


@router.post(
    "/indexes/{index_name}/documents",
    dependencies=AUTH,
    summary="Add files or a directory by server-side path (ADD_DOCUMENTS); long: may answer with a job_id",
)
async def add_documents(request: Request, index_name: str, body: AddDocuments) -> JSONResponse:
    return await _guarded(
        request, "ADD_DOCUMENTS", write=True, long=True, index_name=index_name, **body.params()
    )


@router.post("/indexes/{index_name}/texts", dependencies=AUTH, summary="Add a text (ADD_TEXT)")
async def add_text(request: Request, index_name: str, body: AddText) -> JSONResponse:
    return await action(request, "ADD_TEXT", write=True, index_name=index_name, **body.params())


@router.get("/indexes/{index_name}/documents", dependencies=AUTH, summary="List documents (LIST_DOCUMENTS)")
async def list_documents(
    request: Request,
    index_name: str,
    path_filter: str | None = None,
    query: str | None = None,
    show_files_only: bool | None = None,
    start: int | None = Query(None, description="from 0 (out of range: invalid_argument)"),
    count: int | None = Query(None, description="1 to 50 (out of range: invalid_argument)"),
) -> JSONResponse:
    return await _guarded(
        request,
        "LIST_DOCUMENTS",
        write=False,
        index_name=index_name,
        path_filter=path_filter,
        query=query,
        show_files_only=show_files_only,
        start=start,
        count=count,
    )


@router.get(
    "/indexes/{index_name}/documents/{file_id}",
    dependencies=AUTH,
    summary="Read a document by id (GET_DOCUMENT)",
)
async def get_document(
    request: Request,
    index_name: str,
    file_id: str,
    pagination_mode: str | None = Query(None, description="lines, chars or chunks"),
    start: int | None = Query(None, ge=0),
    count: int | None = Query(None, ge=1),
) -> JSONResponse:
    return await _guarded(
        request,
        "GET_DOCUMENT",
        write=False,
        index_name=index_name,
        file_id=file_id,
        pagination_mode=pagination_mode,
        start=start,
        count=count,
    )


@router.get(
    "/indexes/{index_name}/files/{filepath:path}",
    dependencies=AUTH,
    summary="Read a document by path (GET_DOCUMENT)",
)
async def get_file(
    request: Request,
    index_name: str,
    filepath: str,
    pagination_mode: str | None = Query(None, description="lines, chars or chunks"),
    start: int | None = Query(None, ge=0),
    count: int | None = Query(None, ge=1),
) -> JSONResponse:
    return await _guarded(
        request,
        "GET_DOCUMENT",
        write=False,
        index_name=index_name,
        filepath=filepath,
        pagination_mode=pagination_mode,
        start=start,
        count=count,
    )


@router.delete(
    "/indexes/{index_name}/documents/{file_id}",
    dependencies=AUTH,
    summary="Delete a document by id (DELETE_DOCUMENT)",
)
async def delete_document(request: Request, index_name: str, file_id: str) -> JSONResponse:
    return await action(request, "DELETE_DOCUMENT", write=True, index_name=index_name, file_id=file_id)


@router.delete(
    "/indexes/{index_name}/files/{filepath:path}",
    dependencies=AUTH,
    summary="Delete a document by path (DELETE_DOCUMENT)",
)
async def delete_file(request: Request, index_name: str, filepath: str) -> JSONResponse:
    return await action(request, "DELETE_DOCUMENT", write=True, index_name=index_name, filepath=filepath)


@router.post(
    "/indexes/{index_name}/documents/rename",
    dependencies=AUTH,
    summary="Rename a document (RENAME_DOCUMENT)",
)
async def rename_document(request: Request, index_name: str, body: RenameDocument) -> JSONResponse:
    return await action(request, "RENAME_DOCUMENT", write=True, index_name=index_name, **body.params())
