"""The vector store: Chroma, one collection per embedding identity.

Collections hold chunk ids, vectors and filter metadata only (``fingerprint``,
``index_id``, ``document_id``, ``content_hash`` ...), never the text: the
catalog keeps the truth and vectors can be rebuilt from it. Every vector
carries its fingerprint ``provider/model@dims``; a collection refuses vectors
of another fingerprint. Chroma's default embedding function is never used
(it downloads a model): vectors are always given explicitly.

The same class works embedded (``open_persistent``) and against a Chroma
server (``open_http``). A workspace opens it with its :class:`Naming` (its id and
the identities that keep their old collection names): it sees only its own
collections, so two workspaces on one server never touch each other's vectors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gitkb.core.config import check_ef_search
from gitkb.core.embedders.base import make_fingerprint, parse_fingerprint
from gitkb.core.errors import Conflict, InvalidArgument, StoreUnavailable
from gitkb.stores.vector_collections import Collections, Naming, chroma_guard

UPSERT_BATCH = 64
READ_BATCH = 512

Where = dict[str, Any]
MetadataValue = str | int | float | bool


def _split_where(where: Mapping[str, Any] | None) -> list[Where]:
    """A where dict as a list of single-key clauses (Chroma wants one key per dict)."""
    if not where:
        return []
    if not isinstance(where, Mapping):
        raise InvalidArgument(f"where must be a dict, got {type(where).__name__}")
    return [{k: v} for k, v in where.items()]


def _combine(*clauses: Where) -> Where | None:
    parts = [c for c in clauses if c]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


def _index_clause(index_ids: Sequence[str]) -> Where:
    ids = list(dict.fromkeys(index_ids))
    return {"index_id": ids[0]} if len(ids) == 1 else {"index_id": {"$in": ids}}


def _batches(seq: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(seq), size):
        yield seq[start : start + size]


class VectorStore:
    """Chroma collections, one per embedding identity. Use ``open_persistent`` or ``open_http``."""

    def __init__(
        self,
        client: Any,
        *,
        location: str,
        naming: Naming | None = None,
        ef_search: int | None = None,
        tune: bool = True,
        on_ef_applied: Callable[[int], object] | None = None,
    ) -> None:
        self._client = client
        self.location = location
        self._collections = Collections(client, naming, ef_search, tune=tune, on_applied=on_ef_applied)

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def open_persistent(
        cls, path: Path, *, naming: Naming | None = None, ef_search: int | None = None
    ) -> VectorStore:
        """An embedded Chroma in ``path`` (one process owns it). ``ef_search``: the HNSW search depth
        its collections get (None: ``DEFAULT_EF_SEARCH``)."""
        ef_search = None if ef_search is None else check_ef_search(ef_search)
        import chromadb  # heavy: chromadb
        from chromadb.config import Settings  # heavy: chromadb

        path = Path(path)
        with chroma_guard(f"open {path}"):
            path.mkdir(parents=True, exist_ok=True)
            client = chromadb.PersistentClient(
                path=str(path), settings=Settings(anonymized_telemetry=False, allow_reset=False)
            )
        return cls(client, location=str(path), naming=naming, ef_search=ef_search)

    @classmethod
    def open_http(
        cls,
        host: str,
        port: int,
        headers: Mapping[str, str] | None = None,
        *,
        ssl: bool = False,
        naming: Naming | None = None,
        ef_search: int | None = None,
        tune: bool = True,
        on_ef_applied: Callable[[int], object] | None = None,
    ) -> VectorStore:
        """A Chroma server (``chroma run``, or distributed Chroma); ``ef_search`` as for ``open_persistent``.
        ``tune=False``: an existing collection keeps the ``ef_search`` it records (other nodes share it);
        ``on_ef_applied(ef)`` is called when one is given (or found at) ``ef_search`` by this store."""
        ef_search = None if ef_search is None else check_ef_search(ef_search)
        import chromadb  # heavy: chromadb
        from chromadb.config import Settings  # heavy: chromadb

        with chroma_guard(f"connect to {host}:{port}"):
            client = chromadb.HttpClient(
                host=host,
                port=int(port),
                ssl=ssl,
                headers=dict(headers or {}),
                settings=Settings(anonymized_telemetry=False, allow_reset=False),
            )
            client.heartbeat()
        location = f"{'https' if ssl else 'http'}://{host}:{port}"
        return cls(
            client,
            location=location,
            naming=naming,
            ef_search=ef_search,
            tune=tune,
            on_ef_applied=on_ef_applied,
        )

    def close(self) -> None:
        """Release the client (for an embedded store: its files). Idempotent."""
        self._collections.forget()
        close = getattr(self._client, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> VectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def heartbeat(self) -> None:
        """Raise StoreUnavailable unless the store answers."""
        with chroma_guard("heartbeat"):
            self._client.heartbeat()

    # -- collections ---------------------------------------------------------------------------

    def use_naming(self, naming: Naming) -> None:
        """Name (and find) collections by ``naming`` from now on (a restore that took a new id)."""
        self._collections.naming = naming
        self._collections.forget()

    @property
    def ef_search(self) -> int:
        """The HNSW search depth this store gives its collections."""
        return self._collections.ef_search

    def recorded_ef_search(self, identity: str) -> tuple[str, int | None] | None:
        """(collection name, the ``ef_search`` it records now, read afresh) of ``identity``'s collection,
        None when it does not exist. The collection is opened as by any call (a store that tunes sets
        its value then, once; a refusal lands in :attr:`ef_search_refused`)."""
        if self._collections.get(identity) is None:
            return None
        return self._collections.recorded_ef(identity)

    @property
    def ef_search_refused(self) -> dict[str, str]:
        """Collections whose ``ef_search`` this store was refused setting: name -> why."""
        return dict(self._collections.refused)

    def collection_name(self, identity: str) -> str:
        """The name of ``identity``'s collection in this store's naming (it may not exist yet)."""
        return self._collections.naming.name(identity)

    def fingerprint_of(self, identity: str) -> str | None:
        """The fingerprint recorded on ``identity``'s collection, or None when it has none."""
        return self._collections.fingerprint_of(identity)

    def list_collections(self) -> list[dict[str, Any]]:
        """gitkb's collections (those recording an identity): name, identity, fingerprint, count and the
        ``ef_search`` the collection records."""
        return self._collections.list_all()

    def drop_collection(self, identity: str) -> bool:
        """Delete ``identity``'s collection; False when there was none."""
        return self._collections.drop(identity)

    # -- writes --------------------------------------------------------------------------------

    def upsert(
        self,
        fingerprint: str,
        ids: Sequence[str],
        vectors: Sequence[Sequence[float]],
        metadatas: Sequence[Mapping[str, MetadataValue | None]] | None = None,
    ) -> int:
        """Insert or replace vectors (idempotent by id), 64 per Chroma call; returns how many.

        Refuses (Conflict) a fingerprint, or a vector size, that differs from the
        collection's. Each metadata gets ``fingerprint``; None values are dropped.
        """
        identity, dims = parse_fingerprint(fingerprint)
        fp = make_fingerprint(identity, dims)
        ids = list(ids)
        if metadatas is None:
            metadatas = [{} for _ in ids]
        if not (len(ids) == len(vectors) == len(metadatas)):
            raise InvalidArgument(
                f"upsert needs as many vectors and metadatas as ids ({len(ids)}, {len(vectors)}, {len(metadatas)})"
            )
        if not ids:
            return 0
        if any(not isinstance(i, str) or not i for i in ids):
            raise InvalidArgument("vector ids must be non-empty strings")
        if len(set(ids)) != len(ids):
            raise InvalidArgument("upsert got the same id twice in one call")
        for i, v in enumerate(vectors):
            if len(v) != dims:
                raise Conflict(
                    f"vector {i} ({ids[i]!r}) has {len(v)} dims: fingerprint {identity}@{len(v)} "
                    f"does not match {fp}",
                    details={"expected_fingerprint": fp, "got_fingerprint": f"{identity}@{len(v)}"},
                )
        matrix = np.asarray(vectors, dtype=np.float32)
        if not np.isfinite(matrix).all():
            raise InvalidArgument("upsert got a vector with NaN or infinite values")
        metas = [self._metadata(m, fp) for m in metadatas]
        col = self._collections.writable(fp)
        from chromadb.errors import NotFoundError  # heavy: chromadb

        for start in range(0, len(ids), UPSERT_BATCH):
            end = start + UPSERT_BATCH
            for attempt in (0, 1):
                try:
                    with chroma_guard(f"upsert into {col.name}"):
                        col.upsert(
                            ids=ids[start:end], embeddings=matrix[start:end], metadatas=metas[start:end]
                        )
                    break
                except NotFoundError:  # dropped meanwhile: recreate once, never lose the write
                    if attempt:
                        raise StoreUnavailable(
                            f"vector collection {col.name!r} vanished during upsert"
                        ) from None
                    self._collections.forget(col.name)
                    col = self._collections.writable(fp)
        return len(ids)

    @staticmethod
    def _metadata(meta: Mapping[str, MetadataValue | None], fp: str) -> dict[str, MetadataValue]:
        out: dict[str, MetadataValue] = {}
        for key, value in meta.items():
            if value is None:
                continue
            if not isinstance(key, str) or not key or key.startswith("$"):
                raise InvalidArgument(f"invalid metadata key {key!r}")
            if not isinstance(value, str | int | float | bool):
                raise InvalidArgument(
                    f"metadata {key!r} must be str, int, float or bool, got {type(value).__name__}"
                )
            out[key] = value
        if "fingerprint" in out and out["fingerprint"] != fp:
            raise Conflict(f"metadata fingerprint {out['fingerprint']!r} does not match {fp}")
        out["fingerprint"] = fp
        return out

    def delete(self, identity: str, ids: Sequence[str]) -> None:
        """Remove vectors by id; unknown ids and a missing collection are fine."""
        ids = list(ids)
        for batch in _batches(ids, READ_BATCH):
            self._collections.with_collection(
                identity, "delete", lambda c, b=batch: c.delete(ids=list(b)), None
            )

    def delete_where(self, identity: str, where: Mapping[str, Any]) -> int:
        """Remove every vector matching ``where`` (e.g. ``{"index_id": "docs"}``); returns how many."""
        if not where:
            raise InvalidArgument("delete_where needs a non-empty filter")
        ids = sorted(self.ids_in(identity, where))
        self.delete(identity, ids)
        return len(ids)

    # -- reads ---------------------------------------------------------------------------------

    def ids_in(self, identity: str, where: Mapping[str, Any] | None = None) -> set[str]:
        """Ids of the vectors matching ``where`` (all when None)."""
        flt = _combine(*_split_where(where))
        res = self._collections.with_collection(
            identity, "get ids", lambda c: c.get(where=flt, include=[]), None
        )
        return set() if res is None else set(res["ids"])

    def count(self, identity: str, where: Mapping[str, Any] | None = None) -> int:
        if where:
            return len(self.ids_in(identity, where))
        return int(self._collections.with_collection(identity, "count", lambda c: c.count(), 0))

    def get_vectors(self, identity: str, ids: Sequence[str]) -> dict[str, list[float]]:
        """``{id: vector}`` for the ids that have one."""
        got = self._get_by_ids(identity, ids, "embeddings")
        return {vid: np.asarray(vec, dtype=np.float32).tolist() for vid, vec in got.items()}

    def get_metadata(self, identity: str, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """``{id: metadata}`` for the ids that have a vector (no vectors read)."""
        return {vid: dict(meta or {}) for vid, meta in self._get_by_ids(identity, ids, "metadatas").items()}

    def _get_by_ids(self, identity: str, ids: Sequence[str], field: str) -> dict[str, Any]:
        """``{id: the stored field}`` (``embeddings`` or ``metadatas``), READ_BATCH ids per call."""
        out: dict[str, Any] = {}
        for batch in _batches(list(dict.fromkeys(ids)), READ_BATCH):
            res = self._collections.with_collection(
                identity, f"get {field}", lambda c, b=batch: c.get(ids=list(b), include=[field]), None
            )
            if res is None:
                return out
            out.update(zip(res["ids"], res[field], strict=True))
        return out

    def find_by_content_hash(self, identity: str, hashes: Sequence[str]) -> dict[str, list[float]]:
        """``{content_hash: vector}`` for hashes some stored vector has: reuse instead of re-embedding."""
        out: dict[str, list[float]] = {}
        wanted = [h for h in dict.fromkeys(hashes) if h]
        for batch in _batches(wanted, READ_BATCH):
            flt = {"content_hash": {"$in": list(batch)}}
            res = self._collections.with_collection(
                identity,
                "find by content hash",
                lambda c, f=flt: c.get(where=f, include=["embeddings", "metadatas"]),
                None,
            )
            if res is None:
                return out
            for meta, vec in zip(res["metadatas"], res["embeddings"], strict=True):
                h = (meta or {}).get("content_hash")
                if isinstance(h, str) and h not in out:
                    out[h] = np.asarray(vec, dtype=np.float32).tolist()
        return out

    def query(
        self,
        identity: str,
        vector: Sequence[float],
        n: int,
        index_ids: Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> list[tuple[str, float]]:
        """Nearest ``n`` vectors as ``(id, cosine distance)``, closest first.

        ``index_ids`` restricts to those indexes; an empty list matches nothing
        (a filter is never widened). ``where`` adds Chroma filters on metadata.
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InvalidArgument(f"n must be a positive integer, got {n!r}")
        if index_ids is not None and not list(index_ids):
            return []
        col = self._collections.get(identity)
        if col is None:
            return []
        dims = int(col.metadata["dims"])
        if len(vector) != dims:
            raise Conflict(
                f"query vector has {len(vector)} dims: {identity}@{len(vector)} does not match "
                f"{col.metadata['fingerprint']}"
            )
        flt = _combine(*([_index_clause(index_ids)] if index_ids else []), *_split_where(where))
        q = np.asarray([vector], dtype=np.float32)
        res = self._collections.with_collection(
            identity,
            "query",
            lambda c: c.query(query_embeddings=q, n_results=n, where=flt, include=["distances"]),
            None,
        )
        if res is None or not res["ids"]:
            return []
        return [(vid, float(d)) for vid, d in zip(res["ids"][0], res["distances"][0], strict=True)]
