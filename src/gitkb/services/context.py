"""The services' shared state: settings and opened stores of one workspace.

Built once by an entry point (``Workspace``, the server) and passed to every
service function. Heavy stores (vectors, embedder) open lazily; what the services
keep between calls lives in ``Context.caches`` (``Caches``, one typed field each).
"""

from __future__ import annotations

import contextlib
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from gitkb.core.config import Settings
from gitkb.core.files import private_dirs
from gitkb.core.meters import Meters
from gitkb.stores.catalog import CatalogStore, open_catalog
from gitkb.stores.catalog import jobs as job_rows
from gitkb.stores.keywords import KeywordIndex
from gitkb.stores.lease import LocalGuard
from gitkb.stores.node_lease import WriterLease
from gitkb.stores.node_rows import KEYWORDS_PREFIX, node_id_for

if TYPE_CHECKING:
    from gitkb.core.embedders.base import Embedder
    from gitkb.stores.vectors import VectorStore

WRITER_LOCK_FILE = "writer.lock"
DEFAULT_LEASE_SECONDS = 10.0  # [nodes] lease_seconds: a dead writer's lease passes on within that time


def keywords_mark(settings: Settings, node_id: str) -> str:
    """The name of this node's keyword watermark: ``keywords`` for the home that holds its catalog file
    (one home, as always), ``keywords@<node id>`` for a node sharing a catalog kept elsewhere."""
    own = settings.home / "catalog.sqlite3"
    if settings.catalog_url is None and settings.catalog_path == own:
        return KEYWORDS_PREFIX
    return f"{KEYWORDS_PREFIX}@{node_id}"


class EmbeddingWorkerLike(Protocol):
    """What the services need of the background embedder."""

    last_error: dict[str, Any] | None  # the last failed round's error answer, None after a good one

    def kick(self) -> None: ...

    def close(self) -> None: ...

    def as_dict(self) -> dict[str, Any]: ...


class WriterLike(Protocol):
    """What the services need of the writer thread (``services.runtime.writer.WriterThread``)."""

    recovered: dict[str, list[str]]  # what taking the lease found left over: requeued / failed job ids

    def notify(self) -> None: ...

    def request_stop(self) -> None: ...

    def stop(self, timeout: float = 30.0) -> None: ...


class StoppableLike(Protocol):
    """A background thread the context stops when it closes (``services.nodes.NodeHeartbeat``)."""

    def stop(self, timeout: float = 30.0) -> None: ...


class ClosableLike(Protocol):
    """Something the caches close with the context (``services.indexing.chunk_pipeline.KeptWorker``)."""

    def close(self) -> None: ...


@dataclass
class Caches:
    """What the services keep between calls on one Context, one typed field per thing."""

    vectors: VectorStore | None = None  # Context.vectors, opened on first use
    embedding_worker: EmbeddingWorkerLike | None = None  # Context.embedding_worker, built on first use
    embedders: dict[str, Embedder] = field(
        default_factory=dict
    )  # identity.embedder_for: identity -> embedder
    # semantic.query_vector's LRU: (identity, query) -> the query's vector
    query_vectors: OrderedDict[tuple[str, str], list[float]] = field(default_factory=OrderedDict)
    # semantic.text_vectors' LRU: (identity, text) -> its vector (ASK's candidate sentences)
    text_vectors: OrderedDict[tuple[str, str], array[float]] = field(default_factory=OrderedDict)
    vector_locks: dict[str, threading.RLock] = field(
        default_factory=dict
    )  # vectors_catchup: identity -> lock
    keywords_fed: int | None = None  # catchup: the last change-log seq applied to the open tantivy writer
    maintenance_at: float = 0.0  # jobs.schedule_maintenance: time.monotonic() of the last look
    search_settings_toml: dict[str, Any] | None = None  # search_settings: gitkb.toml [search], validated
    # search.fused_results: threads that run a hybrid search's keyword side while the caller's
    # thread embeds the query (onnxruntime, tantivy and SQLite release the GIL); made on first use
    search_pool: ThreadPoolExecutor | None = None
    chunk_worker: ClosableLike | None = None  # chunk_pipeline.KeptWorker: big ingests' chunking worker

    def close(self) -> None:
        """Close what is open (the vector store, the search threads); the embedding worker is closed
        by ``Context.close``."""
        if self.search_pool is not None:
            self.search_pool.shutdown(wait=True)
        if self.chunk_worker is not None:
            self.chunk_worker.close()
        if self.vectors is not None:
            self.vectors.close()


