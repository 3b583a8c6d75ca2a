"""The services' shared state: settings and opened stores of one workspace.

Built once by an entry point (``Workspace``, the server) and passed to every
service function. Heavy stores (vectors, embedder) open lazily.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from gitkb.core.config import Settings
from gitkb.core.files import private_dirs
from gitkb.core.meters import Meters
from gitkb.stores.catalog import Catalog
from gitkb.stores.keywords import KeywordIndex
from gitkb.stores.lease import WriterLease

WRITER_LOCK_FILE = "writer.lock"


class EmbeddingWorkerLike(Protocol):
    """What the services need of the background embedder."""

    def kick(self) -> None: ...

    def close(self) -> None: ...

    def as_dict(self) -> dict[str, Any]: ...


class Context:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        private_dirs(settings.home)  # 0700 when gitkb creates it (gitkb.core.files)
        self.catalog = Catalog(settings.catalog_path)
        self.keywords = KeywordIndex(settings.keywords_path)
        # Serialises index writes inside this process (the cross-process writer
        # lease is held by whoever runs jobs; see services.jobs).
        self.write_lock = threading.RLock()
        self.keyword_lock = threading.Lock()
        self.extras: dict[str, Any] = {}
        self.meters = Meters()  # this process's counters and latencies (GET /metrics renders them)
        self._lazy_lock = threading.RLock()
        # The cross-process writer lease (services.writer.become_writer takes it).
        self.lease = WriterLease(settings.home / WRITER_LOCK_FILE)
        self.writer: Any = None  # services.writer.WriterThread while we hold the lease
        # Takes the writer lease when it is free (set by the composition root; a job waiter calls it
        # when the holder went away). Returns whether this process now holds it.
        self.take_lease: Callable[[], bool] = lambda: False
        self.make_embedding_worker: Callable[[Context], EmbeddingWorkerLike] | None = None

    @property
    def is_writer(self) -> bool:
        return bool(self.lease.held)

    def notify_writer(self) -> None:
        if self.writer is not None:
            self.writer.notify()

    @property
    def vectors(self) -> Any:
        """The vector store (``gitkb.stores.vectors.VectorStore``), opened on first use."""
        with self._lazy_lock:
            store = self.extras.get("vectors")
            if store is None:
                from gitkb.stores.vectors import VectorStore

                s = self.settings
                if s.chroma_host:
                    store = VectorStore.open_http(s.chroma_host, s.chroma_port or 8000, s.chroma_headers)
                else:
                    store = VectorStore.open_persistent(s.vectors_path)
                self.extras["vectors"] = store
            return store

    @property
    def embedding_worker(self) -> EmbeddingWorkerLike:
        """This process's background embedder, built on first use by the factory the composition root
        handed in (``Workspace`` gives ``services.embedding_worker.EmbeddingWorker``); its thread starts
        on ``kick()``."""
        with self._lazy_lock:
            worker = self.extras.get("embedding_worker")
            if worker is None:
                if self.make_embedding_worker is None:
                    raise RuntimeError(
                        "no embedding worker factory: the composition root sets ctx.make_embedding_worker"
                    )
                worker = self.extras["embedding_worker"] = self.make_embedding_worker(self)
            return worker

    def close(self) -> None:
        if self.writer is not None:  # first: a job it runs may hold the catch-up lock the embedder waits for
            self.writer.request_stop()
        worker = self.extras.pop("embedding_worker", None)
        if worker is not None:  # before the stores it writes to
            worker.close()
        if self.writer is not None:
            self.writer.stop()
            self.writer = None
        for v in list(self.extras.values()):
            close = getattr(v, "close", None)
            if callable(close):
                close()
        self.extras.clear()
        self.keywords.close()
        self.catalog.close()
        self.lease.release()
