"""The action-review gate in front of every push, and open_kb_pull_request.

``open_kb_pull_request`` records what would be pushed -- source, branch, base
and head commits, the staged diff, ``changed_files``, the proposals -- as a
*pending* review, and pushes nothing. Calling it again for the same branch
state returns the same review; staging more proposals first supersedes the
pending one. ``approve_review`` (an operator: CLI, HTTP, library) pushes the
staged head with ``git push --force-with-lease=<ref>:<expected sha>`` and
opens the change request on the source's forge, or updates the open one for
the branch; ``deny_review`` records the reason and pushes nothing (the
proposals stay staged until discarded). A stale lease (someone else pushed
the branch) refuses the push: the review stays approved but unpushed, and
approving it again retries. Every decision and push goes to the audit log.
"""

from __future__ import annotations

import time
from typing import Any

from gitkb.core.change_planning import changed_files
from gitkb.core.errors import Conflict, GitkbError, InvalidArgument, NotFound, ReviewDenied
from gitkb.core.paging import page_of, paged
from gitkb.forges import open_or_update
from gitkb.services import audit
from gitkb.services.context import Context
from gitkb.services.proposals import author
from gitkb.services.sources.registry import forge_for, open_repo, proposal_branch, resolve_source
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import proposals as prop_rows
from gitkb.stores.catalog import sources as source_rows
from gitkb.stores.catalog.proposals import ReviewRow
from gitkb.stores.catalog.sources import SourceRow
from gitkb.stores.git_replay import merge_base, squash
from gitkb.stores.repos import ManagedRepo


def _target_index(ctx: Context, row: SourceRow, first: str, target_index: str) -> str | None:
    conn = ctx.catalog.conn
    names = [ix.name for i in row.index_ids if (ix := index_rows.get_by_id(conn, i)) is not None]
    wanted = target_index or (first if first in names else "")
    if wanted:
        if wanted not in names:
            raise InvalidArgument(
                f"target_index {wanted!r} is not fed by source {row.name!r}; candidates: {', '.join(names)}",
                details={"candidates": names},
            )
        return wanted
    if len(names) > 1:
        raise InvalidArgument(
            f"source {row.name!r} feeds several indexes; pass target_index, one of: {', '.join(names)}",
            details={"candidates": names},
        )
    return names[0] if names else None


def _fresh_base(repo: ManagedRepo, row: SourceRow) -> tuple[str, list[str]]:
    try:
        return repo.fetch(row.branch), []
    except GitkbError as exc:
        tracked = repo.tracking_head(row.branch)
        if tracked is None:
            raise
        return tracked, [
            f"could not fetch {row.branch!r} ({exc.message}); compared with the last fetched head"
        ]


def describe(ctx: Context, r: ReviewRow, *, diff: bool = True) -> dict[str, Any]:
    src = source_rows.get_by_id(ctx.catalog.conn, r.source_id)
    ix = index_rows.get_by_id(ctx.catalog.conn, r.index_id) if r.index_id else None
    out: dict[str, Any] = {
        "review_id": r.id,
        "review_state": r.state,
        "source": src.name if src else r.source_id,
        "target_index": ix.name if ix else None,
        "branch": r.branch,
        "base_branch": r.base_branch,
        "base": r.base_sha,
        "head": r.head_sha,
        "push_sha": r.push_sha,
        "title": r.title,
        "body": r.body,
        "changed_files": r.changed_files,
        "proposal_ids": r.proposal_ids,
        "pushed": r.pushed,
        "push_error": r.push_error,
        "number": r.cr_number,
        "url": r.cr_url,
        "requested_by": r.requested_by,
        "reviewer": r.reviewer,
        "reason": r.reason,
        "decided_at": r.decided_at,
        "created_at": r.created_at,
    }
    if diff:
        out["diff"] = r.diff
    return out


