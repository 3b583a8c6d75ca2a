"""Every number is true: embedding counts equal what really happened (vector store counts,
embedding events), whichever worker did the work; a call that does not wait says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from gitkb import Workspace
from gitkb.services.derived.vector_locks import identity_locks
from gitkb.stores.catalog import vector_state as vs
from helpers import cli_runner, ok, wait_until

IDENT = "hashing/hashing-384"


def _stored(ws: Workspace) -> int:
    return sum(c["count"] for c in ws.ctx.vectors.list_collections() if c["identity"] == IDENT)


def _embedded_by_events(ws: Workspace, since: float) -> int:
    return sum(
        e.get("embedded", 0)
        for e in vs.events(ws.ctx.catalog.conn, "embedding", limit=1000)
        if e["at"] >= since
    )


def test_build_counts_the_work_the_background_embedder_did_while_it_waited(ws: Workspace) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    t0 = time.time()
    lock_held = threading.Event()
    release = threading.Event()

    def hold() -> None:  # keep every embedder out until the build below is waiting
        with identity_locks(ws.ctx, [IDENT]):
            lock_held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    lock_held.wait(5)
    for i in range(12):
        ok(
            ws.document_index(
                "ADD_TEXT",
                index_name="kb",
                text=f"Runbook {i}: restart service {i} after paging.",
                filepath=f"r{i}.txt",
            )
        )
    assert _stored(ws) == 0  # the background embedder was kicked, and is blocked on the lock
    result: dict[str, Any] = {}
    build = threading.Thread(target=lambda: result.update(ws.build_embeddings()))
    build.start()
    time.sleep(0.3)
    release.set()  # the background thread (blocked in acquire) takes the lock first and embeds
    holder.join()
    build.join(30)
    ok(result)
    assert _stored(ws) == 12
    assert _embedded_by_events(ws, t0) == 12  # done exactly once, by whichever worker
    assert result["chunks_embedded"] == 12 and result["chunks_reused"] == 0, result
    assert result["Message"].startswith("12 chunk(s) embedded, 0 reused")
    assert result["cost"]["texts"] == 12 and result["cost"]["tokens"] > 0
    # a second build has nothing left to do, and says so truly
    again = ok(ws.build_embeddings())
    assert (again["chunks_embedded"], again["chunks_reused"]) == (0, 0)


def test_a_write_that_does_not_wait_says_pending_then_the_wait_counts_truly(ws: Workspace) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    with identity_locks(ws.ctx, [IDENT]):  # nothing can embed yet: the answer must say pending
        r = ok(
            ws.document_index(
                "ADD_TEXT",
                index_name="kb",
                text="# Keys\n\nRotate the signing keys every 90 days.",
                filepath="k.md",
            )
        )
        assert r["vectors"] == "pending" and r["vectors_pending"] == r["chunks_written"] == 1
        assert "chunks_embedded" not in r
        job = ok(
            ws.promoted(
                "document_index",
                action="ADD_TEXT",
                index_name="kb",
                text="Another note on paging.",
                filepath="p.txt",
            )
        )
        assert job["vectors"] == "pending" and job["vectors_pending"] == 1
        got = ok(ws.get_job_result(job["job_id"]))["result"]
        assert got["vectors"] == "pending" and got["vectors_pending"] == 1
    # let the background embedder do it, then ask: the counts are the truth for this write's chunks
    wait_until(lambda: _stored(ws) >= 2, timeout=20, interval=0.05, what="the background embedder's vector")
    done = ok(ws.wait_for_vectors(r["vectors_range"]))
    assert done["vectors"] == "ready" and done["chunks_embedded"] == 1 and done["chunks_reused"] == 0, done
    # the same text again under another path reuses the stored vector: counted as reused, not embedded
    r2 = ok(
        ws.document_index("ADD_TEXT", index_name="kb", text="Another note on paging.", filepath="copy.txt")
    )
    done2 = r2 if r2["vectors"] == "ready" else ok(ws.wait_for_vectors(r2["vectors_range"]))
    assert (done2["chunks_embedded"], done2["chunks_reused"]) == (0, 1), done2
    assert _stored(ws) == 3


def test_keyword_only_and_unchanged_writes_report_no_vectors(ws: Workspace) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="kw", embeddings=False))
    r = ok(ws.document_index("ADD_TEXT", index_name="kw", text="plain words", filepath="a.txt"))
    assert "vectors" not in r and "chunks_embedded" not in r


def test_cli_add_and_rechunk_print_true_vector_counts(home: Path, tmp_path: Path) -> None:
    d = tmp_path / "notes"
    d.mkdir()
    for i in range(6):
        (d / f"n{i}.md").write_text(
            f"# Note {i}\n\nThe rota for team {i} changes on Monday {i}.\n\nSecond paragraph {i}.\n"
        )
    run = cli_runner(home)

    run("index", "create", "kb")
    out = run("add", "kb", str(d))
    with Workspace(home) as w:
        stored = _stored(w)
    assert stored > 0 and f"vectors: {stored} chunk(s) embedded, 0 reused" in out, out
    # the notes fit one chunk each: re-chunking them as one chunk per document changes no text
    out = run("index", "rechunk", "kb", "--chunk-strategy", "one_chunk_per_doc")
    assert "vectors: 0 chunk(s) embedded, 6 reused" in out, out
    # small sentence chunks are new texts: each is embedded (the ones equal to an old text reused)
    out = run(
        "--json",
        "index",
        "rechunk",
        "kb",
        "--chunk-strategy",
        "sentence",
        "--chunk-size",
        "8",
        "--chunk-overlap",
        "0",
    )
    data = json.loads(out)
    with Workspace(home) as w:
        after = ok(w.document_index("GET_INDICES_STATS"))["Stats"]["kb"]["chunk_count"]
        assert _stored(w) == after > 6
    emb = data["embeddings"]
    assert emb["chunks_embedded"] + emb["chunks_reused"] == after and emb["chunks_embedded"] > 0, data
    assert data["vectors"] == "ready"
    out = run("embeddings", "build")
    assert out.startswith("0 chunk(s) embedded, 0 reused"), out
    out = run("add", "kb", str(d / "n0.md"), "--base-path", str(tmp_path), "--no-wait")
    assert "vectors:" not in out  # unchanged: nothing was written, so nothing is pending


def _pause_mid_build(ws: Workspace, chunks: int) -> tuple[threading.Thread, threading.Event]:
    """A real catch-up that stops in its progress callback after its first model batch (64 chunks)
    until released: status is read while the vector build runs."""
    from gitkb.services.derived.vectors_catchup import catch_up_identity

    locked, written, paused, release = (threading.Event() for _ in range(4))

    def progress(done: int, total: int) -> None:
        if done >= 64 and not paused.is_set():
            paused.set()
            release.wait(20)

    def run() -> None:
        with identity_locks(ws.ctx, [IDENT]):  # the background embedder waits behind us
            locked.set()
            written.wait(20)
            catch_up_identity(ws.ctx, IDENT, progress=progress)

    t = threading.Thread(target=run)
    t.start()
    locked.wait(5)
    text = " ".join(f"Sentence number {i} is about the pager rota and team {i}." for i in range(chunks))
    r = ok(
        ws.document_index(
            "ADD_TEXT",
            index_name="kb",
            text=text,
            filepath="long.txt",
            chunk_strategy="sentence",
            chunk_size=16,
            chunk_overlap=0,
        )
    )
    assert r["chunks_written"] > 64, r
    written.set()
    assert paused.wait(20)
    return t, release


def test_status_names_the_vector_build_with_its_progress(ws: Workspace) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    t, release = _pause_mid_build(ws, 100)
    try:
        total = ws.ctx.catalog.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        st = ok(ws.get_index_status())
        assert st["in_flight"] == "build_embeddings", st
        job = st["in_flight_job"]
        assert job["background"] is True and job["job_id"] is None
        assert job["progress"]["done"] == 64 and job["progress"]["total"] == total
        assert st["dirty_embeddings"] == total and st["caught_up"] is False
        assert f"in flight build_embeddings (64/{total})" in st["Message"] and "None" not in st["Message"]
    finally:
        release.set()
        t.join(20)
    st = ok(ws.get_index_status())
    assert st["in_flight"] is None and st["vector_build"] is None and st["dirty_embeddings"] == 0


def test_ui_status_panel_shows_the_vector_build(home: Path) -> None:
    from fastapi.testclient import TestClient

    from gitkb.core.config import load_settings
    from gitkb.http import create_app

    home.mkdir(parents=True, exist_ok=True)
    (home / "gitkb.toml").write_text("")
    settings = load_settings(home, embedding_provider="hashing", embedding_model="hashing-384")
    with TestClient(create_app(settings), client=("127.0.0.1", 50000)) as c:
        ws = c.app.state.gitkb.workspace  # type: ignore[attr-defined]
        ok(ws.document_index("CREATE_INDEX", index_name="kb"))
        t, release = _pause_mid_build(ws, 100)
        try:
            status = c.get("/ui/status.json").json()
            total = status["in_flight_job"]["progress"]["total"]
            assert status["in_flight"] == "build_embeddings" and status["progress_percent"] == int(
                100 * 64 / total
            )
            page = c.get("/ui").text
            assert "build_embeddings · background" in page and f"64 / {total}" in page
            assert "None" not in page.split('class="card status-panel"')[1].split("</section>")[0]
        finally:
            release.set()
            t.join(20)
    css = (Path(__file__).resolve().parents[1] / "src/gitkb/http/static/ui/ui.css").read_text()
    rule = next(line for line in css.splitlines() if line.startswith('.status-line [data-field="Message"]'))
    assert "ellipsis" not in rule  # the whole message is shown (it wraps)


# -- a call refused by validation leaves no failed job --------------------------------------------

REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("ADD_DOCUMENTS", {"index_name": "kb", "filepath": "/no/such/folder"}, "not_found"),
    ("ADD_DOCUMENTS", {"index_name": "nope", "filepath": "."}, "not_found"),
    ("ADD_DOCUMENTS", {"index_name": "kb", "filepath": ".", "tier": "lukewarm"}, "invalid_argument"),
    ("ADD_TEXT", {"index_name": "kb", "text": "   "}, "invalid_argument"),
    ("ADD_TEXT", {"index_name": "kb", "text": "x", "chunk_size": "big"}, "invalid_argument"),
    ("ADD_TEXT", {"index_name": "kb", "text": "x", "metadata": [1]}, "invalid_argument"),
    ("DELETE_DOCUMENT", {"index_name": "kb", "filepath": "missing.txt"}, "not_found"),
    ("RENAME_DOCUMENT", {"index_name": "kb", "filepath": "a.txt", "new_filename": "b.txt"}, "conflict"),
    (
        "RENAME_DOCUMENT",
        {"index_name": "kb", "filepath": "a.txt", "new_filename": "../x.txt"},
        "invalid_argument",
    ),
    ("CREATE_INDEX", {"index_name": "kb"}, "conflict"),
    ("RENAME_INDEX", {"index_name": "nope", "new_index_name": "n2"}, "not_found"),
    ("DELETE_INDEX", {"index_name": "nope"}, "not_found"),
    ("RECHUNK", {"index_name": "kb", "chunk_size": "x"}, "invalid_argument"),
]


def _jobs(ws: Workspace) -> int:
    return int(ws.ctx.catalog.conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])


def _seed(ws: Workspace) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    ok(ws.document_index("ADD_TEXT", index_name="kb", text="alpha", filepath="a.txt"))
    ok(ws.document_index("ADD_TEXT", index_name="kb", text="beta", filepath="b.txt"))


def test_refused_calls_leave_no_job_library_and_promoted(ws: Workspace) -> None:
    from helpers import fails

    _seed(ws)
    before = _jobs(ws)
    for action, params, code in REFUSED:
        fails(ws.document_index(action, **params), code)
        fails(ws.promoted("document_index", action=action, **params), code)  # the MCP/HTTP path
        assert _jobs(ws) == before, (action, params)
    fails(ws.reindex(index_name="nope"), "not_found")
    fails(ws.promoted("reindex", index_name="nope"), "not_found")
    fails(ws.reembed("nope"), "not_found")
    assert _jobs(ws) == before
    assert ws.ctx.catalog.conn.execute("SELECT COUNT(*) FROM jobs WHERE state = 'failed'").fetchone()[0] == 0


def test_refused_calls_leave_no_job_http_and_mcp(home: Path) -> None:
    import anyio
    from fastapi.testclient import TestClient
    from mcp import Client

    from gitkb.core.config import load_settings
    from gitkb.http import create_app
    from gitkb.mcp import build_server
    from helpers import error_code

    home.mkdir(parents=True, exist_ok=True)
    (home / "gitkb.toml").write_text("")
    settings = load_settings(home, embedding_provider="hashing", embedding_model="hashing-384")
    with TestClient(create_app(settings), client=("127.0.0.1", 50000)) as c:
        ws = c.app.state.gitkb.workspace  # type: ignore[attr-defined]
        _seed(ws)
        before = _jobs(ws)
        r = c.post("/indexes/nope/texts", json={"text": "x"})
        assert r.status_code == 404 and error_code(r) == "not_found"
        r = c.post("/indexes/kb/texts", json={"text": "x", "tier": "lukewarm"})
        assert r.status_code in (400, 422), r.text
        r = c.post("/reindex", json={"index_name": "nope"})
        assert r.status_code == 404 and error_code(r) == "not_found", r.text
        r = c.delete("/indexes/kb/documents", params={"filepath": "missing.txt"})
        assert r.status_code in (404, 405), r.text
        assert _jobs(ws) == before

        async def call(tool: str, args: dict[str, Any]) -> bool:
            async with Client(build_server(ws, None)) as client:
                return bool((await client.call_tool(tool, args)).is_error)

        for action, params, _code in REFUSED:
            assert anyio.run(call, "document_index", {"action": action, **params}), (action, params)
        assert anyio.run(call, "reindex", {"index_name": "nope"})
        assert _jobs(ws) == before


def test_cli_build_after_a_no_wait_add_counts_the_background_work(home: Path, tmp_path: Path) -> None:
    """The issue's case: `gitkb embeddings build` opens the workspace, which starts the background
    embedder on the pending chunks; the build waits for it and must count that work (it said 0)."""
    import sqlite3

    from gitkb.cli.main import cli

    d = tmp_path / "many"
    d.mkdir()
    for i in range(300):
        (d / f"f{i:03}.md").write_text(
            f"# File {i}\n\nFile {i} explains step {i} of the deploy, then step {i + 1}.\n"
        )
    env = {
        "GITKB_HOME": str(home),
        "GITKB_EMBEDDING_PROVIDER": "hashing",
        "GITKB_EMBEDDING_MODEL": "hashing-384",
    }
    runner = CliRunner()
    assert runner.invoke(cli, ["index", "create", "kb"], env=env).exit_code == 0
    # The add runs in a process of its own, killed right after the background embedder's first batch
    # (if it gets that far before the add returns): work is left pending however fast the machine
    # is (a fast embedder finished all 300 before the add returned, leaving this test nothing to check).
    add = subprocess.run(
        [sys.executable, "-m", "gitkb.cli.main", "add", "kb", str(d), "--no-wait"],
        env={**os.environ, **env, "GITKB_CRASH_AT": "vectors.after_upsert:1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert add.returncode in (0, -9), add.stderr

    def embedded_so_far() -> int:  # from the embedding events every run records, whoever ran it
        with sqlite3.connect(home / "catalog.sqlite3") as conn:
            rows = conn.execute("SELECT data FROM events WHERE kind = 'embedding'").fetchall()
        return sum(json.loads(r[0]).get("embedded", 0) for r in rows)

    before = embedded_so_far()
    res = runner.invoke(cli, ["embeddings", "build"], env=env)
    assert res.exit_code == 0, res.output
    done_by_this_call = embedded_so_far() - before
    with Workspace(home) as w:
        assert _stored(w) == 300
    assert done_by_this_call > 0, before  # the add left work pending
    assert res.output.startswith(f"{done_by_this_call} chunk(s) embedded, 0 reused"), (res.output, before)
