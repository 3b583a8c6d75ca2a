"""Nodes that share no files: separate homes, one catalog.

The writer lease is a catalog row with a heartbeat; each node keeps its own keyword index under its
own home, caught up from the change log by its own watermark (or rebuilt from the catalog when the
writer compacted the log past it); a writer killed during a job hands the lease and the job on.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gitkb import Workspace
from gitkb.services.runtime import jobs, nodes
from gitkb.stores import node_rows
from gitkb.stores.catalog import changes
from gitkb.stores.catalog import jobs as job_rows
from gitkb.stores.catalog.documents import all_chunk_cids, count_all
from gitkb.stores.node_lease import get_lease
from helpers import ok, postgres, wait_until
from helpers.nodes import SLOW_KIND, add_slow_kind, node_settings, sqlite_url

TESTS = Path(__file__).resolve().parent

Node = Callable[..., Workspace]


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
def node(tmp_path: Path, catalog: str) -> Iterator[Node]:
    """``node("a", lease_seconds=...)``: a workspace at its own home on the shared catalog."""
    opened: list[Workspace] = []

    def make(name: str, **section: Any) -> Workspace:
        w = Workspace(settings=node_settings(tmp_path / name, catalog, section))
        opened.append(w)
        return w

    yield make
    for w in reversed(opened):
        w.close()


def keyword_paths(w: Workspace, query: str) -> list[str]:
    hits = ok(w.document_index("SEARCH", index_name="kb", query=query, mode="keyword"))["Results"]
    return [h["filepath"] for h in hits]


def index_matches_catalog(w: Workspace) -> bool:
    """The node's own keyword index holds every chunk of the catalog exactly once."""
    stored = w.ctx.keywords.all_cids()
    return set(stored) == set(all_chunk_cids(w.ctx.catalog.conn)) and all(n == 1 for n in stored.values())


def test_ingest_through_one_node_is_keyword_searchable_through_the_others(node: Node, tmp_path: Path) -> None:
    a, b, c = node("a"), node("b"), node("c")
    assert a.ctx.is_writer and not b.ctx.is_writer and not c.ctx.is_writer
    assert len({a.ctx.node_id, b.ctx.node_id, c.ctx.node_id}) == 3
    assert {a.ctx.keywords_mark, b.ctx.keywords_mark} == {
        f"keywords@{a.ctx.node_id}",
        f"keywords@{b.ctx.node_id}",
    }
    ok(a.document_index("CREATE_INDEX", index_name="kb"))
    ok(a.document_index("ADD_TEXT", index_name="kb", text="The aurora drill runs at noon.", filepath="a.md"))
    # a write through b is queued in the catalog and run by a, the writer
    ok(
        b.document_index(
            "ADD_TEXT", index_name="kb", text="The borealis drill runs at dusk.", filepath="b.md"
        )
    )
    for w in (a, b, c):
        assert keyword_paths(w, "aurora") == ["a.md"], w.home
        assert keyword_paths(w, "borealis") == ["b.md"], w.home
        assert index_matches_catalog(w)
        assert changes.watermark(w.ctx.catalog.conn, w.ctx.keywords_mark) == changes.head(w.ctx.catalog.conn)
    for name in ("a", "b", "c"):  # nothing shared: each home has its own index and node id
        assert (tmp_path / name / "keywords").is_dir() and (tmp_path / name / "node.json").is_file()
        assert not (tmp_path / name / "catalog.sqlite3").exists()
    # without a search, b's heartbeat keeps its index current too
    ok(a.document_index("ADD_TEXT", index_name="kb", text="The corona drill.", filepath="c.md"))
    mark = b.ctx.keywords_mark
    wait_until(
        lambda: changes.watermark(b.ctx.catalog.conn, mark) == changes.head(b.ctx.catalog.conn),
        timeout=10,
        what="b's heartbeat to catch its keyword index up",
    )
    seen = {n["node_id"]: n for n in nodes.nodes_view(c.ctx)}
    assert set(seen) == {a.ctx.node_id, b.ctx.node_id, c.ctx.node_id} and all(
        n["live"] for n in seen.values()
    )


