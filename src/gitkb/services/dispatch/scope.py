"""What an agent may touch: the indexes of its knowledge bases, and nothing else.

``load_scope(ctx, agent_id)`` resolves an agent's bindings into the sets of
index ids it may read and write (``agent_id=None`` is the operator: no limit).
Every agent-facing entry point goes through here:

* ``search_index`` (in ``scoped_search``) searches only readable indexes; requested indexes outside
  the scope (ids or names, known or not) are listed under ``ignored`` and are
  never searched, and an all-ignored request searches nothing — the scope is
  never widened. ``top_n`` is an integer from 1 to ``MAX_TOP_K`` (50, the action
  table's; default from the binding).
* ``plan_action`` / ``finish_action`` wrap ``document_index`` for an agent:
  reads need the index in scope, the agent's writes need a read-write binding,
  and index lifecycle or server-path actions are refused (fail closed for any
  action not listed). The action itself runs the normal way (writes through
  the single writer).
* ``require_index`` / ``require_writer`` are the checks the other tools use.

Refusals for unknown and out-of-scope indexes read the same, so an agent
cannot probe which index names exist.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gitkb.core.action_table import DOCUMENT_INDEX, MAX_TOP_K
from gitkb.core.errors import Forbidden, GitkbError, InvalidArgument, NotFound
from gitkb.services.access import knowledge
from gitkb.services.changes.sources.registry import resolve_source
from gitkb.services.context import Context
from gitkb.services.dispatch import actions
from gitkb.services.operations import scoped_status
from gitkb.stores.catalog import documents as doc_rows
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import knowledge as kb_rows
from gitkb.stores.catalog.indexes import IndexRow

# From the action table: the agent's content writes; reads over every index (no index_name);
# reads over several indexes (narrowed to the agent's).
SCOPED_WRITE_ACTIONS = frozenset(a.name for a in DOCUMENT_INDEX if a.agents and a.cls == "write")
INVENTORY_ACTIONS = frozenset(a.name for a in DOCUMENT_INDEX if a.is_read and "index_name" not in a.fields)
MULTI_INDEX_ACTIONS = frozenset(a.name for a in DOCUMENT_INDEX if "indexes" in a.fields)


@dataclass(frozen=True)
class AgentScope:
    agent_id: str | None
    readable: frozenset[str] = frozenset()
    writable: frozenset[str] = frozenset()  # bindings in mode write: add/delete documents
    default_top_k: int = knowledge.DEFAULT_TOP_K
    proposable: frozenset[str] = frozenset()  # bindings in mode propose or write: proposals, PRs

    @property
    def classes(self) -> frozenset[str]:
        """The classes the agent's binding modes grant somewhere."""
        out = {"read"} if self.readable else set()
        if self.proposable:
            out.add("propose")
        if self.writable:
            out.add("write")
        return frozenset(out)

    @property
    def scoped(self) -> bool:
        return self.agent_id is not None

    def can_read(self, index_id: str) -> bool:
        return not self.scoped or index_id in self.readable

    def can_write(self, index_id: str) -> bool:
        return not self.scoped or index_id in self.writable

    @property
    def has_indexes(self) -> bool:
        return not self.scoped or bool(self.readable)

    @property
    def may_write(self) -> bool:
        return not self.scoped or bool(self.writable)


def load_scope(ctx: Context, agent_id: str | None) -> AgentScope:
    if agent_id is None:
        return AgentScope(None)
    aid = knowledge.validate_agent_id(agent_id)
    conn = ctx.catalog.conn
    agent = kb_rows.agent_get(conn, aid)
    live = {r.id for r in index_rows.list_all(conn)}
    readable: set[str] = set()
    proposable: set[str] = set()
    writable: set[str] = set()
    for b in kb_rows.bindings(conn, aid):
        kb = kb_rows.kb_by_name(conn, b.kb_name)
        ids = {i for i in (kb.index_ids if kb else ()) if i in live}
        readable |= ids
        if b.mode in ("propose", "write"):
            proposable |= ids
        if b.mode == "write":
            writable |= ids
    top_k = agent.default_top_k if agent else knowledge.DEFAULT_TOP_K
    return AgentScope(aid, frozenset(readable), frozenset(writable), top_k, frozenset(proposable))


