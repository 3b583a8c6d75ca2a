"""Fencing a writer that lost its lease (issue 18): once another node took the writer lease over, the
old writer's next catalog write fails with ``lease_lost`` and writes nothing, and a job it ran inline
is left to the new writer (requeued, run once there, its result handed to the inline caller).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitkb import Workspace
from gitkb.core.errors import GitkbError, LeaseLost
from gitkb.services.derived.vector_locks import identity_lock
from gitkb.services.dispatch import actions
from gitkb.services.runtime import jobs, nodes
from gitkb.stores.catalog import changes
from gitkb.stores.catalog import jobs as job_rows
from gitkb.stores.catalog.documents import count_all
from gitkb.stores.node_lease import get_lease
from helpers import ok, postgres, wait_until
from helpers.nodes import node_settings, sqlite_url

GATED = "test_gated_docs"
GATES: dict[str, threading.Event] = {}  # node id -> the gate its run of GATED waits at after document 0
REACHED: dict[str, threading.Event] = {}  # node id -> set when its run of GATED reached the gate
SEEN: list[tuple[str, str]] = []  # (node id, error code) of the writes GATED saw fail


def _gated_docs(ctx: Any, params: dict[str, Any], progress: Any) -> dict[str, Any]:
    """Add ``n`` documents naming the node that writes them; on a node with a gate, stall after the first."""
    n = int(params["n"])
    for i in range(n):
        text = f"Document {i} mentions fencing, written by {ctx.node_id}."
        try:
            actions.run_action(ctx, "ADD_TEXT", {"index_name": "kb", "text": text, "filepath": f"d{i}.md"})
        except GitkbError as exc:
            SEEN.append((ctx.node_id, exc.code))
            raise
        progress(i + 1, n)
        gate = GATES.get(ctx.node_id)
        if i == 0 and gate is not None:
            REACHED[ctx.node_id].set()
            assert gate.wait(60), "the test never opened the gate"
    return {"Message": f"added {n} on {ctx.node_id}"}


@pytest.fixture
def catalog(tmp_path: Path, catalog_backend: str) -> Iterator[str]:
    """The shared catalog's URL: a SQLite file outside every home, or a fresh PostgreSQL database."""
    if catalog_backend == "postgresql":
        url = postgres.create_database()
        yield url
        postgres.drop_database(url)
        return
    d = tmp_path / "shared"
    d.mkdir()
    yield sqlite_url(d / "catalog.sqlite3")


@pytest.fixture
def pair(tmp_path: Path, catalog: str) -> Iterator[tuple[Workspace, Workspace]]:
    """Nodes ``a`` (the writer) and ``b`` on one catalog, own homes, 2 s leases; the gated kind loaded."""
    jobs.add_kind(GATED, jobs.JobKind(_gated_docs))
    a = Workspace(settings=node_settings(tmp_path / "a", catalog, {"lease_seconds": 2}))
    b = Workspace(settings=node_settings(tmp_path / "b", catalog, {"lease_seconds": 2}))
    try:
        assert a.ctx.is_writer and not b.ctx.is_writer
        yield a, b
    finally:
        for gate in GATES.values():
            gate.set()
        b.close()
        a.close()
        GATES.clear()
        REACHED.clear()
        SEEN.clear()
        jobs.remove_kind(GATED)


def take_over(a: Workspace, b: Workspace) -> None:
    """``a`` stalls (its heartbeat stops, its lease row goes stale) and ``b`` takes the lease over."""
    assert a.ctx.heartbeat is not None
    a.ctx.heartbeat.stop()
    with b.ctx.catalog.write() as conn:
        conn.execute("UPDATE writer_lease SET renewed_at = 0")
    wait_until(lambda: b.ctx.is_writer, timeout=10, what="b to take the lease")


def snapshot(w: Workspace, job_id: str | None = None) -> dict[str, Any]:
    """What a write could change: documents, chunks, the change-log head, the job's row."""
    with w.ctx.catalog.read() as conn:
        docs = [tuple(r) for r in conn.execute("SELECT * FROM documents ORDER BY rowid")]
        chunks = [tuple(r) for r in conn.execute("SELECT * FROM chunks ORDER BY rowid")]
        job = [tuple(r) for r in conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,))]
        return {"documents": docs, "chunks": chunks, "head": changes.head(conn), "job": job}


