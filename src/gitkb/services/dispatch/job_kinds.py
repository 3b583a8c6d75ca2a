"""The job kinds, one explicit list: ``JOB_KINDS`` maps each kind's name to its ``JobKind``.

Each kind adapts a service function to ``fn(ctx, params, progress) -> dict``.
Nothing registers itself: the composition root (``Workspace``) hands this
mapping to ``gitkb.services.runtime.jobs.load_kinds`` once.
"""

from __future__ import annotations

from typing import Any

from gitkb.core import disk_roots
from gitkb.services.changes.sources import reach
from gitkb.services.changes.sources.merges import SYNC_JOB_KIND
from gitkb.services.changes.sources.sync import ROLLBACK_JOB_KIND, rollback_job, sync_job
from gitkb.services.context import Context
from gitkb.services.derived import embeddings
from gitkb.services.dispatch import actions, preflight
from gitkb.services.indexing import reindex
from gitkb.services.runtime import ttl
from gitkb.services.runtime.jobs import JobKind, Progress


def _action(ctx: Context, params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    name = params["action"]
    p = dict(params.get("params") or {})
    if "progress" in actions.spec(name).fields:
        p["progress"] = progress
    return actions.run_action(ctx, name, p)


def _reindex(ctx: Context, params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    return reindex.reindex(
        ctx,
        force=bool(params.get("force")),
        index_name=params.get("index_name"),
        progress=progress,
        held_to=disk_roots.held_roots(params),  # a remote caller's: checked again now, before reading
    )


def _build_embeddings(ctx: Context, params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    return embeddings.build_embeddings(ctx, force=bool(params.get("force")), progress=progress)


def _reembed(ctx: Context, params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    return embeddings.reembed(ctx, params.get("index_name"), progress=progress)


def _purge_expired(ctx: Context, params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    return ttl.purge_expired(ctx)


def _repair(ctx: Context, params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    from gitkb.services.operations import verify  # pygit2 and the source registry, only when a repair runs

    held = disk_roots.held_roots(params)  # a remote caller's: no clone of a source outside its roots
    return verify.verify(
        ctx, index_name=params.get("index_name"), repair=True, reachable=reach.reachable(held)
    )


JOB_KINDS: dict[str, JobKind] = {
    # ADD_TEXT's text waits in job_staged, not in jobs.params: the job table keeps no copy of every
    # text, and a queued ADD_TEXT still resumes after a restart (the staged row is in the catalog).
    "action": JobKind(_action, staged=("params.text",), check=preflight.check_action),
    "reindex": JobKind(_reindex, check=preflight.check_reindex),
    "build_embeddings": JobKind(_build_embeddings),
    "reembed": JobKind(_reembed, check=preflight.check_reembed),
    "purge_expired": JobKind(_purge_expired),
    "verify_repair": JobKind(_repair),  # writes the derived stores: on the writer, like every write
    SYNC_JOB_KIND: JobKind(sync_job, check=preflight.check_sync),
    ROLLBACK_JOB_KIND: JobKind(rollback_job, check=preflight.check_sync),
}
