"""``sync_source``: bring a source's indexes to a commit of its branch.

The inbound side of the review gate: an index fed by a source only ever holds
commits reachable from the tracked branch *as the remote has it now*.

* The branch head is read from the remote (fetch) on every sync; a commit a
  caller or a webhook names is a hint, checked against that head. It must be a
  commit id (7-64 hex digits, no ref names or revision expressions) of a
  commit reachable from the fetched head -- a staged proposal, a commit of
  another branch, one dropped by a force-push or an unknown id is refused
  with ``invalid_argument`` and nothing is written, whoever asks.
* A proposal branch (``gitkb/proposals/...``) never feeds an index.
* No sync moves an index back: a target that is an ancestor of the synced
  commit (a replayed or late delivery, a remote reset to an older commit) is a
  no-op reported as ``stale``. Moving back is the explicit admin action
  :func:`rollback_job` (``source_rollback``), which takes only commits of the
  tracked branch too.

Steps:

1. fetch the branch; the target is its head or the given commit (see above);
2. read and validate the sidecars at that commit; merge them with the flags
   into the effective configuration;
3. plan: when the last synced commit is an ancestor and the configuration is
   the same, the tree diff between the two commits (only changed folders are
   read); otherwise -- first sync, force-pushed history, a changed sidecar --
   a full comparison of what the indexes hold (``source_files``) with the
   new tree. Both give a pure :class:`ChangePlan` (A/M/D/R, a rename being
   the same blob under a new path);
4. apply it (:mod:`gitkb.services.changes.sources.apply`), catch the keyword index
   up, record the commit.

A sync of the commit already synced, with the same configuration, does
nothing. A plain function ``fn(ctx, ..., progress=None) -> dict`` so the
job queue can run it.
"""

from __future__ import annotations

import re
import time
from typing import Any

from gitkb.core import disk_roots
from gitkb.core.change_planning import ChangePlan, plan_changes
from gitkb.core.errors import InvalidArgument
from gitkb.services.changes import audit
from gitkb.services.changes.checkouts import refresh_source
from gitkb.services.changes.sources import reach
from gitkb.services.changes.sources.apply import Progress, apply_plan
from gitkb.services.changes.sources.merges import reconcile_merges
from gitkb.services.changes.sources.planning import change_of, filter_plan, reported
from gitkb.services.changes.sources.registry import open_repo, read_source_sidecars, resolve_source
from gitkb.services.changes.sources.selection import EffectiveConfig, effective_config
from gitkb.services.context import Context
from gitkb.services.derived.catchup import catch_up_keywords
from gitkb.stores.catalog import changes
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import sources as source_rows
from gitkb.stores.catalog.sources import SourceRow
from gitkb.stores.repos import ManagedRepo

ROLLBACK_JOB_KIND = "source_rollback"
PROPOSAL_BRANCH_PREFIX = "gitkb/proposals/"  # services.changes.sources.registry.proposal_branch
COMMIT_ID = re.compile(r"[0-9a-fA-F]{7,64}")
AUDITED = (
    "counts",
    "written_by_this_run",
)  # of the answer, in the audit entry: the change, what this run wrote


