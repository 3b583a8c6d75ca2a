"""The Workspace's Knowledge bases, agents and agent-scoped search (``services/access/knowledge``, ``services/dispatch/``)."""

from __future__ import annotations

import logging
from typing import Any

from gitkb.core.errors import Forbidden
from gitkb.services.access import knowledge
from gitkb.services.dispatch import scope, scoped_search
from gitkb.workspace.base import WorkspaceBase, tool

log = logging.getLogger("gitkb")


class KnowledgeTools(WorkspaceBase):
    """Knowledge bases, agents and agent-scoped search (``services/access/knowledge``, ``services/dispatch/``)."""

    # -- knowledge bases, agents, agent-scoped calls (services.access.knowledge, services.dispatch.scope) --

    @tool
    def kb_create(self, name: str, indexes: list[str]) -> dict[str, Any]:
        """A knowledge base over these indexes (names or kidx_ ids); it stores the ids."""
        return knowledge.kb_create(self.ctx, name, indexes)

    @tool
    def kb_list(self) -> dict[str, Any]:
        return knowledge.kb_list(self.ctx)

    @tool
    def kb_delete(self, name: str, force: bool = False) -> dict[str, Any]:
        """Refused while agents use it, unless ``force`` (which unassigns it from them)."""
        return knowledge.kb_delete(self.ctx, name, force=force)

    @tool
    def agent_assign(
        self,
        agent_id: str,
        kbs: list[str],
        mode: str | None = None,
        read_only: bool = False,
        default_top_n: int | None = None,
    ) -> dict[str, Any]:
        """Bind an agent to knowledge bases in a mode: ``read``, ``propose`` (default) or ``write``
        (``read_only=True`` is the older spelling of mode ``read``)."""
        return knowledge.agent_assign(
            self.ctx, agent_id, kbs, mode=mode, read_only=read_only, default_top_n=default_top_n
        )

    @tool
    def agent_unassign(self, agent_id: str, kbs: list[str]) -> dict[str, Any]:
        return knowledge.agent_unassign(self.ctx, agent_id, kbs)

    @tool
    def agent_show(self, agent_id: str) -> dict[str, Any]:
        return knowledge.agent_show(self.ctx, agent_id)

    @tool
    def agent_usage(self, agent_id: str) -> dict[str, Any]:
        """Query-embedding events of an agent: count, tokens, duration."""
        return knowledge.agent_usage(self.ctx, agent_id)

    def _agent_ref(self, agent_id: str | None) -> str | None:
        """The agent a scoped read speaks for: an agent principal only ever for itself."""
        if not self.principal.is_agent:
            return agent_id
        if agent_id not in (None, self.principal.agent_id):
            raise Forbidden(f"agent {self.principal.agent_id!r} can only act for itself")
        return self.principal.agent_id

    @tool
    def list_knowledge_bases(self, agent_id: str | None = None) -> dict[str, Any]:
        """Every knowledge base, or only an agent's (with its mode per binding)."""
        return knowledge.list_knowledge_bases(self.ctx, self._agent_ref(agent_id))

    @tool
    def search_index(
        self,
        query: str,
        indexes: list[str] | None = None,
        top_n: int | None = None,
        *,
        tenant: str | None = None,
        tiers: list[str] | None = None,
        mode: str | None = None,
        agent_id: str | None = None,
    ) -> dict[str, Any]:
        """Search with citations, limited to the agent's indexes (the agent principal's, or
        ``agent_id`` when the operator asks as that agent)."""
        sc = scope.load_scope(self.ctx, self._agent_ref(agent_id))
        return scoped_search.search_index(
            self.ctx, sc, query, indexes=indexes, top_n=top_n, tenant=tenant, tiers=tiers, mode=mode
        )
