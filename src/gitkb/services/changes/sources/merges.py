"""Merge -> re-ingest: sync requests, the local forge's merge/close buttons, and what a merge settles.

* :func:`request_sync` -- what a merge (local forge now, webhooks from the
  HTTP layer) asks for: the ``source_sync`` job, deduplicated per
  ``(source, commit)`` through the job queue's dedupe key; a commit already
  synced is not queued again.
* :func:`reconcile_merges` -- run by every sync: an approved, pushed review
  whose pushed head is now in the synced commit was merged. Its review is
  marked ``merged``, its proposals too, and the proposals staged after it
  are replayed onto the new base (or marked ``conflict`` with the paths).
* :func:`change_request_merged` -- a merge webhook names the change request: a squash or rebase
  merge (the merged commit is not the pushed head) settles the same way.
  Working from the synced history makes GitHub, GitLab and local merges
  (merge commits and fast-forwards) look the same. A review a crash left
  mid-push is reconciled with the remote first (services.changes.review_push).
* :func:`forge_merge` / :func:`forge_close` -- the local forge's buttons; a
  merge then requests the same sync a webhook would.
* :func:`change_request_closed` -- a change request closed unmerged marks its
  reviews ``closed``; the proposals stay staged.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from gitkb.core import disk_roots
from gitkb.core.errors import Conflict, GitkbError, InvalidArgument
from gitkb.services.changes import audit
from gitkb.services.changes.review_push import reconcile_in_flight
from gitkb.services.changes.sources import reach
from gitkb.services.changes.sources.branch_order import staged_on_branch
from gitkb.services.changes.sources.registry import forge_for, open_repo, proposal_branch, resolve_source
from gitkb.services.changes.sources.staging import restack
from gitkb.services.context import Context
from gitkb.services.runtime import jobs
from gitkb.stores.catalog import jobs as job_rows
from gitkb.stores.catalog import proposals as prop_rows
from gitkb.stores.catalog import sources as source_rows
from gitkb.stores.catalog.sources import SourceRow
from gitkb.stores.repos import ManagedRepo

SYNC_JOB_KIND = "source_sync"


def sync_dedupe_key(source_id: str, commit: str) -> str:
    return f"{SYNC_JOB_KIND}:{source_id}:{commit}"


def request_sync(
    ctx: Context, source: Any, commit: str, *, wait: bool = False, held_to: tuple[Path, ...] | None = None
) -> dict[str, Any]:
    """Queue the source's sync to ``commit`` once; ``wait``: block until it has run; ``held_to``:
    a remote caller's allowed roots, which the job carries (``disk_roots.HELD_TO``)."""
    row = resolve_source(ctx, source)
    if not isinstance(commit, str) or not commit.strip():
        raise InvalidArgument("a sync request needs the commit to sync to")
    commit = commit.strip()
    key = sync_dedupe_key(row.id, commit)
    # One snapshot: a sync records its commit before its job ends, so either the job is still active
    # or the commit is recorded. Two separate reads could see neither (the commit not yet recorded,
    # then the job just finished) and queue the same sync again.
    with ctx.catalog.read() as conn:
        now = source_rows.get_by_id(conn, row.id)
        earlier = job_rows.find_active_by_dedupe(conn, key)
    synced = now.synced_commit if now is not None else row.synced_commit
    if earlier is None and synced == commit:
        return {
            "source": row.name,
            "commit": commit,
            "queued": False,
            "deduplicated": True,
            "job_id": None,
            "reason": "already synced at this commit",
        }
    job = earlier or jobs.submit(
        ctx,
        SYNC_JOB_KIND,
        {"source": row.name, "commit": commit, "full": False}
        | ({} if held_to is None else {disk_roots.HELD_TO: [str(r) for r in held_to]}),
        dedupe_key=key,
        check_limit=False,
    )
    out: dict[str, Any] = {
        "source": row.name,
        "commit": commit,
        "queued": earlier is None,
        "deduplicated": earlier is not None,
        "job_id": job.id,
    }
    if wait:
        done = jobs.wait(ctx, job.id, timeout=None)
        if done.state != "completed":
            raise jobs.error_from_row(done)
        out["sync"] = done.result
    return out


