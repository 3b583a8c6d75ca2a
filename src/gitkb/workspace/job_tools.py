"""The Workspace's Status, jobs and long work the writer runs: status, metrics, job results, reindex, purge."""

from __future__ import annotations

import logging
from typing import Any

from gitkb.core.errors import GitkbError
from gitkb.services.dispatch import scope
from gitkb.services.operations import metrics, status
from gitkb.services.runtime import jobs
from gitkb.workspace.base import WorkspaceBase, tool

log = logging.getLogger("gitkb")


class JobTools(WorkspaceBase):
    """Status, jobs and long work the writer runs: status, metrics, job results, reindex, purge."""

    # -- status and jobs ----------------------------------------------------

    @tool
    def get_index_status(self) -> dict[str, Any]:
        """queryable/building/failed, queue depth, in-flight job, dirty counts, skipped files."""
        return scope.filter_status(self.ctx, self._scope(), status.index_status(self.ctx))

    @tool
    def metrics(self) -> dict[str, Any]:
        """Jobs by kind and state, queue depth, writer lease, documents/chunks per index, dirty counts,
        reviews by state, webhook deliveries (``GET /metrics`` renders them with this process's meters)."""
        return metrics.snapshot(self.ctx)

    @tool
    def get_job_result(self, job_id: str) -> dict[str, Any]:
        """``{Success, job_id, kind, status, progress, result?, error?}``; an agent sees only its own jobs."""
        sc = self._scope()
        try:
            out = jobs.job_result(self.ctx, job_id)
        except GitkbError as exc:
            # unknown and foreign ids read the same; a removed one says so (its id alone tells it)
            if sc.scoped and "jobs_pruned_before" not in exc.details:
                scope.require_own_job(sc, {}, job_id)
            raise
        scope.require_own_job(sc, out, job_id)
        return out

    @tool
    def list_jobs(
        self,
        state: str | None = None,
        start: int | None = None,
        count: int | None = None,
    ) -> dict[str, Any]:
        """Newest first, paged (``start``/``count``)."""
        return jobs.list_jobs(self.ctx, state=state, start=start, count=count)

    @tool
    def cancel_job(self, job_id: str) -> dict[str, Any]:
        return jobs.cancel(self.ctx, job_id)

    @tool
    def wait_job(self, job_id: str, timeout: float | None = None, progress: Any = None) -> dict[str, Any]:
        """Block until the job finishes (or ``timeout``); returns get_job_result's dict."""
        jobs.job_result(self.ctx, job_id)  # not_found check
        jobs.wait(self.ctx, job_id, timeout=timeout, progress=progress)
        return jobs.job_result(self.ctx, job_id)

    @tool
    def reindex(
        self, force: bool = False, index_name: str | None = None, progress: Any = None
    ) -> dict[str, Any]:
        """Bring directory-fed indexes up to date with the disk (``force``: parse everything again)."""
        params = self._held("reindex", {"force": bool(force), "index_name": index_name})
        return jobs.run_inline(self.ctx, "reindex", params, progress=progress)

    @tool
    def purge_expired(self) -> dict[str, Any]:
        """Delete documents past their TTL (a job of the writer)."""
        return jobs.run_inline(self.ctx, "purge_expired", {})
