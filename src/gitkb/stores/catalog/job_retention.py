"""Finished jobs past the retention (``[catalog] jobs_days``): the writer's prune, and what it removed.

:func:`plan` finds (a read) and :func:`apply` removes the finished jobs (``completed``, ``failed``,
``cancelled``) that finished before a time, never a queued or running one, and keeps the newest
finished job of each kind and index even when older (``jobs.retention_key``: the kind, the action and
the indexes or source a job names, so the last build of every index that status reports stays:
``services.operations.status`` and ``scoped_status`` read the newest ``completed``/``failed`` build,
for all or for some indexes).
What the prunes removed is recorded (``writer_state``: ``jobs_pruned_before``, ``jobs_pruned``) so
a removed job's id can answer that it was removed (:func:`removed_before`), not "no job".

The plan reads, outside the write transaction, the ids of the finished jobs past the retention that
a newer finished job of the same key supersedes: an indexed read (``jobs_finished`` for the rows
past the retention, ``jobs_retention`` on the key each row carries, migrations
``m028_jobs23_finished_index`` and ``m029_jobs23_retention_key``), never every finished row; and
only when some job finished or aged past the retention since the last prune: an idle server reads
no job row.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitkb.stores.catalog.engine import Conn
from gitkb.stores.catalog.jobs import FINISHED, created_of, get_state, set_state

_CHECKED = "jobs_checked"  # "<before> <latest finished_at>" the last prune looked at
_BEFORE = "jobs_pruned_before"  # jobs finished before this were removed (absent: none ever was)
_PRUNED = "jobs_pruned"  # jobs the prunes removed, in all
_BATCH = 500  # ids per DELETE
# Status reads the newest completed-or-failed build and, apart, cancelled jobs: the newest of each
# key is kept in each group.
_GROUPS = (("completed", "failed"), ("cancelled",))
MAX_PER_PRUNE = 20_000  # jobs one prune removes at most (the oldest first): the first prune of a long
# unpruned table holds the write transaction for a bounded time; the next prune goes on


@dataclass(frozen=True)
class JobStats:
    rows: int  # jobs in the table, of any state
    finished: int
    pruned_before: float | None
    pruned: int


def _due(conn: Conn, before: float) -> tuple[bool, str]:
    """Whether a prune can remove anything the last one did not look at: a job finished since (the
    newest finish time moved: a job the last prune kept as the newest of its key may have a newer one
    now), or one aged past the retention since; and the mark to record once pruned."""
    latest = conn.execute("SELECT MAX(finished_at) FROM jobs").fetchone()[0]
    mark = f"{before!r} {float(latest or 0)!r}"
    last = get_state(conn, _CHECKED)
    if last is None:
        return latest is not None, mark
    last_before, last_latest = (float(x) for x in last.split())
    if float(latest or 0) != last_latest:  # a job finished since (or rows were restored, or aged)
        return True, mark
    aged = conn.execute(
        "SELECT 1 FROM jobs WHERE finished_at >= ? AND finished_at < ? LIMIT 1", (last_before, before)
    ).fetchone()
    return aged is not None, mark


@dataclass(frozen=True)
class PrunePlan:
    before: float
    doomed: list[str]  # the ids to remove
    mark: str | None  # what the prune looked at (``_CHECKED``); None: more is left for the next prune


def plan(conn: Conn, *, before: float) -> PrunePlan | None:
    """The finished jobs that finished before ``before``, but the newest of each
    ``jobs.retention_key``; None when nothing aged or finished since the last prune. A read: the
    writer runs it outside its write transaction (a finished row changes only by a prune, the
    writer's), then :func:`apply` removes them."""
    due, mark = _due(conn, before)
    if not due:
        return None
    doomed: list[str] = []
    for states in _GROUPS:
        marks = ",".join("?" * len(states))
        rows = conn.execute(
            f"SELECT j.id FROM jobs j WHERE j.state IN ({marks}) AND j.finished_at < ? AND EXISTS ("
            f"SELECT 1 FROM jobs n WHERE n.retention_key = j.retention_key AND n.state IN ({marks})"
            " AND n.finished_at >= j.finished_at AND (n.finished_at > j.finished_at OR n.id > j.id))"
            " ORDER BY j.finished_at, j.id LIMIT ?",
            (*states, before, *states, MAX_PER_PRUNE + 1),
        )
        doomed += [str(r["id"]) for r in rows.fetchall()]
    if len(doomed) > MAX_PER_PRUNE:  # the oldest first; the next prune is due again
        return PrunePlan(before, doomed[:MAX_PER_PRUNE], None)
    return PrunePlan(before, doomed, mark)


def apply(conn: Conn, planned: PrunePlan) -> int:
    """Remove what :func:`plan` found (each still finished before its time) and record it; call inside
    a write transaction. Returns how many were removed."""
    removed = 0
    marks = ",".join("?" * len(FINISHED))
    for at in range(0, len(planned.doomed), _BATCH):
        part = planned.doomed[at : at + _BATCH]
        cur = conn.execute(
            f"DELETE FROM jobs WHERE id IN ({','.join('?' * len(part))}) AND state IN ({marks})"
            " AND finished_at < ?",
            (*part, *FINISHED, planned.before),
        )
        removed += max(int(cur.rowcount), 0)
    if planned.mark is not None:
        set_state(conn, _CHECKED, planned.mark)
    if removed:
        old = get_state(conn, _BEFORE)
        set_state(conn, _BEFORE, repr(max(planned.before, float(old)) if old else planned.before))
        set_state(conn, _PRUNED, str(int(get_state(conn, _PRUNED, "0") or 0) + removed))
    return removed


def stats(conn: Conn) -> JobStats:
    """How many jobs there are, and what the prunes removed."""
    rows = int(conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])
    marks = ",".join("?" * len(FINISHED))
    finished = int(
        conn.execute(f"SELECT COUNT(*) FROM jobs WHERE state IN ({marks})", FINISHED).fetchone()[0]
    )
    before = get_state(conn, _BEFORE)
    pruned = int(get_state(conn, _PRUNED, "0") or 0)
    return JobStats(rows, finished, float(before) if before else None, pruned)


def removed_before(conn: Conn, job_id: str) -> float | None:
    """For an id no job has: the time before which finished jobs were removed, when the id is one
    this catalog made before it (its creation time is in it, :func:`jobs.created_of`); else None
    (never a job here, or made after the last prune)."""
    before = get_state(conn, _BEFORE)
    created = created_of(job_id)
    if before is None or created is None or created >= float(before):
        return None
    return float(before)
