"""``create_app(settings) -> FastAPI``: the HTTP API over one Workspace.

One Workspace per app, opened in the lifespan (it takes the writer lease when
it is free and runs the writer thread) and closed on shutdown. Every route is a
thin translation onto a Workspace method (see ``gitkb.http.calls``); errors
come out in one shape (``gitkb.http.errors``); OpenAPI at ``/openapi.json``,
docs at ``/docs``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI

from gitkb import __version__
from gitkb.core.config import Settings
from gitkb.core.errors import StoreUnavailable
from gitkb.http.config import ServerConfig, load_server_config
from gitkb.http.discovery import read_record, remove_record, write_record
from gitkb.http.docs_page import mount_docs
from gitkb.http.errors import document_errors, install_handlers
from gitkb.http.hosts import HostGate
from gitkb.http.limits import BodyGate
from gitkb.http.metrics import HttpMeters, RequestMeter
from gitkb.http.metrics import router as metrics_router
from gitkb.http.routes import all_routers
from gitkb.http.routes.search import document_top_n
from gitkb.http.state import AppState
from gitkb.http.ui import mount_ui
from gitkb.workspace import Workspace

DESCRIPTION = """Searchable knowledge bases over documentation in git, with reviewed agent edits.

Authenticate with `Authorization: Bearer <token>` (tokens and their scopes are in
`[[server.tokens]]` of gitkb.toml; a server without tokens answers loopback only).
Every request's `Host` must be localhost, 127.0.0.1, [::1] or a name in `[server] public_host` /
`allowed_hosts` (403 `forbidden` otherwise).
Every JSON answer is one envelope: `{"Success": true, ...}`, or on error
`{"Success": false, "Error": "<one sentence>", "code": "<stable code>", "next_steps": [...], "details": {...}}`
with the HTTP status from the code. List answers page with `start`/`count` and carry
`total_count`, `actual_count`, `has_more`, `next_start`.
Long calls answer `{"status": "working", "job_id", "poll_with": "get_job_result"}`: poll `GET /jobs/{job_id}`.
"""


def refuse_second_embedded_server(settings: Settings) -> None:
    """Embedded Chroma belongs to one process: a second server on the workspace needs a Chroma server."""
    other = read_record(settings.home)
    if other and other.get("pid") != os.getpid() and not settings.chroma_host:
        raise StoreUnavailable(
            f"gitkb serve (pid {other.get('pid')}, {other.get('url')}) already serves {settings.home}"
            " with the embedded vector store, which belongs to one process",
            next_steps=[
                "send requests to that server",
                "or run several servers against a Chroma server: [chroma] host/port in gitkb.toml",
            ],
        )


async def advertise_while_writer(state: AppState, url: str, every_s: float = 2.0) -> None:
    """Keep ``<home>/server.json`` pointing at this server while its Workspace holds the writer
    lease (it may take the lease over later, when the holder goes away)."""
    home = state.settings.home
    while True:
        ws = state.ws
        if ws is not None and ws.ctx.is_writer:
            rec = read_record(home)
            if rec is None or rec.get("pid") != os.getpid():
                write_record(home, url, auth=state.cfg.auth_enabled, writer=True)
        await asyncio.sleep(every_s)


def create_app(
    settings: Settings,
    *,
    server: ServerConfig | None = None,
    workspace: Workspace | None = None,
    advertise: str | None = None,
) -> FastAPI:
    """Build the app. ``server`` defaults to ``[server]`` of the settings plus the environment;
    ``workspace`` lets a caller share an open Workspace (the app then does not close it);
    ``advertise`` is the URL ``gitkb serve`` listens on, recorded in ``<home>/server.json``
    while this app's Workspace holds the writer lease."""
    cfg = server or load_server_config(settings)
    state = AppState(settings=settings, cfg=cfg)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = workspace is None
        if owned:
            refuse_second_embedded_server(settings)
            state.ws = await anyio.to_thread.run_sync(lambda: Workspace(settings=settings))
        else:
            state.ws = workspace
        task = (
            asyncio.get_running_loop().create_task(advertise_while_writer(state, advertise))
            if advertise
            else None
        )
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                remove_record(settings.home)
            # A request that timed out leaves its call running on a worker thread: let it
            # finish before the Workspace (and its SQLite connections) closes under it.
            left = await anyio.to_thread.run_sync(state.drain, cfg.request_timeout_s + 5)
            ws, state.ws = state.ws, None
            if owned and ws is not None and not left:
                await anyio.to_thread.run_sync(ws.close)

    app = FastAPI(
        title="gitkb",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served by mount_docs from package files, not a CDN
    )
    app.state.gitkb = state
    install_handlers(app, settings.home)
    app.state.gitkb_metrics = meters = HttpMeters()  # this app's registry (GET /metrics)
    app.add_middleware(BodyGate, cfg=cfg)
    app.add_middleware(HostGate, cfg=cfg)
    app.add_middleware(RequestMeter, meters=meters)  # added last: outermost, counts refusals too
    for router in all_routers():
        app.include_router(router)
    app.include_router(metrics_router)
    mount_ui(app)  # the web page at /ui (templates and static files in the package)

    mount_docs(app)
    document_top_n(app, cfg)  # /openapi.json: top_n within this server's [server] max_top_n
    document_errors(app)  # /openapi.json: a 422 is the error envelope, as the handler answers it
    return app
