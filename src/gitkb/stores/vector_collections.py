"""Chroma collections by embedding identity: their names, the identity each records, cached handles.

A collection is named from its identity and the workspace's id (:class:`Naming`, :func:`collection_name`)
and records the identity, the fingerprint it holds and the workspace id; its HNSW search depth
(``ef_search``, :data:`DEFAULT_EF_SEARCH` unless ``[chroma] ef_search`` says otherwise) is set when it is
created and when a process first opens it (:meth:`Collections.get`), unless the store is told not to
(``tune=False``: a node of a shared server whose value is not new, ``gitkb.services.context``: the
collection's recorded value wins there); a refused change is kept in ``refused`` for ``gitkb status``.
A handle whose collection was dropped meanwhile is fetched again once. Two workspaces on one Chroma
server never share a collection; the nodes of one workspace (one catalog, one id) do. An identity a
workspace used before it had an id keeps its collection's old name (``{provider}_{model}_index``), so
nothing built is lost or re-embedded.
Chroma and transport failures are mapped onto the gitkb error tree (:func:`chroma_guard`).
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from gitkb.core.config import DEFAULT_EF_SEARCH, check_ef_search
from gitkb.core.embedders.base import make_fingerprint, parse_fingerprint, split_identity
from gitkb.core.errors import Conflict, GitkbError, InvalidArgument, StoreUnavailable

SCHEMA_VERSION = 1
_SAFE_RE = re.compile(r"[^a-z0-9._-]+")
_MAX_MODEL_PART = 200


_WORKSPACE_RE = re.compile(r"[a-z0-9]{1,32}")
_log = logging.getLogger(__name__)


def collection_name(identity: str, workspace_id: str | None = None) -> str:
    """``{provider}_{sanitized_model}_index`` for a (normalised or not) identity, with
    ``_{workspace_id}`` appended when given. Pure.

    Sanitising keeps ``[a-z0-9._-]``; when it had to change anything (``/``,
    ``:``, ``+``, ``..``, length) a short hash of the identity is appended so
    distinct identities never share a name. The model part has no ``_``, so a name
    with a workspace id never equals one without.
    """
    if workspace_id is not None and not _WORKSPACE_RE.fullmatch(workspace_id):
        raise InvalidArgument(f"invalid workspace id {workspace_id!r}")
    provider, model = split_identity(identity)
    safe = _SAFE_RE.sub("-", model)
    safe = re.sub(r"\.{2,}", ".", safe).strip("._-") or "model"
    if safe != model or len(safe) > _MAX_MODEL_PART:
        digest = hashlib.sha256(f"{provider}/{model}".encode()).hexdigest()[:8]
        safe = f"{safe[:_MAX_MODEL_PART].rstrip('._-')}-{digest}"
    name = f"{provider}_{safe}_index"
    return name if workspace_id is None else f"{name}_{workspace_id}"


def _normal(identity: str) -> str:
    provider, model = split_identity(identity)
    return f"{provider}/{model}"


@dataclass(frozen=True)
class Naming:
    """Which collection is a workspace's for an identity. ``workspace_id`` None (a bare store): the
    name without id for every identity; ``legacy``: identities that keep that name (used before the
    workspace had an id)."""

    workspace_id: str | None = None
    legacy: frozenset[str] = frozenset()

    @classmethod
    def of(cls, workspace_id: str | None, legacy: Iterable[str] = ()) -> Naming:
        return cls(workspace_id or None, frozenset(_normal(i) for i in legacy))

    def workspace_for(self, identity: str) -> str | None:
        """The workspace id ``identity``'s collection is named (and marked) with; None: the old name."""
        return None if _normal(identity) in self.legacy else self.workspace_id

    def name(self, identity: str) -> str:
        return collection_name(identity, self.workspace_for(identity))


@lru_cache(maxsize=256)
def _named(naming: Naming, identity: str) -> tuple[str, str]:
    """``identity`` normalised and its collection's name under ``naming`` (kept: every search asks)."""
    normal = _normal(identity)
    return normal, naming.name(normal)


