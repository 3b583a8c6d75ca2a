"""Job rows: the persistent queue of the single index writer, and the writer's state.

States: ``queued`` → ``running`` → ``completed`` | ``failed`` | ``cancelled``.

Staged parameters: ``insert(..., staged={"params.text": text})`` keeps those
values out of ``jobs.params`` in ``job_staged`` rows (a dotted key names where
the value goes back in the params); :func:`params_for_run` puts them back for
the runner, and :func:`finish` deletes them, so a finished job keeps no copy.
A queued job's staged values survive a restart like the rest of the row.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from gitkb.stores.catalog.engine import Conn, dialect_of

ACTIVE = ("queued", "running")
FINISHED = ("completed", "failed", "cancelled")
# A job id is ``job_`` + its creation second (8 hex digits) + 16 random hex digits (since jobs23, so
# an id whose row the retention removed can say so: ``job_retention.removed_before``); ids made
# before that are 24 random hex digits, read as a creation time only from this second on.
ID_TIME_SINCE = 1_796_083_200  # 2026-12-01 UTC


def new_id(now: float) -> str:
    return f"job_{int(now):08x}{uuid.uuid4().hex[:16]}"


def created_of(job_id: str) -> float | None:
    """The creation second a job id carries (None: not a job id, or one older than its format)."""
    digits = job_id[4:] if job_id.startswith("job_") else ""
    if len(digits) != 24 or any(c not in "0123456789abcdef" for c in digits):
        return None
    second = int(digits[:8], 16)
    return float(second) if second >= ID_TIME_SINCE else None


@dataclass(frozen=True)
class JobRow:
    id: str
    kind: str
    params: dict[str, Any]
    state: str
    progress_done: int
    progress_total: int
    progress_note: str | None
    result: dict[str, Any] | None
    error: str | None
    error_code: str | None
    caller: str | None
    dedupe_key: str | None
    runner: str | None
    attempts: int
    cancel_requested: bool
    created_at: float
    started_at: float | None
    finished_at: float | None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "job_id": self.id,
            "kind": self.kind,
            "status": self.state,
            "progress": {
                "done": self.progress_done,
                "total": self.progress_total,
                "note": self.progress_note,
            },
            "caller": self.caller,
            "attempts": self.attempts,
            "created_at": self.created_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }
        if self.result is not None:
            out["result"] = self.result
        if self.error is not None:
            out["error"] = self.error
            out["error_code"] = self.error_code
        return out


def _row(r: Any) -> JobRow:
    return JobRow(
        id=r["id"],
        kind=r["kind"],
        params=json.loads(r["params"] or "{}"),
        state=r["state"],
        progress_done=r["progress_done"],
        progress_total=r["progress_total"],
        progress_note=r["progress_note"],
        result=json.loads(r["result"]) if r["result"] else None,
        error=r["error"],
        error_code=r["error_code"],
        caller=r["caller"],
        dedupe_key=r["dedupe_key"],
        runner=r["runner"],
        attempts=r["attempts"],
        cancel_requested=bool(r["cancel_requested"]),
        created_at=r["created_at"],
        started_at=r["started_at"],
        finished_at=r["finished_at"],
    )


def retention_key(kind: str, params: dict[str, Any]) -> str:
    """Jobs with the same key concern the same indexes the same way for status (the kind, the
    action, ``index_name`` / ``indexes``, the ``source``): the finished-job retention keeps the
    newest of each (``job_retention``). Stored on the row at insert (column ``retention_key``,
    migration ``m029_jobs23_retention_key``) so the prune finds its rows with an indexed read."""
    inner: Any = params
    action = None
    if kind == "action":
        action = params.get("action")
        inner = params.get("params") if isinstance(params.get("params"), dict) else {}
    source = None if kind == "action" else inner.get("source")
    named = [kind, action, inner.get("index_name"), inner.get("indexes"), source]
    return json.dumps(named, sort_keys=True, default=str)


def insert(
    conn: Conn,
    kind: str,
    params: dict[str, Any],
    *,
    caller: str | None = None,
    dedupe_key: str | None = None,
    state: str = "queued",
    runner: str | None = None,
    staged: dict[str, str] | None = None,
) -> JobRow:
    now = time.time()
    job_id = new_id(now)
    conn.execute(
        "INSERT INTO jobs(id, kind, params, state, caller, dedupe_key, runner, created_at, started_at, attempts,"
        " retention_key) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (
            job_id,
            kind,
            json.dumps(params, default=str),
            state,
            caller,
            dedupe_key,
            runner,
            now,
            now if state == "running" else None,
            1 if state == "running" else 0,
            retention_key(kind, params),
        ),
    )
    if staged:
        conn.executemany(
            "INSERT INTO job_staged(job_id, key, value) VALUES (?,?,?)",
            [(job_id, key, json.dumps(value)) for key, value in staged.items()],  # ASCII: any str fits
        )
    row = get(conn, job_id)
    assert row is not None
    return row


def params_for_run(conn: Conn, job: JobRow) -> dict[str, Any]:
    """``job.params`` with its staged values put back where their dotted keys say."""
    params: dict[str, Any] = json.loads(json.dumps(job.params))  # a deep copy
    for r in conn.execute("SELECT key, value FROM job_staged WHERE job_id=?", (job.id,)):
        *parents, leaf = str(r["key"]).split(".")
        target = params
        for part in parents:
            target = target.setdefault(part, {})
        target[leaf] = json.loads(r["value"])
    return params


def staged_bytes(conn: Conn) -> int:
    """What staged values hold right now (for tests and status)."""
    return int(
        conn.execute(
            f"SELECT COALESCE(SUM({dialect_of(conn).octet_length.format(col='value')}), 0) FROM job_staged"
        ).fetchone()[0]
    )


def get(conn: Conn, job_id: str) -> JobRow | None:
    r = conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return _row(r) if r else None


def find_active_by_dedupe(conn: Conn, key: str) -> JobRow | None:
    r = conn.execute(
        "SELECT * FROM jobs WHERE dedupe_key = ? AND state IN ('queued','running') ORDER BY created_at LIMIT 1",
        (key,),
    ).fetchone()
    return _row(r) if r else None


def find_by_dedupe(conn: Conn, key: str) -> JobRow | None:
    r = conn.execute(
        "SELECT * FROM jobs WHERE dedupe_key = ? ORDER BY created_at DESC LIMIT 1", (key,)
    ).fetchone()
    return _row(r) if r else None


def claim_next(conn: Conn, runner: str) -> JobRow | None:
    """Move the oldest queued job to running (call inside a write transaction). On PostgreSQL the
    row is taken ``FOR UPDATE SKIP LOCKED``: a concurrent claim skips it and takes the next one."""
    lock = " FOR UPDATE SKIP LOCKED" if dialect_of(conn).name == "postgresql" else ""
    r = conn.execute(
        f"SELECT id FROM jobs WHERE state = 'queued' ORDER BY created_at, rowid LIMIT 1{lock}"
    ).fetchone()
    if r is None:
        return None
    conn.execute(
        "UPDATE jobs SET state='running', runner=?, started_at=?, attempts=attempts+1 WHERE id=? AND state='queued'",
        (runner, time.time(), r["id"]),
    )
    return get(conn, r["id"])


def set_progress(conn: Conn, job_id: str, done: int, total: int, note: str | None = None) -> bool:
    """Record progress; returns whether cancellation was requested."""
    conn.execute(
        "UPDATE jobs SET progress_done=?, progress_total=?, progress_note=COALESCE(?, progress_note) WHERE id=?",
        (done, total, note, job_id),
    )
    r = conn.execute("SELECT cancel_requested FROM jobs WHERE id=?", (job_id,)).fetchone()
    return bool(r and r[0])


def finish(
    conn: Conn,
    job_id: str,
    state: str,
    *,
    result: dict[str, Any] | None = None,
    error: str | None = None,
    error_code: str | None = None,
) -> None:
    conn.execute(
        "UPDATE jobs SET state=?, result=?, error=?, error_code=?, finished_at=? WHERE id=?",
        (
            state,
            json.dumps(result, default=str) if result is not None else None,
            error,
            error_code,
            time.time(),
            job_id,
        ),
    )
    conn.execute("DELETE FROM job_staged WHERE job_id=?", (job_id,))


def stage_once(conn: Conn, job_id: str, key: str, value: Any) -> None:
    """Keep ``value`` under ``key`` for the job's later runs, unless a value is kept there already."""
    conn.execute(
        "INSERT INTO job_staged(job_id, key, value) VALUES (?,?,?) ON CONFLICT(job_id, key) DO NOTHING",
        (job_id, key, json.dumps(value)),
    )


