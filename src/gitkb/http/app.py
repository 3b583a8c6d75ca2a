"""``create_app(settings) -> FastAPI``: the HTTP API over one Workspace.

One Workspace per app, opened in the lifespan (it takes the writer lease when
it is free and runs the writer thread) and closed on shutdown. Every route is a
thin translation onto a Workspace method (see ``gitkb.http.calls``); errors
come out in one shape (``gitkb.http.errors``); OpenAPI at ``/openapi.json``,
docs at ``/docs``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio.to_thread
from fastapi import FastAPI

from gitkb.core.config import Settings
from gitkb.http.config import ServerConfig, load_server_config
from gitkb.http.discovery import remove_record, write_record
from gitkb.http.errors import install_handlers
from gitkb.http.limits import BodyGate
from gitkb.http.state import AppState

if TYPE_CHECKING:
    from gitkb.workspace import Workspace

DESCRIPTION = """Searchable knowledge bases over documentation in git, with reviewed agent edits.

Authenticate with `Authorization: Bearer <token>` (tokens and their scopes are in
`[[server.tokens]]` of gitkb.toml; a server without tokens answers loopback only).
Every error has one shape: `{"ok": false, "error": {"code", "message", "next_steps"?, "details"?}}`.
Long calls answer `{"status": "working", "job_id", "poll_with": "get_job_result"}`: poll `GET /jobs/{job_id}`.
"""


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
    from gitkb import __version__
    from gitkb.http.routes import all_routers

    cfg = server or load_server_config(settings)
    state = AppState(settings=settings, cfg=cfg)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = workspace is None
        if owned:
            from gitkb.workspace import Workspace

            state.ws = await anyio.to_thread.run_sync(lambda: Workspace(settings=settings))
        else:
            state.ws = workspace
        recorded = False
        if advertise and state.workspace.ctx.is_writer:
            write_record(settings.home, advertise, auth=cfg.auth_enabled, writer=True)
            recorded = True
        try:
            yield
        finally:
            if recorded:
                remove_record(settings.home)
            ws, state.ws = state.ws, None
            if owned and ws is not None:
                await anyio.to_thread.run_sync(ws.close)

    app = FastAPI(
        title="gitkb",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.gitkb = state
    install_handlers(app, settings.home)
    app.add_middleware(BodyGate, cfg=cfg)
    for router in all_routers():
        app.include_router(router)
    return app