@contextmanager
def chroma_guard(what: str) -> Iterator[None]:
    """Map Chroma / transport failures onto the gitkb error tree."""
    import httpx  # heavy: httpx; here chromadb has loaded it already
    from chromadb import errors as cerr  # heavy: chromadb

    try:
        yield
    except (GitkbError, cerr.NotFoundError):
        raise  # NotFoundError: a missing collection, handled by the caller
    except (cerr.InvalidArgumentError, cerr.DuplicateIDError, cerr.InvalidDimensionException) as exc:
        raise InvalidArgument(f"vector store rejected {what}: {exc}") from exc
    except (httpx.TransportError, ConnectionError, OSError, cerr.ChromaError) as exc:
        raise StoreUnavailable(f"vector store unavailable during {what}: {exc}") from exc
    except ValueError as exc:
        if "connect" in str(exc).lower():
            raise StoreUnavailable(f"vector store unavailable during {what}: {exc}") from exc
        raise


def _ef_of(col: Any) -> int | None:
    """The ``ef_search`` ``col``'s configuration records (None: not an HNSW collection)."""
    hnsw = (getattr(col, "configuration_json", None) or {}).get("hnsw")
    ef = hnsw.get("ef_search") if isinstance(hnsw, dict) else None
    return ef if isinstance(ef, int) else None