def requeue(conn: Conn, job_id: str, note: str) -> None:
    conn.execute(
        "UPDATE jobs SET state='queued', runner=NULL, started_at=NULL, progress_note=? WHERE id=?",
        (note, job_id),
    )


def request_cancel(conn: Conn, job_id: str) -> None:
    conn.execute("UPDATE jobs SET cancel_requested=1 WHERE id=?", (job_id,))


def list_recent(
    conn: Conn, *, limit: int = 50, states: tuple[str, ...] | None = None, offset: int = 0
) -> list[JobRow]:
    if states:
        marks = ",".join("?" * len(states))
        rows = conn.execute(
            f"SELECT * FROM jobs WHERE state IN ({marks}) ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?",
            (*states, limit, offset),
        )
    else:
        rows = conn.execute(
            "SELECT * FROM jobs ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?", (limit, offset)
        )
    return [_row(r) for r in rows]


def count_recent(conn: Conn, *, states: tuple[str, ...] | None = None) -> int:
    """How many jobs ``list_recent`` pages over."""
    if states:
        marks = ",".join("?" * len(states))
        return int(conn.execute(f"SELECT COUNT(*) FROM jobs WHERE state IN ({marks})", states).fetchone()[0])
    return int(conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])


def running(conn: Conn) -> list[JobRow]:
    return [_row(r) for r in conn.execute("SELECT * FROM jobs WHERE state='running' ORDER BY started_at")]


