"""The Workspace's Git sources, proposals, reviews, the local forge, the audit log (``services/changes/``)."""

from __future__ import annotations

import logging
from typing import Any

from gitkb.services.changes import audit, checkouts, proposals, review, review_request, webhook_intake
from gitkb.services.changes.sources import merges, reach, registry, sync
from gitkb.services.changes.sources.cite import cite_check
from gitkb.services.dispatch import scope
from gitkb.services.runtime import jobs
from gitkb.workspace.base import WorkspaceBase, tool

log = logging.getLogger("gitkb")


class ChangeTools(WorkspaceBase):
    """Git sources, proposals, reviews, the local forge, the audit log (``services/changes/``)."""

    # -- git sources, proposals, reviews, forges (services.changes.sources, .proposals, .review) --

    @tool
    def source_add(
        self,
        name: str,
        url: str,
        branch: str = "main",
        documents_root: str = "docs",
        index: str | list[str] | None = None,
        include: list[str] | tuple[str, ...] = (),
        exclude: list[str] | tuple[str, ...] = (),
        forge: dict[str, Any] | None = None,
        auth: dict[str, Any] | None = None,
        webhook_secret: str | None = None,
        credential: str | None = None,
    ) -> dict[str, Any]:
        """Register a git repository feeding one or more indexes (created when missing); clones it.

        ``credential`` names a ``[[credentials]]`` entry of gitkb.toml (sent only to its hosts;
        ``forge={"credential": ...}`` for a different one on the forge API); ``auth`` with secret
        references is refused. ``webhook_secret`` verifies this source's forge webhooks (else
        ``GITKB_WEBHOOK_SECRET``)."""
        out = registry.add_source(
            self.ctx,
            name,
            url,
            branch=branch,
            documents_root=documents_root,
            index=index,
            include=include,
            exclude=exclude,
            forge=forge,
            auth=auth,
            credential=credential,
        )
        if webhook_secret:
            webhook_intake.set_webhook_secret(self.ctx, name, webhook_secret)
            out["webhook_secret"] = "set"
        return out

    @tool
    def source_list(self, start: int | None = None, count: int | None = None) -> dict[str, Any]:
        return registry.list_sources(self.ctx, start=start, count=count)

    @tool
    def source_sync(
        self, source: str, commit: str | None = None, full: bool = False, progress: Any = None
    ) -> dict[str, Any]:
        """Fetch and re-index only what changed since the last synced commit (a job of the writer)."""
        params = self._held(merges.SYNC_JOB_KIND, {"source": source, "commit": commit, "full": bool(full)})
        return jobs.run_inline(self.ctx, merges.SYNC_JOB_KIND, params, progress=progress)

    @tool
    def source_rollback(self, source: str, commit: str, progress: Any = None) -> dict[str, Any]:
        """Admin: move the source's indexes back to an older commit of its tracked branch (no sync does)."""
        params = self._held(sync.ROLLBACK_JOB_KIND, {"source": source, "commit": commit})
        return jobs.run_inline(self.ctx, sync.ROLLBACK_JOB_KIND, params, progress=progress)

    @tool
    def source_remove(self, source: str, keep_documents: bool = False) -> dict[str, Any]:
        return registry.remove_source(self.ctx, source, keep_documents=keep_documents)

    @tool
    def checkout(self, source: str, directory: str) -> dict[str, Any]:
        """Admin: a read-only working copy of ``source`` at its synced commit in ``directory``."""
        return checkouts.checkout(self.ctx, source, directory)

    @tool
    def propose_kb_edit(
        self,
        source_id_or_index: str,
        relative_path: str,
        content: str = "",
        search: str = "",
        replace: str = "",
        note: str = "",
    ) -> dict[str, Any]:
        """Stage an edit (whole content, or exact-once search/replace) on the source's proposal branch."""
        sc = self._scope()
        scope.require_source(self.ctx, sc, source_id_or_index)

        return proposals.propose_kb_edit(
            self.ctx,
            source_id_or_index,
            relative_path,
            content,
            search,
            replace,
            note,
            fed_only=sc.scoped,
        )

    @tool
    def propose_kb_delete(
        self, source_id_or_index: str, relative_path: str, note: str = ""
    ) -> dict[str, Any]:
        sc = self._scope()
        scope.require_source(self.ctx, sc, source_id_or_index)

        return proposals.propose_kb_delete(
            self.ctx, source_id_or_index, relative_path, note, fed_only=sc.scoped
        )

    @tool
    def propose_kb_rename(
        self, source_id_or_index: str, relative_path: str, new_relative_path: str, note: str = ""
    ) -> dict[str, Any]:
        sc = self._scope()
        scope.require_source(self.ctx, sc, source_id_or_index)

        return proposals.propose_kb_rename(
            self.ctx,
            source_id_or_index,
            relative_path,
            new_relative_path,
            note,
            fed_only=sc.scoped,
        )

    @tool
    def list_proposals(
        self,
        source: str | None = None,
        state: str = "staged",
        start: int | None = None,
        count: int | None = None,
    ) -> dict[str, Any]:
        return proposals.list_proposals(self.ctx, source, state, start=start, count=count)

    @tool
    def show_proposal(self, proposal_id: str) -> dict[str, Any]:
        return proposals.show_proposal(self.ctx, proposal_id)

    @tool
    def discard_proposal(self, proposal_id: str) -> dict[str, Any]:
        return proposals.discard_proposal(self.ctx, proposal_id)

    @tool
    def refresh_proposals(self, source: str) -> dict[str, Any]:
        """Make every staged proposal again on the target branch's head now: per proposal applied or conflict."""
        sc = self._scope()
        scope.require_source(self.ctx, sc, source)
        return proposals.refresh_proposals(self.ctx, source, actor=self.principal.label, fed_only=sc.scoped)

    @tool
    def cite_check(self, chunk_id: str) -> dict[str, Any]:
        """Is the cited text still at the cited commit and lines, and still current at the branch head?"""
        sc = self._scope()
        return cite_check(self.ctx, chunk_id, may_read=sc.can_read if sc.scoped else None)

    @tool
    def open_kb_pull_request(
        self,
        source_id_or_index: str,
        target_index: str = "",
        title: str = "",
        body: str = "",
        commit_message: str = "",
        requested_by: str | None = None,
        proposal_ids: list[str] | None = None,
    ) -> dict[str, Any]:
        """Ask for review of the staged proposals: returns review_id, review_state 'pending', changed_files.
        Nothing is pushed and no PR/MR opens until a person approves the review (approve_review).

        ``requested_by``: ``agent:<id>``, ``token:<name>`` or ``local:<user>`` (None: ``local:<your user>``)."""
        sc = self._scope()
        scope.require_source(self.ctx, sc, source_id_or_index)
        if target_index:
            scope.require_index(self.ctx, sc, target_index, write=False)

        return review_request.request_review(
            self.ctx,
            source_id_or_index,
            target_index,
            title,
            body,
            commit_message,
            requested_by=requested_by if self.principal.is_local else self.principal.label,
            proposal_ids=proposal_ids,
            fed_only=sc.scoped,
            targets=sc.proposable if sc.scoped else None,
        )

    @tool
    def list_reviews(
        self,
        state: str | None = None,
        source: str | None = None,
        start: int | None = None,
        count: int | None = None,
    ) -> dict[str, Any]:
        """Reviews, pending first (``Reviews``), paged; a held view settles no in-flight push of a
        source outside its roots (``reach.reachable``)."""
        return review.list_reviews(
            self.ctx, state, source, start=start, count=count, reachable=reach.reachable(self.disk_roots)
        )

    @tool
    def show_review(self, review_id: str) -> dict[str, Any]:
        return review.show_review(self.ctx, review_id)

    @tool
    def approve_review(
        self, review_id: str, reviewer: str = "operator", overwrite: bool = False
    ) -> dict[str, Any]:
        """Push the staged branch with a lease and open/update the PR/MR: number, url, changed_files.

        ``overwrite=True`` acknowledges the review's ``overwrites`` (commits gitkb did not push that the
        push replaces); without it such an approval is refused and nothing is pushed."""
        return review.approve_review(
            self.ctx, review_id, reviewer=self._reviewer(reviewer), overwrite=overwrite
        )

    @tool
    def deny_review(self, review_id: str, reason: str, reviewer: str = "operator") -> dict[str, Any]:
        return review.deny_review(self.ctx, review_id, reason, reviewer=self._reviewer(reviewer))

    @tool
    def forge_merge(self, source: str, number: int, wait: bool = True) -> dict[str, Any]:
        """Local forge: merge change request NUMBER into its base, then sync (like a webhook would)."""
        return merges.forge_merge(self.ctx, source, number, wait=wait, held_to=self.disk_roots)

    @tool
    def forge_close(self, source: str, number: int) -> dict[str, Any]:
        """Local forge: close change request NUMBER unmerged (its reviews become 'closed')."""
        return merges.forge_close(self.ctx, source, number)

    @tool
    def list_pull_requests(self, source: str, state: str | None = None) -> dict[str, Any]:
        return merges.list_pull_requests(self.ctx, source, state)

    @tool
    def list_audit(
        self,
        target: str | None = None,
        start: int | None = None,
        count: int | None = None,
    ) -> dict[str, Any]:
        """The audit log, newest first: who, when, what, result (paged)."""
        return audit.list_audit(self.ctx, target=target, start=start, count=count)
