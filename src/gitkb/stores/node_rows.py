"""Nodes sharing one catalog: each home's node id (``<home>/node.json``), the ``nodes`` rows with their
heartbeat, and the change log's compaction.

A node is a home: every process of a home shares its node id, its keyword index and the keyword
watermark named in its row (``keywords_mark``). Compaction removes the change-log entries every
watermark that still counts has passed: the keyword watermark of each live node (heard from within
``stale_after`` seconds) and the watermarks the caller names (the vectors' of every embedding identity
some index is bound to, ``services.runtime.nodes.compact``). Any other watermark holds nothing back: a
node gone stale, or an identity no index uses any more (its indexes re-embedded into another, or
deleted). The highest seq removed is the
floor (``changes_floor``): a keyword index whose watermark is below it cannot catch up from the log and
is rebuilt from the catalog. The newest entry is always kept, so ``MAX(seq)`` (the head) never moves back.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gitkb.stores.catalog.engine import Conn

NODE_FILE = "node.json"
KEYWORDS_PREFIX = "keywords"  # every keyword watermark's name starts with it ("keywords", "keywords@<node>")


def node_id_for(home: Path) -> str:
    """This home's node id, made (and kept in ``<home>/node.json``) the first time."""
    path = home / NODE_FILE
    try:
        data = json.loads(path.read_text("utf-8"))
        if isinstance(data, dict) and isinstance(data.get("id"), str) and data["id"]:
            return str(data["id"])
    except (OSError, ValueError):
        pass
    node_id = "node_" + uuid.uuid4().hex[:16]
    tmp = path.with_name(f".{NODE_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"id": node_id}), "utf-8")
    try:
        os.link(tmp, path)  # first writer wins; a concurrent opener reads the winner's id
    except FileExistsError:
        tmp.unlink()
        return node_id_for(home)
    tmp.unlink()
    return node_id


@dataclass(frozen=True)
class NodeRow:
    id: str
    host: str
    pid: int
    home: str
    keywords_mark: str
    started_at: float
    heartbeat_at: float


def beat(conn: Conn, node_id: str, *, host: str, pid: int, home: str, keywords_mark: str, at: float) -> None:
    """Register the node or record that it is alive."""
    conn.execute(
        "INSERT INTO nodes(id, host, pid, home, keywords_mark, started_at, heartbeat_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT(id) DO UPDATE SET host = excluded.host, pid = excluded.pid, home = excluded.home,"
        " keywords_mark = excluded.keywords_mark, heartbeat_at = excluded.heartbeat_at",
        (node_id, host, pid, home, keywords_mark, at, at),
    )


def list_nodes(conn: Conn) -> list[NodeRow]:
    return [
        NodeRow(str(r[0]), str(r[1]), int(r[2]), str(r[3]), str(r[4]), float(r[5]), float(r[6]))
        for r in conn.execute(
            "SELECT id, host, pid, home, keywords_mark, started_at, heartbeat_at FROM nodes ORDER BY id"
        )
    ]


def floor(conn: Conn) -> int:
    """The highest change-log seq compaction removed (0: none)."""
    r = conn.execute("SELECT seq FROM changes_floor WHERE id = 1").fetchone()
    return int(r[0]) if r else 0


def holding_floor(conn: Conn, *, live_since: float, counted: Iterable[str] = ()) -> int | None:
    """The lowest watermark that still counts (None when none does): live nodes' keyword watermarks and
    those named in ``counted`` (0 when not stored yet); no other watermark counts."""
    live = {n.keywords_mark for n in list_nodes(conn) if n.heartbeat_at >= live_since}
    stored = {str(name): int(seq) for name, seq in conn.execute("SELECT name, seq FROM watermarks")}
    seqs = [stored.get(name, 0) for name in counted] + [seq for name, seq in stored.items() if name in live]
    return min(seqs) if seqs else None


def compact(conn: Conn, *, live_since: float, at: float, counted: Iterable[str] = ()) -> tuple[int, int]:
    """Remove the entries every counting watermark has passed (call inside a write transaction);
    returns (the floor now, entries removed). With no watermark counting nothing is removed."""
    old = floor(conn)
    held = holding_floor(conn, live_since=live_since, counted=counted)
    if held is None:
        return old, 0
    head = int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM changes").fetchone()[0])
    upto = min(head - 1, held)  # the newest entry stays: the head never moves back
    if upto <= old:
        return old, 0
    cur = conn.execute("DELETE FROM changes WHERE seq <= ?", (upto,))
    removed = max(int(cur.rowcount), 0)
    conn.execute(
        "INSERT INTO changes_floor(id, seq, removed, compacted_at) VALUES (1, ?, ?, ?)"
        " ON CONFLICT(id) DO UPDATE SET seq = excluded.seq, removed = changes_floor.removed + excluded.removed,"
        " compacted_at = excluded.compacted_at",
        (upto, removed, at),
    )
    return upto, removed
