"""``POST /actions/document_index``: the action API as is (``{"action": NAME, ...params}``).

The class each action needs is the action table's, checked by the policy when
the library runs it (an agent-bound token acts as its agent). This server's
caps apply (``top_n``, ``count``) and ADD_DOCUMENTS paths must lie in
``allowed_roots``, exactly as on the dedicated routes.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import JSONResponse

from gitkb.core.errors import InvalidArgument
from gitkb.http.auth import authenticated
from gitkb.http.calls import action
from gitkb.http.limits import TOP_N_DEFAULTS, guarded, run_blocking
from gitkb.http.state import get_state
from gitkb.services.access import policy
from gitkb.services.access.principals import Principal
from gitkb.services.dispatch import scope

router = APIRouter(tags=["actions"])
EXAMPLE = {"action": "SEARCH", "query": "rollback checklist", "index_name": "kb", "top_n": 5}


def _agent_of(request: Request, agent_id: Any) -> str | None:
    """The agent a SEARCH / ASK / search_index runs as: an agent's token's own, else ``agent_id``."""
    who = getattr(request.state, "principal", None) or getattr(request.state, "ui_principal", None)
    agent = who.agent_id if isinstance(who, Principal) and who.is_agent else agent_id
    return agent if isinstance(agent, str) and agent else None


def agent_default(request: Request, agent_id: Any) -> int | None:
    """The binding's default top_n of the agent a SEARCH / ASK / search_index runs as (an agent's
    token: its own; else ``agent_id``), or None when it runs as no agent. A catalog read: call it
    off the event loop (``run_blocking``)."""
    agent = _agent_of(request, agent_id)
    return None if agent is None else scope.load_scope(get_state(request).workspace.ctx, agent).default_top_k


async def guard_params(
    request: Request, name: str, params: dict[str, Any], *, top_n_default: int | None = None
) -> dict[str, Any]:
    """This server's limits on an action's parameters (shared with the dedicated routes), also on
    one left out whose default lies over them; ``top_n_default``: the caller's own (search_index).
    An agent's binding's default is read from the catalog on a worker thread, never on the loop."""
    state = get_state(request)
    cfg = state.cfg
    name = policy.document_index_action(name).name
    left_out = params.get("top_n") is None and cfg.max_top_n is not None
    if name in TOP_N_DEFAULTS and top_n_default is None and left_out and _agent_of(request, None):
        top_n_default = await run_blocking(state, agent_default, request, None)  # an agent's: its binding's
    who = getattr(request.state, "principal", None) or getattr(request.state, "ui_principal", None)
    return guarded(
        cfg, name, params, who if isinstance(who, Principal) else None, top_n_default=top_n_default
    )


@router.post(
    "/actions/document_index",
    dependencies=[Depends(authenticated)],
    summary="The action API (CREATE_INDEX, ADD_DOCUMENTS, ADD_TEXT, SEARCH, ASK, ...)",
)
async def document_index(
    request: Request,
    body: dict[str, Any] = Body(..., examples=[EXAMPLE]),  # noqa: B008
) -> JSONResponse:
    params = dict(body)
    name = params.pop("action", None)
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgument("the body needs 'action' (e.g. SEARCH, ADD_TEXT, LIST_INDICES)")
    spec = policy.document_index_action(name.strip())
    params = await guard_params(request, spec.name, params)
    return await action(request, spec.name, write=not spec.is_read, long=spec.promotable, **params)
