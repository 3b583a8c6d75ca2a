"""The one policy: may this principal call this action with these parameters?

``check(principal, name, params)`` is asked once per call, by the library's
dispatcher (``gitkb.workspace``), whichever interface the call came through:

1. the action must be in the action table (``gitkb.core.action_table``);
2. its parameters must be the table's: unknown ones are ``invalid_argument``
   naming them, required ones must be present, at most one of each exclusive
   group, integers within their range; in-process parameters (callbacks) only
   from the local operator;
3. the principal must hold the action's class. Agents are never offered an
   action the table does not mark for agents, and never ``operate``,
   ``review`` or ``admin``; which indexes and sources an agent reaches, and in
   which binding mode, is decided against its bindings by
   ``gitkb.services.dispatch.scope``.

Deny by default: anything not in the table is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gitkb.core import action_table as table
from gitkb.core.action_table import Action
from gitkb.core.errors import Forbidden, InvalidArgument
from gitkb.services.access.principals import AGENT_CLASSES, Principal


def action(name: Any) -> Action:
    """The table entry of ``name``; anything else is refused."""
    spec = table.get(name) if isinstance(name, str) else None
    if spec is None:
        raise InvalidArgument(f"unknown action {name!r}")
    return spec


def document_index_action(name: Any) -> Action:
    """A ``document_index`` action by name (any case)."""
    if isinstance(name, str) and name.upper() in table.DOCUMENT_INDEX_NAMES:
        return table.ACTIONS[name.upper()]
    raise InvalidArgument(
        f"unknown action {name!r}; valid actions: {', '.join(sorted(table.DOCUMENT_INDEX_NAMES))}",
    )


def _present(v: Any) -> bool:
    return v is not None and v != ""


def validate(spec: Action, params: Mapping[str, Any], *, local: bool = True) -> None:
    """Refuse parameters the table does not give this action (nothing has run yet)."""
    allowed = spec.fields
    unknown = sorted(k for k in params if k not in allowed or (allowed[k].local_only and not local))
    if unknown:
        shown = ", ".join(p.name for p in spec.wire_params) or "nothing"
        raise InvalidArgument(
            f"{spec.name} does not take {', '.join(unknown)}; it takes: {shown}",
            details={"unknown_params": unknown},
        )
    missing = [p for p in spec.required if not _present(params.get(p))]
    if missing:
        raise InvalidArgument(f"{spec.name} needs {', '.join(missing)}")
    for group in spec.exclusive:
        given = [g for g in group if _present(params.get(g))]
        if len(given) > 1:  # groups are pairs
            raise InvalidArgument(f"{spec.name} takes one of {' or '.join(group)}: both were given")
    for name, value in params.items():
        schema = allowed[name].schema
        if schema.get("type") != "integer" or value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgument(f"{name} must be an integer, got {value!r}")
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            span = f"from {lo} to {hi}" if hi is not None else f">= {lo}"
            raise InvalidArgument(f"{name} must be {span}, got {value}", details={"limit": hi})


def authorize(principal: Principal, spec: Action) -> None:
    """Whether the principal's classes allow the action at all (targets are checked by scope)."""
    if principal.is_agent:
        if not spec.agents or spec.cls not in AGENT_CLASSES:
            raise Forbidden(
                f"{spec.name} is not available to agents (it needs the {spec.cls!r} class)",
                details={"required_class": spec.cls},
                next_steps=["ask an operator to run it (CLI: " + (spec.cli or "gitkb") + ")"],
            )
        if not principal.has(spec.cls):
            raise Forbidden(
                f"agent {principal.agent_id!r} has no binding in a mode that allows {spec.name}"
                f" (it needs {spec.cls!r}; its bindings allow {', '.join(sorted(principal.classes)) or 'nothing'})",
                details={"required_class": spec.cls, "classes": sorted(principal.classes)},
                next_steps=[
                    f"an operator can bind it in a mode that allows it (gitkb agent assign AGENT KB --mode {spec.cls})"
                ],
            )
        return
    if not principal.has(spec.cls):
        raise Forbidden(
            f"{principal.label} lacks the {spec.cls!r} class that {spec.name} needs",
            details={"required_class": spec.cls, "classes": sorted(principal.classes)},
            next_steps=[f"use a token with the {spec.cls!r} scope"],
        )


def check(principal: Principal, name: str, params: Mapping[str, Any]) -> Action:
    """Validate and authorize one call; raises ``invalid_argument`` or ``forbidden``."""
    spec = action(name)
    validate(spec, params, local=principal.is_local)
    authorize(principal, spec)
    return spec


def allowed_actions(principal: Principal, names: tuple[str, ...] | None = None) -> list[Action]:
    """The actions (of ``names``, default all) this principal may call at all, in table order."""
    out = []
    for spec in table.ACTIONS.values():
        if names is not None and spec.name not in names:
            continue
        try:
            authorize(principal, spec)
        except Forbidden:
            continue
        out.append(spec)
    return out
