"""A job that does not finish in the process that started it still says what became of the vectors
of everything it wrote (issue 21): ``gitkb reindex --no-wait`` queues a job the CLI's own writer
starts and hands back to the queue at exit ("interrupted by shutdown; will resume"); the run that
completes it found nothing left to do, so its summary said "6 unchanged" and nothing of vectors.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from gitkb.cli.main import cli
from gitkb.services.runtime import jobs
from gitkb.stores.catalog import jobs as job_rows
from helpers import ok, wait_until


def _corpus(root: Path, n: int = 5) -> Path:
    docs = root / "docs"
    docs.mkdir(parents=True)
    for i in range(n):
        (docs / f"d{i}.md").write_text(f"# Doc {i}\n\nrotate keys {i}\n")
    return docs


def _interrupted_reindex(ws: Any) -> str:
    """A reindex job run by this process's writer and handed back to the queue after its first
    write batch, as a CLI exit does; returns its id."""
    stop = threading.Event()
    with ws.ctx.write_lock:
        with ws.ctx.catalog.write() as conn:
            job = job_rows.insert(conn, "reindex", {}, state="running", runner=jobs.runner_name())
        done = jobs._execute(ws.ctx, job, lambda d, t: stop.set(), stop=stop)
    assert done.state == "queued" and done.progress_note == "interrupted by shutdown; will resume"
    return job.id


def test_the_vectors_summary_covers_the_runs_before_an_interruption(make_ws: Any, tmp_path: Path) -> None:
    docs = _corpus(tmp_path)
    ws = make_ws()
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(docs)))
    ok(ws.build_embeddings())
    for i in range(3):
        (docs / f"d{i}.md").write_text(f"# Doc {i}\n\nrotate keys {i}, changed\n")
    (docs / "d9.md").write_text("# New\n\nbrand new text\n")
    job_id = _interrupted_reindex(ws)
    out = ok(ws.wait_job(job_id, timeout=60))  # this process's writer runs it again
    assert out["status"] == "completed"
    result = out["result"]
    assert result["modified"] + result["added"] == 0  # the first run did the work
    assert result.get("vectors") in ("pending", "ready"), result  # ... and its vectors are still told
    total = result.get("vectors_total", result.get("chunks_embedded", 0) + result.get("chunks_reused", 0))
    assert total >= 4, result
    assert any("interrupted and resumed" in w for w in result["Warnings"])  # its counts are its last run's
    ws.close()


def test_jobs_wait_prints_the_vectors_of_a_no_wait_reindex(make_ws: Any, tmp_path: Path) -> None:
    docs = _corpus(tmp_path)
    ws = make_ws()
    home = ws.home
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(docs)))
    ok(ws.build_embeddings())
    ws.close()
    (home / "gitkb.toml").write_text('[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n')
    for i in range(3):
        (docs / f"d{i}.md").write_text(f"# Doc {i}\n\nrotate keys {i}, changed again\n")
    runner = CliRunner()
    queued = runner.invoke(cli, ["--home", str(home), "reindex", "--no-wait"], catch_exceptions=False)
    assert queued.exit_code == 0, queued.output
    assert "not waited for" in queued.output and "gitkb jobs wait job_" in queued.output, queued.output
    job_id = queued.output.split("gitkb jobs wait ")[1].split("`")[0]
    waited = runner.invoke(cli, ["--home", str(home), "jobs", "wait", job_id], catch_exceptions=False)
    assert waited.exit_code == 0, waited.output
    assert "completed" in waited.output and "vectors: " in waited.output, waited.output
    as_json = runner.invoke(cli, ["--home", str(home), "--json", "jobs", "wait", job_id])
    assert json.loads(as_json.stdout)["result"]["vectors"] in ("ready", "pending")


def test_a_no_wait_job_is_finished_after_the_command_exits(make_ws: Any, tmp_path: Path) -> None:
    """`gitkb reindex --no-wait` says the job "runs in the background": with no server, the job the
    command queued (or began, then handed back at exit) is finished by the detached resume the
    command starts as it closes, not left queued until some later gitkb command."""
    docs = _corpus(tmp_path, 300)
    ws = make_ws()
    home = ws.home
    ok(ws.document_index("CREATE_INDEX", index_name="kb", embeddings=False))
    ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(docs)))
    ws.close()
    (home / "gitkb.toml").write_text('[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n')
    for i in range(300):
        (docs / f"d{i}.md").write_text(f"# Doc {i}\n\nrotate keys {i}, changed\n")
    queued = CliRunner().invoke(cli, ["--home", str(home), "reindex", "--no-wait"], catch_exceptions=False)
    assert queued.exit_code == 0 and "gitkb jobs wait job_" in queued.output, queued.output
    job_id = queued.output.split("gitkb jobs wait ")[1].split("`")[0]

    def state() -> str:  # read the catalog without opening a workspace (that would run the job)
        conn = sqlite3.connect(f"file:{ws.settings.catalog_path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            row = job_rows.get(conn, job_id)
        finally:
            conn.close()
        assert row is not None
        return row.state

    wait_until(lambda: state() == "completed", timeout=90)
