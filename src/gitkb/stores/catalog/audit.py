"""The append-only audit log: who did what, when, to what, and with which result.

Callers redact before writing; this module stores what it is given.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from gitkb.stores.catalog.engine import Conn


@dataclass(frozen=True)
class AuditEntry:
    id: int
    at: float
    actor: str
    action: str
    target: str
    result: str
    detail: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.at,
            "actor": self.actor,
            "action": self.action,
            "target": self.target,
            "result": self.result,
            "detail": self.detail,
        }


def append(conn: Conn, *, actor: str, action: str, target: str, result: str, detail: dict[str, Any]) -> int:
    cur = conn.execute(
        "INSERT INTO audit(at, actor, action, target, result, detail) VALUES (?,?,?,?,?,?) RETURNING id",
        (time.time(), actor, action, target, result, json.dumps(detail, sort_keys=True, default=str)),
    )
    return int(cur.fetchall()[0][0])


def count(conn: Conn, *, target: str | None = None) -> int:
    """How many entries ``recent`` pages over."""
    if target:
        return int(conn.execute("SELECT COUNT(*) FROM audit WHERE target = ?", (target,)).fetchone()[0])
    return int(conn.execute("SELECT COUNT(*) FROM audit").fetchone()[0])


def recent(conn: Conn, *, target: str | None = None, limit: int = 100, offset: int = 0) -> list[AuditEntry]:
    sql = "SELECT * FROM audit"
    args: list[Any] = []
    if target:
        sql += " WHERE target = ?"
        args.append(target)
    sql += " ORDER BY id DESC LIMIT ? OFFSET ?"
    args.extend([limit, offset])
    return [
        AuditEntry(
            r["id"], r["at"], r["actor"], r["action"], r["target"], r["result"], json.loads(r["detail"])
        )
        for r in conn.execute(sql, args)
    ]
