"""Counts and reads the services ask for: totals, TTL expiry, tenants."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gitkb.stores.catalog.engine import Conn

LIVE = "(expires_at IS NULL OR expires_at > ?)"  # unexpired documents; its one argument is now


def count_all(conn: Conn) -> int:
    """Documents of the indexes (a RECHUNK's hidden temporary copies are not counted)."""
    return int(
        conn.execute(
            "SELECT COUNT(*) FROM documents WHERE index_id IN (SELECT id FROM indexes WHERE hidden = 0)"
        ).fetchone()[0]
    )


def count_in(conn: Conn, index_ids: Sequence[str]) -> int:
    """Documents in these indexes (0 for none)."""
    if not index_ids:
        return 0
    marks = ",".join("?" * len(index_ids))
    return int(
        conn.execute(
            f"SELECT COUNT(*) FROM documents WHERE index_id IN ({marks})", list(index_ids)
        ).fetchone()[0]
    )


def count_expired(conn: Conn, now: float, index_id: str | None = None) -> int:
    """Documents past their TTL at ``now`` (all indexes, or one)."""
    sql = "SELECT COUNT(*) FROM documents WHERE expires_at IS NOT NULL AND expires_at <= ?"
    args: list[Any] = [now]
    if index_id is not None:
        sql += " AND index_id = ?"
        args.append(index_id)
    return int(conn.execute(sql, args).fetchone()[0])


def expired_batch(conn: Conn, now: float, limit: int) -> list[tuple[int, str, str]]:
    """(rowid, index id, index name) of the first ``limit`` documents past their TTL at ``now``."""
    return [
        (int(r[0]), str(r[1]), str(r[2]))
        for r in conn.execute(
            "SELECT d.rowid, d.index_id, i.name FROM documents d JOIN indexes i ON i.id = d.index_id"
            " WHERE d.expires_at IS NOT NULL AND d.expires_at <= ? ORDER BY d.rowid LIMIT ?",
            (now, limit),
        ).fetchall()
    ]


def has_live_tenant(conn: Conn, index_id: str, tenant: str | None, now: float) -> bool:
    """The index holds a live document of ``tenant`` (None: an untenanted one); answered from the
    (index_id, tenant, expires_at) index."""
    return bool(
        conn.execute(
            f"SELECT EXISTS(SELECT 1 FROM documents WHERE index_id = ? AND tenant IS NOT DISTINCT FROM ? AND {LIVE})",
            (index_id, tenant, now),
        ).fetchone()[0]
    )


def tenant_counts(conn: Conn, index_id: str, tenant: str, now: float) -> tuple[int, int, int]:
    """Live documents of the index: (of ``tenant``, of other tenants, untenanted)."""
    r = conn.execute(
        "SELECT SUM(CASE WHEN tenant = ? THEN 1 ELSE 0 END),"
        " SUM(CASE WHEN tenant IS NOT NULL AND tenant != ? THEN 1 ELSE 0 END),"
        " SUM(CASE WHEN tenant IS NULL THEN 1 ELSE 0 END)"
        f" FROM documents WHERE index_id = ? AND {LIVE}",
        (tenant, tenant, index_id, now),
    ).fetchone()
    mine, others, untenanted = (int(x or 0) for x in r)
    return mine, others, untenanted


def untenanted_counts(conn: Conn, index_id: str, now: float) -> tuple[int, int]:
    """Live documents of the index: (untenanted, tenanted)."""
    r = conn.execute(
        "SELECT SUM(CASE WHEN tenant IS NULL THEN 1 ELSE 0 END), SUM(CASE WHEN tenant IS NOT NULL THEN 1 ELSE 0 END)"
        f" FROM documents WHERE index_id = ? AND {LIVE}",
        (index_id, now),
    ).fetchone()
    untenanted, tenanted = (int(x or 0) for x in r)
    return untenanted, tenanted
