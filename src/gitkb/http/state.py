"""What one app holds: its settings, server config, the Workspace and the thread limiters."""

from __future__ import annotations

import threading
import time
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
    _busy: int = field(init=False, default=0)
    _idle: threading.Condition = field(init=False, default_factory=threading.Condition)

    def __post_init__(self) -> None:
        # Two pools: a burst of writes (which queue on the single writer) never
        # takes the threads that searches need.
        self.read_limiter = CapacityLimiter(self.cfg.read_threads)
        self.write_limiter = CapacityLimiter(self.cfg.write_threads)

    def enter(self) -> list[str]:
        """Count a Workspace call about to be handed to a worker thread; returns its ticket."""
        with self._idle:
            self._busy += 1
        return ["pending"]

    def start(self, ticket: list[str]) -> bool:
        """On the worker thread: False if the caller gave up before the call started."""
        with self._idle:
            if ticket[0] == "abandoned":
                return False
            ticket[0] = "started"
            return True

    def leave(self, ticket: list[str], *, abandoning: bool = False) -> None:
        """The call ended (on its thread), or its caller gave up before it started."""
        with self._idle:
            if abandoning:
                if ticket[0] != "pending":
                    return  # it runs: its thread will leave
                ticket[0] = "abandoned"
            elif ticket[0] != "started":
                return
            else:
                ticket[0] = "done"
            self._busy -= 1
            self._idle.notify_all()

    def drain(self, timeout: float) -> int:
        """Wait until no Workspace call runs (a timed-out request's call goes on in its thread);
        the Workspace must not close under one. Returns how many still run after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._busy and (left := deadline - time.monotonic()) > 0:
                self._idle.wait(left)
            return self._busy

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
