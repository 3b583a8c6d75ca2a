"""Proposal and review rows.

A proposal is one staged commit on a source's proposal branch; its ``state``
is ``staged``, ``merged``, ``discarded`` or ``conflict`` (it could not be
replayed onto a new base). A review is the gate in front of a push: its
``state`` is ``pending``, ``approved``, ``denied``, ``closed`` (the change
request was closed unmerged), ``merged`` or ``superseded`` (newer proposals
were staged before anyone decided).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gitkb.stores.catalog.engine import Conn

PROPOSAL_STATES = ("staged", "merged", "discarded", "conflict")
REVIEW_STATES = ("pending", "approved", "denied", "closed", "merged", "superseded")


@dataclass(frozen=True)
class ProposalRow:
    id: str
    source_id: str
    op: str  # edit | delete | rename
    path: str
    new_path: str | None
    note: str
    parent_sha: str
    commit_sha: str
    state: str
    detail: dict[str, Any]
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class ReviewRow:
    id: str
    source_id: str
    index_id: str | None
    branch: str
    base_branch: str
    base_sha: str
    head_sha: str
    push_sha: str
    expected_remote_sha: str | None
    title: str
    body: str
    commit_message: str
    diff: str
    changed_files: list[dict[str, str]]
    proposal_ids: list[str]
    state: str
    pushed: bool
    push_error: str | None
    cr_number: int | None
    cr_url: str | None
    requested_by: str | None
    reviewer: str | None
    reason: str | None
    decided_at: float | None
    created_at: float
    updated_at: float
    overwrites: list[dict[str, str]] = field(default_factory=list)  # others' commits a push replaces
    pushing_sha: str | None = None  # a push (and its change request) in flight, not yet recorded


def new_proposal_id() -> str:
    return "prop_" + uuid.uuid4().hex[:20]


def new_review_id() -> str:
    return "rev_" + uuid.uuid4().hex[:20]


def _proposal(r: Any) -> ProposalRow:
    return ProposalRow(
        id=r["id"],
        source_id=r["source_id"],
        op=r["op"],
        path=r["path"],
        new_path=r["new_path"],
        note=r["note"],
        parent_sha=r["parent_sha"],
        commit_sha=r["commit_sha"],
        state=r["state"],
        detail=json.loads(r["detail"] or "{}"),
        created_at=r["created_at"],
        updated_at=r["updated_at"],
    )


def insert_proposal(
    conn: Conn,
    *,
    proposal_id: str,
    source_id: str,
    op: str,
    path: str,
    new_path: str | None,
    note: str,
    parent_sha: str,
    commit_sha: str,
    detail: dict[str, Any] | None = None,
) -> ProposalRow:
    now = time.time()
    conn.execute(
        "INSERT INTO proposals(id, source_id, op, path, new_path, note, parent_sha, commit_sha, state, detail,"
        " created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,'staged',?,?,?)",
        (
            proposal_id,
            source_id,
            op,
            path,
            new_path,
            note,
            parent_sha,
            commit_sha,
            json.dumps(detail or {}),
            now,
            now,
        ),
    )
    row = get_proposal(conn, proposal_id)
    assert row is not None
    return row


def get_proposal(conn: Conn, proposal_id: str) -> ProposalRow | None:
    r = conn.execute("SELECT * FROM proposals WHERE id = ?", (proposal_id,)).fetchone()
    return _proposal(r) if r else None


def list_proposals(
    conn: Conn, *, source_id: str | None = None, states: Sequence[str] | None = None
) -> list[ProposalRow]:
    where, args = ["1=1"], []
    if source_id:
        where.append("source_id = ?")
        args.append(source_id)
    if states:
        where.append(f"state IN ({','.join('?' * len(states))})")
        args.extend(states)
    sql = f"SELECT * FROM proposals WHERE {' AND '.join(where)} ORDER BY created_at, rowid"
    return [_proposal(r) for r in conn.execute(sql, args)]


def set_proposal_state(
    conn: Conn, proposal_id: str, state: str, *, detail: dict[str, Any] | None = None
) -> None:
    if detail is None:
        conn.execute(
            "UPDATE proposals SET state = ?, updated_at = ? WHERE id = ?", (state, time.time(), proposal_id)
        )
    else:
        conn.execute(
            "UPDATE proposals SET state = ?, detail = ?, updated_at = ? WHERE id = ?",
            (state, json.dumps(detail), time.time(), proposal_id),
        )


def move_proposal(conn: Conn, proposal_id: str, parent_sha: str, commit_sha: str) -> None:
    """After a replay onto a new base: the proposal's commit is now ``commit_sha``."""
    conn.execute(
        "UPDATE proposals SET parent_sha = ?, commit_sha = ?, updated_at = ? WHERE id = ?",
        (parent_sha, commit_sha, time.time(), proposal_id),
    )


# -- reviews -----------------------------------------------------------------------------