def active(conn: Conn) -> list[JobRow]:
    """The jobs queued or running, running first (by start), then queued (oldest first)."""
    return [
        _row(r)
        for r in conn.execute(
            "SELECT * FROM jobs WHERE state IN ('queued','running')"
            " ORDER BY CASE WHEN state='running' THEN 0 ELSE 1 END, started_at, created_at, id"
        )
    ]


def finished_page(conn: Conn, kinds: tuple[str, ...], *, limit: int, offset: int = 0) -> list[JobRow]:
    """``last_finished``'s jobs (completed or failed, of these kinds), newest first, one page."""
    marks = ",".join("?" * len(kinds))
    return [
        _row(r)
        for r in conn.execute(
            f"SELECT * FROM jobs WHERE kind IN ({marks}) AND state IN ('completed','failed')"
            " ORDER BY finished_at DESC, id DESC LIMIT ? OFFSET ?",
            (*kinds, limit, offset),
        )
    ]


def count_state(conn: Conn, state: str) -> int:
    return int(conn.execute("SELECT COUNT(*) FROM jobs WHERE state=?", (state,)).fetchone()[0])


def count_active_for_caller(conn: Conn, caller: str) -> int:
    return int(
        conn.execute(
            "SELECT COUNT(*) FROM jobs WHERE caller=? AND state IN ('queued','running')", (caller,)
        ).fetchone()[0]
    )


def last_finished(conn: Conn, kinds: tuple[str, ...]) -> JobRow | None:
    marks = ",".join("?" * len(kinds))
    r = conn.execute(
        f"SELECT * FROM jobs WHERE kind IN ({marks}) AND state IN ('completed','failed')"
        " ORDER BY finished_at DESC LIMIT 1",
        kinds,
    ).fetchone()
    return _row(r) if r else None


def get_state(conn: Conn, key: str, default: str | None = None) -> str | None:
    r = conn.execute("SELECT value FROM writer_state WHERE key=?", (key,)).fetchone()
    return str(r[0]) if r else default


def set_state(conn: Conn, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO writer_state(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
        (key, value),
    )


def bump_generation(conn: Conn) -> int:
    g = int(get_state(conn, "write_generation", "0") or 0) + 1
    set_state(conn, "write_generation", str(g))
    return g