class Context:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        private_dirs(settings.home)  # 0700 when gitkb creates it (gitkb.core.files)
        self.catalog: CatalogStore = open_catalog(settings.catalog_url, settings.catalog_path)
        self.keywords = KeywordIndex(settings.keywords_path)
        # Serialises index writes inside this process (the cross-process writer
        # lease is held by whoever runs jobs; see services.runtime.jobs).
        self.write_lock = threading.RLock()
        self.keyword_lock = threading.Lock()
        self.caches = Caches()
        self.meters = Meters()  # this process's counters and latencies (GET /metrics renders them)
        self._lazy_lock = threading.RLock()
        # This home's node (gitkb.stores.node_rows) and the name of its keyword watermark.
        self.node_id = node_id_for(settings.home)
        self.keywords_mark = keywords_mark(settings, self.node_id)
        # The writer lease: a catalog row any node may hold, taken only by the process holding this
        # home's local guard (services.runtime.writer.become_writer takes it).
        seconds = float(settings.section("nodes").get("lease_seconds", DEFAULT_LEASE_SECONDS))
        self.lease = WriterLease(
            LocalGuard(settings.home / WRITER_LOCK_FILE), self.catalog, self.node_id, seconds
        )
        self.heartbeat: StoppableLike | None = (
            None  # services.runtime.nodes.NodeHeartbeat, set by the composition root
        )
        self.writer: WriterLike | None = None  # services.runtime.writer.WriterThread while we hold the lease
        # Takes the writer lease when it is free (set by the composition root; a job waiter calls it
        # when the holder went away). Returns whether this process now holds it.
        self.take_lease: Callable[[], bool] = lambda: False
        self.make_embedding_worker: Callable[[Context], EmbeddingWorkerLike] | None = None
        # Big ingests keep their chunking worker (and its word cache) for the next one
        # (``chunk_pipeline.KeptWorker``); the composition root sets it for long-running processes.
        self.keep_chunk_worker = False
        self.ef_applied_pending: int | None = None  # the ef_search this node's store applied, to record

    @property
    def is_writer(self) -> bool:
        return bool(self.lease.held)

    @property
    def keywords_owner(self) -> bool:
        """Whether this process writes its home's keyword index (it holds the home's local guard)."""
        return self.lease.guard.held

    def notify_writer(self) -> None:
        if self.writer is not None:
            self.writer.notify()

    @property
    def vectors(self) -> VectorStore:
        """The vector store (``gitkb.stores.vectors.VectorStore``), opened on first use."""
        with self._lazy_lock:
            store = self.caches.vectors
            if store is None:
                from gitkb.stores.catalog.vector_state import vector_naming  # opened on first use
                from gitkb.stores.vectors import VectorStore  # heavy: numpy; opened on first use

                s = self.settings
                naming = vector_naming(self.catalog.conn)
                if s.chroma_host:  # shared by nodes: their ef_search must not flip back and forth
                    store = VectorStore.open_http(
                        s.chroma_host,
                        s.chroma_port or 8000,
                        s.chroma_headers,
                        naming=naming,
                        ef_search=s.chroma_ef_search,
                        tune=self.ef_search_is_new(),
                        on_ef_applied=self._ef_applied,
                    )
                else:
                    store = VectorStore.open_persistent(
                        s.vectors_path, naming=naming, ef_search=s.chroma_ef_search
                    )
                self.caches.vectors = store
            return store

    # A shared Chroma server's collections have one ef_search each (a query takes none): a node sets
    # it only when its [chroma] ef_search is new for it, i.e. differs from the value it last applied
    # or joined with (``writer_state`` ``ef_search_applied@<node>``); otherwise a collection keeps the
    # depth it records (the node that changed its value last set it) and ``gitkb status`` warns where
    # it differs from this node's (``services.operations.ef_search``). Embedded Chroma: always set.

    def _ef_key(self) -> str:
        return f"ef_search_applied@{self.node_id}"

    def ef_search_is_new(self) -> bool:
        return job_rows.get_state(self.catalog.conn, self._ef_key()) != str(self.settings.chroma_ef_search)

    def join_ef_search(self) -> None:
        """At a node's start (``runtime.writer.open_node``): a node with no record joins with its value,
        setting nothing (a new node never overwrites the others')."""
        if self.settings.chroma_host and job_rows.get_state(self.catalog.conn, self._ef_key()) is None:
            self.ef_applied_pending = self.settings.chroma_ef_search
            self.record_ef_search()

    def _ef_applied(self, ef: int) -> None:  # from a vector call: recorded later, off its transactions
        self.ef_applied_pending = ef

    def record_ef_search(self) -> None:
        """Record the value this node's store applied (the heartbeat and ``close`` call it)."""
        ef, self.ef_applied_pending = self.ef_applied_pending, None
        if ef is not None and job_rows.get_state(self.catalog.conn, self._ef_key()) != str(ef):
            with self.catalog.write() as conn:
                job_rows.set_state(conn, self._ef_key(), str(ef))

    @property
    def embedding_worker(self) -> EmbeddingWorkerLike:
        """This process's background embedder, built on first use by the factory the composition root
        handed in (``Workspace`` gives ``services.runtime.embedding_worker.EmbeddingWorker``); its thread starts
        on ``kick()``."""
        with self._lazy_lock:
            worker = self.caches.embedding_worker
            if worker is None:
                if self.make_embedding_worker is None:
                    raise RuntimeError(
                        "no embedding worker factory: the composition root sets ctx.make_embedding_worker"
                    )
                worker = self.caches.embedding_worker = self.make_embedding_worker(self)
            return worker

    def close(self) -> None:
        beats, self.heartbeat = self.heartbeat, None
        if beats is not None:  # first: it may take the lease or catch keywords up while we close
            beats.stop()
        with contextlib.suppress(Exception):  # closing never fails on it: the next start applies it again
            self.record_ef_search()
        if self.writer is not None:  # first: a job it runs may hold the catch-up lock the embedder waits for
            self.writer.request_stop()
        worker, self.caches.embedding_worker = self.caches.embedding_worker, None
        if worker is not None:  # before the stores it writes to
            worker.close()
        if self.writer is not None:
            self.writer.stop()
            self.writer = None
        caches, self.caches = self.caches, Caches()  # forget everything held, as a new Context would
        caches.close()
        self.keywords.close()
        self.lease.release()  # before the catalog: the lease row is deleted through it
        self.catalog.close()
