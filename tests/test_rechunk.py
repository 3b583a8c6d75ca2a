"""RECHUNK: a temporary index swapped in atomically, conflicts for writes during the rebuild,
vectors reused for unchanged texts, failures and a SIGKILL leave the original index intact."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gitkb import Workspace
from helpers import fails, ok, wait_until
from helpers.catalog import rows as catalog_rows
from helpers.catalog import url_for as catalog_url_for

REPO = Path(__file__).resolve().parents[1]


def catalog(home: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    return catalog_rows(home, sql, *args)


def chunk_rows(home: Path, index: str) -> list[tuple[Any, ...]]:
    return catalog(
        home,
        "SELECT d.path, c.id, c.text FROM chunks c JOIN documents d ON d.rowid = c.document_rowid"
        " JOIN indexes i ON i.id = c.index_id WHERE i.name = ? ORDER BY d.path, c.ordinal",
        index,
    )


LONG = "\n\n".join(
    f"Paragraph {i}. The failover runbook step {i} says to promote the replica and reload the pooler."
    for i in range(40)
)


@pytest.fixture
def w(make_ws: Callable[..., Workspace], kb_copy: Path) -> Workspace:
    ws = make_ws(embedding_model="h1")
    ok(ws.document_index("CREATE_INDEX", index_name="kb", chunk_size=400, chunk_overlap=40))
    ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    ok(
        ws.document_index(
            "ADD_TEXT", index_name="kb", text=LONG, filepath="notes/long.txt", metadata={"title": "Long"}
        )
    )
    # one chunk under both chunkings (the sidecars, no longer documents, used to be these)
    ok(
        ws.document_index(
            "ADD_TEXT", index_name="kb", text="On-call hands over at 09:00 UTC.", filepath="notes/short.txt"
        )
    )
    ok(ws.build_embeddings())
    return ws


def test_rechunk_swaps_in_new_chunking_keeping_ids_and_reusing_vectors(w: Workspace, tmp_path: Path) -> None:
    home = tmp_path / "ws"
    w.ctx.embedding_worker.close()  # build_embeddings below does the vectors' work, so it can count it
    before = chunk_rows(home, "kb")
    docs_before = ok(w.document_index("LIST_DOCUMENTS", index_name="kb"))["Documents"]
    index_id = ok(w.document_index("LIST_INDICES"))["IndexDetails"]["kb"]["index_id"]
    r = ok(w.document_index("RECHUNK", index_name="kb", chunk_size=60, chunk_overlap=10))
    assert r["docs_rechunked"] == len(docs_before) == 8  # 6 pages + 2 notes (sidecars are not documents)
    assert r["chunks_before"] == len(before) and r["chunks_after"] > r["chunks_before"]
    assert r["chunk_config"] == {"chunk_strategy": "sentence", "chunk_size": 60, "chunk_overlap": 10}
    assert r["temporary_index"].startswith(".rechunk.") and r["Warnings"] == []
    # searchable by keyword at once, same index id, same documents (ids, paths, created_at)
    hit = ok(w.document_index("SEARCH", query="promote the replica step 39", mode="keyword"))["Results"][0]
    assert hit["filepath"] == "notes/long.txt" and hit["index_id"] == index_id
    file_level = ("chunks", "chunk_count")  # the chunks did change; the documents did not
    assert [
        {k: v for k, v in d.items() if k not in file_level}
        for d in ok(w.document_index("LIST_DOCUMENTS", index_name="kb"))["Documents"]
    ] == [{**{k: v for k, v in d.items() if k not in file_level}, "updated_at": ANY} for d in docs_before]
    stats = ok(w.document_index("GET_INDICES_STATS"))["Stats"]["kb"]
    assert stats["chunk_config"] == {"chunk_size": 60, "chunk_overlap": 10, "chunk_strategy": "sentence"}
    after = chunk_rows(home, "kb")
    assert len(after) == r["chunks_after"]
    assert catalog(home, "SELECT COUNT(*) FROM indexes WHERE hidden = 1") == [(0,)]
    assert catalog(home, "SELECT COUNT(*) FROM index_rebuilds") == [(0,)]
    # unchanged chunk texts keep their chunk ids, and their vectors are reused, not re-embedded
    kept = {cid for _, cid, _ in before} & {cid for _, cid, _ in after}
    assert kept
    built = ok(w.build_embeddings())
    new_texts = {t for _, _, t in after} - {t for _, _, t in before}
    assert built["chunks_embedded"] == len(new_texts) and built["chunks_reused"] >= len(kept)
    st = ok(w.embeddings_status())
    assert st["collections"][0]["count"] == st["chunk_count"] == len(after)  # old chunks' vectors removed
    sem = ok(w.document_index("SEARCH", query="promote the replica step 39", mode="semantic"))
    assert sem["Results"][0]["filepath"] == "notes/long.txt"
    # ADD_TEXT documents are re-chunked from their stored text: exact, nothing approximated
    doc = ok(
        w.document_index(
            "GET_DOCUMENT", index_name="kb", filepath="notes/long.txt", pagination_mode="chars", count=10**6
        )
    )
    assert doc["Content"] == LONG


class _Any:
    def __eq__(self, other: object) -> bool:
        return True


ANY = _Any()


def test_rechunk_defaults_and_bad_input(w: Workspace, tmp_path: Path) -> None:
    home = tmp_path / "ws"
    r = ok(w.document_index("RECHUNK", index_name="kb"))  # the index's defaults
    assert r["chunk_config"] == {"chunk_strategy": "sentence", "chunk_size": 400, "chunk_overlap": 40}
    before = chunk_rows(home, "kb")
    fails(w.document_index("RECHUNK", index_name="nope"), "not_found")
    fails(w.document_index("RECHUNK", index_name="kb", chunk_size=50, chunk_overlap=50), "invalid_argument")
    fails(w.document_index("RECHUNK", index_name="kb", chunk_size="big"), "invalid_argument")
    fails(w.document_index("RECHUNK", index_name="kb", chunk_strategy="paragraph"), "invalid_argument")
    fails(w.document_index("RECHUNK"), "invalid_argument")
    assert chunk_rows(home, "kb") == before
    assert catalog(home, "SELECT COUNT(*) FROM indexes") == [(1,)]


def test_writes_during_rebuild_get_conflict(w: Workspace, tmp_path: Path) -> None:
    entered, release = threading.Event(), threading.Event()
    result: dict[str, Any] = {}

    def progress(done: int, total: int, *_: Any) -> None:
        entered.set()
        assert release.wait(30)

    t = threading.Thread(
        target=lambda: result.update(
            w.document_index("RECHUNK", index_name="kb", chunk_size=80, chunk_overlap=8, progress=progress)
        )
    )
    t.start()
    try:
        assert entered.wait(30)
        for action, params in (
            ("ADD_TEXT", {"text": "written during the rebuild", "filepath": "late.txt"}),
            ("DELETE_DOCUMENT", {"filepath": "notes/long.txt"}),
            ("RENAME_DOCUMENT", {"filepath": "notes/long.txt", "new_filename": "l.txt"}),
            ("RENAME_INDEX", {"new_index_name": "kb2"}),
            ("DELETE_INDEX", {}),
            ("RECHUNK", {"chunk_size": 100}),
        ):
            r = fails(w.document_index(action, index_name="kb", **params), "conflict")
            assert "rebuil" in r["Error"]
        # reads go on: the original index answers while it is rebuilt
        assert ok(w.document_index("SEARCH", query="password manager", mode="keyword"))["Results"]
        assert ok(w.document_index("LIST_INDICES"))["Indices"] == ["kb"]
    finally:
        release.set()
        t.join(60)
    assert result["Success"] is True, result
    ok(w.document_index("ADD_TEXT", index_name="kb", text="written after the rebuild", filepath="late.txt"))
    assert "late.txt" in [
        d["path"] for d in ok(w.document_index("LIST_DOCUMENTS", index_name="kb"))["Documents"]
    ]


def test_failed_rebuild_leaves_index_untouched(
    w: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitkb.core.errors import StoreUnavailable
    from gitkb.services.indexing import rechunk

    home = tmp_path / "ws"
    before = chunk_rows(home, "kb")
    calls = {"n": 0}
    real = rechunk.chunk_many

    def flaky(items: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:  # the second batch of documents
            raise StoreUnavailable("disk went away")
        return real(items)

    monkeypatch.setattr(rechunk, "BATCH", 3)
    monkeypatch.setattr(rechunk, "chunk_many", flaky)
    r = fails(
        w.document_index("RECHUNK", index_name="kb", chunk_size=60, chunk_overlap=10), "store_unavailable"
    )
    assert "unchanged" in r["Error"] and r["temporary_index"].startswith(".rechunk.")
    assert chunk_rows(home, "kb") == before
    assert catalog(home, "SELECT COUNT(*) FROM indexes WHERE hidden = 1") == [(0,)]
    assert catalog(home, "SELECT COUNT(*) FROM index_rebuilds") == [(0,)]
    assert ok(w.document_index("SEARCH", query="promote the replica", mode="keyword"))["Results"]
    ok(w.document_index("ADD_TEXT", index_name="kb", text="still writable", filepath="w.txt"))


def test_a_swap_failing_after_the_keyword_switch_gives_the_index_its_keywords_back(
    w: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitkb.core.errors import StoreUnavailable
    from gitkb.services.indexing import rechunk

    home = tmp_path / "ws"
    before = chunk_rows(home, "kb")
    query = {"query": "promote the replica step 39", "mode": "keyword"}
    hit = ok(w.document_index("SEARCH", **query))["Results"][0]

    def broken(*_a: Any) -> None:
        raise StoreUnavailable("disk went away")

    monkeypatch.setattr(rechunk, "_swap", broken)  # after switch_keywords, before the catalog swap
    fails(w.document_index("RECHUNK", index_name="kb", chunk_size=60, chunk_overlap=10), "store_unavailable")
    assert chunk_rows(home, "kb") == before
    index_id = ok(w.document_index("LIST_INDICES"))["IndexDetails"]["kb"]["index_id"]
    assert w.ctx.keywords.count([index_id]) == len(before)  # the old chunks, and only they, are back
    again = ok(w.document_index("SEARCH", **query))["Results"][0]
    assert (again["id"], again["filepath"]) == (hit["id"], hit["filepath"])


CHILD = textwrap.dedent(
    """
    import sys
    from gitkb import Workspace
    from gitkb.services.indexing import rechunk
    rechunk.BATCH = 2
    ws = Workspace(sys.argv[1], embedding_provider="hashing", embedding_model="h1")
    print("start", flush=True)
    ws.document_index("RECHUNK", index_name="kb", chunk_size=60, chunk_overlap=10)
    print("finished", flush=True)
    """
)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "point",
    [
        "rechunk.batch:2",  # SIGKILL after the second batch of re-chunked documents
        "rechunk.after_keywords",  # after the keyword index switched to the new chunks, before the swap
    ],
)
def test_sigkill_mid_rechunk_leaves_original_index_intact(w: Workspace, tmp_path: Path, point: str) -> None:
    home = tmp_path / "ws"
    before = chunk_rows(home, "kb")
    w.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITKB_")}
    env["GITKB_CRASH_AT"] = point
    if url := catalog_url_for(home):  # the child opens the same catalog (PostgreSQL in the both-backend run)
        env["GITKB_CATALOG_URL"] = url
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(home)],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        cwd=REPO,
    )
    assert proc.returncode == -9, proc.stderr
    assert "finished" not in proc.stdout
    # right after the crash: the original is intact, a half-built temporary index and the marker remain
    assert chunk_rows(home, "kb") == before
    assert catalog(home, "SELECT COUNT(*) FROM indexes WHERE hidden = 1") == [(1,)]
    assert catalog(home, "SELECT COUNT(*) FROM index_rebuilds") == [(1,)]
    ws = Workspace(home, embedding_provider="hashing", embedding_model="h1")
    try:
        wait_until(  # the writer may rerun the interrupted RECHUNK job
            lambda: not any(j["status"] in ("queued", "running") for j in ok(ws.list_jobs())["Jobs"]),
            timeout=60,
            interval=0.1,
            what="no job queued or running",
        )
        docs = ok(ws.document_index("LIST_DOCUMENTS", index_name="kb"))
        assert docs["TotalCount"] == 8  # 6 pages + 2 notes
        texts_now = "".join(t for _, _, t in chunk_rows(home, "kb"))
        for path in {p for p, _, _ in before}:
            assert path in [d["path"] for d in docs["Documents"]]
        assert "Paragraph 39." in texts_now
        hit = ok(ws.document_index("SEARCH", query="promote the replica step 39", mode="keyword"))["Results"][
            0
        ]
        assert hit["filepath"] == "notes/long.txt"
        ok(
            ws.document_index(
                "ADD_TEXT", index_name="kb", text="writable after the crash", filepath="after.txt"
            )
        )
        assert catalog(home, "SELECT COUNT(*) FROM indexes WHERE hidden = 1") == [(0,)]
        assert catalog(home, "SELECT COUNT(*) FROM index_rebuilds") == [(0,)]
        ok(ws.build_embeddings())
        sem = ok(ws.document_index("SEARCH", query="promote the replica step 39", mode="semantic"))
        assert sem["Results"][0]["filepath"] == "notes/long.txt"
        again = ok(ws.document_index("RECHUNK", index_name="kb", chunk_size=60, chunk_overlap=10))
        assert again["docs_rechunked"] == 9
    finally:
        ws.close()


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_search_never_comes_back_empty_during_a_rechunk(tmp_path: Path, mode: str) -> None:
    """A reader loop during a RECHUNK of a few hundred documents: a query that matches before and after
    matches all along (the keyword index switches generations in one commit, before the catalog swap)."""
    docs = tmp_path / "many"
    docs.mkdir()
    for i in range(300):
        body = " ".join(
            f"Step {j} of runbook {i} says to promote the replica and reload the pooler." for j in range(30)
        )
        (docs / f"r{i:03}.md").write_text(f"# Runbook {i}\n\n{body}\n")
    with Workspace(tmp_path / "ws", embedding_provider="hashing", embedding_model="h1") as ws:
        ok(ws.document_index("CREATE_INDEX", index_name="kb", chunk_size=400, chunk_overlap=40))
        ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(docs)))
        query = {"query": "promote the replica", "index_name": "kb", "mode": mode}
        assert ok(ws.document_index("SEARCH", **query))["count"] > 0
        done = threading.Event()
        out: dict[str, Any] = {}

        def rechunk() -> None:
            try:
                out["r"] = ws.document_index("RECHUNK", index_name="kb", chunk_size=80, chunk_overlap=10)
            finally:
                done.set()

        t = threading.Thread(target=rechunk)
        t.start()
        answers = []
        while not done.is_set():
            answers.append(ok(ws.document_index("SEARCH", **query))["count"])
        t.join()
        ok(out["r"])
        assert out["r"]["chunks_after"] > out["r"]["chunks_before"]
        assert ok(ws.document_index("SEARCH", **query))["count"] > 0
        empty = answers.count(0)
        print(f"{len(answers)} searches during RECHUNK, {empty} empty")
        assert len(answers) > 10 and empty == 0, (len(answers), empty)