def _outside(scope: AgentScope, ref: Any) -> Forbidden:
    return Forbidden(
        f"index {ref!r} is not in the knowledge bases of agent {scope.agent_id!r}",
        next_steps=["list_knowledge_bases shows the indexes this agent can use"],
    )


def require_index(ctx: Context, scope: AgentScope, ref: Any, *, write: bool = False) -> IndexRow | None:
    """The in-scope index ``ref`` (name or id); None for the operator (the service checks it)."""
    if not scope.scoped:
        return None
    row = knowledge.resolve_index_ref(ctx, ref) if isinstance(ref, str) and ref else None
    if row is None or not scope.can_read(row.id):
        raise _outside(scope, ref)
    if write and not scope.can_write(row.id):
        raise Forbidden(
            f"agent {scope.agent_id!r} is not bound to index {row.name!r} in mode write:"
            " adding and deleting documents is turned off",
            next_steps=[
                "search and read instead, or propose_kb_edit where a source feeds the index; an operator can"
                " bind it in mode write (gitkb agent assign AGENT_ID KB --mode write)",
            ],
        )
    return row


def require_writer(scope: AgentScope, what: str) -> None:
    if scope.scoped and not scope.writable:
        raise Forbidden(
            f"agent {scope.agent_id!r} has only read-only bindings: {what} is turned off for it",
            next_steps=["an operator can give a read-write binding (gitkb agent assign AGENT_ID KB)"],
        )


def resolve_refs(ctx: Context, scope: AgentScope, refs: Any) -> tuple[list[IndexRow], list[Any]]:
    """(in-scope indexes, ignored refs). ``refs`` None means every readable index."""
    if refs is None:
        return [r for r in index_rows.list_all(ctx.catalog.conn) if scope.can_read(r.id)], []
    if isinstance(refs, str):
        refs = [refs]
    if not isinstance(refs, list | tuple):
        raise InvalidArgument("indexes must be a list of index names or kidx_ ids")
    found: dict[str, IndexRow] = {}
    ignored: list[Any] = []
    for ref in refs:
        row = knowledge.resolve_index_ref(ctx, ref) if isinstance(ref, str) and ref else None
        if row is None or not scope.can_read(row.id):
            ignored.append(ref)
        else:
            found.setdefault(row.id, row)
    return list(found.values()), ignored


@dataclass(frozen=True)
class ActionPlan:
    """``document_index`` as the agent may run it: the checked action and parameters."""

    action: Any
    params: dict[str, Any]
    ignored: list[Any] = field(default_factory=list)
    answer: dict[str, Any] | None = None  # answered without running anything


def plan_action(ctx: Context, scope: AgentScope, action: Any, params: dict[str, Any]) -> ActionPlan:
    """Check (and for SEARCH/ASK narrow) an action for this agent; raises when it is refused.

    Reads need the index in scope; the agent's writes (``SCOPED_WRITE_ACTIONS``)
    need a read-write binding; every other action is operator-only.
    """
    if not scope.scoped:
        return ActionPlan(action, dict(params))
    name = actions.validate_action(action, params)  # unknown actions and parameters: refused here
    params = dict(params)
    if name in MULTI_INDEX_ACTIONS:
        narrowed, ignored = _narrow(ctx, scope, name, params)
        if narrowed is None:
            answer = {
                "action": name,
                "Results": [],
                "count": 0,
                "ignored": ignored,
                "Warnings": [
                    "none of the requested indexes is available to this agent; nothing was searched"
                ],
            }
            return ActionPlan(name, params, ignored, answer)
        if "top_n" in actions.spec(name).fields:  # as search_index: the binding's default, 1 to MAX_TOP_K
            narrowed["top_n"] = _agent_top_n(scope, narrowed.get("top_n"))
        return ActionPlan(name, narrowed, ignored)
    if name in INVENTORY_ACTIONS:
        pass
    elif actions.is_read(name):
        require_index(ctx, scope, params.get("index_name"))
    elif name in SCOPED_WRITE_ACTIONS:
        require_index(ctx, scope, params.get("index_name"), write=True)
    else:
        raise Forbidden(
            f"{name} is an operator action; agents cannot run it",
            next_steps=[
                "ask an operator (gitkb CLI) to do it",
                "agents may use ADD_TEXT on indexes they can write",
            ],
        )
    return ActionPlan(name, params)


