"""Requesting a review (the ``open_kb_pull_request`` action): the staged proposals of a source
recorded as a *pending* review -- source, branch, base and head commits, the staged diff,
``changed_files``, the proposals, who asked (``requested_by``: ``agent:<id>``, ``token:<name>`` or
``local:<user>``). It pushes nothing and opens no change request: that happens when a person
approves the review (``review.approve_review``). Calling it again for the same branch state returns
the same review; staging more proposals first supersedes the pending one.
"""

from __future__ import annotations

import getpass
import re
from dataclasses import dataclass
from typing import Any

from gitkb.core.change_planning import changed_files
from gitkb.core.errors import Conflict, GitkbError, InvalidArgument, NotFound, ReviewDenied
from gitkb.services.changes import audit, fed_view
from gitkb.services.changes import review_push as rp
from gitkb.services.changes.proposals import author
from gitkb.services.changes.review import describe, fresh_base, waiting
from gitkb.services.changes.sources.branch_order import staged_on_branch
from gitkb.services.changes.sources.registry import open_repo, proposal_branch, resolve_source
from gitkb.services.changes.sources.staging import restack
from gitkb.services.context import Context
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import proposals as prop_rows
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


def _target_index(
    ctx: Context, row: SourceRow, first: str, target_index: str, targets: frozenset[str] | None
) -> str | None:
    """The index the review targets: the one named, or the only candidate; ``targets`` (an agent's:
    the index ids it may propose to) narrows the candidates, so no other index is named."""
    conn = ctx.catalog.conn
    first, target_index = first.strip(), target_index.strip()
    ids = [i for i in row.index_ids if targets is None or i in targets]
    names = [ix.name for i in ids if (ix := index_rows.get_by_id(conn, i)) is not None]
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


def request_review(
    ctx: Context,
    source_id_or_index: Any,
    target_index: Any = "",
    title: Any = "",
    body: Any = "",
    commit_message: Any = "",
    *,
    requested_by: str | None = None,
    proposal_ids: Any = None,
    fed_only: bool = False,
    targets: frozenset[str] | None = None,
) -> dict[str, Any]:
    """Record a pending review of the staged proposals (the ``open_kb_pull_request`` action): nothing
    is pushed and no change request is opened until a person approves it (``review.approve_review``).
    ``requested_by`` None: ``local:<user>``.

    ``proposal_ids``: review (and push) only these staged proposals; the branch is reordered so they
    come first, and the review's head is the last of them. None or empty: all staged ones (either
    way listed in branch order). An agent: ``fed_only`` (shows the fed ones, ``fed_view``), ``targets``."""
    requester = _requester(requested_by)
    _strings(target_index=target_index, title=title, body=body, commit_message=commit_message)
    row = resolve_source(ctx, source_id_or_index)
    index_name = _target_index(ctx, row, str(source_id_or_index), target_index or "", targets)
    rp.reconcile_in_flight(ctx, source_id=row.id)
    repo = open_repo(ctx, row)
    branch = proposal_branch(row)
    conn = ctx.catalog.conn
    staged = staged_on_branch(conn, row.id)  # the order the branch, its diff and a choice follow
    head = repo.head(branch)
    if not staged or head is None:
        raise InvalidArgument(
            f"nothing is staged for source {row.name!r}",
            next_steps=["stage a change with propose_kb_edit first"],
        )
    if proposal_ids:
        visible = fed_view.fed_ids(ctx, row.name, head, [p.id for p in staged]) if fed_only else None
        staged, head = _choose(ctx, row, repo, staged, proposal_ids, visible)
    existing, stale = _same_head(ctx, row, head, fed_only)
    if existing is not None:
        out = {**describe(ctx, existing), "existing": True, "Message": waiting(existing)}
        return _shown(ctx, out, fed_only, requester, title, body, [])
    plan = _push_plan(ctx, row, repo, branch, head, (commit_message or "").strip())
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
            base_sha=plan.base,
            head_sha=head,
            push_sha=plan.push_sha,
            expected_remote_sha=plan.expected,
            title=(title or "").strip() or _default_title(row, staged),
            body=(body or "").strip() or _default_body(staged),
            commit_message=plan.commit_message,
            diff=repo.unified_diff(plan.base, plan.push_sha),
            changed_files=changed_files(repo.diff_names(plan.base, plan.push_sha)),
            proposal_ids=[p.id for p in staged],
            requested_by=requester,
            overwrites=plan.overwrites,
        )
    audit.record(
        ctx,
        actor=requester,
        action="review.request",
        target=row.name,
        result="pending",
        detail={"review_id": review.id, "head": head, "proposals": review.proposal_ids},
    )
    out = {**describe(ctx, review), "existing": False, "Message": waiting(review)}
    warnings = plan.warnings + out.get("Warnings", [])
    if warnings:
        out["Warnings"] = warnings
    return _shown(ctx, out, fed_only, requester, title, body, plan.warnings)