def test_a_second_process_of_a_node_keeps_its_index_when_the_first_goes(node: Node) -> None:
    a, b1, b2 = node("a"), node("b"), node("b")
    assert b1.ctx.node_id == b2.ctx.node_id and b1.ctx.keywords_owner and not b2.ctx.keywords_owner
    ok(a.document_index("CREATE_INDEX", index_name="kb"))
    b1.close()
    ok(a.document_index("ADD_TEXT", index_name="kb", text="The zeta drill.", filepath="z.md"))
    wait_until(lambda: b2.ctx.keywords_owner, timeout=10, what="b2 to own its home's keyword index")
    assert keyword_paths(b2, "zeta") == ["z.md"]


def test_status_and_metrics_name_the_holder_from_the_lease_row(node: Node) -> None:
    a, b = node("a"), node("b")
    row = get_lease(b.ctx.catalog.conn)
    assert row is not None and row.node_id == a.ctx.node_id and row.pid == os.getpid()
    writer = ok(b.get_index_status())["writer"]
    assert writer["node_id"] == a.ctx.node_id and writer["pid"] == os.getpid() and not writer["expired"]
    own = ok(a.get_index_status())["writer"]
    assert own["this_process"] is True and own["node_id"] == a.ctx.node_id  # from the row too
    a.close()  # a clean close gives the row up: b's heartbeat takes it
    wait_until(lambda: b.ctx.is_writer, timeout=10, what="b to take the released lease")
    row = get_lease(b.ctx.catalog.conn)
    assert row is not None and row.node_id == b.ctx.node_id


def test_a_dead_writer_elsewhere_passes_the_lease_within_lease_seconds(node: Node) -> None:
    a = node("a", lease_seconds=2)
    b = node("b", lease_seconds=2)
    assert a.ctx.is_writer and not b.ctx.is_writer
    # a live writer on another host keeps its lease while it renews
    with a.ctx.catalog.write() as conn:
        conn.execute("UPDATE writer_lease SET host = 'gone-host', pid = 1")
    time.sleep(2.5)
    assert a.ctx.is_writer and not b.ctx.is_writer
    # that host goes silent (its heartbeat stops): another node takes over within lease_seconds
    assert a.ctx.heartbeat is not None
    a.ctx.heartbeat.stop()
    stopped = time.monotonic()
    wait_until(lambda: b.ctx.is_writer, timeout=10, interval=0.05, what="b to take the expired lease")
    took = time.monotonic() - stopped
    assert took <= 2 + 0.5, took  # the bound is the setting (plus scheduling slack)
    row = get_lease(b.ctx.catalog.conn)
    assert row is not None and row.node_id == b.ctx.node_id
    # the old holder learns it at its next beat and stops writing
    nodes.beat_once(a.ctx, a.ctx.take_lease)
    assert not a.ctx.is_writer and a.ctx.writer is None
    ok(a.document_index("CREATE_INDEX", index_name="kb"))  # a's writes now go through the queue to b
    assert ok(b.document_index("LIST_INDICES"))


def test_a_writer_that_lost_its_lease_leaves_the_job_to_the_new_writer(node: Node) -> None:
    """The old writer stops at its job's next step and does not hand back a job the new writer runs."""
    add_slow_kind()
    try:
        a = node("a", lease_seconds=2)
        b = node("b", lease_seconds=2)
        ok(a.document_index("CREATE_INDEX", index_name="kb"))
        job = jobs.submit(a.ctx, SLOW_KIND, {"index_name": "kb", "n": 40, "sleep": 0.1})
        wait_until(
            lambda: jobs.job_result(a.ctx, job.id)["status"] == "running", timeout=30, what="a to run it"
        )
        old = a.ctx.writer
        assert a.ctx.heartbeat is not None and old is not None
        a.ctx.heartbeat.stop()  # a goes silent (a pause, a partition): b takes the lease and the job
        with a.ctx.catalog.write() as conn:
            conn.execute("UPDATE writer_lease SET renewed_at = 0")
        wait_until(lambda: b.ctx.is_writer, timeout=10, what="b to take the lease")

        def b_runs_it() -> bool:
            got = job_rows.get(b.ctx.catalog.conn, job.id)
            return bool(got and got.state == "running" and got.attempts == 2)

        wait_until(b_runs_it, timeout=30, what="b to run the recovered job")
        runner = job_rows.get(b.ctx.catalog.conn, job.id).runner  # type: ignore[union-attr]
        nodes.beat_once(a.ctx, a.ctx.take_lease)  # a learns it lost the lease and stops its writer
        assert not a.ctx.is_writer
        old.stop()
        got = job_rows.get(b.ctx.catalog.conn, job.id)
        assert got is not None and got.state in ("running", "completed") and got.runner == runner, got
        done = jobs.wait(b.ctx, job.id, timeout=60)
        assert done.state == "completed" and done.attempts == 2
        assert count_all(b.ctx.catalog.conn) == 40
    finally:
        jobs.remove_kind(SLOW_KIND)


