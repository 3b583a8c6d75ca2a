"""Finished jobs past the retention (``[catalog] jobs_days``): the writer's prune, and what it removed.

:func:`plan` finds (a read) and :func:`apply` removes the finished jobs (``completed``, ``failed``,
``cancelled``) that finished before a time, never a queued or running one, and keeps the newest
finished job of each kind and index even when older (:func:`retention_key`: the kind, the action and
the indexes or source a job names, so the last build of every index that status reports stays:
``services.operations.status`` and ``scoped_status`` read the newest ``completed``/``failed`` build,
for all or for some indexes).
What the prunes removed is recorded (``writer_state``: ``jobs_pruned_before``, ``jobs_pruned``) so
a removed job's id can answer that it was removed (:func:`removed_before`), not "no job".

The plan reads the finished rows (ids, kinds, params: a finished job keeps no staged text), newest
first, outside the write transaction, and only when some job finished or aged past the retention
since the last prune (two indexed reads on ``jobs_finished``, migration
``m028_jobs23_finished_index``): an idle server reads no job row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gitkb.stores.catalog.engine import Conn
from gitkb.stores.catalog.jobs import FINISHED, created_of, get_state, set_state

_CHECKED = "jobs_checked"  # "<before> <latest finished_at>" the last prune looked at
_BEFORE = "jobs_pruned_before"  # jobs finished before this were removed (absent: none ever was)
_PRUNED = "jobs_pruned"  # jobs the prunes removed, in all
_BATCH = 500  # ids per DELETE
MAX_PER_PRUNE = 20_000  # jobs one prune removes at most (the oldest first): the first prune of a long
# unpruned table holds the write transaction for a bounded time; the next prune goes on


@dataclass(frozen=True)
class JobStats:
    rows: int  # jobs in the table, of any state
    finished: int
    pruned_before: float | None
    pruned: int


def retention_key(kind: str, params: dict[str, Any], state: str) -> str:
    """Jobs with the same key concern the same indexes the same way for status (the kind, the
    action, ``index_name`` / ``indexes``, the ``source``), and cancelled ones are apart from those
    that completed or failed (status reads only those): the newest of each key is kept."""
    inner: Any = params
    action = None
    if kind == "action":
        action = params.get("action")
        inner = params.get("params") if isinstance(params.get("params"), dict) else {}
    group = "cancelled" if state == "cancelled" else "ended"
    source = None if kind == "action" else inner.get("source")
    named = [kind, action, inner.get("index_name"), inner.get("indexes"), source, group]
    return json.dumps(named, sort_keys=True, default=str)


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
    :func:`retention_key`; None when nothing aged or finished since the last prune. A read: the
    writer runs it outside its write transaction (a finished row changes only by a prune, the
    writer's), then :func:`apply` removes them."""
    due, mark = _due(conn, before)
    if not due:
        return None
    marks = ",".join("?" * len(FINISHED))
    rows = conn.execute(
        f"SELECT id, kind, params, state, finished_at FROM jobs WHERE state IN ({marks})"
        " ORDER BY finished_at DESC, id DESC",
        FINISHED,
    )
    seen: set[str] = set()
    doomed: list[str] = []
    for r in rows.fetchall():
        try:
            params = json.loads(r["params"] or "{}")
        except json.JSONDecodeError:
            params = {}
        key = retention_key(str(r["kind"]), params if isinstance(params, dict) else {}, str(r["state"]))
        if key in seen and r["finished_at"] is not None and float(r["finished_at"]) < before:
            doomed.append(str(r["id"]))
        seen.add(key)
    if len(doomed) > MAX_PER_PRUNE:  # newest first: keep the oldest; the next prune is due again
        return PrunePlan(before, doomed[-MAX_PER_PRUNE:], None)
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
