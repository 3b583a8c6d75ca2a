"""The explicit registry of job kinds (imported once by whoever opens a workspace).

Each kind adapts a service function to ``fn(ctx, params, progress) -> dict``.
"""

from __future__ import annotations

from typing import Any

from gitkb.services import actions, preflight, reindex
from gitkb.services import sources as _sources  # noqa: F401 - registers the source_sync job kind
from gitkb.services.context import Context
from gitkb.services.jobs import Progress, register_kind

# Write actions that are safe to run again from the start after a crash.
RESUMABLE_ACTIONS = {"ADD_DOCUMENTS", "ADD_TEXT", "DELETE_INDEX", "DELETE_DOCUMENT", "RECHUNK"}


def _action(ctx: Context, params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    name = params["action"]
    p = dict(params.get("params") or {})
    _, allowed = actions.ACTIONS[name]
    if "progress" in allowed:
        p["progress"] = progress
    return actions.run_action(ctx, name, p)


def _reindex(ctx: Context, params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    return reindex.reindex(ctx, force=bool(params.get("force")), index_name=params.get("index_name"), progress=progress)


register_kind("action", _action, resumable=True, check=preflight.check_action)
register_kind("reindex", _reindex, resumable=True, check=preflight.check_reindex)


def _build_embeddings(ctx: Context, params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    from gitkb.services import embeddings

    return embeddings.build_embeddings(ctx, force=bool(params.get("force")), progress=progress)


def _reembed(ctx: Context, params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    from gitkb.services import embeddings

    return embeddings.reembed(ctx, params.get("index_name"), progress=progress)


def _purge_expired(ctx: Context, params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    from gitkb.services import ttl

    return ttl.purge_expired(ctx)


register_kind("build_embeddings", _build_embeddings, resumable=True)
register_kind("reembed", _reembed, resumable=True, check=preflight.check_reembed)
register_kind("purge_expired", _purge_expired, resumable=True)
