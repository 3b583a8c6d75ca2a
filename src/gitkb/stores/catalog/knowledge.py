"""Knowledge bases, agents, their bindings and per-agent usage events (plain SQL).

``kb_indexes`` stores index ids (``kidx_...``), never names, so a knowledge base
follows its indexes across renames. It has no foreign key to ``indexes``: an id
whose index is gone is reported as missing by the service, not silently dropped.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from gitkb.stores.catalog.engine import Conn


@dataclass(frozen=True)
class KbRow:
    id: str
    name: str
    created_at: float
    updated_at: float
    index_ids: tuple[str, ...]


@dataclass(frozen=True)
class AgentRow:
    id: str
    created_at: float
    updated_at: float
    default_top_k: int


@dataclass(frozen=True)
class BindingRow:
    agent_id: str
    kb_id: str
    kb_name: str
    read_only: bool
    created_at: float
    mode: str = "propose"  # read, propose or write


# -- knowledge bases -------------------------------------------------------
def _kb(conn: Conn, r: Any) -> KbRow:
    ids = tuple(
        x[0]
        for x in conn.execute("SELECT index_id FROM kb_indexes WHERE kb_id = ? ORDER BY position", (r["id"],))
    )
    return KbRow(r["id"], r["name"], r["created_at"], r["updated_at"], ids)


def kb_by_name(conn: Conn, name: str) -> KbRow | None:
    r = conn.execute("SELECT * FROM knowledge_bases WHERE name = ?", (name,)).fetchone()
    return _kb(conn, r) if r else None


def kb_list(conn: Conn) -> list[KbRow]:
    return [_kb(conn, r) for r in conn.execute("SELECT * FROM knowledge_bases ORDER BY name").fetchall()]


def kb_insert(conn: Conn, kb_id: str, name: str, index_ids: list[str]) -> None:
    now = time.time()
    conn.execute(
        "INSERT INTO knowledge_bases(id, name, created_at, updated_at) VALUES (?,?,?,?)",
        (kb_id, name, now, now),
    )
    conn.executemany(
        "INSERT INTO kb_indexes(kb_id, index_id, position) VALUES (?,?,?)",
        [(kb_id, ix, i) for i, ix in enumerate(index_ids)],
    )


def kb_delete(conn: Conn, kb_id: str) -> None:
    conn.execute("DELETE FROM knowledge_bases WHERE id = ?", (kb_id,))


def kb_agents(conn: Conn, kb_id: str) -> list[str]:
    return [
        r[0]
        for r in conn.execute("SELECT agent_id FROM agent_kbs WHERE kb_id = ? ORDER BY agent_id", (kb_id,))
    ]


# -- agents ----------------------------------------------------------------
def agent_get(conn: Conn, agent_id: str) -> AgentRow | None:
    r = conn.execute("SELECT * FROM agents WHERE id = ?", (agent_id,)).fetchone()
    return AgentRow(r["id"], r["created_at"], r["updated_at"], r["default_top_k"]) if r else None


def agent_upsert(conn: Conn, agent_id: str, default_top_k: int | None) -> None:
    now = time.time()
    conn.execute(
        "INSERT INTO agents(id, created_at, updated_at, default_top_k) VALUES (?,?,?,COALESCE(?, 10))"
        " ON CONFLICT(id) DO UPDATE SET updated_at = excluded.updated_at,"
        " default_top_k = COALESCE(?, agents.default_top_k)",
        (agent_id, now, now, default_top_k, default_top_k),
    )


def bind(conn: Conn, agent_id: str, kb_id: str, mode: str) -> None:
    conn.execute(
        "INSERT INTO agent_kbs(agent_id, kb_id, read_only, mode, created_at) VALUES (?,?,?,?,?)"
        " ON CONFLICT(agent_id, kb_id) DO UPDATE SET read_only = excluded.read_only, mode = excluded.mode",
        (agent_id, kb_id, int(mode == "read"), mode, time.time()),
    )


def unbind(conn: Conn, agent_id: str, kb_id: str) -> int:
    return conn.execute("DELETE FROM agent_kbs WHERE agent_id = ? AND kb_id = ?", (agent_id, kb_id)).rowcount


def bindings(conn: Conn, agent_id: str) -> list[BindingRow]:
    rows = conn.execute(
        "SELECT b.agent_id, b.kb_id, k.name, b.read_only, b.created_at, b.mode FROM agent_kbs b"
        " JOIN knowledge_bases k ON k.id = b.kb_id WHERE b.agent_id = ? ORDER BY k.name",
        (agent_id,),
    )
    return [BindingRow(r[0], r[1], r[2], bool(r[3]), r[4], r[5]) for r in rows]


# -- usage events ------------------------------------------------------------
def record_event(
    conn: Conn,
    agent_id: str,
    kind: str,
    *,
    count: int = 0,
    tokens: int = 0,
    duration_ms: float = 0.0,
    data: dict[str, Any] | None = None,
) -> None:
    conn.execute(
        "INSERT INTO agent_events(at, agent_id, kind, count, tokens, duration_ms, data) VALUES (?,?,?,?,?,?,?)",
        (time.time(), agent_id, kind, count, tokens, duration_ms, json.dumps(data or {}, ensure_ascii=False)),
    )


def usage_totals(conn: Conn, agent_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT kind, COUNT(*) AS events, SUM(count) AS count, SUM(tokens) AS tokens,"
        " SUM(duration_ms) AS duration_ms, MIN(at) AS first_at, MAX(at) AS last_at"
        " FROM agent_events WHERE agent_id = ? GROUP BY kind ORDER BY kind",
        (agent_id,),
    )
    return [dict(r) for r in rows]


def recent_events(
    conn: Conn, agent_id: str, kind: str | None = None, limit: int = 20
) -> list[dict[str, Any]]:
    sql = "SELECT at, kind, count, tokens, duration_ms, data FROM agent_events WHERE agent_id = ?"
    args: list[Any] = [agent_id]
    if kind is not None:
        sql += " AND kind = ?"
        args.append(kind)
    sql += " ORDER BY id DESC LIMIT ?"
    args.append(limit)
    out = []
    for r in conn.execute(sql, args):
        d = dict(r)
        d["data"] = json.loads(d["data"] or "{}")
        out.append(d)
    return out