def sync_source(
    ctx: Context,
    source: Any,
    *,
    commit: str | None = None,
    full: bool = False,
    progress: Progress | None = None,
    actor: str = "sync",
    rollback: bool = False,
) -> dict[str, Any]:
    """Sync ``source`` to ``commit`` (default: the branch head just fetched); see the module doc.

    ``rollback``: the target may be older than the synced commit (the admin action only).
    """
    t0 = time.perf_counter()
    row = resolve_source(ctx, source)
    if rollback and commit is None:
        raise InvalidArgument("a rollback needs the commit to move the index back to")
    repo, head, target = _fetch_target(ctx, row, commit, actor=actor)
    base: dict[str, Any] = {"source": row.name, "branch": row.branch, "commit": target, "branch_head": head}
    if not rollback and _behind(repo, row, target):
        return {**base, **_stale(row, target, head), "took_ms": round((time.perf_counter() - t0) * 1000, 1)}
    sidecars = read_source_sidecars(repo, target, row.documents_root)
    cfg = effective_config(row.settings, row.documents_root, sidecars)
    key = cfg.key()
    if not full and row.synced_commit == target and row.synced_config == key:
        return _unchanged(base, row, target, t0)
    with ctx.write_lock:
        conn = ctx.catalog.conn
        known = source_rows.files(conn, row.id)
        tree = cfg.select(repo.tree_map(target, cfg.documents_root))
        incremental, plan, reload = _plan(repo, row, cfg, known, tree, target, full=full)
        change = change_of(repo, row, cfg, tree, target, plan, incremental=incremental)
        seq0 = changes.head(conn)
        report = apply_plan(ctx, row, repo, target, plan, tree, cfg, reload=reload, progress=progress)
        with ctx.catalog.write() as w:
            source_rows.set_synced(w, row.id, target, key)
        catch_up_keywords(ctx)
        added_chunks, removed_chunks = _chunk_changes(ctx, seq0)

        settled = reconcile_merges(ctx, row, repo, target)
    warnings = _sidecar_index_warnings(ctx, row, sidecars.index) + report.warnings
    done = reported(report, change)
    out = {
        **base,
        "Message": _message(row, target, done["counts"], incremental=incremental),
        "status": "synced",
        "previous_commit": row.synced_commit,
        "plan": "incremental" if incremental else "full",
        **done,
        "sidecars": [f"{cfg.prefix}{n}" for n in sidecars.present],  # read as configuration, never indexed
        "chunks_added": added_chunks,
        "chunks_removed": removed_chunks,
        "took_ms": round((time.perf_counter() - t0) * 1000, 1),
    }
    if settled:
        out["merged"] = settled

    if refreshed := refresh_source(ctx, row, target):
        out["checkouts_refreshed"] = len(refreshed)  # how many; their paths stay on this node
    if warnings:
        out["Warnings"] = warnings
    if rollback:
        out["rolled_back"] = bool(row.synced_commit and _behind(repo, row, target))
    audit.record(
        ctx,
        actor=actor,
        action="source.rollback" if rollback else "source.sync",
        target=row.name,
        result="ok",
        detail={"commit": target, "previous": row.synced_commit, **{k: done[k] for k in AUDITED}},
    )
    return out


def _message(row: SourceRow, target: str, counts: dict[str, int], *, incremental: bool) -> str:
    return (
        f"{row.name} synced to {target[:12]} ({'incremental' if incremental else 'full'}): "
        f"{counts['added']} added, {counts['modified']} modified, {counts['deleted']} deleted, "
        f"{counts['renamed']} renamed, {counts['skipped']} skipped"
    )


def _unchanged(base: dict[str, Any], row: SourceRow, target: str, t0: float) -> dict[str, Any]:
    return {
        **base,
        "Message": f"{row.name} is already synced at {target[:12]}; nothing to do",
        "status": "unchanged",
        "previous_commit": row.synced_commit,
        "plan": "none",
        "counts": {"added": 0, "modified": 0, "deleted": 0, "renamed": 0},
        "chunks_added": 0,
        "chunks_removed": 0,
        "took_ms": round((time.perf_counter() - t0) * 1000, 1),
    }


def _plan(
    repo: ManagedRepo,
    row: SourceRow,
    cfg: EffectiveConfig,
    known: dict[str, str],
    tree: dict[str, str],
    target: str,
    *,
    full: bool,
) -> tuple[bool, ChangePlan, list[str]]:
    """Incremental (the diff since the synced commit) when the config is the same and the target
    descends from it, else the whole tree against the known files; and the unchanged files to read
    again because the way files are read may have changed."""
    key = cfg.key()
    incremental = (
        not full
        and row.synced_commit is not None
        and row.synced_config == key
        and repo.is_ancestor(row.synced_commit, target)
    )
    reload: list[str] = []
    if incremental:
        assert row.synced_commit is not None
        plan = filter_plan(repo.diff_names(row.synced_commit, target, cfg.documents_root), cfg, set(known))
    else:
        plan = plan_changes(known, tree)
        if row.synced_config != key or full:  # the way files are read may have changed
            reload = [p for p in tree if p in known and known[p] == tree[p]]
    return incremental, plan, reload


def _sidecar_index_warnings(ctx: Context, row: SourceRow, sidecar_index: str | None) -> list[str]:
    """A sidecar that names an index this source does not feed (its indexes were chosen at add)."""
    if not sidecar_index or row.settings.get("index"):
        return []
    ix = index_rows.get_by_name(ctx.catalog.conn, sidecar_index)
    if ix is not None and ix.id in set(row.index_ids):
        return []
    return [
        f"the sidecar names index {sidecar_index!r}, but this source feeds the indexes chosen when it was"
        " added; remove and add the source again to change them"
    ]


def _fetch_target(
    ctx: Context, row: SourceRow, commit: str | None, *, actor: str
) -> tuple[ManagedRepo, str, str]:
    """(the clone, the branch head read from the remote now, the full id of the commit to sync)."""
    if row.branch.startswith(PROPOSAL_BRANCH_PREFIX):
        raise InvalidArgument(
            f"source {row.name!r} tracks {row.branch!r}, a proposal branch: proposals reach an index only "
            "through an approved review merged into the tracked branch",
            next_steps=["remove the source and add it again on the branch reviews merge into"],
        )
    repo = open_repo(ctx, row)
    head = repo.fetch(row.branch)
    if commit is None:
        return repo, head, head
    try:
        return repo, head, on_branch(repo, row, commit, head)
    except InvalidArgument:
        audit.record(
            ctx,
            actor=actor,
            action="source.sync",
            target=row.name,
            result="refused",
            detail={"commit": str(commit)[:80], "branch_head": head},
        )
        raise


