"""The action API: one entry point, ``document_index(action, **params)``.

A table maps each action to the service function and the parameters it
accepts; unknown actions and unknown parameters are refused before anything
runs. Interfaces (library, CLI, HTTP, MCP) all come through here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gitkb.core.errors import InvalidArgument
from gitkb.services import ask, documents, indexes, ingest, rechunk, search
from gitkb.services.context import Context
from gitkb.services.identity import identity_state

ActionFn = Callable[..., dict[str, Any]]

_CHUNK = ("chunk_size", "chunk_overlap", "chunk_strategy")
_PLACE = ("tenant", "tier", "ttl_seconds")

ACTIONS: dict[str, tuple[ActionFn, tuple[str, ...]]] = {
    "CREATE_INDEX": (
        indexes.create_index,
        ("index_name", *_CHUNK, "embeddings", "embedding_provider", "embedding_model", "settings"),
    ),
    "RENAME_INDEX": (indexes.rename_index, ("index_name", "new_index_name")),
    "DELETE_INDEX": (indexes.delete_index, ("index_name",)),
    "SET_SEARCH_SETTINGS": (indexes.set_search_settings, ("index_name", "settings", "reset")),
    "GET_SEARCH_SETTINGS": (indexes.get_search_settings, ("index_name",)),
    "LIST_INDICES": (lambda ctx: indexes.list_indices(ctx), ()),
    "GET_INDICES_STATS": (lambda ctx: indexes.indices_stats(ctx), ()),
    "ADD_DOCUMENTS": (
        ingest.add_documents,
        ("index_name", "filepath", *_CHUNK, "base_path", *_PLACE, "progress"),
    ),
    "ADD_TEXT": (ingest.add_text, ("index_name", "text", "metadata", "filepath", *_CHUNK, *_PLACE)),
    "LIST_DOCUMENTS": (
        lambda ctx, **kw: {
            **documents.list_documents(ctx, **kw),
            "EmbeddingIdentityState": identity_state(ctx).as_dict(),
        },
        ("index_name", "path_filter", "query", "show_files_only", "start", "count"),
    ),
    "GET_DOCUMENT": (
        documents.get_document,
        ("index_name", "file_id", "filepath", "pagination_mode", "start", "count"),
    ),
    "DELETE_DOCUMENT": (documents.delete_document, ("index_name", "file_id", "filepath")),
    "RENAME_DOCUMENT": (documents.rename_document, ("index_name", "filepath", "new_filename")),
    "SEARCH": (search.search, ("query", "index_name", "indexes", "top_n", "mode", "tenant", "tiers")),
}

REQUIRED: dict[str, tuple[str, ...]] = {
    "CREATE_INDEX": ("index_name",),
    "RENAME_INDEX": ("index_name", "new_index_name"),
    "DELETE_INDEX": ("index_name",),
    "SET_SEARCH_SETTINGS": ("index_name",),
    "GET_SEARCH_SETTINGS": ("index_name",),
    "ADD_DOCUMENTS": ("index_name", "filepath"),
    "ADD_TEXT": ("index_name", "text"),
    "LIST_DOCUMENTS": ("index_name",),
    "GET_DOCUMENT": ("index_name",),
    "DELETE_DOCUMENT": ("index_name",),
    "RENAME_DOCUMENT": ("index_name", "filepath", "new_filename"),
    "SEARCH": ("query",),
}


# Actions that only read: they run in the caller's process, never through the writer.
READ_ACTIONS: set[str] = {
    "LIST_INDICES",
    "GET_INDICES_STATS",
    "GET_SEARCH_SETTINGS",
    "LIST_DOCUMENTS",
    "GET_DOCUMENT",
    "SEARCH",
    "ASK",
}


def register(
    name: str,
    fn: ActionFn,
    params: tuple[str, ...],
    required: tuple[str, ...] = (),
    *,
    read_only: bool = False,
) -> None:
    """Later services (ASK, RECHUNK, ...) add their actions here at import time."""
    ACTIONS[name] = (fn, params)
    if required:
        REQUIRED[name] = required
    if read_only:
        READ_ACTIONS.add(name)


def validate_action(action: Any, params: dict[str, Any]) -> str:
    """The action's canonical name; refuses unknown actions and parameters before anything runs."""
    if not isinstance(action, str) or action.upper() not in ACTIONS:
        raise InvalidArgument(
            f"unknown action {action!r}; valid actions: {', '.join(sorted(ACTIONS))}",
        )
    name = action.upper()
    _, allowed = ACTIONS[name]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        shown = ", ".join(a for a in allowed if a != "progress") or "nothing"
        raise InvalidArgument(f"{name} does not take {', '.join(unknown)}; it takes: {shown}")
    missing = [p for p in REQUIRED.get(name, ()) if params.get(p) in (None, "")]
    if missing:
        raise InvalidArgument(f"{name} needs {', '.join(missing)}")
    return name


def is_read(action: str) -> bool:
    return action.upper() in READ_ACTIONS


def admit(ctx: Context, action: Any, params: dict[str, Any]) -> str:
    """Validate an action before it runs or queues; a write to an index being rechunked is
    refused now (``conflict``), not queued behind the rebuild."""
    name = validate_action(action, params)
    if not is_read(name):
        rechunk.guard_action(ctx, name, params)
    return name


def run_action(ctx: Context, action: Any, params: dict[str, Any]) -> dict[str, Any]:
    name = validate_action(action, params)
    fn, _ = ACTIONS[name]
    rechunk.guard_action(ctx, name, params)  # conflict while the index is being rebuilt
    clean = {k: v for k, v in params.items() if v is not None}
    result = fn(ctx, **clean)
    return {"Success": True, "action": name, **result}


register(
    "ASK",
    ask.ask,
    ("query", "index_name", "indexes", "top_n", "mode", "tenant", "tiers", "answer_mode"),
    ("query",),
    read_only=True,
)
register("RECHUNK", rechunk.rechunk, ("index_name", *_CHUNK, "progress"), ("index_name",))
