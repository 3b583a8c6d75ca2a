"""jobs23: finished jobs are kept ``[catalog] jobs_days``: the writer removes older ones (never a queued
or running job, never the newest finished job of a kind and index, so status reads the same), a
removed job's id answers ``not_found`` saying so on every interface, ``status`` shows the retention."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from gitkb.cli.main import cli
from gitkb.core.config import DEFAULT_JOBS_DAYS, load_settings
from gitkb.core.errors import InvalidArgument
from gitkb.mcp import build_server
from gitkb.services.operations.scoped_status import status_of_indexes
from gitkb.services.runtime import jobs
from gitkb.services.runtime.retention import DAY_SECONDS, prune_jobs
from gitkb.stores.catalog import Catalog, job_retention
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import jobs as job_rows
from gitkb.stores.catalog.migrations import migrate
from helpers import error_code, error_message, ok, wait_until

STATUS_KEYS = ("status", "error", "last_reindex_error", "last_build_embeddings_error", "caught_up")
LATER = 40 * DAY_SECONDS  # a clock this far ahead: every job finished now is past the default 30 days


def finished(ws: Any, kind: str, params: dict[str, Any], state: str, error: str | None = None) -> str:
    """A job of ``kind`` that ran and ended in ``state`` (through the store, as the writer does)."""
    with ws.ctx.catalog.write() as conn:
        row = job_rows.insert(conn, kind, params, state="running", runner="test")
        job_rows.finish(conn, row.id, state, error=error, error_code="internal" if error else None)
    time.sleep(0.002)  # finish times in order
    return row.id


def ids_left(ws: Any) -> set[str]:
    return {j.id for j in job_rows.list_recent(ws.ctx.catalog.conn, limit=1000)}


def index_ids(ws: Any) -> dict[str, str]:
    return {r.name: r.id for r in index_rows.list_all(ws.ctx.catalog.conn)}


def statuses(ws: Any, ids: dict[str, str]) -> dict[str, Any]:
    whole = ws.get_index_status()
    return {
        "all": {k: whole[k] for k in STATUS_KEYS},
        **{name: {k: v for k, v in status_of_indexes(ws.ctx, [i]).items()} for name, i in ids.items()},
    }


def test_old_finished_jobs_are_removed_but_the_newest_of_each_kind_and_index_and_status_stay(ws: Any) -> None:
    """Past the retention, every finished job goes except the newest (completed or failed; and
    cancelled) of each kind and index: the whole status and each index's status read the same after."""
    for name in ("a", "b"):
        ok(ws.document_index("CREATE_INDEX", index_name=name))
    ids = index_ids(ws)
    a, b = {"index_name": "a"}, {"index_name": "b"}
    f1 = finished(ws, "reindex", a, "failed", "boom a")
    embeds = [finished(ws, "build_embeddings", {}, "completed") for _ in range(3)]
    f2 = finished(ws, "reindex", a, "completed")
    c1 = finished(ws, "reindex", a, "cancelled")
    c2 = finished(ws, "reindex", a, "cancelled")
    adds = [finished(ws, "action", {"action": "ADD_TEXT", "params": b}, "completed") for _ in range(2)]
    f3 = finished(ws, "reindex", b, "failed", "boom b")  # the last build of all, and of b
    before = statuses(ws, ids)
    assert before["all"]["status"] == "failed" and before["all"]["error"] == "boom b", before
    assert before["b"]["status"] == "failed" and before["a"]["status"] == "queryable", before
    kept_before = ids_left(ws)

    assert prune_jobs(ws.ctx) == {"pruned": True, "removed": 0}  # nothing is 30 days old yet
    assert ids_left(ws) == kept_before
    out = prune_jobs(ws.ctx, now=time.time() + LATER)
    removed = {f1, embeds[0], embeds[1], c1, adds[0]}
    assert out == {"pruned": True, "removed": len(removed)}, out
    assert ids_left(ws) == kept_before - removed
    assert {f2, embeds[2], c2, adds[1], f3} <= ids_left(ws)
    assert statuses(ws, ids) == before
    view = ws.get_index_status()["jobs"]
    assert view["pruned"] == len(removed) and view["retention_days"] == DEFAULT_JOBS_DAYS, view
    assert view["rows"] == len(kept_before - removed) and view["pruned_before"] > time.time(), view
    assert prune_jobs(ws.ctx, now=time.time() + LATER) == {"pruned": True, "removed": 0}  # the newest stay