def reconcile_merges(ctx: Context, row: SourceRow, repo: ManagedRepo, commit: str) -> dict[str, Any]:
    """Settle reviews and proposals whose pushed head is contained in ``commit``."""
    reconcile_in_flight(ctx, source_id=row.id)  # a push a crash left unrecorded counts as pushed

    conn = ctx.catalog.conn
    candidates = prop_rows.list_reviews(conn, source_id=row.id, states=("approved",), limit=1000)
    merged = [r for r in candidates if r.pushed and repo.is_ancestor(r.push_sha, commit)]
    if not merged:
        return {}
    return _settle(ctx, row, repo, merged, commit)


def change_request_merged(
    ctx: Context, source: Any, number: Any, commit: str, *, actor: str = "forge"
) -> dict[str, Any]:
    """A change request merged on the forge (GitHub's ``merge_commit_sha``, GitLab's merge event).

    By squash or rebase the merged commit is not the pushed head, so the synced history cannot
    tell; the merge event names the change request. Its approved, pushed reviews are settled as
    after a merge commit: marked ``merged`` with their proposals, and the later proposals replayed
    onto the merged commit. The webhook's sha is a hint: it must be on the target branch fetched
    now. Nothing to settle (no such review, or already settled) answers ``reviews_merged: []``.
    """
    row = resolve_source(ctx, source)
    n = _number(number)
    reviews = [
        r
        for r in prop_rows.review_for_change_request(ctx.catalog.conn, row.id, n)
        if r.state == "approved" and r.pushed
    ]
    out: dict[str, Any] = {"source": row.name, "number": n, "reviews_merged": []}
    if not reviews:
        return {**out, "reason": f"no approved, pushed review of change request #{n} is waiting"}
    repo = open_repo(ctx, row)
    head = repo.fetch(row.branch)
    full = repo.commit_by_id(commit) if isinstance(commit, str) else None
    if full is None or not repo.is_ancestor(full, head):
        return {**out, "reason": f"{commit!r} is not on {row.branch!r} at {head[:12]}; nothing settled"}
    settled = _settle(ctx, row, repo, reviews, full, actor=actor, number=n)
    return {**out, **settled, "merge_commit": full}


def _settle(
    ctx: Context,
    row: SourceRow,
    repo: ManagedRepo,
    merged: list[prop_rows.ReviewRow],
    commit: str,
    *,
    actor: str = "sync",
    number: int | None = None,
) -> dict[str, Any]:
    conn = ctx.catalog.conn
    ids = {pid for r in merged for pid in r.proposal_ids}
    staged = staged_on_branch(conn, row.id)  # the rest is replayed in the order the branch held it
    keep = [p for p in staged if p.id not in ids]
    with ctx.catalog.write() as w:
        for r in merged:
            prop_rows.update_review(w, r.id, state="merged")
        for p in staged:
            if p.id in ids:
                prop_rows.set_proposal_state(w, p.id, "merged", detail={"merged_in": commit})
        for r in prop_rows.list_reviews(w, source_id=row.id, states=("pending",)):
            if ids & set(r.proposal_ids):
                prop_rows.update_review(w, r.id, state="superseded")
    rest = restack(ctx, row, repo, commit, keep)
    _forget_deleted_branch(repo, proposal_branch(row))
    audit.record(
        ctx,
        actor=actor,
        action="proposals.merged",
        target=row.name,
        result="ok",
        detail={
            "commit": commit,
            "reviews": [r.id for r in merged],
            "proposals": sorted(ids),
            **({"number": number} if number is not None else {}),
            **rest,
        },
    )
    return {"reviews_merged": [r.id for r in merged], "proposals_merged": sorted(ids), **rest}


def _forget_deleted_branch(repo: ManagedRepo, branch: str) -> None:
    """Forges often delete a merged branch: then the next push must expect no branch, not the old head.

    A branch someone moved is left alone, so the lease still refuses to overwrite it.
    """
    with contextlib.suppress(GitkbError):
        if repo.remote_head(branch) is None:
            repo.fetch(branch)  # raises NotFound and drops the stale tracking ref


def change_request_closed(ctx: Context, source: Any, number: int, *, actor: str = "forge") -> dict[str, Any]:
    """A change request closed without merging: its reviews are ``closed``; proposals stay staged."""
    row = resolve_source(ctx, source)
    closed = []
    with ctx.catalog.write() as w:
        for r in prop_rows.review_for_change_request(w, row.id, number):
            if r.state in ("approved", "pending"):
                prop_rows.update_review(w, r.id, state="closed")
                closed.append(r.id)
    audit.record(
        ctx,
        actor=actor,
        action="change_request.close",
        target=row.name,
        result="closed",
        detail={"number": number, "reviews": closed},
    )
    return {"source": row.name, "number": number, "reviews_closed": closed}


