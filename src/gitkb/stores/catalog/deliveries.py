"""Webhook deliveries (for replay protection) and per-source webhook secrets.

A delivery is claimed before its sync is requested (``claim``: one row per
provider and delivery id); a replay finds the row and answers with the first
delivery's job. Webhook secrets are stored here, apart from ``sources.settings``
(which only holds references), and never listed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from gitkb.stores.catalog.engine import Conn


@dataclass(frozen=True)
class DeliveryRow:
    provider: str
    delivery_id: str
    source_id: str | None
    commit_sha: str | None
    event: str
    job_id: str | None
    received_at: float


def claim(
    conn: Conn,
    provider: str,
    delivery_id: str,
    *,
    source_id: str | None,
    commit: str | None,
    event: str,
) -> DeliveryRow | None:
    """Record a new delivery; ``None`` when it is new, else the earlier row (a replay)."""
    cur = conn.execute(
        "INSERT INTO webhook_deliveries(provider, delivery_id, source_id, commit_sha, event, received_at)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (provider, delivery_id, source_id, commit, event, time.time()),
    )
    if cur.rowcount == 1:
        return None
    return get(conn, provider, delivery_id)


def get(conn: Conn, provider: str, delivery_id: str) -> DeliveryRow | None:
    r = conn.execute(
        "SELECT provider, delivery_id, source_id, commit_sha, event, job_id, received_at"
        " FROM webhook_deliveries WHERE provider = ? AND delivery_id = ?",
        (provider, delivery_id),
    ).fetchone()
    return DeliveryRow(*tuple(r)) if r is not None else None


def set_job(conn: Conn, provider: str, delivery_id: str, job_id: str | None) -> None:
    conn.execute(
        "UPDATE webhook_deliveries SET job_id = ? WHERE provider = ? AND delivery_id = ?",
        (job_id, provider, delivery_id),
    )


def release(conn: Conn, provider: str, delivery_id: str) -> None:
    """Forget a claim whose sync could not be requested, so the forge's retry is not a 'replay'."""
    conn.execute(
        "DELETE FROM webhook_deliveries WHERE provider = ? AND delivery_id = ?", (provider, delivery_id)
    )


def count(conn: Conn) -> int:
    return int(conn.execute("SELECT COUNT(*) FROM webhook_deliveries").fetchone()[0])


def set_secret(conn: Conn, source_id: str, secret: str | None) -> None:
    if secret:
        conn.execute(
            "INSERT INTO webhook_secrets(source_id, secret, set_at) VALUES (?, ?, ?)"
            " ON CONFLICT(source_id) DO UPDATE SET secret = excluded.secret, set_at = excluded.set_at",
            (source_id, secret, time.time()),
        )
    else:
        conn.execute("DELETE FROM webhook_secrets WHERE source_id = ?", (source_id,))


def get_secret(conn: Conn, source_id: str) -> str | None:
    r = conn.execute("SELECT secret FROM webhook_secrets WHERE source_id = ?", (source_id,)).fetchone()
    return str(r[0]) if r is not None else None
