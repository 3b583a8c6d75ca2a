"""What makes a big ingest fast without changing what it writes: the chunking worker sends its
chunks back without their text (the caller cuts it from the documents it holds), and the keyword
feed commits as it goes, so tantivy's serialising does not all wait for the last batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gitkb import Workspace
from gitkb.core.chunking import chunk_many
from gitkb.core.models import ChunkConfig
from gitkb.services.derived import catchup
from gitkb.services.indexing import ingest
from gitkb.services.indexing.chunk_pipeline import ChunkPipeline, chunk_packed
from gitkb.stores.catalog import changes
from gitkb.stores.catalog.documents.write import BULK_CACHE_KIB
from helpers import ok

MARKDOWN = "\n\n".join(
    f"## Section {k}\n\n" + " ".join(f"Sentence {j} of section {k} names topic{j % 7}." for j in range(60))
    for k in range(6)
)
ITEMS = [(f"# Page {i}\n\n{MARKDOWN}\n", ChunkConfig("auto"), True) for i in range(3)] + [
    ("plain text, one chunk.", ChunkConfig("sentence", 16, 4), False),
    ("", ChunkConfig("auto"), False),
]


def test_the_worker_sends_chunks_without_their_text_and_they_come_back_equal() -> None:
    expected = chunk_many(list(ITEMS))
    assert any(len(spans) > 3 and spans[-1].heading_path for spans in expected)  # cut, with headings
    packed = chunk_packed(ITEMS)
    assert all(isinstance(x, int) for rows, _ in packed for row in rows for x in row)  # no text in it
    with ChunkPipeline(parallel=True) as pipe:  # a real spawned worker
        assert pipe.submit(ITEMS)() == expected


def test_a_big_ingest_commits_the_keyword_index_as_it_goes(
    ws: Workspace, kb_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``FEED_COMMIT_EVERY`` fed entries the feed starts a commit on a thread of its own and
    the next feed moves the watermark to what it made durable: the chunks written before the last
    batch are searchable before the ingest returns (the writer never waits for a commit right
    after starting it); at the end everything is applied exactly once."""
    monkeypatch.setattr(catchup, "FEED_COMMIT_EVERY", 1)
    monkeypatch.setattr(ingest, "WRITE_BATCH", 2)  # 6 pages: 3 batches
    ok(ws.document_index("CREATE_INDEX", index_name="kb", embeddings=False))
    conn = ws.ctx.catalog.conn
    seen: list[tuple[int, int, int]] = []  # (files done, keyword watermark, keyword entries)

    def progress(done: int, _total: int) -> None:
        seen.append((done, changes.watermark(conn, catchup.KEYWORDS), ws.ctx.keywords.count()))

    r = ingest.add_documents(ws.ctx, "kb", str(kb_copy / "docs"), progress=progress)
    assert r["counts"]["added"] == 6 and [d for d, _, _ in seen] == [2, 4, 6]
    assert seen[0][1] == 0 < seen[1][1] < seen[2][1] and 0 < seen[1][2] < seen[2][2], seen
    chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    assert ws.ctx.keywords.count() == chunks and changes.pending(conn, catchup.KEYWORDS) == 0
    assert ws.ctx.keywords.all_cids() == {int(c): 1 for (c,) in conn.execute("SELECT rowid FROM chunks")}


def test_batch_bounds_cover_every_file_once_with_small_edges() -> None:
    for total in (0, 1, 5, 64, 65, 300, 2757):
        for size, edge in ((256, 32), (256, 256), (4, 1)):
            bounds = ingest.batch_bounds(total, size, edge)
            assert [i for s, e in bounds for i in range(s, e)] == list(range(total))
            assert all(0 < e - s <= size for s, e in bounds)
    awsdocs = ingest.batch_bounds(2757, 256, 32)
    assert awsdocs[0] == (0, 32) and awsdocs[-1] == (2725, 2757) and len(awsdocs) == 13


