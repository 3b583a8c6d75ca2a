"""Proposal branches rebuildable from the catalog.

A clone is a cache on whichever node holds the writer lease: everything a proposal branch is made of is
in the catalog. Each staged proposal's commit is recorded as data when it is staged or moved
(``record``: the whole new content of every path it touches, its message, author and committer with
their times; ``proposal_specs``); the base is the first staged proposal's parent, a commit of the
tracked branch fetched from the remote. When the clone is missing the branch (another node staged it,
or the clone was deleted), ``ensure_branch`` checks that the base and every staged commit can be had,
writes the commits again, checks each comes out with the recorded sha, and points the branch at the tip.
"""

from __future__ import annotations

import logging

from gitkb.core.errors import Conflict, GitkbError
from gitkb.services.changes.sources.branch_order import staged_on_branch
from gitkb.services.context import Context
from gitkb.stores import node_proposals
from gitkb.stores.catalog import proposals as prop_rows
from gitkb.stores.catalog.engine import Conn
from gitkb.stores.catalog.sources import SourceRow
from gitkb.stores.node_git import commit_spec, has_commit, rebuild_commit
from gitkb.stores.repos import ManagedRepo

log = logging.getLogger("gitkb.proposals")


def record(conn: Conn, repo: ManagedRepo, proposal_id: str, parent: str, commit: str) -> None:
    """Write the proposal's commit down as data (inside the caller's transaction)."""
    node_proposals.record_spec(
        conn, proposal_id, parent, commit, commit_spec(repo.repository, parent, commit)
    )


def move(conn: Conn, repo: ManagedRepo, proposal_id: str, parent: str, commit: str) -> None:
    """A proposal replayed onto ``parent`` as ``commit``: its row and its recorded commit move together."""
    prop_rows.move_proposal(conn, proposal_id, parent, commit)
    record(conn, repo, proposal_id, parent, commit)


def ensure_branch(ctx: Context, row: SourceRow, repo: ManagedRepo, branch: str) -> int:
    """Make ``branch`` hold the staged proposals again when the clone lacks them; returns commits rebuilt.
    Raises ``Conflict`` when the catalog cannot make them (a proposal staged before its commits were
    recorded, or a base commit the remote no longer has)."""
    conn = ctx.catalog.conn
    staged = staged_on_branch(conn, row.id)  # the tip is the last on the branch, not the last staged
    if not staged:
        return 0
    git = repo.repository
    specs = node_proposals.specs_for(conn, [p.id for p in staged])
    unrecorded = [p for p in staged if specs.get(p.id, ("",))[0] != p.commit_sha]
    if unrecorded and all(
        has_commit(git, p.commit_sha) and has_commit(git, p.parent_sha) for p in unrecorded
    ):
        with ctx.catalog.write() as w:  # staged by an older gitkb: record them while the clone has them
            for p in unrecorded:
                record(w, repo, p.id, p.parent_sha, p.commit_sha)
        unrecorded = []
    tip = staged[-1].commit_sha
    head = repo.head(branch)
    if head == tip:
        return 0
    missing = [p.id for p in unrecorded if not has_commit(git, p.commit_sha)]
    if missing:
        raise Conflict(
            f"the proposal branch of {row.name!r} is not in this clone and the catalog does not hold"
            f" {', '.join(missing)}; it cannot be rebuilt",
            next_steps=["discard those proposals and propose them again"],
            details={"proposal_ids": missing},
        )
    if not has_commit(git, staged[0].parent_sha):
        repo.fetch(row.branch)
    rebuilt = 0
    for p in staged:
        if has_commit(git, p.commit_sha):
            continue
        if not has_commit(git, p.parent_sha):
            raise Conflict(
                f"the base commit {p.parent_sha[:12]} of proposal {p.id} is not on the remote branch"
                f" {row.branch!r} any more; the proposal branch cannot be rebuilt",
                next_steps=[f"refresh the proposals: gitkb proposals refresh {row.name}"],
                details={"proposal_id": p.id, "base": p.parent_sha},
            )
        sha = rebuild_commit(git, p.parent_sha, specs[p.id][1])
        if sha != p.commit_sha:
            raise Conflict(
                f"rebuilding proposal {p.id} made {sha[:12]}, not its recorded commit {p.commit_sha[:12]}",
                details={"proposal_id": p.id},
            )
        rebuilt += 1
    repo.reset_branch(branch, tip, expected=head)
    log.info("rebuilt the proposal branch %s from the catalog (%d commits)", branch, rebuilt)
    return rebuilt


def follow_branch(ctx: Context, row: SourceRow, repo: ManagedRepo, branch: str) -> None:
    """``ensure_branch`` for ``open_repo``: a branch that cannot be rebuilt is logged, not raised (a sync
    needs no proposal branch; a review push then refuses the missing branch)."""
    try:
        ensure_branch(ctx, row, repo, branch)
    except GitkbError as exc:
        log.warning("%s", exc.message)
