"""Web page login sessions: one row per logged-in browser.

The cookie holds a random session id; the catalog holds only its SHA-256, the name of the token
that logged in and that token's SHA-256 (the same digest ``[[server.tokens]]`` may hold), so a
copy of the catalog opens no session and a rotated or removed token ends its sessions.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitkb.stores.catalog.engine import Conn


@dataclass(frozen=True)
class SessionRow:
    token_name: str
    token_sha256: str
    expires_at: float


def insert(
    conn: Conn,
    id_sha256: str,
    token_name: str,
    token_sha256: str,
    now: float,
    expires_at: float,
) -> None:
    conn.execute(
        "INSERT INTO ui_sessions(id_sha256, token_name, token_sha256, created_at, expires_at)"
        " VALUES (?, ?, ?, ?, ?)",
        (id_sha256, token_name, token_sha256, now, expires_at),
    )


def get(conn: Conn, id_sha256: str, now: float) -> SessionRow | None:
    row = conn.execute(
        "SELECT token_name, token_sha256, expires_at FROM ui_sessions WHERE id_sha256 = ? AND expires_at > ?",
        (id_sha256, now),
    ).fetchone()
    return SessionRow(str(row[0]), str(row[1]), float(row[2])) if row else None


def delete(conn: Conn, id_sha256: str) -> int:
    return conn.execute("DELETE FROM ui_sessions WHERE id_sha256 = ?", (id_sha256,)).rowcount


def purge_expired(conn: Conn, now: float) -> int:
    return conn.execute("DELETE FROM ui_sessions WHERE expires_at <= ?", (now,)).rowcount
