"""Three API servers with three homes (no shared files), one catalog (SQLite or PostgreSQL), one Chroma server: an ingest
through one is keyword-searchable through the others within 2 s; kill -9 the writer during an ingest of
a few hundred files: another node takes the lease and completes it, nothing lost or doubled (documents =
files; each node's keyword index and the vectors agree with the catalog); 8 clients of hybrid search on
the other nodes meanwhile see 0 errors."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from helpers import wait_until
from helpers.nodes import ServeNode as Node
from helpers.nodes import finished, keyword_paths, three_nodes, wait_caught_up
from test_http_multinode import chroma as chroma  # the Chroma server fixture

FILES = 700


@pytest.fixture
def cluster(
    tmp_path: Path, chroma: tuple[str, int], catalog_backend: str, request: pytest.FixtureRequest
) -> Iterator[tuple[list[Node], Path]]:
    """Three nodes; node a (the writer) is SIGKILLed at the crash point ``request.param`` names. The
    catalog is a SQLite file outside every home, or a fresh PostgreSQL database (both in CI)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(FILES):
        body = "\n\n".join(f"Paragraph {j} of file {i}: the runbook word{i} and drill{j}." for j in range(20))
        (docs / f"f{i:03}.md").write_text(f"# File {i}\n\n{body}\n")
    with three_nodes(
        tmp_path, chroma, catalog_backend, allowed_root=docs, crash_at=str(request.param)
    ) as nodes:
        yield nodes, docs


# The writer kills itself with SIGKILL (``GITKB_CRASH_AT``, core/faults.py) after its 2nd of 3 batch
# writes (mid-way), or after the 3rd (every document in, the job still running: the rerun writes nothing
# new, and the vectors the dead writer had not embedded must still catch up on the new writer).
@pytest.mark.parametrize(
    "cluster",
    ["ingest.after_write:2", "ingest.after_write:3"],
    ids=["mid-way", "after-the-last-batch"],
    indirect=True,
)
def test_three_nodes_one_catalog_kill_9_the_writer_during_an_ingest(cluster: tuple[list[Node], Path]) -> None:
    (a, b, c), docs = cluster
    assert a.writer() and not b.writer() and not c.writer()
    finished(b, b.post("/indexes", {"index_name": "kb"}).json())  # run by a
    finished(a, a.post("/indexes/kb/texts", {"text": "The aurora drill.", "filepath": "aurora.md"}).json())
    t0 = time.monotonic()
    for n in (b, c):
        wait_until(
            lambda n=n: keyword_paths(n, "aurora") == ["aurora.md"], timeout=2, interval=0.05, what="it"
        )
    seen_in = time.monotonic() - t0
    assert seen_in <= 2, seen_in
    print(f"an ingest through a was keyword-searchable through b and c after {seen_in:.2f} s")

    errors: list[str] = []
    stop = threading.Event()
    counts = [0]

    def client(k: int) -> None:
        n = (b, c)[k % 2]
        with httpx.Client(timeout=60) as http:
            while not stop.is_set():
                r = http.post(n.url + "/search", json={"query": f"runbook word{k}", "index_name": "kb"})
                if r.status_code != 200 or r.json().get("Success") is not True:
                    errors.append(f"{n.url}: {r.status_code} {r.text[:200]}")
                counts[0] += 1

    clients = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in clients:
        t.start()
    try:
        job = a.post("/indexes/kb/documents", {"filepath": str(docs)}).json()
        assert job.get("status") == "working", job

        assert a.proc.wait(120) == -signal.SIGKILL  # killed -9 at its crash point, mid-job
        at_kill = b.get("/indexes/kb/documents?count=1").json()["total_count"]
        assert b.get(f"/jobs/{job['job_id']}").json()["status"] in ("running", "queued")
        result = finished(b, job)
        print(f"the writer was killed with {at_kill} of {FILES + 1} documents in")
        assert result.get("Success", True) is not False
        assert b.writer() or c.writer()
        # nothing lost or doubled: documents = files (+ the text); every node and the vectors agree
        docs_listed = b.get("/indexes/kb/documents?count=1").json()
        assert docs_listed["total_count"] == FILES + 1, docs_listed
        for n in (b, c):
            wait_caught_up(n)
            v = n.post("/verify", {}).json()
            assert v["clean"], (n.url, v)
            assert keyword_paths(n, "word699")[:1] == ["docs/f699.md"]
    finally:
        stop.set()
        for t in clients:
            t.join(60)
    assert errors == [], errors[:5]
    assert counts[0] > 0
    print(f"{counts[0]} hybrid searches by 8 clients on b and c during the ingest and the takeover: 0 errors")
