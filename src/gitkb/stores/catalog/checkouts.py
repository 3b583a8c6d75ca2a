"""Checkout rows: the read-only working copies ``gitkb checkout`` made, one per (node, path).

A node is the host that made the copy (its files are on that host's disk); each node refreshes
only its own rows when it sees the source's synced commit move.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from gitkb.stores.catalog.engine import Conn


@dataclass(frozen=True)
class CheckoutRow:
    id: str
    source_id: str
    node: str
    path: str
    commit_id: str
    created_at: float
    refreshed_at: float


def _row(r: Any) -> CheckoutRow:
    return CheckoutRow(
        id=r["id"],
        source_id=r["source_id"],
        node=r["node"],
        path=r["path"],
        commit_id=r["commit_id"],
        created_at=r["created_at"],
        refreshed_at=r["refreshed_at"],
    )


def get(conn: Conn, node: str, path: str) -> CheckoutRow | None:
    r = conn.execute("SELECT * FROM checkouts WHERE node = ? AND path = ?", (node, path)).fetchone()
    return _row(r) if r else None


def for_node(conn: Conn, node: str, source_id: str | None = None) -> list[CheckoutRow]:
    if source_id is None:
        rows = conn.execute("SELECT * FROM checkouts WHERE node = ? ORDER BY path", (node,))
    else:
        rows = conn.execute(
            "SELECT * FROM checkouts WHERE node = ? AND source_id = ? ORDER BY path", (node, source_id)
        )
    return [_row(r) for r in rows]


def stale_for_node(conn: Conn, node: str) -> list[CheckoutRow]:
    """This node's checkouts whose source was synced to another commit since they were refreshed."""
    rows = conn.execute(
        "SELECT c.* FROM checkouts c JOIN sources s ON s.id = c.source_id"
        " WHERE c.node = ? AND s.synced_commit IS NOT NULL AND s.synced_commit != c.commit_id ORDER BY c.path",
        (node,),
    )
    return [_row(r) for r in rows]


def upsert(conn: Conn, *, source_id: str, node: str, path: str, commit_id: str) -> CheckoutRow:
    now = time.time()
    conn.execute(
        "INSERT INTO checkouts(id, source_id, node, path, commit_id, created_at, refreshed_at)"
        " VALUES (?,?,?,?,?,?,?) ON CONFLICT(node, path) DO UPDATE SET"
        " source_id = excluded.source_id, commit_id = excluded.commit_id, refreshed_at = excluded.refreshed_at",
        ("co_" + uuid.uuid4().hex, source_id, node, path, commit_id, now, now),
    )
    row = get(conn, node, path)
    assert row is not None
    return row


def delete(conn: Conn, checkout_id: str) -> None:
    conn.execute("DELETE FROM checkouts WHERE id = ?", (checkout_id,))


def all_paths(conn: Conn) -> list[tuple[str, str]]:
    """``(node, path)`` of every checkout, of every node."""
    return [
        (str(r[0]), str(r[1])) for r in conn.execute("SELECT node, path FROM checkouts ORDER BY node, path")
    ]