def test_kill_9_the_writer_during_a_job_the_other_node_completes_it(
    tmp_path: Path, catalog: str, node: Node
) -> None:
    env = {**os.environ, "PYTHONPATH": str(TESTS) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    code = "import sys; from helpers.nodes import child_writer; child_writer(*sys.argv[1:])"
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "a"), str(catalog), "{}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert child.stdout is not None
        hello = json.loads(child.stdout.readline())
        assert hello["writer"] is True
        add_slow_kind()
        b, c = node("b"), node("c")
        assert not b.ctx.is_writer
        ok(b.document_index("CREATE_INDEX", index_name="kb"))  # run by the child
        n = 30
        job = jobs.submit(b.ctx, SLOW_KIND, {"index_name": "kb", "n": n})

        def midway() -> bool:
            got = jobs.job_result(b.ctx, job.id)
            return bool(got["status"] == "running" and 5 <= got["progress"]["done"] < n)

        wait_until(midway, timeout=60, interval=0.02, what="the child to be mid-way through the job")
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        killed = time.monotonic()
        # a's pid is gone on this host: a live node takes the lease at once, not after lease_seconds (10 s)
        wait_until(
            lambda: b.ctx.is_writer or c.ctx.is_writer,
            timeout=5,
            interval=0.02,
            what="a node to take the lease",
        )
        assert time.monotonic() - killed < 5
        assert not (b.ctx.is_writer and c.ctx.is_writer)
        done = jobs.wait(b.ctx, job.id, timeout=60)  # the new writer recovered the job on taking the lease
        assert done.state == "completed", done
        assert done.attempts == 2
        conn = b.ctx.catalog.conn
        assert count_all(conn) == n  # nothing lost or doubled
        for w in (b, c):
            wait_until(lambda w=w: index_matches_catalog(w), timeout=10, what=f"{w.home} to catch up")
            assert keyword_paths(w, "marker0") == ["d0.md"] and keyword_paths(w, f"marker{n - 1}") == [
                f"d{n - 1}.md"
            ]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        jobs.remove_kind(SLOW_KIND)


def test_compaction_waits_for_live_nodes_and_a_stale_node_rebuilds(node: Node) -> None:
    a = node("a", lease_seconds=3, stale_after_seconds=60)
    b = node("b", lease_seconds=3)
    c = node("c", lease_seconds=3)
    ok(a.document_index("CREATE_INDEX", index_name="kb"))
    ok(a.document_index("ADD_TEXT", index_name="kb", text="The first gamma note.", filepath="g1.md"))
    assert keyword_paths(b, "gamma") == ["g1.md"] and keyword_paths(c, "gamma") == ["g1.md"]
    c_mark = c.ctx.keywords_mark
    conn = a.ctx.catalog.conn
    c_seq = changes.watermark(conn, c_mark)
    c.close()  # c goes silent
    ok(a.document_index("ADD_TEXT", index_name="kb", text="The second delta note.", filepath="g2.md"))
    ok(a.document_index("DELETE_DOCUMENT", index_name="kb", filepath="g1.md"))
    assert keyword_paths(b, "delta") == ["g2.md"]
    wait_until(lambda: not jobs_or_vectors_behind(a), timeout=30, what="a's vectors to catch up")
    # c is still live: it holds compaction back at its watermark
    out = nodes.compact(a.ctx)
    assert out["floor"] <= c_seq
    with a.ctx.catalog.write() as w:  # c was last heard of more than stale_after_seconds ago
        w.execute("UPDATE nodes SET heartbeat_at = heartbeat_at - 61 WHERE id = ?", (c.ctx.node_id,))
    out = nodes.compact(a.ctx)
    assert out["removed"] > 0 and out["floor"] > c_seq and out["floor"] == node_rows.floor(conn)
    assert changes.head(conn) == out["floor"] + 1  # the newest entry stays: the head never moves back
    # c returns: its watermark is below the floor, it rebuilds from the catalog
    c2 = node("c", lease_seconds=3)
    assert c2.ctx.node_id == c.ctx.node_id
    assert keyword_paths(c2, "delta") == ["g2.md"] and keyword_paths(c2, "gamma") == []
    assert index_matches_catalog(c2)
    # so does a brand-new node
    d = node("d")
    assert keyword_paths(d, "delta") == ["g2.md"] and index_matches_catalog(d)
    # and b, live all along, still catches up from the log
    ok(a.document_index("ADD_TEXT", index_name="kb", text="The third epsilon note.", filepath="g3.md"))
    assert keyword_paths(b, "epsilon") == ["g3.md"] and index_matches_catalog(b)


