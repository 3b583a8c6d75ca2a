"""Files an ingest or a sync skipped, with the latest reason per path (status lists them)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from gitkb.core.models import SkippedFile
from gitkb.stores.catalog.engine import Conn


def record(conn: Conn, index_id: str, skipped: Sequence[SkippedFile], *, ok: Sequence[str]) -> None:
    """Keep the latest skip reason per path (``excluded`` and ``sidecar`` ones are not kept: nothing to fix); a path in ``ok``
    loaded again and is cleared."""
    now = time.time()
    conn.executemany(
        "INSERT INTO skipped_files(index_id, path, category, detail, at) VALUES (?,?,?,?,?)"
        " ON CONFLICT(index_id, path) DO UPDATE SET category=excluded.category, detail=excluded.detail, at=excluded.at",
        [
            (index_id, s.path, s.category, s.detail, now)
            for s in skipped
            if s.category not in ("excluded", "sidecar")
        ],
    )
    conn.executemany("DELETE FROM skipped_files WHERE index_id=? AND path=?", [(index_id, p) for p in ok])


def forget(conn: Conn, index_id: str, category: str, *, keep: Sequence[str]) -> None:
    """Drop the recorded skips of ``category`` except ``keep`` (a sync that lists them all anew)."""
    kept = set(keep)
    rows = conn.execute(
        "SELECT path FROM skipped_files WHERE index_id=? AND category=?", (index_id, category)
    )
    gone = [(index_id, r[0]) for r in rows.fetchall() if r[0] not in kept]
    conn.executemany("DELETE FROM skipped_files WHERE index_id=? AND path=?", gone)


def in_categories(conn: Conn, categories: Sequence[str]) -> list[dict[str, Any]]:
    """Every recorded skip of these categories (all indexes), by path: {path, category, detail, index_id}."""
    marks = ",".join("?" * len(categories))
    return [
        {"path": r["path"], "category": r["category"], "detail": r["detail"], "index_id": r["index_id"]}
        for r in conn.execute(
            f"SELECT index_id, path, category, detail FROM skipped_files WHERE category IN ({marks}) ORDER BY path",
            list(categories),
        )
    ]
