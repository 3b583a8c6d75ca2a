"""The single writer and its persistent job queue: inline and promoted runs,
polling, cancellation, per-caller limits, recovery after a crash, a second
process-like Workspace forwarding its writes to the lease holder, and readers
that never wait for the writer."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gitkb import Workspace
from gitkb.services.runtime import jobs
from gitkb.stores.catalog import jobs as job_rows
from helpers import ok, wait_until


@pytest.fixture
def slow_kind() -> Any:
    """A job kind that takes a while and reports progress (cancellable between steps)."""

    def fn(ctx: Any, params: dict[str, Any], progress: Any) -> dict[str, Any]:
        steps = int(params.get("steps", 20))
        for i in range(steps):
            time.sleep(float(params.get("delay", 0.05)))
            progress(i + 1, steps)
        return {"Message": "slept", "steps": steps}

    jobs.add_kind("test_sleep", jobs.JobKind(fn))
    yield "test_sleep"
    jobs.remove_kind("test_sleep")


@pytest.fixture
def blocker() -> Any:
    """A job kind that holds the writer until released: what is queued after it waits."""
    release = threading.Event()

    def fn(ctx: Any, params: dict[str, Any], progress: Any) -> dict[str, Any]:
        assert release.wait(30)
        return {"Message": "released"}

    jobs.add_kind("test_block", jobs.JobKind(fn))
    yield release
    release.set()
    jobs.remove_kind("test_block")


def cancel_when_queued(ws: Workspace, kind: str, release: threading.Event) -> threading.Thread:
    """In the background: cancel the first queued job of ``kind``, then let the writer go on."""

    def run() -> None:
        try:
            queued = wait_until(
                lambda: [j for j in ok(ws.list_jobs(state="queued"))["Jobs"] if j["kind"] == kind],
                timeout=30,
                interval=0.02,
                what=f"a queued {kind} job",
            )
            ok(ws.cancel_job(queued[0]["job_id"]))
        finally:
            release.set()

    t = threading.Thread(target=run)
    t.start()
    return t


def test_a_cancelled_promoted_call_answers_cancelled(ws: Workspace, blocker: threading.Event) -> None:
    """A promoted call whose job is cancelled before it answers: ``cancelled`` (was ``internal``)."""
    ok(ws.promoted("test_block", wait=0))
    t = cancel_when_queued(ws, "reindex", blocker)
    r = ws.promoted("reindex", wait=30)
    t.join(30)
    assert r["Success"] is False and r["code"] == "cancelled", r
    assert r["Error"].startswith("job job_") and "cancelled before it started" in r["Error"]
    assert ok(ws.get_job_result(r["job_id"]))["status"] == "cancelled"


def test_a_cancelled_inline_call_answers_cancelled(ws: Workspace, tmp_path: Path) -> None:
    """A call that waits for its job (``reindex``) and sees it cancelled: ``cancelled`` (was ``conflict``)."""
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(write_many(tmp_path, 3))))
    cancelled: list[str] = []

    def progress(done: int, total: int) -> None:  # the operator presses cancel while it runs
        if not cancelled:
            [job] = [j for j in ok(ws.list_jobs(state="running"))["Jobs"] if j["kind"] == "reindex"]
            cancelled.append(ok(ws.cancel_job(job["job_id"]))["job_id"])

    r = ws.reindex(force=True, progress=progress)
    assert r["Success"] is False and r["code"] == "cancelled", r
    assert r["Error"] == f"job {cancelled[0]} was cancelled on request" and r["job_id"] == cancelled[0]


def write_many(tmp: Path, n: int) -> Path:
    d = tmp / "corpus"
    d.mkdir()
    for i in range(n):
        (d / f"page{i:04}.md").write_text(f"# Page {i}\n\nThe quick brown fox number {i} jumps. " * 20)
    return d


def test_inline_write_is_a_completed_job_and_bumps_generation(ws: Workspace) -> None:
    g0 = ok(ws.get_index_status())["write_generation"]
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    ok(ws.document_index("ADD_TEXT", index_name="kb", text="hello"))
    st = ok(ws.get_index_status())
    assert st["write_generation"] == g0 + 2
    listed = ok(ws.list_jobs())["Jobs"]
    assert [j["status"] for j in listed[:2]] == ["completed", "completed"]
    ok(ws.build_embeddings())  # vectors follow in the background; wait for them
    st = ok(ws.get_index_status())
    assert st["dirty_embeddings"] == 0 and st["dirty_paths"] == 0
    assert st["caught_up"] is True and st["queue_depth"] == 0 and st["in_flight"] is None


def test_promoted_call_returns_working_then_result(ws: Workspace, slow_kind: str) -> None:
    r = ok(ws.promoted(slow_kind, steps=20, delay=0.05, wait=0.1))
    assert r["status"] == "working" and r["poll_with"] == "get_job_result"
    job_id = r["job_id"]
    mid = ok(ws.get_job_result(job_id))
    assert mid["status"] in ("queued", "running")
    done = ok(ws.wait_job(job_id, timeout=30))
    assert done["status"] == "completed" and done["result"]["steps"] == 20
    assert done["progress"]["done"] == 20


def test_promoted_fast_call_answers_inline(ws: Workspace) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    r = ok(ws.promoted("document_index", action="ADD_TEXT", index_name="kb", text="quick one"))
    assert r["status"] == "added" and r["job_id"].startswith("job_")
    bad = ws.promoted("document_index", action="ADD_TEXT", index_name="missing", text="x")
    assert bad["Success"] is False and bad["code"] == "not_found"


def test_cancel_running_and_queued(ws: Workspace, slow_kind: str) -> None:
    first = ok(ws.promoted(slow_kind, steps=200, delay=0.02, wait=0.05))["job_id"]
    second = ok(ws.promoted(slow_kind, steps=5, wait=0))["job_id"]
    assert ok(ws.cancel_job(second))["status"] == "cancelled"
    ok(ws.cancel_job(first))
    assert ok(ws.wait_job(first, timeout=30))["status"] == "cancelled"
    assert ws.cancel_job(first)["code"] == "conflict"
    assert ws.get_job_result("job_nope")["code"] == "not_found"


def test_per_caller_limit_refuses_and_queues_nothing(ws: Workspace, slow_kind: str) -> None:
    ids = [
        ok(ws.promoted(slow_kind, steps=100, delay=0.02, wait=0, caller="agent-x"))["job_id"]
        for _ in range(4)
    ]
    before = len(ok(ws.list_jobs(count=100))["Jobs"])
    r = ws.promoted(slow_kind, steps=1, wait=0, caller="agent-x")
    assert r["Success"] is False and r["code"] == "busy"
    assert len(ok(ws.list_jobs(count=100))["Jobs"]) == before
    other = ok(ws.promoted(slow_kind, steps=1, wait=0, caller="agent-y"))
    for j in ids + [other["job_id"]]:
        ws.cancel_job(j)


def test_second_workspace_forwards_writes_to_the_lease_holder(home: Path) -> None:
    with (
        Workspace(home, embedding_provider="hashing") as a,
        Workspace(home, embedding_provider="hashing") as b,
    ):
        assert a.ctx.is_writer and not b.ctx.is_writer
        ok(b.document_index("CREATE_INDEX", index_name="kb"))
        ok(b.document_index("ADD_TEXT", index_name="kb", text="forwarded through the queue"))
        runners = {j["job_id"]: j for j in ok(a.list_jobs())["Jobs"]}
        assert all(j["status"] == "completed" for j in runners.values())
        assert ok(b.document_index("SEARCH", query="forwarded queue"))["Results"]


def test_lease_passes_to_a_waiting_process_when_the_holder_closes(home: Path) -> None:
    a = Workspace(home, embedding_provider="hashing")
    b = Workspace(home, embedding_provider="hashing")
    try:
        assert not b.ctx.is_writer
        a.close()
        ok(b.document_index("CREATE_INDEX", index_name="kb"))  # b takes the lease while waiting
        assert b.ctx.is_writer
    finally:
        b.close()


def test_recovery_requeues_an_interrupted_job(home: Path) -> None:
    with Workspace(home, embedding_provider="hashing") as w:
        ok(w.document_index("CREATE_INDEX", index_name="kb"))
        with w.ctx.catalog.write() as conn:  # what a SIGKILLed writer leaves behind
            job = job_rows.insert(
                conn,
                "action",
                {"action": "ADD_TEXT", "params": {"index_name": "kb", "text": "survives a crash"}},
                state="running",
                runner="deadhost:1:1",
            )
            stale = job_rows.insert(conn, "no_such_kind", {}, state="running", runner="deadhost:1:1")
    with Workspace(home, embedding_provider="hashing") as w2:
        done = ok(w2.wait_job(job.id, timeout=30))
        assert done["status"] == "completed"
        assert ok(w2.document_index("SEARCH", query="survives crash"))["Results"]
        failed = ok(w2.get_job_result(stale.id))
        assert failed["status"] == "failed" and "interrupted" in failed["error"]


def test_readers_never_wait_for_the_writer(ws: Workspace, tmp_path: Path) -> None:
    corpus = write_many(tmp_path, 300)
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    ok(ws.document_index("ADD_TEXT", index_name="kb", text="the quick brown fox is here already"))
    errors: list[str] = []
    counts = [0] * 8
    stop = threading.Event()

    def reader(i: int) -> None:
        while not stop.is_set():
            for call in (
                lambda: ws.document_index("SEARCH", query="quick brown fox", index_name="kb"),
                lambda: ws.document_index("LIST_DOCUMENTS", index_name="kb"),
                lambda: ws.get_index_status(),
            ):
                r = call()
                if not r["Success"]:
                    errors.append(r["Error"])
                counts[i] += 1

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    try:
        r = ok(
            ws.promoted(
                "document_index", action="ADD_DOCUMENTS", index_name="kb", filepath=str(corpus), wait=60
            )
        )
        if r.get("status") == "working":
            ok(ws.wait_job(r["job_id"], timeout=120))
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == []
    assert all(c > 0 for c in counts)
    assert ok(ws.document_index("LIST_DOCUMENTS", index_name="kb"))["TotalCount"] == 301
