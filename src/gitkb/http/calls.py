"""The one way a route reaches the library: a Workspace method on a worker thread,
its dict answered as is (or as the error shape when it says ``Success: false``).

Long calls go through ``Workspace.promoted``: they answer inline
when quick, else ``{"status": "working", "job_id", "poll_with": "get_job_result"}``.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from fastapi import Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from gitkb.core.errors import InvalidArgument, Unauthorized
from gitkb.http.errors import respond
from gitkb.http.limits import run_blocking
from gitkb.http.state import get_state
from gitkb.services.access.principals import Principal
from gitkb.workspace import Workspace

# Paging query parameters of every list route; the library checks the range (invalid_argument).
START = Query(None, description="the first item, from 0 (out of range: invalid_argument)")
COUNT = Query(None, description="items in the page, 1 to 500 (out of range: invalid_argument)")


@functools.cache
def accepted_params(method: str) -> tuple[frozenset[str], bool]:
    """The keyword parameters ``Workspace.<method>`` takes, and whether it takes ``**kwargs``."""
    sig = inspect.signature(getattr(Workspace, method))
    names = frozenset(
        p.name
        for p in sig.parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in ("self", "progress")
    )
    return names, any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())


def check_params(method: str, params: dict[str, Any]) -> None:
    names, open_ended = accepted_params(method)
    unknown = sorted(set(params) - names)
    if unknown and not open_ended:
        raise InvalidArgument(
            f"unknown field(s) {', '.join(unknown)}; accepted: {', '.join(sorted(names)) or 'none'}"
        )


def clean(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


def principal_name(request: Request) -> str | None:
    p = getattr(request.state, "principal", None)
    return getattr(p, "name", None)


def refuse_unknown_query(request: Request) -> None:
    """A query parameter the route does not declare is refused (``invalid_argument``), not ignored."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    declared = {getattr(p, "alias", None) or p.name for p in dependant.query_params}
    for dep in getattr(dependant, "dependencies", ()):
        declared |= {getattr(p, "alias", None) or p.name for p in dep.query_params}
    unknown = sorted(set(request.query_params) - declared)
    if unknown:
        raise InvalidArgument(
            f"unknown query parameter(s) {', '.join(unknown)}; this route takes: {', '.join(sorted(declared)) or 'none'}",
            details={"unknown_params": unknown},
        )


def caller_view(request: Request) -> Workspace:
    """The Workspace as the authenticated caller (the policy checks every call it makes), its work
    held to ``[server] allowed_roots`` (a reindex's roots, a local-path source's sync: ``held_to``)."""
    state = get_state(request)
    p = getattr(request.state, "principal", None) or getattr(request.state, "ui_principal", None)
    if not isinstance(p, Principal):
        raise Unauthorized("not authenticated")  # pragma: no cover - every route authenticates first
    return state.workspace.as_principal(p).held_to(state.cfg.allowed_roots)


async def call(
    request: Request,
    method: str,
    /,
    *args: Any,
    write: bool = False,
    long: bool = False,
    status: int = 200,
    **params: Any,
) -> JSONResponse:
    """``Workspace.<method>(*args, **params)`` (None values dropped) → the HTTP answer."""
    state = get_state(request)
    refuse_unknown_query(request)
    ws = caller_view(request)
    kwargs = clean(params)
    check_params(method, kwargs)
    if long:
        result = await run_blocking(state, ws.promoted, method, *args, write=True, **kwargs)
    else:
        result = await run_blocking(state, getattr(ws, method), *args, write=write, **kwargs)
    return respond(result, status=status, retry_after_s=state.cfg.busy_retry_after_s)


async def action(
    request: Request, name: str, /, *, write: bool, long: bool = False, **params: Any
) -> JSONResponse:
    """``Workspace.document_index(name, **params)``. Writes go through ``promoted``: the writer
    (in this process or the one holding the lease) runs them as jobs; a quick one answers
    inline, a slow one with its ``job_id``, so no request waits on the writer's queue."""
    return await call(request, "document_index", write=write, long=long or write, action=name, **params)


class Body(BaseModel):
    """A request body for a Workspace method: strict types, unknown fields refused."""

    model_config = ConfigDict(extra="forbid", strict=True)

    def params(self) -> dict[str, Any]:
        return clean(self.model_dump(exclude_unset=True))


class ActionBody(Body):
    """A body for an action of the action API: unknown fields pass through and the action
    API refuses them with the list it accepts (so new action parameters need no route change)."""

    model_config = ConfigDict(extra="allow", strict=True)
