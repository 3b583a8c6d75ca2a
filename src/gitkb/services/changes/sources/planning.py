"""The two plans of a source sync (pure, but for reading the tree diff).

* what to write: the tree diff from the synced commit kept to the selected files, deletes and
  renames only of what the indexes hold now (:func:`filter_plan` with ``known``) -- after an
  interrupted run, less than the change, since the dead run's batches are in already;
* what to report: the change itself between the synced commit and the target (:func:`change_of`),
  whatever part an earlier, interrupted run wrote. The sync's answer and its audit entry carry it
  as ``counts`` (and the path lists); ``written_by_this_run`` and ``chunks_written`` say what this
  run wrote (:func:`reported`).
"""

from __future__ import annotations

from typing import Any

from gitkb.core.change_planning import ChangePlan, plan_changes
from gitkb.services.changes.sources.apply import ApplyReport, storable_plan
from gitkb.services.changes.sources.selection import EffectiveConfig
from gitkb.stores.catalog.sources import SourceRow
from gitkb.stores.repos import ManagedRepo


def filter_plan(plan: ChangePlan, cfg: EffectiveConfig, known: set[str] | None) -> ChangePlan:
    """Keep the part of a tree-diff plan that concerns the selected files (pure).

    ``known``: paths the indexes hold for the source (what to write now); ``None``: the selected
    paths of the old commit (the change between the two commits, whatever is written already). A
    rename whose source was not indexed becomes an add; one whose target is not selected, a delete.
    """

    def held(path: str) -> bool:
        return cfg.selects(path) if known is None else path in known

    added = [p for p in plan.added if cfg.selects(p)]
    modified = [p for p in plan.modified if cfg.selects(p)]
    deleted = [p for p in plan.deleted if held(p)]
    renamed = []
    for old, new in plan.renamed:
        had, wants = held(old), cfg.selects(new)
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


def change_of(
    repo: ManagedRepo,
    row: SourceRow,
    cfg: EffectiveConfig,
    tree: dict[str, str],
    target: str,
    plan: ChangePlan,
    *,
    incremental: bool,
) -> ChangePlan:
    """The change a sync reports: the source's files from its synced commit to ``target`` (A/M/D/R),
    whatever part of it an earlier, interrupted run already wrote (``plan``, what this run writes,
    leaves that part out: it is computed against the files the indexes hold now). A first sync adds
    the whole selected tree; a full re-sync of a synced source (changed configuration, force-push)
    reports ``plan``."""
    if incremental:
        assert row.synced_commit is not None
        diff = filter_plan(repo.diff_names(row.synced_commit, target, cfg.documents_root), cfg, None)
        return storable_plan(diff, tree)
    if row.synced_commit is None:
        return storable_plan(plan_changes({}, tree), tree)
    return storable_plan(plan, tree)


def reported(report: ApplyReport, change: ChangePlan) -> dict[str, Any]:
    """The sync's answer: ``added``/``modified``/``deleted``/``renamed`` and ``counts`` are the change
    (:func:`change_of`, less the files this run skipped), ``written_by_this_run`` and
    ``chunks_written`` what this run wrote."""
    mine = report.as_dict()
    skipped = {s.path for s in report.skipped}
    to_load = {*change.added, *change.modified, *(new for _, new in change.renamed)}
    added = [p for p in change.added if p not in skipped]
    modified = [p for p in change.modified if p not in skipped]
    # a file of the change another run wrote is found unchanged by this one: it is not "unchanged"
    unchanged = report.unchanged - len(to_load & set(report.unchanged_paths))
    return {
        **mine,
        "added": added,
        "modified": modified,
        "deleted": list(change.deleted),
        "renamed": [{"old_path": old, "path": new} for old, new in change.renamed],
        "counts": {
            **mine["counts"],
            "added": len(added),
            "modified": len(modified),
            "deleted": len(change.deleted),
            "renamed": len(change.renamed),
            "unchanged": unchanged,
        },
        "written_by_this_run": {
            **{k: mine["counts"][k] for k in ("added", "modified", "deleted", "renamed")},
            "chunks": report.chunks_written,
        },
    }
