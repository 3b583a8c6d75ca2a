"""Crash safety: SIGKILL an ingest at several points, restart, let the writer
catch up, and check that nothing was lost or duplicated and that the catalog,
the keyword index and the vectors agree.

The crash points are ``gitkb.core.faults.crash_point`` calls, armed only by
``GITKB_CRASH_AT`` in the child process.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from gitkb import Workspace
from helpers import wait_until

CHILD = """
import sys
from gitkb import Workspace
home, corpus = sys.argv[1], sys.argv[2]
with Workspace(home, embedding_provider="hashing") as ws:
    ws.document_index("CREATE_INDEX", index_name="kb")
    r = ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=corpus)
    print(r.get("Message"))
    print(ws.build_embeddings())
"""

POINTS = [
    "ingest.chunked:2",  # during chunking of the second batch
    "ingest.after_write:1",  # after the first catalog commit, before the keyword apply
    "ingest.after_write:2",  # batch 1 fed to tantivy but not committed, batch 2 in the catalog
    "keywords.after_commit:1",  # tantivy committed, watermark not yet stored
    "vectors.after_upsert:3",  # during embedding: some vectors stored, watermark not yet
]


def make_corpus(root: Path, n: int) -> Path:
    d = root / "corpus"
    for i in range(n):
        sub = d / f"section{i % 7}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"page{i:04}.md").write_text(
            f"# Page {i}\n\n"
            + " ".join(f"Sentence {j} of page {i} mentions topic{i % 13}." for j in range(40))
            + "\n"
        )
    return d


def wait_caught_up(ws: Workspace, timeout: float = 120) -> dict[str, Any]:
    def caught_up() -> dict[str, Any] | None:
        st = ws.get_index_status()
        assert st["Success"], st
        return st if st["caught_up"] else None

    return wait_until(caught_up, timeout=timeout, interval=0.1, what="the index to catch up")


@pytest.mark.usefixtures("catalog_url")  # both backends: GITKB_CATALOG_URL for the child too
@pytest.mark.slow
@pytest.mark.parametrize("point", POINTS)
def test_sigkill_during_ingest_loses_nothing(tmp_path: Path, point: str) -> None:
    n = 300
    corpus = make_corpus(tmp_path, n)
    home = tmp_path / "ws"
    env = {**os.environ, "GITKB_CRASH_AT": point}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(home), str(corpus)], env=env, capture_output=True, timeout=300
    )
    assert proc.returncode == -9, (proc.returncode, proc.stderr.decode()[-2000:])

    with Workspace(home, embedding_provider="hashing") as ws:
        st = wait_caught_up(ws)
        assert st["caught_up"], st
        assert st["status"] == "queryable" and st["dirty_paths"] == 0 and st["dirty_embeddings"] == 0
        conn = ws.ctx.catalog.conn
        paths = [r[0] for r in conn.execute("SELECT path FROM documents")]
        assert len(paths) == n and len(set(paths)) == n
        chunk_count = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        assert ws.ctx.keywords.count() == chunk_count
        identity = ws.embeddings_status()["identity"]
        assert ws.ctx.vectors.count(identity) == chunk_count
        jobs = ws.list_jobs()["Jobs"]
        assert any(j["status"] == "completed" and j["attempts"] >= 2 for j in jobs), jobs
        res = ws.document_index("SEARCH", query="topic7 sentence", index_name="kb", top_n=50)["Results"]
        assert res
        live = {r[0] for r in conn.execute("SELECT id FROM chunks")}
        assert all(r["id"] in live for r in res)


def _resumers(home: Path) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "gitkb.resume" in cmd and str(home) in cmd:
            out.append(p)
    return out


@pytest.mark.slow
def test_status_after_a_crash_answers_while_the_vectors_catch_up_in_the_background(tmp_path: Path) -> None:
    """A `gitkb add` killed while embedding: `gitkb status` answers with the work still pending (it does not
    finish the resumed build first), and the vectors then catch up with no further command."""
    corpus = make_corpus(tmp_path, 1500)
    home = tmp_path / "ws"
    base = {k: v for k, v in os.environ.items() if not k.startswith("GITKB_")}
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(home), str(corpus)],
        env={**base, "GITKB_CRASH_AT": "vectors.after_upsert:3"},
        capture_output=True,
        timeout=300,
    )
    assert child.returncode == -9, child.stderr.decode()[-2000:]

    gitkb = str(Path(sys.executable).parent / "gitkb")
    status = subprocess.Popen(
        [gitkb, "--home", str(home), "--json", "status"],
        env={**base, "GITKB_EMBEDDING_PROVIDER": "hashing"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = status.communicate(timeout=120)
    assert status.returncode == 0, err.decode()[-2000:]
    answer = json.loads(out)
    assert answer["dirty_embeddings"] > 0, answer  # it answered with the resumed work still to do

    def build_job() -> tuple[str, str]:
        con = sqlite3.connect(home / "catalog.sqlite3")
        try:
            return con.execute("SELECT state, runner FROM jobs WHERE kind = 'build_embeddings'").fetchone()
        finally:
            con.close()

    # no gitkb command runs meanwhile
    wait_until(
        lambda: build_job()[0] == "completed", timeout=240, interval=0.2, what="the build job to complete"
    )
    state, runner = build_job()
    assert state == "completed" and runner.split(":")[1] != str(status.pid), (state, runner)
    for p in _resumers(home):  # the background process exits once caught up
        p.wait(timeout=60)
    with Workspace(home, embedding_provider="hashing") as ws:
        st = ws.get_index_status()
        assert st["dirty_embeddings"] == 0 and st["dirty_paths"] == 0 and st["queue_depth"] == 0, st
        chunk_count = ws.ctx.catalog.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        assert ws.ctx.vectors.count(ws.embeddings_status()["identity"]) == chunk_count