def _agent_top_n(scope: AgentScope, top_n: Any) -> Any:
    """An agent's SEARCH / ASK top_n, as its search_index takes it: left out, its binding's default;
    over ``MAX_TOP_K``, refused (other values are the action's to check)."""
    if top_n is None:
        return scope.default_top_k
    if isinstance(top_n, int) and not isinstance(top_n, bool) and top_n > MAX_TOP_K:
        raise InvalidArgument(f"top_n must be from 1 to {MAX_TOP_K} for an agent, got {top_n}")
    return top_n


def finish_action(ctx: Context, scope: AgentScope, plan: ActionPlan, out: dict[str, Any]) -> dict[str, Any]:
    """Trim an action's answer to the scope (inventory lists) and report ignored indexes."""
    if not scope.scoped or out.get("Success") is False:
        return out
    if plan.action in INVENTORY_ACTIONS:
        out = _filter_inventory(ctx, scope, out)
    if plan.ignored:
        out = {**out, "ignored": plan.ignored}
    return out


# What an agent's get_index_status keeps (deny by default: a key status gains is an operator's
# until it is listed here): whether search is current and why not, in counts and a job kind, and
# its own indexes' documents and skipped files. Dropped: the writer, the catalog, the in-flight
# job's parameters and the vector build's identities, vectors (Chroma collection names),
# retired_chunks, query_embedding, Warnings (they name collections), other jobs' last errors,
# write_generation, pending_purge.
AGENT_STATUS_KEYS = (
    "Success",
    "Message",
    "status",
    "caught_up",
    "error",
    "queue_depth",
    "in_flight",
    "dirty_paths",
    "dirty_embeddings",
    "documents_indexed",
    "documents_indexed_error",
    "skipped_files",
)


AGENT_FAILED = "the last build of one of its indexes failed: the operator sees why (gitkb status)"
AGENT_DAMAGED = (
    "the keyword index is damaged: searches fail until the operator repairs it (gitkb verify --repair)"
)


def filter_status(ctx: Context, scope: AgentScope, out: dict[str, Any]) -> dict[str, Any]:
    """get_index_status for an agent: only ``AGENT_STATUS_KEYS``, each counted over its own indexes
    (``scoped_status``: their jobs, dirty paths and embeddings, status and caught_up; skipped
    files and documents), and a message made of what it keeps."""
    if not scope.scoped or out.get("Success") is False:
        return out
    out = {k: out[k] for k in AGENT_STATUS_KEYS if k in out}
    own = scoped_status.status_of_indexes(ctx, scope.readable)
    out.update({k: v for k, v in own.items() if k in out})
    if out.get("error"):  # a build's error text names server paths (git's remote, the catalog, a folder)
        out["error"] = AGENT_DAMAGED if ctx.keywords.damage is not None else AGENT_FAILED
    if isinstance(out.get("skipped_files"), list):
        out["skipped_files"] = [
            f for f in out["skipped_files"] if isinstance(f, dict) and scope.can_read(str(f.get("index_id")))
        ]
    if isinstance(out.get("documents_indexed"), int) and not out.get("documents_indexed_error"):
        out["documents_indexed"] = doc_rows.count_in(ctx.catalog.conn, sorted(scope.readable))
    elif out.get("documents_indexed_error"):
        out["documents_indexed_error"] = "the catalog could not be read"  # its text may name the database
    return out


# What an agent's embeddings_status leaves out: they describe every index (the Chroma collections
# with their names and counts, the background embedder's busy flag, the last runs of any index).
AGENT_EMBEDDINGS_DROPPED = ("path", "collections", "vector_store_error", "worker", "last_runs")