class Collections:
    """The collections of one Chroma client, one per embedding identity; handles cached, thread-safe.
    ``ef_search``: the HNSW search depth each collection is given (None: :data:`DEFAULT_EF_SEARCH`);
    ``tune``: whether an existing collection recording another depth is given it (else it keeps its
    own); ``on_applied(ef)``: called once a collection searches at ``ef_search`` because of this store."""

    def __init__(
        self,
        client: Any,
        naming: Naming | None = None,
        ef_search: int | None = None,
        *,
        tune: bool = True,
        on_applied: Callable[[int], object] | None = None,
    ) -> None:
        self._client = client
        self.naming = naming or Naming()
        self.ef_search = DEFAULT_EF_SEARCH if ef_search is None else check_ef_search(ef_search)
        self.tune = tune
        self._on_applied = on_applied
        self.refused: dict[str, str] = {}  # collection name -> why its ef_search could not be set
        self._lock = threading.Lock()
        self._handles: dict[str, Any] = {}
        self._tuned: set[str] = set()  # collections whose depth this store settled (once each)

    def forget(self, name: str | None = None) -> None:
        """Drop the cached handle of collection ``name`` (all of them when None)."""
        with self._lock:
            if name is None:
                self._handles.clear()
            else:
                self._handles.pop(name, None)

    def _checked(self, col: Any, identity: str) -> Any:
        md = col.metadata or {}
        found = md.get("identity")
        if found != identity:
            raise Conflict(f"vector collection {col.name!r} belongs to identity {found!r}, not {identity!r}")
        ws = self.naming.workspace_for(identity)
        if ws is not None and md.get("workspace") != ws:
            raise Conflict(
                f"vector collection {col.name!r} belongs to workspace {md.get('workspace')!r}, not {ws!r}"
            )
        return col

    def get(self, identity: str, *, refresh: bool = False) -> Any | None:
        """The collection of ``identity``, or None when it does not exist."""
        from chromadb.errors import NotFoundError  # heavy: chromadb

        identity, name = _named(self.naming, identity)
        with self._lock:
            if not refresh and name in self._handles:
                return self._handles[name]
        try:
            with chroma_guard(f"open collection {name}"):
                col = self._client.get_collection(name, embedding_function=None)
        except NotFoundError:
            with self._lock:
                self._handles.pop(name, None)
            return None
        self._checked(col, identity)
        self._tune(col)
        with self._lock:
            self._handles[name] = col
        return col

    def _tune(self, col: Any) -> None:
        """Give ``col`` this store's ``ef_search`` when its configuration says another. Chroma keeps it
        and reads it when it loads the collection's index: in this process when nothing here searched it
        yet (a gitkb process opens a collection before its first query), a Chroma server when it next
        loads it (after a restart). Once per collection and store, and only when ``tune``. A refusal (a
        read-only token) leaves the old depth: logged and kept in ``refused``."""
        from chromadb.errors import NotFoundError  # heavy: chromadb

        if not self.tune or col.name in self._tuned:
            return
        self._tuned.add(col.name)
        hnsw = (getattr(col, "configuration_json", None) or {}).get("hnsw")
        if not isinstance(hnsw, dict):
            return  # not an HNSW collection (distributed Chroma's SPANN)
        if hnsw.get("ef_search") != self.ef_search:
            try:
                with chroma_guard(f"set ef_search of {col.name}"):
                    col.modify(configuration={"hnsw": {"ef_search": self.ef_search}})
            except NotFoundError:
                return  # dropped meanwhile: the caller finds it gone on its next call
            except GitkbError as exc:
                kept = hnsw.get("ef_search")
                _log.warning("vector collection %s keeps ef_search %s: %s", col.name, kept, exc)
                self.refused[col.name] = f"setting ef_search {self.ef_search} was refused ({exc.message})"
                return
        self.refused.pop(col.name, None)
        if self._on_applied is not None:
            self._on_applied(self.ef_search)

    def recorded_ef(self, identity: str) -> tuple[str, int | None] | None:
        """(name, the ``ef_search`` it records now: read afresh, never changed) of ``identity``'s
        collection; None when it does not exist."""
        from chromadb.errors import NotFoundError  # heavy: chromadb

        _, name = _named(self.naming, identity)
        try:
            with chroma_guard(f"open collection {name}"):
                col = self._client.get_collection(name, embedding_function=None)
        except NotFoundError:
            return None
        return name, _ef_of(col)

    def get_or_create(self, fingerprint: str) -> Any:
        identity, dims = parse_fingerprint(fingerprint)
        col = self.get(identity)
        if col is not None:
            return col
        provider, model = identity.split("/", 1)
        name = self.naming.name(identity)
        metadata: dict[str, Any] = {
            "identity": identity,
            "fingerprint": make_fingerprint(identity, dims),
            "dims": dims,
            "provider": provider,
            "model": model,
            "gitkb_schema": SCHEMA_VERSION,
            "hnsw:space": "cosine",
        }
        ws = self.naming.workspace_for(identity)
        if ws is not None:
            metadata["workspace"] = ws
        with chroma_guard(f"create collection {name}"):
            col = self._client.get_or_create_collection(
                name,
                metadata=metadata,
                configuration={"hnsw": {"space": "cosine", "ef_search": self.ef_search}},
                embedding_function=None,
            )
        self._checked(col, identity)
        self._tuned.discard(col.name)  # made now, or meanwhile by another process: settle it once more
        self._tune(col)
        with self._lock:
            self._handles[name] = col
        return col

    def with_collection(self, identity: str, what: str, fn: Any, default: Any) -> Any:
        """Run ``fn(col)``; a collection dropped meanwhile (stale handle) is re-fetched once."""
        from chromadb.errors import NotFoundError  # heavy: chromadb

        for attempt in (0, 1):
            col = self.get(identity, refresh=attempt == 1)
            if col is None:
                return default
            try:
                with chroma_guard(what):
                    return fn(col)
            except NotFoundError:
                continue
        return default

    def writable(self, fp: str) -> Any:
        """The collection for fingerprint ``fp``; Conflict when it holds another fingerprint."""
        col = self.get_or_create(fp)
        existing = str(col.metadata["fingerprint"])
        if existing != fp:
            raise Conflict(
                f"vector store refuses fingerprint {fp}: collection {col.name!r} holds {existing}",
                details={"expected_fingerprint": existing, "got_fingerprint": fp, "collection": col.name},
            )
        return col

    def fingerprint_of(self, identity: str) -> str | None:
        """The fingerprint recorded on ``identity``'s collection, or None when it has none."""
        col = self.get(identity)
        return None if col is None else str(col.metadata["fingerprint"])

    def list_all(self) -> list[dict[str, Any]]:
        """This workspace's collections (those recording an identity under the name this workspace gives
        it; other workspaces' on the same server are not listed): name, identity, fingerprint, count."""
        out: list[dict[str, Any]] = []
        with chroma_guard("list collections"):
            for col in self._client.list_collections():
                md = col.metadata or {}
                if "identity" in md and "fingerprint" in md and self._ours(col.name, md):
                    out.append(
                        {
                            "name": col.name,
                            "identity": md["identity"],
                            "fingerprint": md["fingerprint"],
                            "count": col.count(),
                            "ef_search": _ef_of(col),
                        }
                    )
        return sorted(out, key=lambda c: c["name"])

    def _ours(self, name: str, md: dict[str, Any]) -> bool:
        try:
            return self.naming.name(str(md["identity"])) == name
        except InvalidArgument:
            return False

    def drop(self, identity: str) -> bool:
        """Delete ``identity``'s collection; False when there was none."""
        col = self.get(identity)
        if col is None:
            return False
        with self._lock:
            self._handles.pop(col.name, None)
        from chromadb.errors import NotFoundError  # heavy: chromadb

        try:
            with chroma_guard(f"drop collection {col.name}"):
                self._client.delete_collection(col.name)
        except NotFoundError:
            return False
        return True
