"""The action-review gate in front of every push, and open_kb_pull_request.

``open_kb_pull_request`` records what would be pushed -- source, branch, base
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

import getpass
import re
import time
from typing import Any

from gitkb.core.change_planning import changed_files
from gitkb.core.errors import Conflict, GitkbError, InvalidArgument, NotFound, ReviewDenied
from gitkb.core.paging import page_of, paged
from gitkb.services.changes import audit
from gitkb.services.changes import review_push as rp
from gitkb.services.changes.proposals import author
from gitkb.services.changes.sources.registry import open_repo, proposal_branch, resolve_source
from gitkb.services.changes.sources.staging import restack
from gitkb.services.context import Context
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import proposals as prop_rows
from gitkb.stores.catalog import sources as source_rows
from gitkb.stores.catalog.proposals import ReviewRow
from gitkb.stores.catalog.sources import SourceRow
from gitkb.stores.git_replay import merge_base, replay, squash
from gitkb.stores.repos import ManagedRepo

REQUESTER = re.compile(r"^(agent|token|local):[^\x00-\x1f\x7f]{1,200}$")


def local_requester() -> str:
    """``local:<user>``: who asks when a person runs the CLI or the library on this machine."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # pragma: no cover - no passwd entry
        user = "operator"
    return f"local:{user}"


def _requester(requested_by: Any) -> str:
    if requested_by is None or requested_by == "":
        return local_requester()
    if not isinstance(requested_by, str) or not REQUESTER.match(requested_by):
        raise InvalidArgument(
            f"requested_by must be agent:<id>, token:<name> or local:<user>, got {requested_by!r}"
        )
    return requested_by


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
        "overwrites": r.overwrites,
        "push_in_flight": r.pushing_sha is not None,
    }
    warning = rp.overwrite_warning(r) if not r.pushed else None
    if warning:
        out["Warnings"] = [warning]
    if diff:
        out["diff"] = rp.diff_with_warning(r) if not r.pushed else r.diff
    return out


def open_kb_pull_request(
    ctx: Context,
    source_id_or_index: Any,
    target_index: Any = "",
    title: Any = "",
    body: Any = "",
    commit_message: Any = "",
    *,
    requested_by: str | None = None,
    proposal_ids: Any = None,
) -> dict[str, Any]:
    """Record a pending review of the staged proposals; ``requested_by`` None: ``local:<user>``.

    ``proposal_ids``: review (and push) only these staged proposals; the branch is reordered so they
    come first, and the review's head is the last of them. None or empty: all staged ones."""
    requester = _requester(requested_by)
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
    rp.reconcile_in_flight(ctx, source_id=row.id)
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
    if proposal_ids:
        staged, head = _choose(ctx, row, repo, staged, proposal_ids)
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
    try:  # what is on the remote branch now, and which of it a push would drop
        expected, overwrites = rp.remote_state(ctx, row, repo, head=head, base=base_head)
    except GitkbError as exc:
        expected, overwrites = repo.tracking_head(branch), []
        warnings.append(
            f"could not fetch {branch!r} ({exc.message}); approving checks the remote branch again"
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
            requested_by=requester,
            overwrites=overwrites,
        )
    audit.record(
        ctx,
        actor=requester,
        action="review.request",
        target=row.name,
        result="pending",
        detail={"review_id": review.id, "head": head, "proposals": review.proposal_ids},
    )
    out = {**describe(ctx, review), "existing": False, "Message": _waiting(review)}
    warnings += out.get("Warnings", [])
    if warnings:
        out["Warnings"] = warnings
    return out


def _choose(
    ctx: Context, row: SourceRow, repo: ManagedRepo, staged: list[prop_rows.ProposalRow], wanted: Any
) -> tuple[list[prop_rows.ProposalRow], str]:
    """The chosen staged proposals first on the branch (replayed when needed); returns them and the
    commit of the last one, the head the review pushes."""
    if not isinstance(wanted, list | tuple) or not all(isinstance(x, str) and x.strip() for x in wanted):
        raise InvalidArgument("proposal_ids must be a list of proposal ids (prop_...)")
    ids = {x.strip() for x in wanted}
    unknown = sorted(ids - {p.id for p in staged})
    if unknown:
        raise NotFound(
            f"not staged for source {row.name!r}: {', '.join(unknown)}",
            next_steps=[f"list the staged ones with `gitkb proposals list --source {row.name}`"],
            details={"proposal_ids": unknown},
        )
    chosen = [p for p in staged if p.id in ids]
    rest = [p for p in staged if p.id not in ids]
    if staged[: len(chosen)] != chosen:
        probe = replay(
            repo.repository, staged[0].parent_sha, [(p.parent_sha, p.commit_sha) for p in chosen + rest]
        )
        blocked = [p.id for p in chosen if p.commit_sha in probe.conflicts]
        if blocked:
            raise Conflict(
                f"{', '.join(blocked)} build(s) on staged proposals that were not chosen; nothing was opened",
                next_steps=[
                    "choose those earlier proposals too (--proposal ID for each)",
                    "or review all staged proposals (no --proposal)",
                ],
                details={"proposal_ids": blocked},
            )
        restack(ctx, row, repo, staged[0].parent_sha, chosen + rest)
        again = {
            p.id: p for p in prop_rows.list_proposals(ctx.catalog.conn, source_id=row.id, states=("staged",))
        }
        chosen = [again[p.id] for p in chosen if p.id in again]
    return chosen, chosen[-1].commit_sha


def _superseded(ctx: Context, repo: ManagedRepo, r: ReviewRow) -> bool:
    """The review's head is no longer on the proposal branch, or (a review of every staged proposal)
    newer proposals were staged after it."""
    head = repo.head(r.branch)
    if head is None or not repo.is_ancestor(r.head_sha, head):
        return True
    staged = prop_rows.list_proposals(ctx.catalog.conn, source_id=r.source_id, states=("staged",))
    others = [p for p in staged if p.id not in set(r.proposal_ids)]
    return bool(others) and all(p.created_at > r.created_at for p in others)


def _waiting(r: ReviewRow) -> str:
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
    rp.reconcile_in_flight(ctx, source_id=row.id if row else None)
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
        if r.state == "pending":
            with ctx.catalog.write() as w:
                prop_rows.update_review(w, r.id, state="approved", reviewer=reviewer, decided_at=time.time())
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
        cr = rp.push_and_open(ctx, get_review(ctx, r.id), row, repo, reviewer, expected)
        return _approved(ctx, get_review(ctx, r.id), row, cr)


def _check_overwrites(
    ctx: Context, r: ReviewRow, row: SourceRow, repo: ManagedRepo, reviewer: str, overwrite: bool
) -> str | None:
    """Fetch the proposal branch; refuse unless what a push drops is nothing or acknowledged. Returns the
    remote head the push is leased on."""
    expected, dropped = rp.remote_state(ctx, row, repo, head=r.head_sha, base=_base_now(repo, row, r))
    if dropped:  # the base may have moved and been merged in by hand: compare with it fetched
        base_head, _ = _fresh_base(repo, row)
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
