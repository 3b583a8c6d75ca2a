"""The explicit registry of job kinds (imported once by whoever opens a workspace).

Each kind adapts a service function to ``fn(ctx, params, progress) -> dict``.
"""

from __future__ import annotations

from typing import Any

from gitkb.services import actions, preflight, reindex
from gitkb.services import sources as _sources  # noqa: F401 - registers the source_sync job kind
from gitkb.services.context import Context
from gitkb.services.jobs import Progress, register_kind


def _action(ctx: Context, params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    name = params["action"]
    p = dict(params.get("params") or {})
    if "progress" in actions.spec(name).fields:
        p["progress"] = progress
    return actions.run_action(ctx, name, p)


def _reindex(ctx: Context, params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    return reindex.reindex(ctx, force=bool(params.get("force")), index_name=params.get("index_name"), progress=progress)


# ADD_TEXT's text waits in job_staged, not in jobs.params: the job table keeps no copy of every
# text, and a queued ADD_TEXT still resumes after a restart (the staged row is in the catalog).
register_kind("action", _action, resumable=True, staged=("params.text",), check=preflight.check_action)
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