def filter_embeddings_status(ctx: Context, scope: AgentScope, out: dict[str, Any]) -> dict[str, Any]:
    """embeddings_status for an agent: per-index entries of its own indexes only, their chunk and
    waiting counts (``scoped_status.embedding_counts``), no server paths or workspace-wide views."""
    if not scope.scoped or out.get("Success") is False:
        return out
    out = _filter_inventory(ctx, scope, out)
    for key in AGENT_EMBEDDINGS_DROPPED:
        out.pop(key, None)
    chunks, waiting = scoped_status.embedding_counts(ctx, scope.readable)
    out["chunk_count"], out["pending_embeddings"] = chunks, waiting
    if "Message" in out:
        out["Message"] = (
            f"{out.get('identity') or 'no identity'}: {chunks} chunk(s), {waiting} waiting for vectors"
        )
    return out


def job_caller(scope: AgentScope) -> str | None:
    """The ``caller`` recorded on jobs an agent starts (and the only jobs it may poll)."""
    return f"agent:{scope.agent_id}" if scope.scoped else None


def require_own_job(scope: AgentScope, job: dict[str, Any], job_id: Any) -> None:
    if scope.scoped and job.get("caller") != job_caller(scope):
        raise NotFound(
            f"no job {job_id!r} started by agent {scope.agent_id!r}",
            next_steps=["poll only the job_id a promoted call of this agent returned"],
        )


def _narrow(
    ctx: Context, scope: AgentScope, name: str, params: dict[str, Any]
) -> tuple[dict[str, Any] | None, list[Any]]:
    refs: list[Any] | None = None
    one, many = params.pop("index_name", None), params.pop("indexes", None)
    if one not in (None, "") or many not in (None, ""):
        refs = [one] if one not in (None, "") else []
        if many not in (None, ""):
            if not isinstance(many, list | tuple | str):
                raise InvalidArgument("indexes must be a list of index names")
            refs.extend([many] if isinstance(many, str) else many)
    rows, ignored = resolve_refs(ctx, scope, refs)
    if not rows:
        return None, ignored
    if "indexes" in actions.spec(name).fields:
        params["indexes"] = [r.name for r in rows]
    elif len(rows) == 1:
        params["index_name"] = rows[0].name
    else:
        raise InvalidArgument(
            f"{name} takes one index_name here; choose one of {', '.join(r.name for r in rows)}"
        )
    return params, ignored


def _filter_inventory(ctx: Context, scope: AgentScope, out: dict[str, Any]) -> dict[str, Any]:
    """Drop every index outside the scope from LIST_INDICES / GET_INDICES_STATS answers."""
    all_rows = index_rows.list_all(ctx.catalog.conn, include_hidden=True)
    names = {r.name: r.id for r in all_rows}
    keep = {n for n, i in names.items() if scope.can_read(i)}
    filtered: dict[str, Any] = {}
    for key, value in out.items():
        if isinstance(value, dict) and value and all(k in names for k in value):
            filtered[key] = {k: v for k, v in value.items() if k in keep}
        elif isinstance(value, list) and value and all(isinstance(v, str) and v in names for v in value):
            filtered[key] = [v for v in value if v in keep]
        else:
            filtered[key] = value
    if "Message" in filtered and "Indices" in filtered:
        filtered["Message"] = f"{len(filtered['Indices'])} index(es)"
    if "Message" in filtered and "Stats" in filtered:
        filtered["Message"] = f"{len(filtered['Stats'])} index(es)"
    return filtered


def require_source(ctx: Context, scope: AgentScope, ref: Any) -> None:
    """Proposals and pull requests: the source (or the index it feeds) must feed an index the agent may write."""
    if not scope.scoped:
        return

    try:
        fed = set(resolve_source(ctx, ref).index_ids)
    except GitkbError:  # unknown and out-of-scope read the same: no probing
        fed = set()
    if not fed & scope.readable:
        raise Forbidden(
            f"source or index {ref!r} does not feed any index in the knowledge bases of agent {scope.agent_id!r}",
            next_steps=["list_knowledge_bases shows the indexes this agent can use"],
        )
    if not fed & scope.proposable:
        raise Forbidden(
            f"agent {scope.agent_id!r} has only read-only bindings to the indexes fed by {ref!r}:"
            " proposing changes is turned off for it",
            next_steps=[
                "an operator can bind it in mode propose (gitkb agent assign AGENT_ID KB --mode propose)"
            ],
        )
