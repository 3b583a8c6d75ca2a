"""What a user deleted or renamed through gitkb (reindex keeps it)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from gitkb.stores.catalog.engine import Conn


def set_override(conn: Conn, index_id: str, origin_path: str, new_path: str | None) -> None:
    """The file ``origin_path`` stays out of the index (``new_path`` None) or is stored as ``new_path``."""
    conn.execute(
        "INSERT INTO document_overrides(index_id, origin_path, new_path, at) VALUES (?,?,?,?)"
        " ON CONFLICT(index_id, origin_path) DO UPDATE SET new_path=excluded.new_path, at=excluded.at",
        (index_id, origin_path, new_path, time.time()),
    )


def overrides(conn: Conn, index_id: str) -> dict[str, str | None]:
    """origin_path -> the stored path it was renamed to, or None when it was deleted."""
    return {
        r[0]: r[1]
        for r in conn.execute(
            "SELECT origin_path, new_path FROM document_overrides WHERE index_id = ?", (index_id,)
        )
    }


def clear_overrides(conn: Conn, index_id: str, origin_paths: Sequence[str]) -> None:
    """ADD_DOCUMENTS named these files again: they follow the disk once more."""
    conn.executemany(
        "DELETE FROM document_overrides WHERE index_id = ? AND origin_path = ?",
        [(index_id, p) for p in origin_paths],
    )
