"""Chunk a big ingest on the second core while the writer writes the previous batch.

Chunking (tokenizer counts, sentence packing) is most of an ingest's CPU and
holds the GIL, so a thread doesn't help: one worker process does it, spawned
only for ingests of at least ``PARALLEL_MIN_FILES`` files (its start-up costs
about half a second). Small ingests chunk in-process, as before.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor

from gitkb.core.chunking import chunk_many
from gitkb.core.models import ChunkConfig, ChunkSpan

PARALLEL_MIN_FILES = 400
Items = Sequence[tuple[str, ChunkConfig, bool]]


class ChunkPipeline:
    def __init__(self, parallel: bool) -> None:
        self._pool: ProcessPoolExecutor | None = None
        if parallel:
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))

    def submit(self, items: Items) -> Callable[[], list[list[ChunkSpan]]]:
        """Start chunking ``items``; call the returned function for the result."""
        if not items:
            return list
        if self._pool is None:
            done = chunk_many(list(items))
            return lambda: done
        future = self._pool.submit(chunk_many, list(items))
        return future.result

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> ChunkPipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