def test_an_ingest_chunked_by_the_worker_writes_a_small_first_and_last_batch(
    ws: Workspace, kb_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's first batch is chunked while the writer has nothing to write, and the writer's
    last batch is written while the worker has nothing to chunk: both are ``EDGE_BATCH`` files."""
    monkeypatch.setattr(ingest, "PARALLEL_MIN_FILES", 1)
    monkeypatch.setattr(ingest, "WRITE_BATCH", 4)
    monkeypatch.setattr(ingest, "EDGE_BATCH", 1, raising=False)
    ok(ws.document_index("CREATE_INDEX", index_name="kb", embeddings=False))
    seen: list[int] = []
    r = ingest.add_documents(ws.ctx, "kb", str(kb_copy / "docs"), progress=lambda done, _t: seen.append(done))
    assert r["counts"]["added"] == 6 and seen == [1, 5, 6]


def test_a_big_ingest_writes_with_a_bigger_page_cache_and_gives_it_back(
    ws: Workspace, kb_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection writing a big ingest holds ``BULK_CACHE_KIB`` of page cache while it writes,
    and its own size again afterwards, also when the ingest fails midway; a small ingest keeps it."""
    conn = ws.ctx.catalog.conn
    default = conn.execute("PRAGMA cache_size").fetchone()[0]
    ok(ws.document_index("CREATE_INDEX", index_name="kb", embeddings=False))
    sizes: list[int] = []

    def progress(_done: int, _total: int) -> None:
        sizes.append(conn.execute("PRAGMA cache_size").fetchone()[0])

    ingest.add_documents(ws.ctx, "kb", str(kb_copy / "docs"), progress=progress)
    assert sizes and set(sizes) == {default}  # 6 files: not a big ingest
    monkeypatch.setattr(ingest, "PARALLEL_MIN_FILES", 1)
    sizes.clear()
    ok(ws.document_index("CREATE_INDEX", index_name="kb2", embeddings=False))
    ingest.add_documents(ws.ctx, "kb2", str(kb_copy / "docs"), progress=progress)
    assert sizes and set(sizes) == {-BULK_CACHE_KIB} and default != -BULK_CACHE_KIB
    assert conn.execute("PRAGMA cache_size").fetchone()[0] == default

    def fail(_done: int, _total: int) -> None:
        raise RuntimeError("stop")

    ok(ws.document_index("CREATE_INDEX", index_name="kb3", embeddings=False))
    with pytest.raises(RuntimeError):
        ingest.add_documents(ws.ctx, "kb3", str(kb_copy / "docs"), progress=fail)
    assert conn.execute("PRAGMA cache_size").fetchone()[0] == default


def test_the_worker_is_handed_batches_ahead_of_the_one_being_written(
    ws: Workspace, kb_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the writer writes a batch, the worker already holds the next ``CHUNK_AHEAD`` ones, so
    it never waits for the writer to read and submit the next batch; everything is written once,
    in order."""
    monkeypatch.setattr(ingest, "PARALLEL_MIN_FILES", 1)
    monkeypatch.setattr(ingest, "WRITE_BATCH", 1)
    monkeypatch.setattr(ingest, "EDGE_BATCH", 1)
    submitted: list[int] = []
    real = ChunkPipeline.submit

    def counting(self: ChunkPipeline, items: Any) -> Any:
        submitted.append(len(items))
        return real(self, items)

    monkeypatch.setattr(ChunkPipeline, "submit", counting)
    ok(ws.document_index("CREATE_INDEX", index_name="kb", embeddings=False))
    seen: list[tuple[int, int]] = []  # (files written, batches handed to the worker)
    r = ingest.add_documents(
        ws.ctx, "kb", str(kb_copy / "docs"), progress=lambda done, _t: seen.append((done, len(submitted)))
    )
    assert ingest.CHUNK_AHEAD == 4 and r["counts"]["added"] == 6
    assert seen == [(1, 5), (2, 6), (3, 6), (4, 6), (5, 6), (6, 6)]
    conn = ws.ctx.catalog.conn
    assert conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0] == 6


def test_the_keyword_feed_takes_the_texts_the_writer_just_wrote_and_they_equal_the_catalogs(
    ws: Workspace, kb_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ingest's feed reads no chunk text back from the catalog for the chunks its write just made
    (``keyword_rows`` is asked for none of them); every keyword doc it makes so equals the one the
    catalog's rows make, on a first ingest and on a re-ingest that edits, shifts and re-titles
    chunks, and the index ends with exactly the catalog's chunks."""
    monkeypatch.setattr(ingest, "WRITE_BATCH", 2)  # 6 pages: 3 writes, 3 feeds
    read_back: list[Any] = []  # the texts the feed read back from the catalog
    real_rows, real_docs = catchup.keyword_rows, catchup._keyword_docs

    def rows(conn: Any, cids: Any) -> Any:
        got = real_rows(conn, cids)
        read_back.extend(got)
        return got

    compared: list[int] = []

    def docs(conn: Any, cids: list[int], written: Any = None, handed: Any = None) -> Any:
        got = real_docs(conn, cids, written, handed)
        if written is not None:
            n = len(read_back)
            assert got == real_docs(conn, cids)  # what the catalog's rows make
            del read_back[n:]  # that comparison's reads are the test's, not the feed's
            compared.append(len(got))
        return got

    real_new = catchup._new_keyword_docs

    def new_docs(written: Any, fed: int) -> Any:
        got = real_new(written, fed)
        if got is not None:  # made from the write alone: the same as the catalog's rows make
            n = len(read_back)
            assert got == real_docs(conn, [d.cid for d in got])
            del read_back[n:]  # the test's reads
            compared.append(len(got))
        return got

    monkeypatch.setattr(catchup, "keyword_rows", rows)
    monkeypatch.setattr(catchup, "_keyword_docs", docs)
    monkeypatch.setattr(catchup, "_new_keyword_docs", new_docs)
    ok(ws.document_index("CREATE_INDEX", index_name="kb", embeddings=False))
    conn = ws.ctx.catalog.conn
    docs_dir = kb_copy / "docs"
    ingest.add_documents(ws.ctx, "kb", str(docs_dir))
    fed = sum(compared)
    assert fed == conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] > 0
    assert read_back == []
    pages = sorted(p for p in docs_dir.rglob("*.md"))
    for p in pages[::2]:  # a new first section shifts every chunk's ordinal; a new title, heading paths
        p.write_text("# Retitled\n\n## New first part\n\nA new sentence.\n\n" + p.read_text())
    pages[1].write_text(pages[1].read_text().replace("the", "a"))
    read_back.clear()
    compared.clear()
    ingest.add_documents(ws.ctx, "kb", str(docs_dir))
    assert sum(compared) > 0 and read_back == []
    cids = [r[0] for r in conn.execute("SELECT rowid FROM chunks ORDER BY rowid")]
    assert ws.ctx.keywords.count() == len(cids) and changes.pending(conn, catchup.KEYWORDS) == 0


def test_the_keyword_feed_reads_the_catalog_when_something_newer_is_pending(ws: Workspace) -> None:
    """A hand-off is only good for the write it came from: once a later entry is pending (another
    write changed the chunks since), every text comes from the catalog."""
    ok(ws.document_index("CREATE_INDEX", index_name="kb", embeddings=False))
    ok(ws.document_index("ADD_TEXT", index_name="kb", text="alpha beta gamma", filepath="a.md"))
    conn = ws.ctx.catalog.conn
    batch = changes.since(conn, 0, 100)
    cids = sorted({c.cid for c in batch if c.cid is not None})
    ix, doc = conn.execute("SELECT index_id, document_rowid FROM chunks").fetchone()
    stale = catchup.Written(
        0, batch[-1].seq, {doc: catchup.WrittenDocument(ix, None, None, [("old text", ())])}
    )
    assert catchup._handed(batch, stale) == set(cids)  # the write's own entries: its texts
    assert catchup._keyword_docs(conn, cids, stale, set(cids))[0].text == "old text"
    older = catchup.Written(0, batch[-1].seq - 1, stale.docs)
    assert catchup._handed(batch, older) == set()  # something newer is pending: the catalog
    assert [d.text for d in catchup._keyword_docs(conn, cids, older, set())] == ["alpha beta gamma"]
    assert catchup._handed(batch, None) == set()


def test_a_first_ingests_feed_reads_nothing_back_from_the_change_log(
    ws: Workspace, kb_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write of new documents only hands the feed the cids it logged: the feed reads no change-log
    entry and asks the catalog which chunk no cid is, and the index still ends with exactly the
    catalog's chunks, each once, under the titles the catalog's rows make."""
    monkeypatch.setattr(ingest, "WRITE_BATCH", 2)  # 6 pages: 3 writes, 3 feeds
    read: list[int] = []  # change-log entries and chunk keys the feeds read
    real_since, real_keys, real_feed = catchup.changes.since, catchup.keyword_keys, catchup.feed_keywords
    feeding = [False]

    def since(conn: Any, seq: int, limit: int) -> Any:
        got = real_since(conn, seq, limit)
        read.extend([c.seq for c in got] if feeding[0] else [])
        return got

    def keys(conn: Any, cids: Any) -> Any:
        got = real_keys(conn, cids)
        read.extend([k[0] for k in got] if feeding[0] else [])
        return got

    def feed(ctx: Any, written: Any = None) -> None:
        feeding[0] = True
        try:
            real_feed(ctx, written)
        finally:
            feeding[0] = False

    monkeypatch.setattr(catchup.changes, "since", since)
    monkeypatch.setattr(catchup, "keyword_keys", keys)
    monkeypatch.setattr(ingest, "feed_keywords", feed)
    ok(ws.document_index("CREATE_INDEX", index_name="kb", embeddings=False))
    ingest.add_documents(ws.ctx, "kb", str(kb_copy / "docs"))
    conn = ws.ctx.catalog.conn
    assert read == []
    cids = [r[0] for r in conn.execute("SELECT rowid FROM chunks ORDER BY rowid")]
    assert ws.ctx.keywords.all_cids() == {c: 1 for c in cids} and changes.pending(conn, catchup.KEYWORDS) == 0
    assert ws.ctx.keywords.count() == len(cids) > 0
