"""A long-running process keeps its chunking worker (and the worker's word cache) between big
ingests; it ends with the workspace's close(), after an idle while, or when it broke. A CLI
command's workspace starts and ends one per ingest, as before. Real spawned processes."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from gitkb.core import tokenizer
from gitkb.core.chunking import chunk_many
from gitkb.core.models import ChunkConfig
from gitkb.services.indexing import ingest
from gitkb.services.indexing.chunk_pipeline import ChunkPipeline, KeptWorker
from helpers import ok, wait_until

ITEMS = [
    (f"# Page {i}\n\nWords about zanzibarite{i} and more.\n", ChunkConfig("auto"), True) for i in range(4)
]


def _worker(kept: KeptWorker, call: Callable[[], Any]) -> Any:
    """Run ``call`` in the kept worker (lent and given back like an ingest does)."""
    pool = kept.lend()
    assert pool is not None
    try:
        return pool.submit(call).result()
    finally:
        kept.give_back(pool, broken=False)


def _cached_words() -> int:
    return len(tokenizer._word_counts)


def test_a_workspace_keeps_its_chunk_worker_and_its_word_cache_between_big_ingests(
    make_ws: Callable[..., Any], kb_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest, "PARALLEL_MIN_FILES", 1)
    ws = make_ws()
    for name in ("a", "b"):
        ok(ws.document_index("CREATE_INDEX", index_name=name, embeddings=False))
    ok(ws.document_index("ADD_DOCUMENTS", index_name="a", filepath=str(kb_copy / "docs")))
    kept = ws.ctx.caches.chunk_worker
    assert isinstance(kept, KeptWorker) and kept.alive
    pid, words = _worker(kept, os.getpid), _worker(kept, _cached_words)
    assert pid != os.getpid() and words > 0  # the first ingest's words are learned in the worker
    r = ok(ws.document_index("ADD_DOCUMENTS", index_name="b", filepath=str(kb_copy / "docs")))
    assert r["counts"]["added"] == 6
    assert _worker(kept, os.getpid) == pid and _worker(kept, _cached_words) == words  # same worker, warm
    a = ok(ws.document_index("SEARCH", index_name="a", query="onboarding"))["Results"]
    b = ok(ws.document_index("SEARCH", index_name="b", query="onboarding"))["Results"]
    assert [h["filepath"] for h in a] == [h["filepath"] for h in b] != []
    ws.close()
    assert not kept.alive
    wait_until(
        lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
        timeout=10.0,
    )


def test_a_cli_workspace_ends_its_chunk_worker_with_each_ingest(
    make_ws: Callable[..., Any], kb_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest, "PARALLEL_MIN_FILES", 1)
    ws = make_ws(resume_in_background=True)  # what gitkb's commands open
    ok(ws.document_index("CREATE_INDEX", index_name="a", embeddings=False))
    ok(ws.document_index("ADD_DOCUMENTS", index_name="a", filepath=str(kb_copy / "docs")))
    assert ws.ctx.caches.chunk_worker is None
    assert _running_workers() == []


def _running_workers() -> list[psutil.Process]:
    """This process's live multiprocessing children (a zombie left by an earlier test of the same
    pytest process, not reaped yet, runs nothing and has no command line to read)."""
    out = []
    for p in psutil.Process().children():
        try:
            if p.status() != psutil.STATUS_ZOMBIE and "spawn_main" in " ".join(p.cmdline()):
                out.append(p)
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            continue
    return out


def test_a_kept_worker_ends_when_idle_and_a_broken_one_is_not_kept() -> None:
    kept = KeptWorker(idle_seconds=0.3)
    with ChunkPipeline(True, kept) as pipe:
        assert pipe.submit(ITEMS)() == chunk_many(list(ITEMS))
        assert kept.lend() is None  # lent to one pipeline at a time
    assert kept.alive
    wait_until(lambda: not kept.alive, timeout=10.0)
    with ChunkPipeline(True, kept) as pipe:  # a new one for the next ingest
        assert pipe.submit(ITEMS)() == chunk_many(list(ITEMS))
        pid = _pid_of(pipe)
        psutil.Process(pid).kill()
        wait_until(
            lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
            timeout=10.0,
        )
        assert pipe.submit(ITEMS)() == chunk_many(list(ITEMS))  # chunked here instead
    assert not kept.alive
    kept.close()
    with ChunkPipeline(True, kept) as pipe:  # closed: a pipeline of its own, as before
        assert pipe.submit(ITEMS)() == chunk_many(list(ITEMS))
    assert not kept.alive


def _pid_of(pipe: ChunkPipeline) -> int:
    pool = pipe._pool
    assert pool is not None
    return int(pool.submit(os.getpid).result())


@pytest.mark.parametrize("kept", [False, True], ids=["own-worker", "kept-worker"])
def test_a_worker_that_cannot_start_leaves_the_chunking_to_this_process(
    kept: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's queues need multiprocessing's resource tracker; when it is gone (a node of the
    three-node test met ``BrokenPipeError`` there after a takeover) the ingest still chunks, in-process,
    with the same spans, instead of failing the job. The failure is the stdlib's own call failing."""
    from multiprocessing import resource_tracker  # the stdlib call that failed in CI

    def broken(*_a: object, **_k: object) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(resource_tracker._resource_tracker, "_send", broken)
    worker = KeptWorker() if kept else None
    with ChunkPipeline(True, worker) as pipeline:
        got = pipeline.submit(ITEMS)()
    assert got == chunk_many(ITEMS)
    if worker is not None:
        assert not worker.alive
        worker.close()
