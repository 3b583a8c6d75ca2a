"""``sync_source``: bring a source's indexes to a commit of its branch.

1. fetch the branch (or use the given commit, which must be in the clone
   after the fetch -- a merge commit from a webhook, say);
2. read and validate the sidecars at that commit; merge them with the flags
   into the effective configuration;
3. plan: when the last synced commit is an ancestor and the configuration is
   the same, the tree diff between the two commits (only changed folders are
   read); otherwise -- first sync, force-pushed history, a changed sidecar --
   a full comparison of what the indexes hold (``source_files``) with the
   new tree. Both give a pure :class:`ChangePlan` (A/M/D/R, a rename being
   the same blob under a new path);
4. apply it (:mod:`gitkb.services.sources.apply`), catch the keyword index
   up, record the commit.

A sync of the commit already synced, with the same configuration, does
nothing. A plain function ``fn(ctx, ..., progress=None) -> dict`` so the
job queue can run it.
"""

from __future__ import annotations

import time
from typing import Any

from gitkb.core.change_planning import ChangePlan, plan_changes
from gitkb.services import audit
from gitkb.services.catchup import catch_up_keywords
from gitkb.services.context import Context
from gitkb.services.sources.apply import Progress, apply_plan
from gitkb.services.sources.registry import open_repo, read_source_sidecars, resolve_source
from gitkb.services.sources.selection import EffectiveConfig, effective_config
from gitkb.stores.catalog import changes
from gitkb.stores.catalog import sources as source_rows


def filter_plan(plan: ChangePlan, cfg: EffectiveConfig, known: set[str]) -> ChangePlan:
    """Keep the part of a tree-diff plan that concerns the selected files (pure).

    ``known``: paths the indexes hold for the source. A rename whose source was
    not indexed becomes an add; one whose target is not selected, a delete.
    """
    added = [p for p in plan.added if cfg.selects(p)]
    modified = [p for p in plan.modified if cfg.selects(p)]
    deleted = [p for p in plan.deleted if p in known]
    renamed = []
    for old, new in plan.renamed:
        had, wants = old in known, cfg.selects(new)
        if had and wants:
            renamed.append((old, new))
        elif had:
            deleted.append(old)
        elif wants:
            added.append(new)
    return ChangePlan(
        added=tuple(sorted(added)),
        modified=tuple(sorted(modified)),
        deleted=tuple(sorted(deleted)),
        renamed=tuple(renamed),
    )


def sync_source(
    ctx: Context,
    source: Any,
    *,
    commit: str | None = None,
    full: bool = False,
    progress: Progress | None = None,
    actor: str = "sync",
) -> dict[str, Any]:
    t0 = time.perf_counter()
    row = resolve_source(ctx, source)
    repo = open_repo(ctx, row)
    head = repo.fetch(row.branch)
    target = head if not commit else repo.resolve(commit)
    sidecars = read_source_sidecars(repo, target, row.documents_root)
    cfg = effective_config(row.settings, row.documents_root, sidecars)
    key = cfg.key()
    base: dict[str, Any] = {"source": row.name, "branch": row.branch, "commit": target, "branch_head": head}
    if not full and row.synced_commit == target and row.synced_config == key:
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
    with ctx.write_lock:
        conn = ctx.catalog.conn
        known = source_rows.files(conn, row.id)
        tree = cfg.select(repo.tree_map(target, cfg.documents_root))
        incremental = (
            not full
            and row.synced_commit is not None
            and row.synced_config == key
            and repo.is_ancestor(row.synced_commit, target)
        )
        reload: list[str] = []
        if incremental:
            assert row.synced_commit is not None
            plan = filter_plan(
                repo.diff_names(row.synced_commit, target, cfg.documents_root), cfg, set(known)
            )
        else:
            plan = plan_changes(known, tree)
            if row.synced_config != key or full:  # the way files are read may have changed
                reload = [p for p in tree if p in known and known[p] == tree[p]]
        seq0 = changes.head(conn)
        report = apply_plan(ctx, row, repo, target, plan, tree, cfg, reload=reload, progress=progress)
        with ctx.catalog.write() as w:
            source_rows.set_synced(w, row.id, target, key)
        catch_up_keywords(ctx)
        added_chunks, removed_chunks = _chunk_changes(ctx, seq0)
        from gitkb.services.sources.merges import reconcile_merges

        settled = reconcile_merges(ctx, row, repo, target)
    warnings = []
    linked = set(row.index_ids)
    if sidecars.index and not row.settings.get("index"):
        from gitkb.stores.catalog import indexes as index_rows

        ix = index_rows.get_by_name(conn, sidecars.index)
        if ix is None or ix.id not in linked:
            warnings.append(
                f"the sidecar names index {sidecars.index!r}, but this source feeds the indexes chosen when it was"
                " added; remove and add the source again to change them"
            )
    out = {
        **base,
        "Message": (
            f"{row.name} synced to {target[:12]} ({'incremental' if incremental else 'full'}): "
            f"{len(report.added)} added, {len(report.modified)} modified, {len(report.deleted)} deleted, "
            f"{len(report.renamed)} renamed, {len(report.skipped)} skipped"
        ),
        "status": "synced",
        "previous_commit": row.synced_commit,
        "plan": "incremental" if incremental else "full",
        **report.as_dict(),
        "chunks_added": added_chunks,
        "chunks_removed": removed_chunks,
        "took_ms": round((time.perf_counter() - t0) * 1000, 1),
    }
    if settled:
        out["merged"] = settled
    if warnings:
        out["Warnings"] = warnings
    audit.record(ctx, actor=actor, action="source.sync", target=row.name, result="ok",
                 detail={"commit": target, "previous": row.synced_commit, "counts": report.as_dict()["counts"]})  # fmt: skip
    return out


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
    """Job-queue adapter: ``{"source": NAME, "commit": SHA?}``."""
    return sync_source(
        ctx, params["source"], commit=params.get("commit"), full=bool(params.get("full")), progress=progress
    )
