"""reindex: bring indexes that came from a directory up to date with the disk.

Every ADD_DOCUMENTS records its root (``index_roots``). Reindex walks each
root again: same size and mtime means unchanged without reading the file
(then the content hash decides), changed files are re-chunked (unchanged
chunks keep their ids and vectors), files gone from disk are deleted.
``force`` drops every document of those roots and parses everything again.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gitkb.core.chunking import resolve_config
from gitkb.core.errors import Busy
from gitkb.core.walking import walk
from gitkb.services.catchup import catch_up_keywords, rebuild_keywords
from gitkb.services.context import Context
from gitkb.services.indexes import get_index
from gitkb.services.ingest import IngestReport, Placement, ingest_entries
from gitkb.stores.catalog import documents as doc_rows
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog.indexes import IndexRow

Progress = Any


def _roots(ctx: Context, row: IndexRow) -> list[tuple[Path, Path]]:
    return [
        (Path(r["root"]), Path(r["base"]))
        for r in ctx.catalog.conn.execute("SELECT root, base FROM index_roots WHERE index_id=? ORDER BY root", (row.id,))
    ]


def _under(path: str | None, root: Path) -> bool:
    if not path:
        return False
    p = Path(path)
    return p == root or root in p.parents


def reindex(ctx: Context, *, force: bool = False, index_name: Any = None, progress: Progress | None = None) -> dict[str, Any]:
    if ctx.extras.get("rechunking"):
        raise Busy("an index is being rechunked; reindex when it finishes", next_steps=["poll get_index_status"])
    rows = [get_index(ctx, index_name)] if index_name else index_rows.list_all(ctx.catalog.conn)
    t0 = time.perf_counter()
    total = IngestReport()
    deleted: list[str] = []
    per_index: dict[str, dict[str, int]] = {}
    with ctx.write_lock:
        for row in rows:
            if row.settings.get("source"):
                continue  # git-fed indexes follow their source (source sync), not the disk
            before = (len(total.added), len(total.modified), len(total.unchanged), len(deleted))
            for root, base in _roots(ctx, row):
                if not root.exists():
                    deleted.extend(_delete_missing(ctx, row, root, seen=set()))
                    continue
                entries = list(walk(root, base=base, max_bytes=ctx.settings.max_file_bytes))
                cfg, _ = resolve_config(None, None, None, defaults=row.chunk_defaults)
                ingest_entries(
                    ctx, row, entries, cfg, Placement(), total, progress=progress, trust_mtime=not force, reparse=force
                )
                seen = {e.rel_path for e in entries if hasattr(e, "rel_path")}
                deleted.extend(_delete_missing(ctx, row, root, seen=seen))
            per_index[row.name] = {
                "added": len(total.added) - before[0],
                "modified": len(total.modified) - before[1],
                "unchanged": len(total.unchanged) - before[2],
                "deleted": len(deleted) - before[3],
            }
        if force:
            rebuild_keywords(ctx)
        catch_up_keywords(ctx)
    if force:  # everything was parsed again: report it all as added
        total.added.extend(total.modified + total.unchanged)
        total.modified, total.unchanged = [], []
    d = total.as_dict()
    return {
        "Message": (
            f"{len(total.added)} added, {len(total.modified)} modified, {len(deleted)} deleted, "
            f"{len(total.unchanged)} unchanged" + (" (full rebuild)" if force else "")
        ),
        "added": d["added"],
        "modified": d["modified"],
        "deleted": deleted,
        "unchanged": len(total.unchanged),
        "skipped": d["skipped"],
        "full_rebuild": force,
        "indexes": per_index,
        "seconds": round(time.perf_counter() - t0, 3),
    }


def _docs_under(ctx: Context, row: IndexRow, root: Path) -> list[tuple[int, str, str | None]]:
    return [
        (r["rowid"], r["path"], r["origin_path"])
        for r in ctx.catalog.conn.execute(
            "SELECT rowid, path, origin_path FROM documents WHERE index_id=? AND origin='file'", (row.id,)
        )
        if _under(r["origin_path"], root)
    ]


def _delete_missing(ctx: Context, row: IndexRow, root: Path, *, seen: set[str]) -> list[str]:
    gone = [(rowid, path) for rowid, path, _ in _docs_under(ctx, row, root) if path not in seen]
    if gone:
        with ctx.catalog.write() as conn:
            for rowid, _ in gone:
                doc_rows.delete(conn, rowid)
    return [p for _, p in gone]

