"""Principals: who is calling.

* ``local`` — the operator (CLI, library, ``gitkb mcp``, the HTTP API with no token configured):
  every class. ``[server] allowed_roots`` is not a principal's: an interface that others can reach
  applies it to every caller, this one too (the HTTP API and its web page, and ``gitkb mcp
  --transport http``, whose operator session is ``local``, and the webhooks: server-side paths,
  ``gitkb.http.limits``; the roots a reindex walks and a local-path source a sync fetches,
  ``Workspace.held_to`` and ``gitkb.core.disk_roots``); in-process (CLI, library, ``gitkb mcp``
  over stdio) it does not apply.
* ``token`` — an HTTP bearer token: its scopes are classes (``write`` also grants ``operate``, as the
  ``write`` scope always allowed reindex, sync and embeddings).
* ``agent`` — an agent bound to knowledge bases; its classes come from its bindings' modes and never
  include ``operate``, ``review`` or ``admin``.
* ``forge`` — a signed forge webhook: it may only sync the source it signed for.
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass

from gitkb.core.action_table import CLASSES, classes_of

# What each configured token scope grants (scopes are classes; ``write`` keeps its old meaning).
SCOPE_GRANTS: dict[str, frozenset[str]] = {c: frozenset({c}) for c in CLASSES} | {
    "write": frozenset({"write", "operate"}),
}
AGENT_CLASSES = frozenset({"read", "propose", "write"})


@dataclass(frozen=True)
class Principal:
    kind: str  # local, token, agent, forge
    name: str
    classes: frozenset[str]
    agent_id: str | None = None

    @property
    def label(self) -> str:
        """``agent:<id>``, ``token:<name>``, ``local:<user>`` or ``forge:<provider>``."""
        return self.name if self.kind == "local" else f"{self.kind}:{self.name}"

    @property
    def scopes(self) -> frozenset[str]:  # the HTTP layer's older word for classes
        return self.classes

    @property
    def agent(self) -> str | None:
        return self.agent_id

    @property
    def is_agent(self) -> bool:
        return self.kind == "agent"

    @property
    def is_local(self) -> bool:
        return self.kind == "local"

    def has(self, cls: str) -> bool:
        return cls in self.classes


def local() -> Principal:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # pragma: no cover - no passwd entry
        user = "operator"
    return Principal("local", f"local:{user}", frozenset(CLASSES))


def token(
    name: str, scopes: frozenset[str] | set[str] | tuple[str, ...], agent_id: str | None = None
) -> Principal:
    """A bearer token; one bound to an agent (``agent = "ID"``) acts as that agent."""
    if agent_id:
        return agent(agent_id)
    granted: set[str] = set()
    for s in scopes:
        granted |= SCOPE_GRANTS.get(s, frozenset())
    return Principal("token", name, classes_of(granted))


def agent(agent_id: str, classes: frozenset[str] = AGENT_CLASSES) -> Principal:
    """An agent with the classes its binding modes grant (at most read, propose, write); what it
    may do on each index is decided against its bindings at call time."""
    return Principal("agent", agent_id, classes & AGENT_CLASSES, agent_id=agent_id)


def forge(provider: str) -> Principal:
    return Principal("forge", provider, frozenset({"read", "operate"}))
