"""reindex: bring indexes that came from a directory up to date with the disk.

Every ADD_DOCUMENTS records its root (``index_roots``). Reindex walks each
root again: same size and mtime means unchanged without reading the file
(then the content hash decides), changed files are re-chunked (unchanged
chunks keep their ids and vectors), files gone from disk are deleted.
``force`` parses every file again (unchanged chunks still keep their ids).
A delete or rename made through gitkb (DELETE_DOCUMENT, RENAME_DOCUMENT) holds
across reindexes until ADD_DOCUMENTS names that file again.

A reindex a remote caller asked for is held to ``[server] allowed_roots`` (``held_to``, the job's
``gitkb.core.disk_roots.HELD_TO`` parameter): every root it would walk must lie inside them, else
it is refused whole (``refuse_outside``) before anything is read -- checked before the job is
queued and again when it runs (a root the operator recorded while the job waited), and the run
walks exactly the roots it checked.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from gitkb.core import disk_roots
from gitkb.core.chunk_config import resolve_config
from gitkb.core.models import WalkEntry
from gitkb.core.walking import walk
from gitkb.services.context import Context
from gitkb.services.derived.catchup import catch_up_keywords, rebuild_keywords
from gitkb.services.indexing.admission import Placement
from gitkb.services.indexing.indexes import get_index
from gitkb.services.indexing.ingest import IngestReport, ingest_entries, leave_out_sidecars
from gitkb.stores.catalog import documents as doc_rows
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog.indexes import IndexRow

Progress = Any


def _roots(ctx: Context, row: IndexRow) -> list[tuple[Path, Path]]:
    return [(Path(root), Path(base)) for root, base in index_rows.roots(ctx.catalog.conn, row.id)]


def walked_indexes(ctx: Context, index_name: Any = None) -> list[IndexRow]:
    """The indexes a reindex of ``index_name`` (None: every index) walks: those fed from the disk
    (a git-fed index follows its source's managed clone, gitkb's own, through a source sync)."""
    rows = [get_index(ctx, index_name)] if index_name else index_rows.list_all(ctx.catalog.conn)
    return [row for row in rows if not row.settings.get("source")]


def refuse_outside(
    ctx: Context, index_name: Any, held_to: tuple[Path, ...] | None
) -> list[tuple[IndexRow, list[tuple[Path, Path]]]]:
    """The indexes a reindex of ``index_name`` (None: every index) walks and their roots; with
    ``held_to`` (a remote caller's allowed roots) refused (``forbidden``, ``details.refused_roots``
    by index) when one of them lies outside (symlinks resolved; none allowed: any). One index with
    such a root refuses the whole call (deny by default: a reindex of every index then reindexes
    none; name an index to reindex it alone). Reads the catalog only."""
    walked = [(row, _roots(ctx, row)) for row in walked_indexes(ctx, index_name)]
    if held_to is None:
        return walked
    refused = {
        row.name: outside
        for row, roots in walked
        if (outside := [str(root) for root, _ in roots if not disk_roots.inside(root, held_to)])
    }
    if not refused:
        return walked
    steps = [
        "reindex from the server's CLI (gitkb reindex"
        + (" --index NAME" if index_name else "")
        + "): it holds the operator's rights",
        "or add the root to [server] allowed_roots in gitkb.toml",
    ]
    if not index_name:
        steps.append("or reindex one index whose roots are all allowed (index_name)")
    raise disk_roots.refusal("reindex", refused, held_to, by="index", steps=steps)


def _under(path: str | None, root: Path) -> bool:
    if not path:
        return False
    p = Path(path)
    return p == root or root in p.parents


COUNTS = ("added", "modified", "deleted", "unchanged", "skipped", "left_out")


def _follow_overrides(entries: list[Any], kept: dict[str, str | None]) -> tuple[list[Any], list[str]]:
    """Files a user deleted through gitkb stay out; renamed ones are read under their new path."""
    out: list[Any] = []
    left_out: list[str] = []
    for e in entries:
        if isinstance(e, WalkEntry) and str(e.abs_path) in kept:
            new_path = kept[str(e.abs_path)]
            if new_path is None:
                left_out.append(e.rel_path)
                continue
            e = replace(e, rel_path=new_path)
        out.append(e)
    return out, left_out


def reindex(
    ctx: Context,
    *,
    force: bool = False,
    index_name: Any = None,
    progress: Progress | None = None,
    held_to: tuple[Path, ...] | None = None,
) -> dict[str, Any]:
    """Walk every recorded root again (``held_to``: all inside these roots, ``refuse_outside``).
    Answers ``status: completed``, integer counts (``added``, ``modified``, ``deleted``,
    ``unchanged``, ``skipped``, ``left_out``), the same counts per index under ``indexes``, and the
    paths under ``paths``. With ``force`` every file parsed again counts as added. ``left_out``:
    files on disk a user deleted through gitkb (ADD_DOCUMENTS brings them back)."""
    t0 = time.perf_counter()
    paths: dict[str, list[Any]] = {k: [] for k in COUNTS}
    per_index: dict[str, dict[str, int]] = {}
    with ctx.write_lock:
        for row, roots in refuse_outside(ctx, index_name, held_to):  # walks exactly what it checked, now
            report = IngestReport()
            deleted: list[str] = []
            left_out: list[str] = []
            kept = doc_rows.overrides(ctx.catalog.conn, row.id)
            for root, base in roots:
                if not root.exists():
                    deleted.extend(_delete_missing(ctx, row, root, seen=set()))
                    continue
                walked = list(walk(root, base=base, max_bytes=ctx.settings.max_file_bytes))
                walked = leave_out_sidecars(row, walked)
                entries, dropped = _follow_overrides(walked, kept)
                left_out.extend(dropped)
                cfg, _ = resolve_config(None, None, None, defaults=row.chunk_defaults)
                ingest_entries(
                    ctx,
                    row,
                    entries,
                    cfg,
                    Placement(),
                    report,
                    progress=progress,
                    trust_mtime=not force,
                    reparse=force,
                )
                seen = {e.rel_path for e in entries if isinstance(e, WalkEntry)}
                deleted.extend(_delete_missing(ctx, row, root, seen=seen))
            if force:  # everything was parsed again: report it all as added
                report.added.extend(report.modified + report.unchanged)
                report.modified, report.unchanged = [], []
            d = report.as_dict()
            mine = {
                "added": report.added,
                "modified": report.modified,
                "deleted": deleted,
                "unchanged": report.unchanged,
                "skipped": d["skipped"],
                "left_out": left_out,
            }
            per_index[row.name] = {k: len(v) for k, v in mine.items()}
            for k, v in mine.items():
                paths[k].extend(v)
        if force:
            rebuild_keywords(ctx)
        catch_up_keywords(ctx)
    counts = {k: len(v) for k, v in paths.items()}
    msg = ", ".join(
        f"{counts[k]} {k.replace('_', ' ')}" for k in ("added", "modified", "deleted", "unchanged", "skipped")
    )
    if counts["left_out"]:
        msg += f", {counts['left_out']} left out (deleted through gitkb; ADD_DOCUMENTS brings them back)"
    return {
        "status": "completed",
        "Message": msg + (" (full rebuild)" if force else ""),
        **counts,
        "full_rebuild": bool(force),
        "indexes": per_index,
        "paths": paths,
        "seconds": round(time.perf_counter() - t0, 3),
    }


def _docs_under(ctx: Context, row: IndexRow, root: Path) -> list[tuple[int, str, str | None]]:
    return [d for d in doc_rows.file_documents(ctx.catalog.conn, row.id) if _under(d[2], root)]


def _delete_missing(ctx: Context, row: IndexRow, root: Path, *, seen: set[str]) -> list[str]:
    gone = [(rowid, path) for rowid, path, _ in _docs_under(ctx, row, root) if path not in seen]
    if gone:
        with ctx.catalog.write() as conn:
            for rowid, _ in gone:
                doc_rows.delete(conn, rowid)
    return [p for _, p in gone]
