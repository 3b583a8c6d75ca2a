"""``GET /healthz`` (the process answers) and ``GET /readyz`` (catalog and vector store reachable).

Both are open: they say nothing about the data, and name no file, directory or address
(a failure says which check failed and the exception's type only; details go to the log)."""

from __future__ import annotations

import logging
from typing import Any

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from gitkb.http.errors import error_response, ok_body
from gitkb.http.limits import run_blocking
from gitkb.http.state import AppState, get_state
from gitkb.services.operations.status import probe_catalog

router = APIRouter(tags=["health"])
log = logging.getLogger("gitkb.http")


@router.get("/healthz", summary="The process is up")
async def healthz() -> dict[str, Any]:
    return ok_body()


def _catalog(state: AppState) -> str:
    return probe_catalog(state.workspace.ctx)


async def _vectors(state: AppState) -> str:
    s = state.settings
    if s.chroma_host:
        url = f"http://{s.chroma_host}:{s.chroma_port or 8000}/api/v2/heartbeat"
        async with httpx.AsyncClient(timeout=2.0, headers=s.chroma_headers) as client:
            r = await client.get(url)
            r.raise_for_status()
        return "ok (chroma server)"
    path = s.vectors_path
    probe = path if path.exists() else path.parent
    if not probe.is_dir():
        raise OSError(f"{probe} is not a directory")
    return "ok (embedded chroma)"


def _failed(what: str, exc: Exception) -> str:
    log.warning("readyz: %s unreachable: %s", what, exc)
    return f"unreachable ({type(exc).__name__})"


@router.get("/readyz", summary="The catalog and the vector store are reachable")
async def readyz(request: Request) -> JSONResponse:
    state = get_state(request)
    checks: dict[str, Any] = {}
    engine: str | None = None
    failed: list[str] = []
    try:
        engine = await run_blocking(state, _catalog, state)
        checks["catalog"] = "ok"
    except Exception as exc:  # noqa: BLE001 - a probe reports, it does not crash
        checks["catalog"] = _failed("catalog", exc)
        failed.append("catalog")
    try:
        checks["vectors"] = await _vectors(state)
    except Exception as exc:  # noqa: BLE001
        checks["vectors"] = _failed("vectors", exc)
        failed.append("vectors")
    if failed:
        return error_response(
            "store_unavailable",
            f"not ready: {', '.join(failed)} unreachable",
            details={"checks": checks},
            next_steps=["check the Chroma server and the workspace directory; GET /readyz again"],
        )
    # catalog_engine: "sqlite" or "postgresql" (never its address)
    return JSONResponse(ok_body(checks=checks, writer=state.workspace.ctx.is_writer, catalog_engine=engine))
