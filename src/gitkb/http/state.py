"""What one app holds: its settings, server config, the Workspace and the thread limiters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from anyio import CapacityLimiter
from fastapi import Request

from gitkb.core.config import Settings
from gitkb.core.errors import StoreUnavailable
from gitkb.http.config import ServerConfig

if TYPE_CHECKING:
    from gitkb.workspace import Workspace


@dataclass
class AppState:
    settings: Settings
    cfg: ServerConfig
    ws: Workspace | None = None
    read_limiter: CapacityLimiter = field(init=False)
    write_limiter: CapacityLimiter = field(init=False)

    def __post_init__(self) -> None:
        # Two pools: a burst of writes (which queue on the single writer) never
        # takes the threads that searches need.
        self.read_limiter = CapacityLimiter(self.cfg.read_threads)
        self.write_limiter = CapacityLimiter(self.cfg.write_threads)

    @property
    def workspace(self) -> Workspace:
        if self.ws is None:
            raise StoreUnavailable("the workspace is not open (the server is starting or stopping)")
        return self.ws


def get_state(request: Request) -> AppState:
    state = getattr(request.app.state, "gitkb", None)
    if not isinstance(state, AppState):  # pragma: no cover - create_app always sets it
        raise StoreUnavailable("the app was not built by create_app")
    return state
