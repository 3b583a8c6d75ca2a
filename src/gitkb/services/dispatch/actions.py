"""The action API: one entry point, ``document_index(action, **params)``.

Which actions exist, their parameters and their classes are declared once in
``gitkb.core.action_table``; this module binds each ``document_index`` action
to the service function that runs it (a test checks the two agree). Unknown
actions and parameters are refused before anything runs
(``gitkb.services.access.policy``). Interfaces (library, CLI, HTTP, MCP) all
come through here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gitkb.core.action_table import ACTIONS as TABLE
from gitkb.core.action_table import Action
from gitkb.services.access import policy
from gitkb.services.context import Context
from gitkb.services.derived import rebuild_guard
from gitkb.services.derived.identity import identity_state
from gitkb.services.indexing import documents, indexes, ingest, ingest_text, rechunk
from gitkb.services.indexing.guard import ensure_not_managed
from gitkb.services.retrieval import ask, search
from gitkb.stores.catalog import indexes as index_rows

ActionFn = Callable[..., dict[str, Any]]


def _list_documents(ctx: Context, **kw: Any) -> dict[str, Any]:
    return {**documents.list_documents(ctx, **kw), "EmbeddingIdentityState": identity_state(ctx).as_dict()}


FUNCTIONS: dict[str, ActionFn] = {
    "CREATE_INDEX": indexes.create_index,
    "RENAME_INDEX": indexes.rename_index,
    "DELETE_INDEX": indexes.delete_index,
    "SET_SEARCH_SETTINGS": indexes.set_search_settings,
    "GET_SEARCH_SETTINGS": indexes.get_search_settings,
    "LIST_INDICES": lambda ctx: indexes.list_indices(ctx),
    "GET_INDICES_STATS": lambda ctx: indexes.indices_stats(ctx),
    "ADD_DOCUMENTS": ingest.add_documents,
    "ADD_TEXT": ingest_text.add_text,
    "LIST_DOCUMENTS": _list_documents,
    "GET_DOCUMENT": documents.get_document,
    "DELETE_DOCUMENT": documents.delete_document,
    "RENAME_DOCUMENT": documents.rename_document,
    "SEARCH": search.search,
    "ASK": ask.ask,
    "RECHUNK": rechunk.rechunk,
}


def spec(name: str) -> Action:
    return TABLE[name]


def validate_action(action: Any, params: dict[str, Any], *, local: bool = True) -> str:
    """The action's canonical name; refuses unknown actions and parameters before anything runs."""
    s = policy.document_index_action(action)
    policy.validate(s, params, local=local)
    return s.name


def is_read(action: str) -> bool:
    s = TABLE.get(action.upper())
    return s is not None and s.is_read


def admit(ctx: Context, action: Any, params: dict[str, Any]) -> str:
    """Validate an action before it runs or queues; a write to an index being rechunked
    (``conflict``) or fed by a git source (``managed_repo_guard``) is refused now, not queued."""
    name = validate_action(action, params)
    if not is_read(name):
        rebuild_guard.guard_action(ctx, name, params)
    if TABLE[name].cls == "write":  # content writes to a git-fed index: refused before a job is queued
        ref = params.get("index_name")
        row = (
            index_rows.get_by_name(ctx.catalog.conn, ref.strip())
            if isinstance(ref, str) and ref.strip()
            else None
        )
        if row is not None and not row.hidden:
            ensure_not_managed(ctx, row, name)
    return name


def run_action(ctx: Context, action: Any, params: dict[str, Any]) -> dict[str, Any]:
    name = validate_action(action, params)
    rebuild_guard.guard_action(ctx, name, params)  # conflict while the index is being rebuilt
    clean = {k: v for k, v in params.items() if v is not None}
    result = FUNCTIONS[name](ctx, **clean)
    return {"Success": True, "action": name, **result}
