"""A library script that never calls ``close()`` exits cleanly, even while the background embedder
is computing: the embedder's native thread pool used to abort the process at interpreter teardown
("terminate called without an active exception", exit 134). Only the real model reproduces it (the
hashing embedder has no native threads), so this runs the real one."""

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


@pytest.mark.slow
def test_a_script_that_never_closes_its_workspace_exits_0_ten_times(tmp_path: Path) -> None:
    corpus = tmp_path / "docs"
    corpus.mkdir()
    for i in range(120):
        body = " ".join(
            f"Step {j} of runbook {i}: promote the replica, then reload the pooler." for j in range(40)
        )
        (corpus / f"r{i:03}.md").write_text(f"# Runbook {i}\n\n{body}\n")
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
    assert codes == [0] * 10, (codes, tails)
