"""The proposal branch as a list: list, show, discard, and replay onto a new base.

Discarding a proposal from the middle of ``gitkb/proposals/<source>`` replays
the later ones onto its parent (refused when they build on it); after a
merge, :func:`restack` replays the proposals staged after the merged ones
onto the merge commit and marks the ones that no longer apply.
"""

from __future__ import annotations

from typing import Any

from gitkb.core.errors import Conflict, InvalidArgument, NotFound
from gitkb.core.paging import page_of, paged
from gitkb.services import audit
from gitkb.services.context import Context
from gitkb.services.sources.registry import open_repo, proposal_branch, resolve_source
from gitkb.stores.catalog import proposals as prop_rows
from gitkb.stores.catalog import sources as source_rows
from gitkb.stores.catalog.proposals import ProposalRow
from gitkb.stores.catalog.sources import SourceRow
from gitkb.stores.git_replay import replay
from gitkb.stores.repos import ManagedRepo


def describe(p: ProposalRow, source_name: str) -> dict[str, Any]:
    return {
        "proposal_id": p.id,
        "source": source_name,
        "op": p.op,
        "path": p.path,
        "new_path": p.new_path,
        "note": p.note,
        "state": p.state,
        "commit": p.commit_sha,
        "parent": p.parent_sha,
        "created_at": p.created_at,
        **({"detail": p.detail} if p.detail else {}),
    }


def list_proposals(
    ctx: Context, source: Any = None, state: Any = "staged", start: Any = None, count: Any = None
) -> dict[str, Any]:
    page = page_of(start, count, default=100)
    conn = ctx.catalog.conn
    row = resolve_source(ctx, source) if source else None
    states = None if state in (None, "", "all") else (str(state),)
    if states and states[0] not in prop_rows.PROPOSAL_STATES:
        raise InvalidArgument(f"state must be one of {', '.join(prop_rows.PROPOSAL_STATES)} or 'all'")
    every = prop_rows.list_proposals(conn, source_id=row.id if row else None, states=states)
    rows, fields = paged(every, page)
    names = {row.id: row.name} if row else {}
    for p in rows:
        if p.source_id not in names:
            s = source_rows.get_by_id(conn, p.source_id)
            names[p.source_id] = s.name if s else p.source_id
    return {
        "Proposals": [describe(p, names[p.source_id]) for p in rows],
        **fields,
        "Message": f"{len(rows)} of {len(every)} proposal(s)",
    }


def get_proposal(ctx: Context, proposal_id: Any) -> ProposalRow:
    if not isinstance(proposal_id, str) or not proposal_id.strip():
        raise InvalidArgument("proposal_id is required (prop_...)")
    p = prop_rows.get_proposal(ctx.catalog.conn, proposal_id.strip())
    if p is None:
        raise NotFound(f"no proposal {proposal_id!r}", next_steps=["list them with `gitkb proposals list`"])
    return p


def show_proposal(ctx: Context, proposal_id: Any) -> dict[str, Any]:
    p = get_proposal(ctx, proposal_id)
    row = source_rows.get_by_id(ctx.catalog.conn, p.source_id)
    assert row is not None
    repo = open_repo(ctx, row)
    out = describe(p, row.name)
    out["diff"] = repo.unified_diff(p.parent_sha, p.commit_sha)
    out["branch"] = proposal_branch(row)
    out["Message"] = (
        f"{p.id}: {p.op} {p.path}" + (f" -> {p.new_path}" if p.new_path else "") + f" ({p.state})"
    )
    return out


def restack(
    ctx: Context, row: SourceRow, repo: ManagedRepo, onto: str, keep: list[ProposalRow]
) -> dict[str, list[str]]:
    """Rebuild the proposal branch as ``keep`` replayed onto ``onto``.

    Proposals that conflict with the new base are marked ``conflict`` (with
    the paths); ones whose change is already there are marked ``merged``.
    Returns ``{"kept", "conflicts", "already_applied"}`` (proposal ids).
    """
    branch = proposal_branch(row)
    result = replay(repo.repository, onto, [(p.parent_sha, p.commit_sha) for p in keep])
    current = repo.head(branch)
    repo.reset_branch(branch, result.head, expected=current)
    out: dict[str, list[str]] = {"kept": [], "conflicts": [], "already_applied": []}
    parent = onto
    with ctx.catalog.write() as w:
        for p in keep:
            if p.commit_sha in result.commits:
                new = result.commits[p.commit_sha]
                prop_rows.move_proposal(w, p.id, parent, new)
                parent = new
                out["kept"].append(p.id)
            elif p.commit_sha in result.conflicts:
                paths = result.conflicts[p.commit_sha]
                prop_rows.set_proposal_state(
                    w, p.id, "conflict", detail={"conflicting_paths": paths, "base": onto}
                )
                out["conflicts"].append(p.id)
            else:
                prop_rows.set_proposal_state(
                    w, p.id, "merged", detail={"reason": "already in the base", "base": onto}
                )
                out["already_applied"].append(p.id)
    return out


def discard_proposal(ctx: Context, proposal_id: Any, *, actor: str = "operator") -> dict[str, Any]:
    p = get_proposal(ctx, proposal_id)
    if p.state not in ("staged", "conflict"):
        raise Conflict(f"proposal {p.id} is {p.state}; only staged proposals can be discarded")
    row = source_rows.get_by_id(ctx.catalog.conn, p.source_id)
    assert row is not None
    if p.state == "conflict":
        with ctx.catalog.write() as w:
            prop_rows.set_proposal_state(w, p.id, "discarded")
        return {"Message": f"Discarded {p.id}", "proposal_id": p.id, "branch": proposal_branch(row)}
    repo = open_repo(ctx, row)
    staged = prop_rows.list_proposals(ctx.catalog.conn, source_id=row.id, states=("staged",))
    later = staged[[s.id for s in staged].index(p.id) + 1 :]
    probe = replay(repo.repository, p.parent_sha, [(s.parent_sha, s.commit_sha) for s in later])
    if probe.conflicts:
        blocked = [s.id for s in later if s.commit_sha in probe.conflicts]
        raise Conflict(
            f"cannot discard {p.id}: later proposals build on it ({', '.join(blocked)}); discard them first",
            details={"depends": blocked},
        )
    with ctx.catalog.write() as w:
        prop_rows.set_proposal_state(w, p.id, "discarded")
    rest = restack(ctx, row, repo, p.parent_sha, later)
    audit.record(ctx, actor=actor, action="proposal.discard", target=row.name, result="discarded",
                 detail={"proposal_id": p.id, "path": p.path})  # fmt: skip
    return {
        "Message": f"Discarded {p.id}; {len(rest['kept'])} later proposal(s) kept on {proposal_branch(row)}",
        "proposal_id": p.id,
        "branch": proposal_branch(row),
        "branch_head": repo.head(proposal_branch(row)),
        **rest,
    }