def on_branch(repo: ManagedRepo, row: SourceRow, commit: Any, head: str) -> str:
    """The full id of ``commit`` if it is reachable from ``head`` (the tracked branch as just
    fetched), else ``InvalidArgument``. Only a commit id is taken: 7-64 hex digits, any case."""
    steps = [f"give a commit of {row.branch!r} as the remote has it (its head is {head[:12]}), or no commit"]
    if not isinstance(commit, str) or not COMMIT_ID.fullmatch(commit):
        raise InvalidArgument(
            f"commit must be a commit id (7 to 64 hex digits) of branch {row.branch!r}, got {str(commit)[:80]!r}",
            next_steps=steps,
        )
    full = repo.commit_by_id(commit.lower())
    if full is None or not repo.is_ancestor(full, head):
        raise InvalidArgument(
            f"commit {commit} is not on branch {row.branch!r} of source {row.name!r} (head {head[:12]}): an "
            "index only takes commits of its tracked branch, never a staged proposal or another branch",
            next_steps=steps,
        )
    return full


def _behind(repo: ManagedRepo, row: SourceRow, target: str) -> bool:
    """True when ``target`` is an older commit than the synced one (an ancestor of it)."""
    synced = row.synced_commit
    return bool(synced) and synced != target and repo.is_ancestor(target, synced or "")


def _stale(row: SourceRow, target: str, head: str) -> dict[str, Any]:
    assert row.synced_commit is not None
    at = row.synced_commit[:12]
    what = "the branch head" if target == head else "commit"
    return {
        "Message": f"{row.name} is synced at {at}; {what} {target[:12]} is older, so nothing changes (no "
        f"sync moves an index back; an admin can: `gitkb source rollback {row.name} {target[:12]}`)",
        "status": "stale",
        "previous_commit": row.synced_commit,
        "plan": "none",
        "counts": {"added": 0, "modified": 0, "deleted": 0, "renamed": 0},
        "chunks_added": 0,
        "chunks_removed": 0,
    }


def check_target(ctx: Context, source: Any, commit: str) -> dict[str, Any]:
    """What a sync to ``commit`` would do, without writing: fetch, then ``{"status": "stale" |
    "unchanged" | "sync", "commit": full id, "branch_head", "reason"?}``; ``InvalidArgument`` when
    the commit is not on the tracked branch. For intake paths that answer before queueing."""
    row = resolve_source(ctx, source)
    repo, head, target = _fetch_target(ctx, row, commit, actor="webhook")
    out: dict[str, Any] = {"source": row.name, "commit": target, "branch_head": head}
    if target == row.synced_commit:
        return {**out, "status": "unchanged", "reason": "already synced at this commit"}
    if _behind(repo, row, target):
        return {**out, "status": "stale", "reason": _stale(row, target, head)["Message"]}
    return {**out, "status": "sync"}


def _chunk_changes(ctx: Context, since: int) -> tuple[int, int]:
    """(chunks added, chunks removed) in the change log after ``since``: what derived indexes must redo."""
    added = removed = 0
    conn = ctx.catalog.conn
    seq = since
    while True:
        batch = changes.since(conn, seq, 20000)
        if not batch:
            return added, removed
        for c in batch:
            added += c.op == "add"
            removed += c.op == "remove"
        seq = batch[-1].seq


def sync_job(ctx: Context, params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Job-queue adapter: ``{"source": NAME, "commit": SHA?}``; never moves an index back. Held
    to allowed roots (a remote caller's): a local-path source outside them is refused, unread."""
    reach.refuse_outside(ctx, params["source"], disk_roots.held_roots(params))
    return sync_source(
        ctx,
        params["source"],
        commit=params.get("commit") or None,
        full=bool(params.get("full")),
        progress=progress,
    )


def rollback_job(ctx: Context, params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Job-queue adapter of the admin action ``source_rollback``: ``{"source": NAME, "commit": SHA}``,
    a commit of the tracked branch, older than the synced one (a newer one is a plain sync)."""
    reach.refuse_outside(ctx, params["source"], disk_roots.held_roots(params))
    return sync_source(
        ctx, params["source"], commit=params.get("commit"), rollback=True, progress=progress, actor="rollback"
    )
