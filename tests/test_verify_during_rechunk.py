"""``gitkb verify`` while a RECHUNK runs in another process tells the truth.

RECHUNK switches the keyword index to the new chunks (one commit) before it swaps the catalog
rows. The writer here is a child process paused at ``rechunk.after_keywords`` (or
``rechunk.before_swap``, ``core/faults.pause_point``); verify runs meanwhile from this process
through the library, the CLI and HTTP (verify is not offered on MCP). It used to report the
index's old chunks as ``keyword_missing``; now it says the index is being re-chunked and leaves
its keyword entries out of the comparison. ``verify --repair`` is a job on the writer, which runs
one job at a time: it waits for the RECHUNK and then finds nothing to repair.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gitkb import Workspace
from gitkb.cli.main import cli
from helpers import ok, wait_until
from helpers.catalog import execute as catalog_execute
from helpers.catalog import rows as catalog_rows
from helpers.catalog import url_for as catalog_url_for

REPO = Path(__file__).resolve().parents[1]
TOML = '[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n'

CHILD = textwrap.dedent(
    """
    import json, pathlib, sys, time
    from gitkb import Workspace
    ws = Workspace(sys.argv[1], embedding_provider="hashing", embedding_model="hashing-384")
    r = ws.document_index("RECHUNK", index_name="kb", chunk_size=60, chunk_overlap=10)
    print(json.dumps(r), flush=True)
    close = pathlib.Path(sys.argv[2]) / "child.close"
    deadline = time.monotonic() + 90
    while not close.exists() and time.monotonic() < deadline:  # still the writer: queued jobs run
        time.sleep(0.05)
    ws.close()
    """
)


def kinds(d: dict[str, Any]) -> dict[str, int]:
    return {x["kind"]: x["count"] for x in d["differences"]}


def rechunking(d: dict[str, Any]) -> None:
    """A clean answer that says kb is being re-chunked."""
    assert d["clean"] is True and kinds(d) == {}, d
    assert [r["index_name"] for r in d["rebuilding"]] == ["kb"], d
    assert "RECHUNK" in d["Message"] or "rechunk" in d["Message"], d  # the CLI names its command


@pytest.fixture
def filled(make_ws: Callable[..., Workspace], home: Path, kb_copy: Path) -> Path:
    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="kb", chunk_size=400, chunk_overlap=40))
    ok(w.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    ok(w.build_embeddings())
    assert ok(w.verify())["clean"] is True
    w.close()
    (home / "gitkb.toml").write_text(TOML)
    return home


@pytest.mark.timeout(240)
@pytest.mark.parametrize("point", ["rechunk.after_keywords", "rechunk.before_swap"])
def test_verify_while_a_rechunk_runs_in_another_process(
    filled: Path, tmp_path: Path, make_client: Callable[..., Any], point: str
) -> None:
    home = filled
    where = tmp_path / "pause"
    where.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITKB_")}
    env.update(GITKB_PAUSE_AT=point, GITKB_PAUSE_DIR=str(where))
    if url := catalog_url_for(home):  # the child opens the same catalog (PostgreSQL in the both-backend run)
        env["GITKB_CATALOG_URL"] = url
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(home), str(where)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        wait_until(lambda: (where / f"{point}.reached").exists() or child.poll() is not None, timeout=90)
        assert child.poll() is None, child.communicate()
        with Workspace(home, embedding_provider="hashing", embedding_model="hashing-384") as w:
            assert not w.ctx.is_writer  # the child is
            rechunking(ok(w.verify()))
            rechunking(ok(w.verify(index_name="kb")))
            # status counts the index's documents, not also the temporary index's copies of them
            assert ok(w.get_index_status())["documents_indexed"] == 6
            res = CliRunner().invoke(cli, ["--home", str(home), "--json", "verify"], catch_exceptions=False)
            assert res.exit_code == 0, res.output
            rechunking(json.loads(res.stdout))
            res = CliRunner().invoke(cli, ["--home", str(home), "verify"], catch_exceptions=False)
            assert res.exit_code == 0 and "is rebuilding it" in res.output, res.output
            resp = make_client(at=home).post("/verify", json={})
            assert resp.status_code == 200, resp.text
            rechunking(resp.json())

            # --repair is a job for the writer, busy with the RECHUNK: it waits, then finds it done
            repaired: dict[str, Any] = {}
            t = threading.Thread(target=lambda: repaired.update(w.verify(repair=True)))
            t.start()
            time.sleep(1.5)
            assert t.is_alive() and not repaired  # not in the window
            (where / f"{point}.go").write_text("")
            t.join(120)
            assert ok(repaired)["clean"] is True and repaired["repaired"] == [], repaired
            assert "rebuilding" not in repaired or repaired["rebuilding"] == [], repaired
            jobs = {j["kind"]: j for j in ok(w.list_jobs())["Jobs"]}
            assert jobs["verify_repair"]["status"] == "completed", jobs
            after = ok(w.verify())
            assert after["clean"] is True and kinds(after) == {} and not after.get("rebuilding"), after
            hit = ok(w.document_index("SEARCH", query="promote the replica", mode="keyword"))["Results"]
            assert hit
    finally:
        (where / f"{point}.go").write_text("")
        (where / "child.close").write_text("")
        out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    assert json.loads(out.splitlines()[0])["Success"] is True, out


KILLED = textwrap.dedent(
    """
    import sys
    from gitkb import Workspace
    from gitkb.services.indexing import rechunk
    rechunk.BATCH = 2
    ws = Workspace(sys.argv[1], embedding_provider="hashing", embedding_model="hashing-384")
    ws.document_index("RECHUNK", index_name="kb", chunk_size=60, chunk_overlap=10)
    print("finished", flush=True)
    """
)


def agree_with_catalog(w: Workspace, home: Path, *, keywords: bool = True) -> None:
    """status, the index's stats and (``keywords``) the keyword index count what the catalog holds."""
    [(docs,)] = catalog_rows(
        home, "SELECT COUNT(*) FROM documents d JOIN indexes i ON i.id = d.index_id WHERE i.hidden = 0"
    )
    [(ix, chunks)] = catalog_rows(
        home,
        "SELECT i.id, COUNT(c.rowid) FROM indexes i JOIN chunks c ON c.index_id = i.id WHERE i.name = 'kb' GROUP BY i.id",
    )
    status = ok(w.get_index_status())
    assert status["documents_indexed"] == docs, status
    res = CliRunner().invoke(cli, ["--home", str(home), "--json", "status"], catch_exceptions=False)
    assert res.exit_code == 0 and json.loads(res.stdout)["documents_indexed"] == docs, res.output
    details = ok(w.document_index("LIST_INDICES"))["IndexDetails"]
    assert list(details) == ["kb"] and details["kb"]["chunk_count"] == chunks, details
    assert not keywords or w.ctx.keywords.count([ix]) == chunks