def _review(r: Any) -> ReviewRow:
    return ReviewRow(
        id=r["id"],
        source_id=r["source_id"],
        index_id=r["index_id"],
        branch=r["branch"],
        base_branch=r["base_branch"],
        base_sha=r["base_sha"],
        head_sha=r["head_sha"],
        push_sha=r["push_sha"],
        expected_remote_sha=r["expected_remote_sha"],
        title=r["title"],
        body=r["body"],
        commit_message=r["commit_message"],
        diff=r["diff"],
        changed_files=json.loads(r["changed_files"] or "[]"),
        proposal_ids=json.loads(r["proposal_ids"] or "[]"),
        state=r["state"],
        pushed=bool(r["pushed"]),
        push_error=r["push_error"],
        cr_number=r["cr_number"],
        cr_url=r["cr_url"],
        requested_by=r["requested_by"],
        reviewer=r["reviewer"],
        reason=r["reason"],
        decided_at=r["decided_at"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        overwrites=json.loads(r["overwrites"] or "[]"),
        pushing_sha=r["pushing_sha"],
    )


def insert_review(conn: Conn, **values: Any) -> ReviewRow:
    now = time.time()
    values = dict(values)
    values["changed_files"] = json.dumps(values.get("changed_files") or [])
    values["proposal_ids"] = json.dumps(values.get("proposal_ids") or [])
    values["overwrites"] = json.dumps(values.get("overwrites") or [])
    values.setdefault("state", "pending")
    values["created_at"] = values["updated_at"] = now
    cols = ", ".join(values)
    conn.execute(f"INSERT INTO reviews({cols}) VALUES ({','.join('?' * len(values))})", list(values.values()))
    row = get_review(conn, values["id"])
    assert row is not None
    return row


_REVIEW_UPDATABLE = frozenset(
    {
        "state",
        "pushed",
        "push_error",
        "cr_number",
        "cr_url",
        "reviewer",
        "reason",
        "decided_at",
        "changed_files",
        "expected_remote_sha",
        "overwrites",
        "pushing_sha",
    }
)


def update_review(conn: Conn, review_id: str, **values: Any) -> None:
    bad = set(values) - _REVIEW_UPDATABLE
    if bad:
        raise ValueError(f"not updatable: {sorted(bad)}")
    for key in ("changed_files", "overwrites"):
        if key in values:
            values[key] = json.dumps(values[key])
    if "pushed" in values:
        values["pushed"] = int(bool(values["pushed"]))
    values["updated_at"] = time.time()
    sets = ", ".join(f"{k} = ?" for k in values)
    conn.execute(f"UPDATE reviews SET {sets} WHERE id = ?", [*values.values(), review_id])


def get_review(conn: Conn, review_id: str) -> ReviewRow | None:
    r = conn.execute("SELECT * FROM reviews WHERE id = ?", (review_id,)).fetchone()
    return _review(r) if r else None


def list_reviews(
    conn: Conn,
    *,
    source_id: str | None = None,
    states: Sequence[str] | None = None,
    limit: int = 100,
) -> list[ReviewRow]:
    where: list[str] = ["1=1"]
    args: list[Any] = []
    if source_id:
        where.append("source_id = ?")
        args.append(source_id)
    if states:
        where.append(f"state IN ({','.join('?' * len(states))})")
        args.extend(states)
    sql = f"SELECT * FROM reviews WHERE {' AND '.join(where)} ORDER BY created_at DESC, rowid DESC"
    if limit >= 0:  # a negative limit: all (PostgreSQL refuses LIMIT -1)
        sql += " LIMIT ?"
        args.append(limit)
    return [_review(r) for r in conn.execute(sql, args)]


def review_for_change_request(conn: Conn, source_id: str, number: int) -> list[ReviewRow]:
    rows = conn.execute(
        "SELECT * FROM reviews WHERE source_id = ? AND cr_number = ? ORDER BY created_at DESC, rowid DESC",
        (source_id, number),
    )
    return [_review(r) for r in rows]


def reviews_in_flight(conn: Conn, *, source_id: str | None = None) -> list[ReviewRow]:
    """Reviews whose push (or change request step) started and was never recorded as finished."""
    sql, args = "SELECT * FROM reviews WHERE pushing_sha IS NOT NULL", []
    if source_id:
        sql += " AND source_id = ?"
        args.append(source_id)
    return [_review(r) for r in conn.execute(sql + " ORDER BY created_at, rowid", args)]


def pushed_shas(conn: Conn, source_id: str) -> list[str]:
    """Every commit gitkb pushed (or began to push) for a source's reviews: not someone else's."""
    rows = conn.execute(
        "SELECT push_sha, pushing_sha FROM reviews WHERE source_id = ? AND (pushed = 1 OR pushing_sha IS NOT NULL)",
        (source_id,),
    )
    return sorted({sha for r in rows for sha in (r["push_sha"], r["pushing_sha"]) if sha})