def _local_forge(ctx: Context, row: SourceRow) -> Any:
    forge = forge_for(ctx, row)
    if forge.name != "local":
        raise InvalidArgument(
            f"source {row.name!r} uses the {forge.name} forge: merge or close there; its webhook (or "
            f"`gitkb source sync {row.name}`) brings the index up to date"
        )
    return forge


def _number(number: Any) -> int:
    try:
        n = int(number)
    except (TypeError, ValueError):
        raise InvalidArgument(f"a change request number is a positive integer, got {number!r}") from None
    if isinstance(number, bool) or n < 1:
        raise InvalidArgument(f"a change request number is a positive integer, got {number!r}")
    return n


def forge_merge(
    ctx: Context,
    source: Any,
    number: Any,
    *,
    actor: str = "operator",
    wait: bool = True,
    held_to: tuple[Path, ...] | None = None,
) -> dict[str, Any]:
    """Merge a local change request into its base on the remote, then request the sync a webhook
    would. ``held_to`` (a remote caller's allowed roots): a remote that is a path of this disk
    outside them is refused before it is merged into or synced (``reach.refuse_outside``)."""
    row = reach.refuse_outside(ctx, source, held_to)
    n = _number(number)
    try:
        cr = _local_forge(ctx, row).merge(n)
    except Conflict as exc:
        if "conflicts in" not in exc.message:
            raise
        raise Conflict(
            exc.message,
            next_steps=[
                f"refresh the staged proposals on the new {row.branch}: gitkb proposals refresh {row.name}",
                "then open the review again (gitkb pr open) and approve it; discard proposals that conflict",
            ],
            details=exc.details,
        ) from None
    audit.record(
        ctx,
        actor=actor,
        action="change_request.merge",
        target=row.name,
        result="merged",
        detail={"number": n, "merge_commit": cr.merge_commit_sha},
    )
    assert cr.merge_commit_sha is not None
    sync = request_sync(ctx, row.name, cr.merge_commit_sha, wait=wait, held_to=held_to)
    return {
        "Message": f"Merged change request #{n} into {cr.base} as {cr.merge_commit_sha[:12]}; "
        + ("synced" if wait else f"sync queued as job {sync['job_id']}"),
        "source": row.name,
        "number": n,
        "state": cr.state,
        "merge_commit": cr.merge_commit_sha,
        "url": cr.url,
        **{k: v for k, v in sync.items() if k in ("job_id", "queued", "deduplicated", "sync")},
    }


def forge_close(ctx: Context, source: Any, number: Any, *, actor: str = "operator") -> dict[str, Any]:
    row = resolve_source(ctx, source)
    n = _number(number)
    cr = _local_forge(ctx, row).close(n)
    out = change_request_closed(ctx, row.name, n, actor=actor)
    return {
        **out,
        "state": cr.state,
        "url": cr.url,
        "Message": f"Closed change request #{n} without merging; its proposals stay staged",
    }


def list_pull_requests(ctx: Context, source: Any, state: Any = None) -> dict[str, Any]:
    """Change requests of the source's proposal branch: from the local forge's catalog, or the reviews that opened
    them (GitHub, GitLab)."""
    row = resolve_source(ctx, source)
    forge = forge_for(ctx, row)
    if forge.name == "local":
        crs = forge.list(state=state or None)  # type: ignore[attr-defined]
        items = [
            {
                "number": c.number,
                "url": c.url,
                "state": c.state,
                "head": c.head,
                "base": c.base,
                "title": c.title,
                "merge_commit": c.merge_commit_sha,
            }
            for c in crs
        ]
    else:
        seen: dict[int, dict[str, Any]] = {}
        for r in prop_rows.list_reviews(ctx.catalog.conn, source_id=row.id, limit=1000):
            if r.cr_number is not None and r.cr_number not in seen:
                seen[r.cr_number] = {
                    "number": r.cr_number,
                    "url": r.cr_url,
                    "state": r.state,
                    "head": r.branch,
                    "base": r.base_branch,
                    "title": r.title,
                    "merge_commit": None,
                }
        items = sorted(seen.values(), key=lambda c: c["number"])
    return {
        "source": row.name,
        "forge": forge.name,
        "PullRequests": items,
        "count": len(items),
        "Message": f"{len(items)} change request(s)",
    }