def open_kb_pull_request(
    ctx: Context,
    source_id_or_index: Any,
    target_index: Any = "",
    title: Any = "",
    body: Any = "",
    commit_message: Any = "",
    *,
    actor: str = "agent",
) -> dict[str, Any]:
    for name, v in (
        ("target_index", target_index),
        ("title", title),
        ("body", body),
        ("commit_message", commit_message),
    ):
        if v is not None and not isinstance(v, str):
            raise InvalidArgument(f"{name} must be a string")
    row = resolve_source(ctx, source_id_or_index)
    index_name = _target_index(ctx, row, str(source_id_or_index).strip(), (target_index or "").strip())
    repo = open_repo(ctx, row)
    branch = proposal_branch(row)
    conn = ctx.catalog.conn
    staged = prop_rows.list_proposals(conn, source_id=row.id, states=("staged",))
    head = repo.head(branch)
    if not staged or head is None:
        raise InvalidArgument(
            f"nothing is staged for source {row.name!r}",
            next_steps=["stage a change with propose_kb_edit first"],
        )
    stale: list[ReviewRow] = []
    for r in prop_rows.list_reviews(conn, source_id=row.id, states=("pending", "approved", "denied")):
        if r.head_sha != head:
            continue
        if r.state == "approved" and not r.pushed and r.push_error == "stale lease":
            stale.append(r)
            continue
        if r.state == "denied":
            raise ReviewDenied(
                f"review {r.id} of exactly these staged changes was denied: {r.reason}",
                next_steps=["discard or change the proposals (gitkb proposals discard ID), then open again"],
                details={"review_id": r.id, "review_state": "denied", "reason": r.reason},
            )
        return {**describe(ctx, r), "existing": True, "Message": _waiting(r)}
    base_head, warnings = _fresh_base(repo, row)
    expected = repo.tracking_head(branch)
    if stale:  # replacing what someone else pushed: look at the remote branch now, and say so
        try:
            expected = repo.fetch(branch)
        except NotFound:
            expected = None
        warnings.append(
            f"{branch!r} on the remote holds commits gitkb did not push ({(expected or 'deleted')[:12]}); "
            "approving this review overwrites them"
        )
    base = merge_base(repo.repository, head, base_head) or base_head
    commit_message = (commit_message or "").strip()
    push_sha = head
    if commit_message:
        push_sha = squash(repo.repository, base, head, commit_message, author(ctx))
    title = (title or "").strip() or _default_title(row, staged)
    body = (body or "").strip() or _default_body(staged)
    ix = index_rows.get_by_name(conn, index_name) if index_name else None
    with ctx.catalog.write() as w:
        for old in [*prop_rows.list_reviews(w, source_id=row.id, states=("pending",)), *stale]:
            prop_rows.update_review(w, old.id, state="superseded")
        review = prop_rows.insert_review(
            w,
            id=prop_rows.new_review_id(),
            source_id=row.id,
            index_id=ix.id if ix else None,
            branch=branch,
            base_branch=row.branch,
            base_sha=base,
            head_sha=head,
            push_sha=push_sha,
            expected_remote_sha=expected,
            title=title,
            body=body,
            commit_message=commit_message,
            diff=repo.unified_diff(base, push_sha),
            changed_files=changed_files(repo.diff_names(base, push_sha)),
            proposal_ids=[p.id for p in staged],
            requested_by=actor,
        )
    audit.record(ctx, actor=actor, action="review.request", target=row.name, result="pending",
                 detail={"review_id": review.id, "head": head, "proposals": review.proposal_ids})  # fmt: skip
    out = {**describe(ctx, review), "existing": False, "Message": _waiting(review)}
    if warnings:
        out["Warnings"] = warnings
    return out


def _waiting(r: ReviewRow) -> str:
    if r.state == "approved" and r.pushed and r.cr_number is not None:
        return f"Review {r.id} is approved and pushed: change request #{r.cr_number} ({r.cr_url})"
    if r.state == "approved":
        return f"Review {r.id} is approved but not pushed ({r.push_error}); approve it again to retry"
    return (
        f"Review {r.id} is pending: nothing is pushed until a person approves it "
        f"(gitkb review approve {r.id}, or deny it with a reason)"
    )


def _default_title(row: SourceRow, staged: list[prop_rows.ProposalRow]) -> str:
    if len(staged) == 1:
        p = staged[0]
        return f"docs: {p.op} {p.path}" + (f" -> {p.new_path}" if p.new_path else "")
    return f"docs: {len(staged)} proposed changes to {row.name}"


