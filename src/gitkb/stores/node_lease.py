"""The writer lease: one catalog row (``writer_lease``) with a heartbeat, so any node sharing the
catalog can be the writer.

The row names its holder (a random token per acquisition, the node id, host, pid) and when it was
taken and last renewed. The holder renews it every ``lease_seconds / 5``; another process takes it
over when it was not renewed for ``0.8 * lease_seconds`` (so a dead writer's lease passes within
``lease_seconds`` to a node that looks as often), or at once when the holder is on this host and its
pid is gone (a ``kill -9``). Taking and renewing are compare-and-set on the token: two nodes never both
believe they hold it after a renewal.

The token is also the fencing token. A writer runs its jobs under ``WriterLease.fence()``
(``CatalogStore.fenced``): each write transaction of the job first reads the row, under the catalog's
write lock, and rolls back with ``LeaseLost`` (``lease_lost``) unless the row still holds the token the
job started with. A writer that stalled past its lease (a pause, a GC, a long batch) and was taken over
so writes nothing more; the cost is one primary-key read per write transaction.

A process must hold its home's local guard (``gitkb.stores.lease.LocalGuard``) to take the lease: the
derived files of a home (keyword index, embedded Chroma) are written by one process.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from gitkb.core.errors import LeaseLost
from gitkb.stores.catalog.engine import CatalogStore, Conn
from gitkb.stores.lease import LocalGuard

NAME = "writer"
EXPIRES_AFTER = 0.8  # of lease_seconds: a lease not renewed for that long may be taken over


@dataclass(frozen=True)
class LeaseRow:
    token: str
    node_id: str
    host: str
    pid: int
    acquired_at: float
    renewed_at: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "host": self.host,
            "pid": self.pid,
            "since": self.acquired_at,
            "renewed_at": self.renewed_at,
        }


def get_lease(conn: Conn) -> LeaseRow | None:
    r = conn.execute(
        "SELECT token, node_id, host, pid, acquired_at, renewed_at FROM writer_lease WHERE name = ?", (NAME,)
    ).fetchone()
    if r is None:
        return None
    return LeaseRow(str(r[0]), str(r[1]), str(r[2]), int(r[3]), float(r[4]), float(r[5]))


def _claim(conn: Conn, mine: LeaseRow, replacing: str | None) -> bool:
    """Write ``mine`` as the holder when the row is absent (``replacing`` None) or still holds the token
    ``replacing``; returns whether the row is now ours."""
    if replacing is None:
        conn.execute(
            "INSERT INTO writer_lease(name, token, node_id, host, pid, acquired_at, renewed_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO NOTHING",
            (NAME, mine.token, mine.node_id, mine.host, mine.pid, mine.acquired_at, mine.renewed_at),
        )
    else:
        conn.execute(
            "UPDATE writer_lease SET token = ?, node_id = ?, host = ?, pid = ?, acquired_at = ?, renewed_at = ?"
            " WHERE name = ? AND token = ?",
            (
                mine.token,
                mine.node_id,
                mine.host,
                mine.pid,
                mine.acquired_at,
                mine.renewed_at,
                NAME,
                replacing,
            ),
        )
    now = get_lease(conn)
    return now is not None and now.token == mine.token


def _renew(conn: Conn, token: str, at: float) -> bool:
    cur = conn.execute(
        "UPDATE writer_lease SET renewed_at = ? WHERE name = ? AND token = ?", (at, NAME, token)
    )
    return cur.rowcount == 1


def check_holder(conn: Conn, token: str | None) -> None:
    """Raise ``LeaseLost`` unless the lease row holds ``token`` (called inside a write transaction)."""
    r = conn.execute("SELECT token, node_id FROM writer_lease WHERE name = ?", (NAME,)).fetchone()
    if token is None or r is None or str(r[0]) != token:
        holder = "nobody" if r is None else f"node {r[1]}"
        raise LeaseLost(
            f"this process lost the writer lease ({holder} holds it now); the write was rolled back",
            details={"lease_holder": None if r is None else str(r[1])},
        )


def _release(conn: Conn, token: str) -> None:
    conn.execute("DELETE FROM writer_lease WHERE name = ? AND token = ?", (NAME, token))


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host runs (a zombie, killed and not yet reaped, does not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rpartition(")")[2].split()[:1] != ["Z"]
    except OSError:
        return True


def takeable(row: LeaseRow, *, host: str, now: float, lease_seconds: float) -> bool:
    """A lease another process may take: not renewed in time, or held by a dead process of this host."""
    if now - row.renewed_at > EXPIRES_AFTER * lease_seconds:
        return True
    return row.host == host and row.pid != os.getpid() and not pid_alive(row.pid)


@dataclass(frozen=True)
class LeaseFence:
    """A ``CatalogStore.fenced`` check bound to one lease token (None: not held, every write fails)."""

    token: str | None

    def __call__(self, conn: Conn) -> None:
        check_holder(conn, self.token)


class WriterLease:
    """This process's view of the writer lease: the home's local guard plus the catalog row."""

    def __init__(self, guard: LocalGuard, catalog: CatalogStore, node_id: str, lease_seconds: float) -> None:
        self.guard = guard
        self.catalog = catalog
        self.node_id = node_id
        self.lease_seconds = lease_seconds
        self.host = socket.gethostname()
        self._token: str | None = None
        self._lock = threading.Lock()

    @property
    def held(self) -> bool:
        return self._token is not None

    def try_acquire(self) -> bool:
        """Take the lease when it is free, expired or held by a dead process here; True when held."""
        with self._lock:
            if self._token is not None:
                return True
            if not self.guard.try_acquire():
                return False
            now = time.time()
            row = get_lease(self.catalog.conn)  # a read first: a look costs no write transaction
            if row is not None and not takeable(
                row, host=self.host, now=now, lease_seconds=self.lease_seconds
            ):
                return False
            mine = LeaseRow(uuid.uuid4().hex, self.node_id, self.host, os.getpid(), now, now)
            with self.catalog.write() as conn:
                row = get_lease(conn)  # again inside the transaction: someone may have taken it meanwhile
                if row is not None and not takeable(
                    row, host=self.host, now=now, lease_seconds=self.lease_seconds
                ):
                    return False
                if not _claim(conn, mine, None if row is None else row.token):
                    return False
            self._token = mine.token
            return True

    def fence(self) -> LeaseFence:
        """The check a job's write transactions run (``CatalogStore.fenced``): the lease row still holds
        the token held now. Taken when the job starts: a lease lost and taken again meanwhile fails it too."""
        return LeaseFence(self._token)

    def lost(self, fence: LeaseFence) -> bool:
        """A write under ``fence`` found the lease taken over: forget the lease if it is still the one
        the fence was taken with; True when this call forgot it."""
        with self._lock:
            if self._token is None or fence.token != self._token:
                return False
            self._token = None
            return True

    def looks_free(self) -> bool:
        """Whether ``try_acquire`` could succeed now (one read, no transaction)."""
        if self._token is not None:
            return False
        row = get_lease(self.catalog.conn)
        return row is None or takeable(row, host=self.host, now=time.time(), lease_seconds=self.lease_seconds)

    def renew(self) -> bool:
        """The heartbeat: True while the lease is still ours; False once another process took it."""
        with self._lock:
            token = self._token
            if token is None:
                return False
            with self.catalog.write() as conn:
                still = _renew(conn, token, time.time())
            if not still:
                self._token = None
            return still

    def holder(self) -> dict[str, Any] | None:
        """Who holds the lease, from the row (None when nobody does or it expired)."""
        row = get_lease(self.catalog.conn)
        if row is None:
            return None
        out = row.as_dict()
        out["expired"] = takeable(row, host=self.host, now=time.time(), lease_seconds=self.lease_seconds)
        return out

    def release(self) -> None:
        with self._lock:
            token, self._token = self._token, None
            if token is not None:
                try:
                    with self.catalog.write() as conn:
                        _release(conn, token)
                except Exception:  # noqa: BLE001 - the catalog is going away; the row expires on its own
                    pass
            self.guard.release()
