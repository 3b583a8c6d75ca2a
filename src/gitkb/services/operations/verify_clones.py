"""``verify`` and ``--repair`` for the managed clones: ``clone_missing`` (gone or not a git
repository), ``clone_behind`` (lacks the synced commit), ``clone_orphan`` (no source owns it: only
reported). Only in the writer's home (``clones_here``): elsewhere the clones are a cache."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pygit2

from gitkb.services.changes.sources import registry
from gitkb.services.context import Context
from gitkb.services.operations.verify_report import SAMPLE, Difference, difference
from gitkb.stores.catalog import sources as source_rows
from gitkb.stores.catalog.sources import SourceRow

# a held caller's repair of a source whose url is a folder of this disk outside its roots
LEFT = (
    "its url is a folder of this server outside [server] allowed_roots; repair it with gitkb verify --repair"
)


def check_clones(ctx: Context) -> list[Difference]:
    conn = ctx.catalog.conn
    rows = source_rows.list_all(conn)
    missing, behind = [], []
    for row in rows:
        path = registry.repo_path(ctx, row)
        try:
            repo = pygit2.Repository(str(path))
        except (pygit2.GitError, OSError):
            missing.append(row.id)
            continue
        if row.synced_commit:
            try:
                repo.revparse_single(row.synced_commit)
            except (KeyError, ValueError, pygit2.GitError):
                behind.append(row.id)
    names = {r.id: r.name for r in rows}
    root: Path = ctx.settings.repos_path
    owned = set(names)
    orphans = [p.name for p in sorted(root.iterdir()) if p.is_dir()] if root.is_dir() else []
    out = [
        difference("clone_missing", "clones", missing, "sources whose managed clone is gone or broken"),
        difference("clone_behind", "clones", behind, "clones without the commit the catalog says was synced"),
        difference(
            "clone_orphan",
            "clones",
            [o for o in orphans if o not in owned],
            f"directories under {root} no source owns (not removed: they may hold work)",
            repairable=False,
        ),
    ]
    found = [d for d in out if d is not None]
    for d in found:
        if d.kind != "clone_orphan":
            d.sample = [f"{names.get(i, i)} ({i})" for i in d.items[:SAMPLE]]
    return found


def clones_here(ctx: Context) -> bool:
    """The clones that matter are in this home: it holds the writer lease (this process or another
    one on the same home), or nobody holds it."""
    holder = ctx.lease.holder()
    return (
        ctx.is_writer or holder is None or bool(holder.get("expired")) or holder.get("node_id") == ctx.node_id
    )


def repair_clones(
    ctx: Context, by_kind: dict[str, list[Difference]], reachable: Callable[[SourceRow], bool] | None = None
) -> list[str]:
    """Re-clone missing clones and fetch those behind; what was done, one line each. ``reachable``:
    the sources whose url this caller may clone or fetch from (None: all)."""
    done: list[str] = []
    conn = ctx.catalog.conn
    for kind in ("clone_missing", "clone_behind"):
        for d in by_kind.get(kind, []):
            for source_id in d.items:
                row = source_rows.get_by_id(conn, source_id)
                if row is None:
                    continue
                if reachable is not None and not reachable(row):
                    done.append(f"left source {row.name}: {LEFT}")
                    continue
                repo = registry.open_repo(ctx, row)  # clones again when the clone is gone
                if kind == "clone_behind" or not repo.commit_by_id(row.synced_commit or ""):
                    repo.fetch(row.branch)
                done.append(f"{'re-cloned' if kind == 'clone_missing' else 'fetched'} source {row.name}")
    return done


def broken_clone(
    ctx: Context, found: list[Difference], reachable: Callable[[SourceRow], bool] | None = None
) -> None:
    """A clone that exists but is not a repository: moved aside so ``open_repo`` clones again (not
    one of a source ``reachable`` says this caller may not clone: it stays as it is)."""
    for d in found:
        if d.kind != "clone_missing":
            continue
        for source_id in d.items:
            row = source_rows.get_by_id(ctx.catalog.conn, source_id)
            if reachable is not None and row is not None and not reachable(row):
                continue
            path = ctx.settings.repos_path / source_id
            if path.exists():
                path.rename(path.with_name(f"{source_id}.broken"))