def test_a_fenced_write_after_a_takeover_fails_with_lease_lost_and_writes_nothing(
    pair: tuple[Workspace, Workspace],
) -> None:
    a, b = pair
    ok(a.document_index("CREATE_INDEX", index_name="kb"))
    fence = a.ctx.lease.fence()
    with a.ctx.catalog.fenced(fence), a.ctx.catalog.write() as conn:  # while a holds it, fenced writes pass
        conn.execute("UPDATE writer_lease SET pid = pid")
    take_over(a, b)
    before = snapshot(b)
    with pytest.raises(LeaseLost) as caught, a.ctx.catalog.fenced(fence), a.ctx.catalog.write() as conn:
        conn.execute("DELETE FROM documents")  # never runs: the check comes first
    assert caught.value.code == "lease_lost" and caught.value.details["lease_holder"] == b.ctx.node_id
    assert snapshot(b) == before
    row = get_lease(b.ctx.catalog.conn)
    assert row is not None and row.node_id == b.ctx.node_id
    with a.ctx.catalog.write() as conn:  # unfenced writes (a node's heartbeat, a queued job) still work
        conn.execute("UPDATE nodes SET heartbeat_at = heartbeat_at WHERE id = ?", (a.ctx.node_id,))


def test_an_inline_job_of_a_writer_that_stalled_past_its_lease_is_left_to_the_new_writer(
    pair: tuple[Workspace, Workspace],
) -> None:
    """a runs a job inline and stalls mid-way (a pause, a long batch); b takes the lease, requeues the job
    and runs it; when a wakes, its next write fails with ``lease_lost`` and writes nothing, and a's
    caller gets b's result: the job is not failed and not run twice."""
    a, b = pair
    ok(a.document_index("CREATE_INDEX", index_name="kb"))
    GATES[a.ctx.node_id] = threading.Event()
    REACHED[a.ctx.node_id] = threading.Event()
    answer: dict[str, Any] = {}

    def caller() -> None:
        try:
            answer["result"] = jobs.run_inline(a.ctx, GATED, {"n": 5}, caller="test")
        except BaseException as exc:  # noqa: BLE001 - the assertion below names it
            answer["error"] = exc

    t = threading.Thread(target=caller)
    t.start()
    assert REACHED[a.ctx.node_id].wait(30), "a never ran the job's first document"
    job = job_rows.list_recent(a.ctx.catalog.conn, limit=1, offset=0, states=("running",))[0]
    take_over(a, b)
    assert a.ctx.is_writer  # a has not noticed (its writer thread waits behind the inline job)

    def b_finished() -> bool:
        got = job_rows.get(b.ctx.catalog.conn, job.id)
        return got is not None and got.state == "completed"

    wait_until(b_finished, timeout=30, what="b to run the recovered job")
    before = snapshot(b, job.id)
    GATES[a.ctx.node_id].set()  # a wakes up and goes on with document 1
    t.join(30)
    assert not t.is_alive()
    assert "error" not in answer, answer
    assert [(a.ctx.node_id, "lease_lost")] == SEEN  # a's next write was refused
    assert snapshot(b, job.id) == before  # and wrote nothing: not the document, not the job's row
    done = job_rows.get(b.ctx.catalog.conn, job.id)
    assert done is not None and done.state == "completed" and done.attempts == 2
    assert answer["result"]["Message"] == f"added 5 on {b.ctx.node_id}"  # a's caller got b's run
    assert count_all(b.ctx.catalog.conn) == 5
    texts = [str(r[0]) for r in b.ctx.catalog.conn.execute("SELECT text FROM chunks")]
    assert texts and all(b.ctx.node_id in t for t in texts)  # every document as b wrote it
    assert not a.ctx.is_writer and a.ctx.writer is None  # a stopped writing at once
    nodes.beat_once(a.ctx, a.ctx.take_lease)
    assert b.ctx.is_writer and not a.ctx.is_writer


def test_the_background_embedder_of_a_writer_that_lost_its_lease_writes_nothing(
    pair: tuple[Workspace, Workspace],
) -> None:
    a, b = pair
    ok(a.document_index("CREATE_INDEX", index_name="kb"))
    ok(a.document_index("ADD_TEXT", index_name="kb", text="The first fenced note.", filepath="n0.md"))
    ok(a.build_embeddings())
    identity = ok(a.embeddings_status())["identity"]
    mark = f"vectors:{identity}"
    held = identity_lock(b.ctx, identity)  # b's embedder waits: only a's could move the watermark
    held.acquire()
    try:
        take_over(a, b)
        ok(b.document_index("ADD_TEXT", index_name="kb", text="The second fenced note.", filepath="n1.md"))
        before = changes.watermark(b.ctx.catalog.conn, mark)
        assert before < changes.head(b.ctx.catalog.conn)
        a.ctx.embedding_worker.kick()  # a still believes it is the writer: its embedder tries
        wait_until(lambda: not a.ctx.is_writer, timeout=15, what="a's embedder to find its lease taken")
        assert changes.watermark(b.ctx.catalog.conn, mark) == before  # a wrote nothing
        assert a.ctx.embedding_worker.last_error is None
    finally:
        held.release()
    wait_until(
        lambda: changes.watermark(b.ctx.catalog.conn, mark) == changes.head(b.ctx.catalog.conn),
        timeout=30,
        what="b's embedder to catch up",
    )
