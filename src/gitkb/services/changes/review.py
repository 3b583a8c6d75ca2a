"""The action-review gate in front of every push: reviews shown, denied, approved (and pushed).

A review is requested by ``review_request.request_review`` (the ``open_kb_pull_request`` action),
which records what would be pushed -- source, branch, base
and head commits, the staged diff, ``changed_files``, the proposals -- as a
*pending* review, and pushes nothing. Calling it again for the same branch
state returns the same review; staging more proposals first supersedes the
pending one. Every review records who asked for it, ``requested_by``
(``agent:<id>``, ``token:<name>`` or ``local:<user>``).

A push that would take commits someone else made off the proposal branch is
said wherever the review is shown: ``overwrites`` (``{sha, author, message}``),
a warning line, and ``#`` lines above the diff. ``approve_review`` fetches the
branch and computes that list again; when it is not empty approving needs
``overwrite=True``, and that acknowledges only the commits the review listed
(a hand push after the review was shown refuses again, with the new list).
Refused, nothing is pushed and the review stays as it was.

``approve_review`` (an operator: CLI, HTTP, library) then pushes the staged
head with ``git push --force-with-lease=<ref>:<the remote head just checked>``
and opens the change request on the source's forge, or updates the open one
for the branch (see :mod:`gitkb.services.changes.review_push`, which also reconciles
a push a crash left unrecorded); ``deny_review`` records the reason and pushes
nothing (the proposals stay staged until discarded). A lease gone stale in
between refuses the push: the review stays approved but unpushed, and
approving it again looks again. Every decision and push goes to the audit log.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gitkb.core.errors import Conflict, GitkbError, InvalidArgument, NotFound, ReviewDenied
from gitkb.core.faults import pause_point
from gitkb.core.paging import page_of, paged
from gitkb.services.changes import audit
from gitkb.services.changes import review_push as rp
from gitkb.services.changes.sources.registry import open_repo, resolve_source
from gitkb.services.context import Context
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import proposals as prop_rows
from gitkb.stores.catalog import sources as source_rows
from gitkb.stores.catalog.proposals import ReviewRow
from gitkb.stores.catalog.sources import SourceRow
from gitkb.stores.repos import ManagedRepo


def fresh_base(repo: ManagedRepo, row: SourceRow) -> tuple[str, list[str]]:
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
        "overwrites": r.overwrites,
        "push_in_flight": r.pushing_sha is not None,
    }
    warning = rp.overwrite_warning(r) if not r.pushed else None
    if warning:
        out["Warnings"] = [warning]
    if diff:
        out["diff"] = rp.diff_with_warning(r) if not r.pushed else r.diff
    return out


def _superseded(ctx: Context, repo: ManagedRepo, r: ReviewRow) -> bool:
    """The review's head is no longer on the proposal branch, or (a review of every staged proposal)
    newer proposals were staged after it."""
    head = repo.head(r.branch)
    if head is None or not repo.is_ancestor(r.head_sha, head):
        return True
    staged = prop_rows.list_proposals(ctx.catalog.conn, source_id=r.source_id, states=("staged",))
    others = [p for p in staged if p.id not in set(r.proposal_ids)]
    return bool(others) and all(p.created_at > r.created_at for p in others)


def waiting(r: ReviewRow) -> str:
    if r.state == "approved" and r.pushed and r.cr_number is not None:
        return f"Review {r.id} is approved and pushed: change request #{r.cr_number} ({r.cr_url})"
    if r.state == "approved":
        return f"Review {r.id} is approved but not pushed ({r.push_error}); approve it again to retry"
    extra = (
        f"; approving it overwrites {len(r.overwrites)} commit(s) gitkb did not push and needs --overwrite"
        if r.overwrites
        else ""
    )
    return (
        f"Review {r.id} is pending: nothing is pushed until a person approves it "
        f"(gitkb review approve {r.id}, or deny it with a reason){extra}"
    )


def get_review(ctx: Context, review_id: Any) -> ReviewRow:
    if not isinstance(review_id, str) or not review_id.strip():
        raise InvalidArgument("review_id is required (rev_...)")
    r = prop_rows.get_review(ctx.catalog.conn, review_id.strip())
    if r is None:
        raise NotFound(f"no review {review_id!r}", next_steps=["list them with `gitkb review list`"])
    return r


def list_reviews(
    ctx: Context,
    state: Any = None,
    source: Any = None,
    start: Any = None,
    count: Any = None,
    *,
    reachable: Callable[[SourceRow], bool] | None = None,
) -> dict[str, Any]:
    """Reviews, pending first then newest, a page at a time (``reachable``: a remote caller's
    sources it may fetch from, to settle their in-flight pushes; ``reach.reachable``)."""
    page = page_of(start, count, default=100)
    states = None
    if state not in (None, "", "all"):
        if state not in prop_rows.REVIEW_STATES:
            raise InvalidArgument(f"state must be one of {', '.join(prop_rows.REVIEW_STATES)} or 'all'")
        states = (str(state),)
    row = resolve_source(ctx, source) if source else None
    rp.reconcile_in_flight(ctx, source_id=row.id if row else None, reachable=reachable)
    rows = prop_rows.list_reviews(
        ctx.catalog.conn,
        source_id=row.id if row else None,
        states=states,
        limit=-1,  # -1: all, then paged
    )
    rows.sort(key=lambda r: (r.state != "pending", -r.created_at))
    shown, fields = paged(rows, page)
    return {
        "Reviews": [describe(ctx, r, diff=False) for r in shown],
        **fields,
        "Message": f"{len(shown)} of {len(rows)} review(s)",
    }


def show_review(ctx: Context, review_id: Any) -> dict[str, Any]:
    r = get_review(ctx, review_id)
    if r.pushing_sha is not None:
        rp.reconcile_in_flight(ctx, source_id=r.source_id)
        r = get_review(ctx, r.id)
    return {**describe(ctx, r), "Message": f"{r.id}: {r.state} - {r.title}"}


def deny_review(ctx: Context, review_id: Any, reason: Any, *, reviewer: str = "operator") -> dict[str, Any]:
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidArgument(
            "a denial needs a reason (it is recorded and shown to whoever proposed the change)"
        )
    r = get_review(ctx, review_id)
    if r.pushing_sha is not None:
        rp.reconcile_in_flight(ctx, source_id=r.source_id)
        r = get_review(ctx, r.id)
    if r.state not in ("pending", "approved") or r.pushed or r.pushing_sha is not None:
        raise Conflict(
            f"review {r.id} is {r.state}{' and pushed' if r.pushed else ''}; it can no longer be denied"
        )
    with ctx.catalog.write() as w:
        prop_rows.update_review(
            w, r.id, state="denied", reviewer=reviewer, reason=reason.strip(), decided_at=time.time()
        )
    src = source_rows.get_by_id(ctx.catalog.conn, r.source_id)
    audit.record(
        ctx,
        actor=reviewer,
        action="review.deny",
        target=src.name if src else r.source_id,
        result="denied",
        detail={"review_id": r.id, "reason": reason.strip()},
    )
    return {
        **describe(ctx, get_review(ctx, r.id), diff=False),
        "Message": f"Review {r.id} denied; nothing was pushed. The proposals stay staged until discarded.",
    }


def approve_review(
    ctx: Context, review_id: Any, *, reviewer: str = "operator", overwrite: bool = False
) -> dict[str, Any]:
    """Approve, push with lease, open or update the change request; returns number, url, changed_files.

    When the push would overwrite commits gitkb did not push, ``overwrite=True`` must acknowledge
    them (exactly those the review lists); otherwise ``Conflict`` and nothing is pushed.
    """
    if not isinstance(overwrite, bool):
        raise InvalidArgument("overwrite must be true or false")
    r = get_review(ctx, review_id)
    row = source_rows.get_by_id(ctx.catalog.conn, r.source_id)
    if row is None:
        raise NotFound(f"the source of review {r.id} was removed")
    with rp.push_lock(ctx, row.id) as held:
        if not held:
            raise Conflict(
                f"another approval is pushing {r.branch!r} right now; nothing was done",
                next_steps=[f"wait a moment, then look at it with `gitkb review show {r.id}`"],
                details={"review_id": r.id},
            )
        repo = open_repo(ctx, row)
        r = get_review(ctx, r.id)
        if r.pushing_sha is not None:  # a process died mid-push: settle that first
            rp.settle(ctx, r, row, repo)
            r = get_review(ctx, r.id)
        if r.state == "denied":
            raise ReviewDenied(
                f"review {r.id} was denied ({r.reason}); open a new one", details={"review_id": r.id}
            )
        if r.state not in ("pending", "approved"):
            raise Conflict(
                f"review {r.id} is {r.state}; nothing to approve",
                details={"review_state": r.state},
                next_steps=[f"open a new review of what is staged now: gitkb pr open {row.name}"],
            )
        if r.pushed:
            return _approved(ctx, r, row, rp.open_change_request(ctx, r, row, repo, reviewer))
        if _superseded(ctx, repo, r):
            with ctx.catalog.write() as w:
                prop_rows.update_review(w, r.id, state="superseded")
            raise Conflict(
                f"the staged proposals changed after review {r.id} was requested; it is superseded",
                next_steps=[
                    "call open_kb_pull_request again and review the new state",
                    f"after a base move, `gitkb proposals refresh {row.name}` first",
                ],
            )
        expected = _check_overwrites(ctx, r, row, repo, reviewer, overwrite)
        # the push in flight is recorded with the approval: a refresh or a choice by another caller
        # in between would otherwise mark the review superseded while it is pushed all the same
        fields: dict[str, Any] = {"pushing_sha": r.push_sha, "expected_remote_sha": expected}
        if r.state == "pending":
            fields.update(state="approved", reviewer=reviewer, decided_at=time.time())
        with ctx.catalog.write() as w:
            prop_rows.update_review(w, r.id, **fields)
        if r.state == "pending":
            audit.record(
                ctx,
                actor=reviewer,
                action="review.approve",
                target=row.name,
                result="approved",
                detail={
                    "review_id": r.id,
                    "head": r.push_sha,
                    "overwrites": [c["sha"] for c in get_review(ctx, r.id).overwrites],
                },
            )
        pause_point("review.approved")  # tests: another caller acts between the approval and the push
        cr = rp.push_and_open(ctx, get_review(ctx, r.id), row, repo, reviewer, expected)
        return _approved(ctx, get_review(ctx, r.id), row, cr)


def _check_overwrites(
    ctx: Context, r: ReviewRow, row: SourceRow, repo: ManagedRepo, reviewer: str, overwrite: bool
) -> str | None:
    """Fetch the proposal branch; refuse unless what a push drops is nothing or acknowledged. Returns the
    remote head the push is leased on."""
    expected, dropped = rp.remote_state(ctx, row, repo, head=r.head_sha, base=_base_now(repo, row, r))
    if dropped:  # the base may have moved and been merged in by hand: compare with it fetched
        base_head, _ = fresh_base(repo, row)
        expected, dropped = rp.remote_state(ctx, row, repo, head=r.head_sha, base=base_head)
    listed = {c["sha"] for c in r.overwrites}
    unlisted = [c for c in dropped if c["sha"] not in listed]
    if dropped != r.overwrites or expected != r.expected_remote_sha:
        with ctx.catalog.write() as w:
            prop_rows.update_review(w, r.id, overwrites=dropped, expected_remote_sha=expected)
    if not dropped or (overwrite and not unlisted):
        return expected
    audit.record(
        ctx,
        actor=reviewer,
        action="review.approve",
        target=row.name,
        result="refused_overwrite",
        detail={"review_id": r.id, "overwrites": [c["sha"] for c in dropped], "acknowledged": overwrite},
    )
    shown = "; ".join(f"{c['sha'][:12]} by {c['author']}: {c['message']}" for c in (unlisted or dropped)[:5])
    if overwrite:
        what = f"the remote now holds {len(unlisted)} commit(s) the review did not list ({shown})"
    else:
        what = f"approving it would overwrite {len(dropped)} commit(s) gitkb did not push ({shown})"
    raise Conflict(
        f"review {r.id} was not approved: {r.branch!r} on the remote changed by hand; {what}. Nothing was pushed",
        next_steps=[
            f"look at them: gitkb review show {r.id} (the list is in 'overwrites')",
            f'to replace them: gitkb review approve {r.id} --overwrite (HTTP: {{"overwrite": true}}; '
            "library: overwrite=True; web page: tick 'overwrite')",
            "to keep them: deny the review and stage the change on top of them",
        ],
        details={"review_id": r.id, "review_state": r.state, "pushed": False, "overwrites": dropped},
    )


def _base_now(repo: ManagedRepo, row: SourceRow, r: ReviewRow) -> str:
    return repo.tracking_head(row.branch) or r.base_sha


def _approved(ctx: Context, r: ReviewRow, row: SourceRow, cr: dict[str, Any]) -> dict[str, Any]:
    return {
        **describe(ctx, r, diff=False),
        **cr,
        "review_state": "approved",
        "Message": f"Approved review {r.id}: pushed {r.branch} and {'opened' if cr['created'] else 'updated'} "
        f"change request #{cr['number']} ({cr['url']})",
    }