@pytest.mark.timeout(240)
@pytest.mark.parametrize("rerun", [True, False], ids=["rerun", "not-rerun"])
@pytest.mark.parametrize("point", ["rechunk.batch:2", "rechunk.before_swap", "rechunk.after_keywords"])
def test_status_and_verify_after_a_killed_rechunk(
    filled: Path, point: str, rerun: bool, make_client: Callable[..., Any]
) -> None:
    """SIGKILL at each crash point, reopen. ``rerun``: the new writer requeues the RECHUNK job and
    runs it; ``not-rerun``: the job row says failed (nothing reruns it), the rebuild is left over
    until verify --repair (or the next write to the index) cleans it up."""
    home = filled
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITKB_")}
    env["GITKB_CRASH_AT"] = point
    if url := catalog_url_for(home):
        env["GITKB_CATALOG_URL"] = url
    proc = subprocess.run(
        [sys.executable, "-c", KILLED, str(home)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == -9 and "finished" not in proc.stdout, proc.stderr
    assert catalog_rows(home, "SELECT COUNT(*) FROM index_rebuilds") == [(1,)]
    if not rerun:
        catalog_execute(home, "UPDATE jobs SET state = 'failed', error = 'killed' WHERE state = 'running'")
    with Workspace(home, embedding_provider="hashing", embedding_model="hashing-384") as w:
        wait_until(
            lambda: not any(j["status"] in ("queued", "running") for j in ok(w.list_jobs())["Jobs"]),
            timeout=90,
            what="no job queued or running",
        )
        found = ok(w.verify())
        if rerun:
            assert found["clean"] is True and found["rebuilding"] == [], found
        else:
            assert kinds(found) == {"rechunk_interrupted": 1}, found  # not keyword_missing
            assert found["rebuilding"][0]["state"] == "interrupted", found
            metrics = make_client(at=home).get("/metrics")
            assert metrics.status_code == 200 and 'index="kb"' in metrics.text, metrics.text
            assert ".rechunk." not in metrics.text  # the temporary copies: no series of their own
            # the keyword index holds the rebuilt chunks in kb's place after rechunk.after_keywords
            agree_with_catalog(w, home, keywords=point != "rechunk.after_keywords")
            fixed = ok(w.verify(repair=True))
            assert fixed["clean"] is True and fixed["rebuilding"] == [], fixed
            assert any("interrupted RECHUNK of 'kb'" in line for line in fixed["repaired"]), fixed
        agree_with_catalog(w, home)
        assert ok(w.verify())["clean"] is True
        hit = ok(w.document_index("SEARCH", query="promote the replica", mode="keyword"))["Results"]
        assert hit


NODE_CHILD = textwrap.dedent(
    """
    import json, pathlib, sys, time
    from gitkb import Workspace
    from helpers.nodes import node_settings
    ws = Workspace(settings=node_settings(pathlib.Path(sys.argv[1]), sys.argv[2]))
    assert ws.ctx.is_writer
    r = ws.document_index("RECHUNK", index_name="kb", chunk_size=60, chunk_overlap=10)
    print(json.dumps(r), flush=True)
    close = pathlib.Path(sys.argv[3]) / "child.close"
    deadline = time.monotonic() + 90
    while not close.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    ws.close()
    """
)


@pytest.mark.timeout(240)
def test_verify_on_another_node_while_the_writer_node_rechunks(tmp_path: Path, kb_copy: Path) -> None:
    """Nodes with their own homes on one catalog: node a (a child, the writer) re-chunks, paused
    after its keyword switch; node b's own keyword index never saw the switch. b's verify says kb is
    being re-chunked and finds nothing else; its --repair waits for a's RECHUNK."""
    from helpers.nodes import node_settings, sqlite_url

    shared = tmp_path / "shared"
    shared.mkdir()
    url = sqlite_url(shared / "catalog.sqlite3")
    with Workspace(settings=node_settings(tmp_path / "a", url)) as a:
        ok(
            a.document_index(
                "CREATE_INDEX", index_name="kb", chunk_size=400, chunk_overlap=40, embeddings=False
            )
        )
        ok(a.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    where = tmp_path / "pause"
    where.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITKB_")}
    env.update(GITKB_PAUSE_AT="rechunk.after_keywords", GITKB_PAUSE_DIR=str(where))
    env["PYTHONPATH"] = str(REPO / "tests") + os.pathsep + env.get("PYTHONPATH", "")
    child = subprocess.Popen(
        [sys.executable, "-c", NODE_CHILD, str(tmp_path / "a"), url, str(where)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        reached = where / "rechunk.after_keywords.reached"
        wait_until(lambda: reached.exists() or child.poll() is not None, timeout=90)
        assert child.poll() is None, child.communicate()
        with Workspace(settings=node_settings(tmp_path / "b", url)) as b:
            assert not b.ctx.is_writer
            wait_until(lambda: b.ctx.keywords.count() > 0, timeout=30, what="b's own keyword index")
            rechunking(ok(b.verify()))
            repaired: dict[str, Any] = {}
            t = threading.Thread(target=lambda: repaired.update(b.verify(repair=True)))
            t.start()
            time.sleep(1.5)
            assert t.is_alive() and not repaired
            (where / "rechunk.after_keywords.go").write_text("")
            t.join(120)
            assert ok(repaired)["clean"] is True and repaired["repaired"] == [], repaired
            wait_until(lambda: ok(b.verify())["clean"] and not ok(b.verify())["rebuilding"], timeout=30)
    finally:
        (where / "rechunk.after_keywords.go").write_text("")
        (where / "child.close").write_text("")
        out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    assert json.loads(out.splitlines()[0])["Success"] is True, out


@pytest.mark.parametrize("write", ["add", "delete"])
def test_a_write_while_verify_reads_is_pending_not_a_difference(
    make_ws: Callable[..., Workspace],
    kb_copy: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    write: str,
) -> None:
    """verify reads the catalog's chunks, then the keyword index: a write the writer applied to both
    in between used to be an orphan (add) or a missing entry (delete), because the watermark was read
    after them. It is read first now: that write is pending, left out."""
    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="kb", embeddings=False))
    ok(w.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    where = tmp_path / "pause"
    where.mkdir()
    monkeypatch.setenv("GITKB_PAUSE_AT", "verify.chunks_read")
    monkeypatch.setenv("GITKB_PAUSE_DIR", str(where))
    out: dict[str, Any] = {}
    t = threading.Thread(target=lambda: out.update(w.verify()))
    t.start()
    try:
        wait_until(lambda: (where / "verify.chunks_read.reached").exists(), timeout=60)
        if write == "add":
            ok(
                w.document_index(
                    "ADD_TEXT", index_name="kb", text="A note written meanwhile.", filepath="m.md"
                )
            )
        else:
            path = ok(w.document_index("LIST_DOCUMENTS", index_name="kb"))["Documents"][0]["path"]
            ok(w.document_index("DELETE_DOCUMENT", index_name="kb", filepath=path))
    finally:
        (where / "verify.chunks_read.go").write_text("")
        t.join(60)
    assert ok(out)["clean"] is True and kinds(out) == {}, out
    monkeypatch.delenv("GITKB_PAUSE_AT")
    assert ok(w.verify())["clean"] is True


def test_http_verify_on_the_writer_while_its_rechunk_job_runs(
    make_client: Callable[..., Any], kb_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server is the writer: its RECHUNK job (paused after the keyword switch) holds the write
    lock; POST /verify on another thread says kb is being re-chunked (running, not interrupted: the
    rebuild's lock is held), and finds nothing else."""
    client = make_client()
    w = client.app.state.gitkb.workspace
    ok(w.document_index("CREATE_INDEX", index_name="kb", chunk_size=400, chunk_overlap=40))
    ok(w.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    ok(w.build_embeddings())
    where = tmp_path / "pause"
    where.mkdir()
    monkeypatch.setenv("GITKB_PAUSE_AT", "rechunk.after_keywords")
    monkeypatch.setenv("GITKB_PAUSE_DIR", str(where))
    out: dict[str, Any] = {}
    t = threading.Thread(
        target=lambda: out.update(
            w.document_index("RECHUNK", index_name="kb", chunk_size=60, chunk_overlap=10)
        )
    )
    t.start()
    try:
        wait_until(lambda: (where / "rechunk.after_keywords.reached").exists(), timeout=60)
        assert w.ctx.is_writer
        resp = client.post("/verify", json={})
        assert resp.status_code == 200, resp.text
        rechunking(resp.json())
        assert resp.json()["rebuilding"][0]["state"] == "running"
    finally:
        (where / "rechunk.after_keywords.go").write_text("")
        t.join(60)
    ok(out)
    monkeypatch.delenv("GITKB_PAUSE_AT")
    after = client.post("/verify", json={}).json()
    assert after["clean"] is True and after["rebuilding"] == [], after
