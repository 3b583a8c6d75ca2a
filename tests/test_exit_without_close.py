"""A library script that never calls ``close()`` exits cleanly, even while the background embedder
is computing: the embedder's native thread pool used to abort the process at interpreter teardown
("terminate called without an active exception", exit 134). Only the real model reproduces it (the
hashing embedder has no native threads), so this runs the real one.

Cheap on purpose (it used to take 60-90 s at load 10 and could reach its timeout on a busier machine):
one short chunk per document, so the model's batches (64 texts) take a fraction of a second instead of
seconds each, while 400 chunks still leave several batches computing when the script exits."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys, time
    from gitkb import Workspace
    ws = Workspace(sys.argv[1])  # the default embedder, and no close() anywhere
    ws.document_index("CREATE_INDEX", index_name="kb")
    ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=sys.argv[2])
    print(ws.document_index("SEARCH", query="replica failover", index_name="kb", mode="keyword")["count"])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # exit with the embedder mid-way: some vectors stored, not all
        st = ws.embeddings_status()
        stored = sum(c["count"] for c in st["collections"])
        if 0 < stored < st["chunk_count"]:
            break
        time.sleep(0.05)
    print("busy at exit", 0 < stored < st["chunk_count"], stored, st["chunk_count"], flush=True)
    """
)


REOPEN = textwrap.dedent(
    """
    import sys
    from gitkb import Workspace
    with Workspace(sys.argv[1]) as ws:  # the workspace a script left without close(): it opens
        ws.build_embeddings()
        st = ws.embeddings_status()
        stored = sum(c["count"] for c in st["collections"])
        print("reopened", st["chunk_count"], stored, st["pending_embeddings"], flush=True)
    """
)

DOCS = 400  # one chunk each: more than six model batches


@pytest.mark.slow
def test_a_script_that_never_closes_its_workspace_exits_0_ten_times(tmp_path: Path) -> None:
    corpus = tmp_path / "docs"
    corpus.mkdir()
    for i in range(DOCS):
        (corpus / f"r{i:03}.md").write_text(
            f"# Runbook {i}\n\nStep {i}: promote the replica, then reload the pooler.\n"
        )
    script = tmp_path / "noclose.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITKB_")}
    codes, tails = [], []
    for run in range(10):
        p = subprocess.run(
            [sys.executable, str(script), str(tmp_path / f"ws{run}"), str(corpus)],
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
        )
        codes.append(p.returncode)
        tails.append(p.stdout[-200:] + p.stderr[-300:])
        assert "busy at exit True" in p.stdout, p.stdout + p.stderr  # the embedder was computing
        assert f" {DOCS}\n" in p.stdout, p.stdout  # every document's chunk was written before the exit
        assert "Traceback" not in p.stderr, p.stderr  # the exit stops the embedder, it does not crash it
    assert codes == [0] * 10, (codes, tails)
    # nothing was lost: the last workspace opens again and its embedder finishes every chunk
    reopen = tmp_path / "reopen.py"
    reopen.write_text(REOPEN)
    p = subprocess.run(
        [sys.executable, str(reopen), str(tmp_path / "ws9")],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert p.returncode == 0 and f"reopened {DOCS} {DOCS} 0" in p.stdout, p.stdout + p.stderr