def _default_body(staged: list[prop_rows.ProposalRow]) -> str:
    lines = ["Changes proposed through gitkb and approved by a reviewer before this push.", ""]
    for p in staged:
        what = f"{p.op} `{p.path}`" + (f" -> `{p.new_path}`" if p.new_path else "")
        lines.append(f"- {what}" + (f": {p.note.strip()}" if p.note.strip() else ""))
    return "\n".join(lines)


def get_review(ctx: Context, review_id: Any) -> ReviewRow:
    if not isinstance(review_id, str) or not review_id.strip():
        raise InvalidArgument("review_id is required (rev_...)")
    r = prop_rows.get_review(ctx.catalog.conn, review_id.strip())
    if r is None:
        raise NotFound(f"no review {review_id!r}", next_steps=["list them with `gitkb review list`"])
    return r


def list_reviews(
    ctx: Context, state: Any = None, source: Any = None, start: Any = None, count: Any = None
) -> dict[str, Any]:
    """Reviews, pending first then newest, a page at a time."""
    page = page_of(start, count, default=100)
    states = None
    if state not in (None, "", "all"):
        if state not in prop_rows.REVIEW_STATES:
            raise InvalidArgument(f"state must be one of {', '.join(prop_rows.REVIEW_STATES)} or 'all'")
        states = (str(state),)
    row = resolve_source(ctx, source) if source else None
    rows = prop_rows.list_reviews(
        ctx.catalog.conn, source_id=row.id if row else None, states=states, limit=-1  # -1: all, then paged
    )
    rows.sort(key=lambda r: (r.state != "pending", -r.created_at))
    shown, fields = paged(rows, page)
    return {"Reviews": [describe(ctx, r, diff=False) for r in shown], **fields,
            "Message": f"{len(shown)} of {len(rows)} review(s)"}  # fmt: skip


def show_review(ctx: Context, review_id: Any) -> dict[str, Any]:
    r = get_review(ctx, review_id)
    return {**describe(ctx, r), "Message": f"{r.id}: {r.state} - {r.title}"}


def deny_review(ctx: Context, review_id: Any, reason: Any, *, reviewer: str = "operator") -> dict[str, Any]:
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidArgument(
            "a denial needs a reason (it is recorded and shown to whoever proposed the change)"
        )
    r = get_review(ctx, review_id)
    if r.state not in ("pending", "approved") or r.pushed:
        raise Conflict(
            f"review {r.id} is {r.state}{' and pushed' if r.pushed else ''}; it can no longer be denied"
        )
    with ctx.catalog.write() as w:
        prop_rows.update_review(w, r.id, state="denied", reviewer=reviewer, reason=reason.strip(),
                                decided_at=time.time())  # fmt: skip
    src = source_rows.get_by_id(ctx.catalog.conn, r.source_id)
    audit.record(ctx, actor=reviewer, action="review.deny", target=src.name if src else r.source_id,
                 result="denied", detail={"review_id": r.id, "reason": reason.strip()})  # fmt: skip
    return {
        **describe(ctx, get_review(ctx, r.id), diff=False),
        "Message": f"Review {r.id} denied; nothing was pushed. The proposals stay staged until discarded.",
    }


def approve_review(ctx: Context, review_id: Any, *, reviewer: str = "operator") -> dict[str, Any]:
    """Approve, push with lease, open or update the change request; returns number, url, changed_files."""
    r = get_review(ctx, review_id)
    if r.state == "denied":
        raise ReviewDenied(
            f"review {r.id} was denied ({r.reason}); open a new one", details={"review_id": r.id}
        )
    if r.state not in ("pending", "approved"):
        raise Conflict(f"review {r.id} is {r.state}; nothing to approve", details={"review_state": r.state})
    row = source_rows.get_by_id(ctx.catalog.conn, r.source_id)
    if row is None:
        raise NotFound(f"the source of review {r.id} was removed")
    repo = open_repo(ctx, row)
    if not r.pushed and repo.head(r.branch) != r.head_sha:
        with ctx.catalog.write() as w:
            prop_rows.update_review(w, r.id, state="superseded")
        raise Conflict(
            f"the staged proposals changed after review {r.id} was requested; it is superseded",
            next_steps=["call open_kb_pull_request again and review the new state"],
        )
    if r.state == "pending":
        with ctx.catalog.write() as w:
            prop_rows.update_review(w, r.id, state="approved", reviewer=reviewer, decided_at=time.time())
        audit.record(ctx, actor=reviewer, action="review.approve", target=row.name, result="approved",
                     detail={"review_id": r.id, "head": r.push_sha})  # fmt: skip
    if not r.pushed:
        _push(ctx, r, row, repo, reviewer)
    return _open_change_request(ctx, get_review(ctx, r.id), row, repo, reviewer)