def jobs_or_vectors_behind(w: Workspace) -> bool:
    from gitkb.services.runtime.writer import work_left  # cycle-free: only this helper needs it

    return work_left(w.ctx)


def test_a_signed_webhook_sent_to_another_node_syncs_once(
    node: Node, tmp_path: Path, catalog: str, upstream: Any
) -> None:
    """The webhook reaches node c (not the writer): it is recorded once in the shared catalog, the sync
    runs on the writer a, and the new page is keyword-searchable through b; a replay to b is a duplicate."""

    from fastapi.testclient import TestClient  # heavy: fastapi

    from gitkb.http import create_app  # heavy: fastapi
    from gitkb.services.changes import webhook_intake
    from helpers import SOURCE, github_push, with_roots

    a, b = node("a"), node("b")
    ok(a.source_add(SOURCE, str(upstream.remote)))
    ok(a.source_sync(SOURCE))
    webhook_intake.set_webhook_secret(a.ctx, SOURCE, "s3cret")
    before = upstream.remote_sha("main")
    upstream.write(
        "docs/runbooks/zz-nodes.md",
        "---\ntitle: Nodes page\n---\n# Nodes page\n\nThe nebula failover procedure.\n",
    )
    after = upstream.commit_push("add a page")
    body, headers = github_push("s3cret", before, after, upstream.remote)
    for name in ("c", "b2"):  # a webhook is remote: the local-path source syncs inside allowed_roots
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
        (tmp_path / name / "gitkb.toml").write_text(with_roots("", upstream.remote))
    apps = [create_app(node_settings(tmp_path / name, catalog)) for name in ("c", "b2")]
    with (
        TestClient(apps[0], client=("127.0.0.1", 1)) as c,
        TestClient(apps[1], client=("127.0.0.1", 1)) as b2,
    ):
        r = c.post("/webhooks/github", content=body, headers=headers)
        assert r.status_code == 202, r.text
        job_id = r.json()["job_id"]
        done = jobs.wait(b.ctx, job_id, timeout=60)
        assert done.state == "completed", done
        assert a.ctx.is_writer  # run by the writer, not by c
        hits = ok(b.document_index("SEARCH", query="nebula", mode="keyword"))["Results"]
        assert hits and hits[0]["filepath"].endswith("zz-nodes.md")
        again = b2.post("/webhooks/github", content=body, headers=headers)  # the replay, to another node
        assert again.status_code == 200 and again.json()["duplicate"] is True
        assert again.json()["job_id"] == job_id
    syncs = [j for j in ok(a.list_jobs(count=100))["Jobs"] if j["kind"] == done.kind]
    assert len(syncs) == 2  # the first sync and the webhook's: one each


def test_verify_on_a_node_that_is_not_the_writer_leaves_the_clones_to_the_writer(
    node: Node, upstream: Any
) -> None:
    """The managed clones are a cache of the writer's home (sync18): verify on another node with its
    own home reports no clone difference; the writer's own home is still checked."""
    import shutil  # only this test removes a home's clones

    from helpers import SOURCE

    a, b = node("a"), node("b")
    ok(a.source_add(SOURCE, str(upstream.remote)))
    ok(a.source_sync(SOURCE))
    assert a.ctx.is_writer and not b.ctx.is_writer
    assert not [d for d in ok(b.verify())["differences"] if d["store"] == "clones"]
    shutil.rmtree(a.ctx.settings.repos_path)
    assert "clone_missing" in {d["kind"] for d in ok(a.verify())["differences"]}
