"""Change requests of the embedded ``local`` forge, kept in the catalog.

``repo`` names the repository (the remote URL of a source); numbers count up
from 1 per repository, like PR numbers on a forge.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from gitkb.stores.catalog.engine import Conn


@dataclass(frozen=True)
class ChangeRequestRow:
    repo: str
    number: int
    head: str
    base: str
    title: str
    body: str
    state: str  # open | closed | merged
    merged: bool
    merge_commit_sha: str | None
    base_sha: str | None
    head_sha: str | None
    created_at: float
    updated_at: float


def _row(r: Any) -> ChangeRequestRow:
    return ChangeRequestRow(
        repo=r["repo"],
        number=r["number"],
        head=r["head"],
        base=r["base"],
        title=r["title"],
        body=r["body"],
        state=r["state"],
        merged=bool(r["merged"]),
        merge_commit_sha=r["merge_commit_sha"],
        base_sha=r["base_sha"],
        head_sha=r["head_sha"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
    )


def get(conn: Conn, repo: str, number: int) -> ChangeRequestRow | None:
    r = conn.execute("SELECT * FROM change_requests WHERE repo = ? AND number = ?", (repo, number)).fetchone()
    return _row(r) if r else None


def find_open_by_head(conn: Conn, repo: str, head: str) -> ChangeRequestRow | None:
    r = conn.execute(
        "SELECT * FROM change_requests WHERE repo = ? AND head = ? AND state = 'open' ORDER BY number DESC LIMIT 1",
        (repo, head),
    ).fetchone()
    return _row(r) if r else None


def list_for_repo(conn: Conn, repo: str, *, state: str | None = None) -> list[ChangeRequestRow]:
    sql = "SELECT * FROM change_requests WHERE repo = ?"
    args: list[object] = [repo]
    if state:
        sql += " AND state = ?"
        args.append(state)
    return [_row(r) for r in conn.execute(sql + " ORDER BY number", args)]


def create(conn: Conn, repo: str, *, head: str, base: str, title: str, body: str) -> ChangeRequestRow:
    now = time.time()
    n = conn.execute(
        "SELECT COALESCE(MAX(number), 0) + 1 FROM change_requests WHERE repo = ?", (repo,)
    ).fetchone()[0]
    conn.execute(
        "INSERT INTO change_requests(repo, number, head, base, title, body, state, created_at, updated_at)"
        " VALUES (?,?,?,?,?,?,'open',?,?)",
        (repo, n, head, base, title, body, now, now),
    )
    row = get(conn, repo, int(n))
    assert row is not None
    return row


def update_text(conn: Conn, repo: str, number: int, *, title: str, body: str) -> None:
    conn.execute(
        "UPDATE change_requests SET title = ?, body = ?, updated_at = ? WHERE repo = ? AND number = ?",
        (title, body, time.time(), repo, number),
    )


def mark(
    conn: Conn,
    repo: str,
    number: int,
    state: str,
    *,
    merge_commit_sha: str | None = None,
    base_sha: str | None = None,
    head_sha: str | None = None,
) -> None:
    conn.execute(
        "UPDATE change_requests SET state = ?, merged = ?, merge_commit_sha = COALESCE(?, merge_commit_sha),"
        " base_sha = COALESCE(?, base_sha), head_sha = COALESCE(?, head_sha), updated_at = ?"
        " WHERE repo = ? AND number = ?",
        (state, int(state == "merged"), merge_commit_sha, base_sha, head_sha, time.time(), repo, number),
    )