def _push(ctx: Context, r: ReviewRow, row: SourceRow, repo: ManagedRepo, reviewer: str) -> None:
    try:
        repo.push_with_lease(r.branch, r.expected_remote_sha, sha=r.push_sha)
    except GitkbError as exc:
        stale = isinstance(exc, Conflict)
        with ctx.catalog.write() as w:
            prop_rows.update_review(w, r.id, push_error="stale lease" if stale else exc.message)
        audit.record(ctx, actor=reviewer, action="push", target=row.name, result="stale_lease" if stale else "failed",
                     detail={"review_id": r.id, "branch": r.branch, "expected": r.expected_remote_sha,
                             "error": exc.message})  # fmt: skip
        details = {"review_id": r.id, "review_state": "approved", "pushed": False}
        if stale:
            raise Conflict(
                f"review {r.id} is approved but was not pushed: {r.branch!r} moved on the remote since gitkb last "
                f"saw it (expected {r.expected_remote_sha or 'no branch'}); nothing was overwritten",
                next_steps=[
                    "look at what was pushed to the proposal branch",
                    "to replace it, call open_kb_pull_request again: the new review says it overwrites the branch",
                ],
                details={**details, "stale_lease": True},
            ) from None
        exc.details.update(details)
        raise
    with ctx.catalog.write() as w:
        prop_rows.update_review(w, r.id, pushed=True, push_error=None)
    audit.record(ctx, actor=reviewer, action="push", target=row.name, result="pushed",
                 detail={"review_id": r.id, "branch": r.branch, "sha": r.push_sha})  # fmt: skip


def _open_change_request(
    ctx: Context, r: ReviewRow, row: SourceRow, repo: ManagedRepo, reviewer: str
) -> dict[str, Any]:
    try:
        forge = forge_for(ctx, row)
        cr, created = open_or_update(forge, head=r.branch, base=r.base_branch, title=r.title, body=r.body)
    except GitkbError as exc:
        with ctx.catalog.write() as w:
            prop_rows.update_review(w, r.id, push_error=f"change request: {exc.message}")
        audit.record(ctx, actor=reviewer, action="change_request.open", target=row.name, result="failed",
                     detail={"review_id": r.id, "error": exc.message})  # fmt: skip
        exc.details.update({"review_id": r.id, "review_state": "approved", "pushed": True})
        exc.next_steps = [
            *exc.next_steps,
            f"the branch is pushed; approve review {r.id} again to retry the PR step",
        ]
        raise
    base_head = repo.tracking_head(r.base_branch) or r.base_sha
    start = merge_base(repo.repository, r.push_sha, base_head) or r.base_sha
    files = changed_files(repo.diff_names(start, r.push_sha))
    with ctx.catalog.write() as w:
        prop_rows.update_review(
            w, r.id, cr_number=cr.number, cr_url=cr.url, changed_files=files, push_error=None
        )
    audit.record(ctx, actor=reviewer, action="change_request.open" if created else "change_request.update",
                 target=row.name, result="ok", detail={"review_id": r.id, "number": cr.number, "url": cr.url})  # fmt: skip
    return {
        **describe(ctx, get_review(ctx, r.id), diff=False),
        "number": cr.number,
        "url": cr.url,
        "created": created,
        "review_state": "approved",
        "changed_files": files,
        "Message": f"Approved review {r.id}: pushed {r.branch} and {'opened' if created else 'updated'} "
        f"change request #{cr.number} ({cr.url})",
    }
