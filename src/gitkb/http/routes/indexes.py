"""Indexes: list, create, stats, rename, delete, rechunk (all through the action API)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from gitkb.http.auth import authenticated
from gitkb.http.calls import ActionBody, action

AUTH = [Depends(authenticated)]  # who is calling; the policy decides what they may do
router = APIRouter(tags=["indexes"])


class CreateIndex(ActionBody):
    index_name: str = Field(description="[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
    chunk_size: int | None = None
    chunk_overlap: int | None = None
    chunk_strategy: str | None = Field(None, description="sentence, one_chunk_per_doc or auto")
    embeddings: bool | None = None
    settings: dict[str, Any] | None = None


class RenameIndex(ActionBody):
    new_index_name: str


class SearchSettings(ActionBody):
    settings: dict[str, Any] | None = Field(
        None,
        description="fusion (score|rrf), semantic_weight (0..1), rrf_k, bm25_k1, bm25_b; a null value drops that key",
    )
    reset: bool | None = Field(None, description="drop the index's own search settings first")


class Rechunk(ActionBody):
    chunk_size: int | None = None
    chunk_overlap: int | None = None
    chunk_strategy: str | None = None


@router.get("/indexes", dependencies=AUTH, summary="List indexes (LIST_INDICES)")
async def list_indexes(request: Request) -> JSONResponse:
    return await action(request, "LIST_INDICES", write=False)


@router.post("/indexes", dependencies=AUTH, summary="Create an index (CREATE_INDEX)")
async def create_index(request: Request, body: CreateIndex) -> JSONResponse:
    return await action(request, "CREATE_INDEX", write=True, **body.params())


@router.get("/indexes/stats", dependencies=AUTH, summary="Per-index statistics (GET_INDICES_STATS)")
async def index_stats(request: Request) -> JSONResponse:
    return await action(request, "GET_INDICES_STATS", write=False)


@router.post("/indexes/{index_name}/rename", dependencies=AUTH, summary="Rename an index (RENAME_INDEX)")
async def rename_index(request: Request, index_name: str, body: RenameIndex) -> JSONResponse:
    return await action(request, "RENAME_INDEX", write=True, index_name=index_name, **body.params())


@router.get(
    "/indexes/{index_name}/search-settings",
    dependencies=AUTH,
    summary="How an index is ranked, and where each value comes from (GET_SEARCH_SETTINGS)",
)
async def get_search_settings(request: Request, index_name: str) -> JSONResponse:
    return await action(request, "GET_SEARCH_SETTINGS", write=False, index_name=index_name)


@router.post(
    "/indexes/{index_name}/search-settings",
    dependencies=AUTH,
    summary="Set how an index is ranked: fusion, weights, BM25 k1/b (SET_SEARCH_SETTINGS)",
)
async def set_search_settings(request: Request, index_name: str, body: SearchSettings) -> JSONResponse:
    return await action(request, "SET_SEARCH_SETTINGS", write=True, index_name=index_name, **body.params())


@router.delete("/indexes/{index_name}", dependencies=AUTH, summary="Delete an index (DELETE_INDEX)")
async def delete_index(request: Request, index_name: str) -> JSONResponse:
    return await action(request, "DELETE_INDEX", write=True, index_name=index_name)


@router.post(
    "/indexes/{index_name}/rechunk",
    dependencies=AUTH,
    summary="Re-chunk an index with new settings (RECHUNK); long: may answer with a job_id",
)
async def rechunk(request: Request, index_name: str, body: Rechunk) -> JSONResponse:
    return await action(request, "RECHUNK", write=True, long=True, index_name=index_name, **body.params())