def test_queued_and_running_jobs_are_kept_however_old(ws: Any) -> None:
    """A running job and one queued behind it stay through a prune whose clock is years ahead; the
    finished ones around them go."""
    release = threading.Event()
    jobs.add_kind("test_block23", jobs.JobKind(lambda ctx, params, progress: {"ok": release.wait(30)}))
    try:
        old = [finished(ws, "reindex", {"index_name": "x"}, "completed") for _ in range(2)]
        running = jobs.submit(ws.ctx, "test_block23", {"n": 1})
        wait_until(lambda: ok(ws.get_job_result(running.id))["status"] == "running", timeout=10)
        queued = jobs.submit(ws.ctx, "test_block23", {"n": 2})
        assert prune_jobs(ws.ctx, now=time.time() + 3650 * DAY_SECONDS)["removed"] == 1
        assert ok(ws.get_job_result(running.id))["status"] == "running"
        assert ok(ws.get_job_result(queued.id))["status"] == "queued"
        assert ids_left(ws) == {running.id, queued.id, old[1]}
    finally:
        release.set()
        wait_until(lambda: ws.get_job_result(queued.id)["status"] == "completed", timeout=10)
        jobs.remove_kind("test_block23")


def test_a_long_unpruned_table_is_pruned_a_bounded_part_at_a_time(
    ws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At most ``MAX_PER_PRUNE`` jobs go per prune (the oldest first), and the next prune goes on
    even when nothing finished or aged since."""
    monkeypatch.setattr(job_retention, "MAX_PER_PRUNE", 3)
    made = [finished(ws, "reindex", {"index_name": "x"}, "completed") for _ in range(8)]
    later = time.time() + LATER
    assert prune_jobs(ws.ctx, now=later)["removed"] == 3
    assert not {made[0], made[1], made[2]} & ids_left(ws)
    assert prune_jobs(ws.ctx, now=later)["removed"] == 3
    assert prune_jobs(ws.ctx, now=later)["removed"] == 1  # the newest of the key stays
    assert prune_jobs(ws.ctx, now=later)["removed"] == 0
    assert made[-1] in ids_left(ws) and not set(made[:-1]) & ids_left(ws)


def _mcp_job(ws: Any, agent: str | None, job_id: str) -> Any:
    async def main() -> Any:
        async with Client(build_server(ws, agent)) as client:
            return await client.call_tool("get_job_result", {"job_id": job_id})

    return anyio.run(main)


def test_a_removed_job_id_says_so_on_every_interface_and_a_never_known_one_does_not(
    ws: Any, home: Path, make_client: Any
) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="a"))
    ok(ws.kb_create("kb-a", ["a"]))
    ok(ws.agent_assign("bot", ["kb-a"]))
    ok(ws.document_index("ADD_TEXT", index_name="a", filepath="n.md", text="one note"))
    gone = ok(ws.list_jobs(count=1))["Jobs"][0]["job_id"]
    ok(ws.document_index("ADD_TEXT", index_name="a", filepath="m.md", text="two notes"))  # the newest stays
    never = "job_" + "0" * 24
    assert "were removed" not in ws.get_job_result(never)["Error"]
    assert prune_jobs(ws.ctx, now=time.time() + LATER)["removed"] >= 1

    for answer in (ws.get_job_result(gone), ws.wait_job(gone, timeout=1), ws.cancel_job(gone)):
        assert answer["Success"] is False and answer["code"] == "not_found", answer
        assert f"no job {gone!r} now: its id dates from before" in answer["Error"], answer
        assert "finished jobs are kept 30 days" in answer["Error"], answer
        assert answer["jobs_days"] == 30 and answer["jobs_pruned_before"] > time.time()
    for bad in (never, "job_nope"):
        answer = ws.get_job_result(bad)
        assert answer["code"] == "not_found" and answer["Error"] == f"no job {bad!r}", answer

    for args in (["jobs", "get", gone], ["jobs", "wait", gone]):
        res = CliRunner().invoke(cli, ["--home", str(home), *args])
        assert res.exit_code == 1 and "were removed" in res.output and "jobs_days" in res.output, res.output
    res = CliRunner().invoke(cli, ["--home", str(home), "jobs", "get", never])
    assert res.exit_code == 1 and "were removed" not in res.output and "no job" in res.output, res.output

    http = make_client()
    r = http.get(f"/jobs/{gone}")
    assert r.status_code == 404 and error_code(r) == "not_found" and "were removed" in error_message(r), (
        r.text
    )
    r = http.get(f"/jobs/{never}")
    assert r.status_code == 404 and error_message(r) == f"no job {never!r}", r.text

    for agent in (None, "bot"):  # the operator's stdio server and an agent's
        result = _mcp_job(ws, agent, gone)
        assert result.is_error and "were removed" in result.content[0].text, result.content[0].text
        result = _mcp_job(ws, agent, never)
        assert result.is_error and "were removed" not in result.content[0].text, result.content[0].text


def test_the_writer_prunes_when_it_takes_the_lease_and_when_idle(ws: Any, make_ws: Any, home: Path) -> None:
    """No prune call by hand: a writer removes the jobs that finished 31 days ago when it takes the
    lease, and again in its idle maintenance; ``gitkb status`` shows the retention."""
    ok(ws.document_index("CREATE_INDEX", index_name="a"))
    for i in range(3):
        ok(ws.document_index("ADD_TEXT", index_name="a", filepath=f"n{i}.md", text=f"note {i}"))
    total = len(ids_left(ws))

    def age_all() -> None:  # as if every finished job had finished 31 days ago
        with ws.ctx.catalog.write() as conn:
            conn.execute("UPDATE jobs SET finished_at = finished_at - ?", (31 * DAY_SECONDS,))

    age_all()
    ws.close()
    again = make_ws()
    assert again.ctx.is_writer
    wait_until(lambda: again.get_index_status()["jobs"]["pruned"] >= 2, timeout=10)
    left = ids_left(again)
    assert len(left) == total - 2, (left, total)  # the newest ADD_TEXT and the CREATE_INDEX stay

    for i in range(2):
        ok(again.document_index("ADD_TEXT", index_name="a", filepath=f"m{i}.md", text=f"memo {i}"))
    ws = again
    age_all()
    ok(again.document_index("ADD_TEXT", index_name="a", filepath="m2.md", text="memo 2"))  # the newest
    again.ctx.caches.maintenance_at = float("-inf")  # the next idle moment runs the maintenance
    again.ctx.notify_writer()
    wait_until(lambda: again.get_index_status()["jobs"]["pruned"] >= 5, timeout=10)
    assert len(ids_left(again)) == len(left)  # n2, m0 and m1 went: m2 is the newest ADD_TEXT now

    res = CliRunner().invoke(cli, ["--home", str(home), "--json", "status"])
    assert res.exit_code == 0, res.output
    shown = json.loads(res.output)["jobs"]
    assert shown["retention_days"] == 30 and shown["pruned"] == 5 and shown["rows"] == len(left), shown
    assert shown["pruned_before"] is not None
    res = CliRunner().invoke(cli, ["--home", str(home), "status"])
    assert f"jobs:              {len(left)} (" in res.output and "kept 30 days; 5 removed)" in res.output


@pytest.mark.parametrize("bad", ["0", "-1", '"week"', "true", "1.5", "40000"])
def test_a_bad_jobs_days_is_refused_where_the_config_is_read(tmp_path: Path, bad: str) -> None:
    home = tmp_path / "h"
    home.mkdir()
    (home / "gitkb.toml").write_text(f"[catalog]\njobs_days = {bad}\n")
    with pytest.raises(InvalidArgument, match=r"\[catalog\] jobs_days must be a whole number of days"):
        load_settings(home)
    res = CliRunner().invoke(cli, ["--home", str(home), "--json", "status"])
    assert res.exit_code == 1 and "jobs_days" in res.output and "invalid_argument" in res.output, res.output
    assert not (home / "catalog.sqlite3").exists()
    with pytest.raises(InvalidArgument, match="GITKB_CATALOG_JOBS_DAYS must be a whole number"):
        load_settings(tmp_path, env={"GITKB_CATALOG_JOBS_DAYS": bad.strip('"')})
    with pytest.raises(InvalidArgument, match="catalog_jobs_days must be"):
        load_settings(tmp_path, catalog_jobs_days=json.loads(bad))
    assert load_settings(tmp_path, env={"GITKB_CATALOG_JOBS_DAYS": "7"}).catalog_jobs_days == 7
    assert load_settings(tmp_path).catalog_jobs_days == DEFAULT_JOBS_DAYS == 30


def test_the_finish_time_is_indexed_on_both_backends(ws: Any) -> None:
    """m028_jobs23_finished_index: the prune's check of what finished or aged since reads an index."""
    conn = ws.ctx.catalog.conn
    if ws.ctx.catalog.backend["engine"] == "postgresql":
        rows = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'jobs_finished'").fetchall()
    else:
        rows = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'jobs_finished'").fetchall()
    assert len(rows) == 1 and "finished_at" in str(rows[0][0]), rows
    applied = {r[0] for r in conn.execute("SELECT name FROM migrations")}
    assert "m028_jobs23_finished_index" in applied


def test_jobs_of_before_the_key_column_are_keyed_and_the_prune_reads_by_index(tmp_path: Path) -> None:
    """m029_jobs23_retention_key: jobs of a catalog made before it get the key insert gives, so the
    prune finds their older duplicates; the plan's supersession check seeks ``jobs_retention`` (a
    plain scan of every finished row per aged job took seconds at 70,000 rows: bench/jobs_prune.py)."""
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    migrate(conn, upto="m028_jobs23_finished_index")
    params = json.dumps({"action": "ADD_TEXT", "params": {"index_name": "a"}})
    old = time.time() - 40 * DAY_SECONDS
    for job_id, at in (("job_older", old), ("job_newer", old + 1), ("job_other", old)):
        conn.execute(
            "INSERT INTO jobs(id, kind, params, state, created_at, finished_at) VALUES (?, ?, ?, 'completed', ?, ?)",
            (job_id, "action" if job_id != "job_other" else "reindex", params, at, at),
        )
    conn.commit()
    migrate(conn)
    conn.commit()
    keys = dict(conn.execute("SELECT id, retention_key FROM jobs").fetchall())
    assert keys["job_older"] == keys["job_newer"] == job_rows.retention_key("action", json.loads(params))
    assert keys["job_other"] == job_rows.retention_key("reindex", json.loads(params)) != keys["job_older"]
    conn.close()
    cat = Catalog(path)
    try:
        planned = job_retention.plan(cat.conn, before=time.time() - 30 * DAY_SECONDS)
        assert planned is not None and planned.doomed == ["job_older"], planned
        plan_rows = cat.conn.execute(
            "EXPLAIN QUERY PLAN SELECT 1 FROM jobs n WHERE n.retention_key = ? AND n.state IN ('completed')"
            " AND n.finished_at >= ? AND (n.finished_at > ? OR n.id > ?)",
            ("k", 0.0, 0.0, "x"),
        ).fetchall()
        assert any("jobs_retention" in str(tuple(r)) for r in plan_rows), [tuple(r) for r in plan_rows]
    finally:
        cat.close()