def _shown(
    ctx: Context,
    out: dict[str, Any],
    fed_only: bool,
    caller: str,
    title: Any,
    body: Any,
    warnings: list[str],
) -> dict[str, Any]:
    """The answer as the caller may see it: an agent's through the fed proposals only."""
    if not fed_only:
        return out
    return fed_view.fed_review(ctx, out, caller=caller, title=title or "", body=body or "", warnings=warnings)


def _strings(**given: Any) -> None:
    for name, v in given.items():
        if v is not None and not isinstance(v, str):
            raise InvalidArgument(f"{name} must be a string")


def _same_head(
    ctx: Context, row: SourceRow, head: str, fed_only: bool = False
) -> tuple[ReviewRow | None, list[ReviewRow]]:
    """A review of exactly this head to return again (a denied one refuses), and the approved ones
    whose push met a stale lease (superseded by the new review). ``fed_only`` (an agent): the reason
    of a denied review that holds proposals on files the source does not feed is not shown (it may
    speak of them)."""
    stale: list[ReviewRow] = []
    states = ("pending", "approved", "denied")
    for r in prop_rows.list_reviews(ctx.catalog.conn, source_id=row.id, states=states):
        if r.head_sha != head:
            continue
        if r.state == "approved" and not r.pushed and r.push_error == "stale lease":
            stale.append(r)
            continue
        if r.state == "denied":
            reason = r.reason
            if fed_only and set(r.proposal_ids) - fed_view.fed_ids(ctx, row.name, r.base_sha, r.proposal_ids):
                reason = "(not shown: it concerns other staged changes too; ask the reviewer)"
            raise ReviewDenied(
                f"review {r.id} of exactly these staged changes was denied: {reason}",
                next_steps=["discard or change the proposals (gitkb proposals discard ID), then open again"],
                details={"review_id": r.id, "review_state": "denied", "reason": reason},
            )
        return r, stale
    return None, stale


@dataclass(frozen=True)
class _PushPlan:
    base: str
    push_sha: str
    expected: str | None
    overwrites: list[dict[str, Any]]
    commit_message: str
    warnings: list[str]


def _push_plan(
    ctx: Context, row: SourceRow, repo: ManagedRepo, branch: str, head: str, commit_message: str
) -> _PushPlan:
    """What the review would push: the merge base with the fetched base branch, the head (squashed
    when a commit message is given), the remote head it expects and the commits a push would drop."""
    base_head, warnings = fresh_base(repo, row)
    try:  # what is on the remote branch now, and which of it a push would drop
        expected, overwrites = rp.remote_state(ctx, row, repo, head=head, base=base_head)
    except GitkbError as exc:
        expected, overwrites = repo.tracking_head(branch), []
        warnings.append(
            f"could not fetch {branch!r} ({exc.message}); approving checks the remote branch again"
        )
    base = merge_base(repo.repository, head, base_head) or base_head
    push_sha = head
    if commit_message:
        push_sha = squash(repo.repository, base, head, commit_message, author(ctx))
    return _PushPlan(base, push_sha, expected, overwrites, commit_message, warnings)


def _choose(
    ctx: Context,
    row: SourceRow,
    repo: ManagedRepo,
    staged: list[prop_rows.ProposalRow],
    wanted: Any,
    visible: set[str] | None = None,
) -> tuple[list[prop_rows.ProposalRow], str]:
    """The chosen staged proposals (``staged``: in branch order) first on the branch (replayed when
    needed); returns them and the commit of the last one, the head the review pushes. ``visible``:
    the staged ids the caller may name (an agent's: the fed ones); any other reads as not staged."""
    if not isinstance(wanted, list | tuple) or not all(isinstance(x, str) and x.strip() for x in wanted):
        raise InvalidArgument("proposal_ids must be a list of proposal ids (prop_...)")
    ids = {x.strip() for x in wanted}
    unknown = sorted(ids - ({p.id for p in staged} if visible is None else visible))
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
