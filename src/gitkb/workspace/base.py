"""The one place a Workspace call is checked and enveloped (``tool``), and what every facade of the
Workspace shares (``WorkspaceBase``: settings, the principal, the opened ``Context``, the scope).
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gitkb.core import action_table, disk_roots
from gitkb.core.config import Settings
from gitkb.core.errors import GitkbError, InvalidArgument, write_crash_log
from gitkb.services.access import policy
from gitkb.services.access.principals import Principal
from gitkb.services.changes.checkouts import refresh_moved
from gitkb.services.changes.sources import reach
from gitkb.services.context import Context
from gitkb.services.dispatch import scope

log = logging.getLogger("gitkb")
F = TypeVar("F", bound=Callable[..., dict[str, Any]])


def internal_error_response(home: Path, exc: BaseException) -> dict[str, Any]:
    write_crash_log(home, exc)
    return {
        "Success": False,
        "Error": f"internal error ({type(exc).__name__}: {exc}); details in {home / 'logs' / 'gitkb.log'}",
        "code": "internal",
    }


def tool(fn: F) -> F:
    """Envelope the method's dict (``{"Success": True, **out}``; the method returns the service's
    dict as is), translate domain errors into the response shape; never let a traceback out.

    Before the method runs, the policy checks the call (``gitkb.services.access.policy``): the
    method's name is its action in the action table, the arguments are its parameters, and the
    Workspace's principal must hold its class. ``document_index`` and ``promoted`` check the
    action they are given instead.
    """
    name = fn.__name__
    sig = inspect.signature(fn)
    dispatches = name in ("document_index", "promoted")

    @functools.wraps(fn)
    def wrapper(self: WorkspaceBase, *args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            if not dispatches:
                self._check(name, _bound(sig, name, self, args, kwargs))
            return {"Success": True, **fn(self, *args, **kwargs)}  # the one place a success is enveloped
        except GitkbError as exc:
            return exc.to_response()
        except Exception as exc:  # noqa: BLE001 - the contract: no traceback leaves a tool
            return internal_error_response(self.settings.home, exc)

    return wrapper  # type: ignore[return-value]


def _bound(sig: inspect.Signature, name: str, ws: Any, args: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments of one call by parameter name; unknown or missing ones are ``invalid_argument``."""
    try:
        bound = sig.bind(ws, *args, **kwargs)
    except TypeError as exc:
        allowed = [p for p in sig.parameters if p not in ("self", "progress")]
        unknown = sorted(set(kwargs) - set(sig.parameters))
        what = f"does not take {', '.join(unknown)}" if unknown else f"was called wrongly ({exc})"
        raise InvalidArgument(
            f"{name} {what}; it takes: {', '.join(allowed) or 'nothing'}", details={"unknown_params": unknown}
        ) from None
    out = {k: v for k, v in bound.arguments.items() if k != "self"}
    return out


class WorkspaceBase:
    """What the facades of ``Workspace`` share; ``Workspace.__init__`` sets these."""

    settings: Settings
    principal: Principal
    ctx: Context
    # the roots of this server's disk the view's work may read ([server] allowed_roots of an
    # interface others reach: Workspace.held_to); None: the operator's own (CLI, library, stdio MCP)
    disk_roots: tuple[Path, ...] | None = None

    @property
    def home(self) -> Path:
        return self.settings.home

    def _check(self, name: str, params: dict[str, Any]) -> None:
        policy.check(self.principal, name, params)
        self._reach(name, params)
        self._follow_checkouts()

    def _reach(self, name: str, params: dict[str, Any]) -> None:
        """A held view's call of an action that fetches from, pushes to or writes a source's url
        (``reaches_source`` in the action table): refused before it runs when that url is a path of
        this disk outside the view's roots (``reach.refuse_call``). An agent is told only of a
        source it may read, in words that name no path of the server."""
        spec = action_table.ACTIONS.get(name)
        if self.disk_roots is None or spec is None or spec.reaches_source is None:
            return
        visible = None
        if self.principal.is_agent:
            sc = self._scope()

            def visible(row: Any, index_id: str | None) -> bool:
                ids = [index_id] if index_id is not None else list(row.index_ids)
                return any(sc.can_read(i) for i in ids)

        param = spec.reaches_source
        reach.refuse_call(self.ctx, name, param, params.get(param), self.disk_roots, visible=visible)

    def _follow_checkouts(self) -> None:
        """This node's checkouts follow the synced commit, whichever node synced (one indexed query)."""
        try:
            refresh_moved(self.ctx)
        except Exception as exc:  # noqa: BLE001 - a checkout that cannot follow never fails a call
            log.warning("refreshing this node's checkouts failed: %s", exc)

    def _held(self, kind: str, params: dict[str, Any]) -> dict[str, Any]:
        """A job's ``params`` as this view queues it: an action whose job reads the disk
        (``reads_disk`` in the action table) from a held view carries the roots it is held to
        (``disk_roots.HELD_TO``; after the policy's check, so no caller can name it), checked
        when it is queued and again when it runs."""
        spec = action_table.ACTIONS.get(kind)
        if self.disk_roots is None or spec is None or not spec.reads_disk:
            return params
        return {**params, disk_roots.HELD_TO: [str(r) for r in self.disk_roots]}

    def _scope(self) -> scope.AgentScope:
        """The agent's scope for an agent principal, else the operator's (no limit)."""
        return scope.load_scope(self.ctx, self.principal.agent_id if self.principal.is_agent else None)

    def _reviewer(self, given: str) -> str:
        """Who decided: a token's name, never one the caller chose (the operator may name one)."""
        return given if self.principal.is_local else self.principal.name

    def _caller(self) -> str | None:
        """Who a job is recorded for (None for the local operator)."""
        return None if self.principal.is_local else self.principal.label
