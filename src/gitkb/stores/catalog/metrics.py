"""Grouped counts for ``GET /metrics``: read at scrape time, one query per figure.

Every function is one ``GROUP BY`` over an indexed or small table; none reads a
document's text, a review's diff or a secret.
"""

from __future__ import annotations

from gitkb.stores.catalog.engine import Conn


def _pairs(conn: Conn, sql: str) -> dict[tuple[str, str], int]:
    return {(str(a), str(b)): int(n) for a, b, n in conn.execute(sql).fetchall()}


def jobs_by_kind_state(conn: Conn) -> dict[tuple[str, str], int]:
    """(kind, state) -> jobs the catalog holds (finished ones until they are pruned)."""
    return _pairs(conn, "SELECT kind, state, COUNT(*) FROM jobs GROUP BY kind, state")


# Not a RECHUNK's hidden temporary index: its copies are not documents of their own.
_VISIBLE = " WHERE i.hidden = 0 GROUP BY i.id"


def documents_by_index(conn: Conn) -> dict[str, int]:
    """index name -> documents (indexes without documents give 0)."""
    rows = conn.execute(
        f"SELECT i.name, COUNT(d.rowid) FROM indexes i LEFT JOIN documents d ON d.index_id = i.id{_VISIBLE}"
    ).fetchall()
    return {str(name): int(n) for name, n in rows}


def chunks_by_index(conn: Conn) -> dict[str, int]:
    """index name -> chunks (indexes without chunks give 0)."""
    rows = conn.execute(
        f"SELECT i.name, COUNT(c.rowid) FROM indexes i LEFT JOIN chunks c ON c.index_id = i.id{_VISIBLE}"
    ).fetchall()
    return {str(name): int(n) for name, n in rows}


def reviews_by_state(conn: Conn) -> dict[str, int]:
    rows = conn.execute("SELECT state, COUNT(*) FROM reviews GROUP BY state").fetchall()
    return {str(s): int(n) for s, n in rows}


def deliveries_by_provider(conn: Conn) -> dict[tuple[str, str], int]:
    """(provider, ``queued`` | ``no_sync``) -> recorded webhook deliveries (those with a delivery id)."""
    return _pairs(
        conn,
        "SELECT provider, CASE WHEN job_id IS NULL THEN 'no_sync' ELSE 'queued' END, COUNT(*)"
        " FROM webhook_deliveries GROUP BY 1, 2",
    )
