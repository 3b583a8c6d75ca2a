"""The workspace's active embedding identity and each index's effective identity.

Rules:

* A *saved* identity (catalog ``workspace_state.embedding_identity``) wins.
  While none is saved, the settings (``gitkb.toml``, ``GITKB_EMBEDDING_PROVIDER``
  / ``GITKB_EMBEDDING_MODEL``, ``Workspace(...)`` keywords) seed it; the seed is
  saved the first time a write needs it (CREATE_INDEX, ingest). Changing the
  identity afterwards is explicit: ``set_active_identity``.
* An index may pin its own identity at CREATE_INDEX (``indexes.embedding_identity``);
  an unpinned index follows the active identity.
* When no complete identity resolves (``GITKB_EMBEDDING_PROVIDER=none``, an
  unknown provider, a provider without a model), writes that need one fail
  with ``embedding_not_configured``; listings report ``EmbeddingIdentityState``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from gitkb.core.config import Settings
from gitkb.core.embedders import Embedder, create_embedder, resolve_identity
from gitkb.core.embedders.base import normalize_provider, split_identity
from gitkb.core.errors import EmbeddingNotConfigured, InvalidArgument
from gitkb.services.context import Context
from gitkb.stores.catalog import vector_state as vs
from gitkb.stores.catalog.indexes import IndexRow

_NEXT_STEPS = [
    "set GITKB_EMBEDDING_PROVIDER / GITKB_EMBEDDING_MODEL (or [embedding] in gitkb.toml)",
    "or create a keyword-only index: CREATE_INDEX(..., embeddings=False) (CLI --no-embeddings)",
]
_embedder_lock = threading.Lock()


@dataclass(frozen=True)
class IdentityState:
    identity: str | None
    source: str  # "saved" | "settings" | "unresolved"
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "resolved": self.identity is not None,
            "identity": self.identity,
            "source": self.source,
        }
        if self.error:
            out["error"] = self.error
            out["code"] = EmbeddingNotConfigured.code
        return out


def identity_state(ctx: Context) -> IdentityState:
    saved = vs.get_state(ctx.catalog.conn, vs.IDENTITY_KEY)
    if saved:
        return IdentityState(saved, "saved")
    s = ctx.settings
    try:
        return IdentityState(resolve_identity(s.embedding_provider, s.embedding_model), "settings")
    except EmbeddingNotConfigured as exc:
        return IdentityState(None, "unresolved", exc.message)


def active_identity(ctx: Context, *, save: bool = False) -> str:
    """The active identity; EmbeddingNotConfigured when none resolves. ``save`` fixes a seed."""
    st = identity_state(ctx)
    if st.identity is None:
        raise EmbeddingNotConfigured(
            st.error or "no embedding identity is configured", next_steps=_NEXT_STEPS
        )
    if save and st.source == "settings":
        with ctx.catalog.write() as conn:
            if vs.get_state(conn, vs.IDENTITY_KEY) is None:
                vs.set_state(conn, vs.IDENTITY_KEY, st.identity)
            return vs.get_state(conn, vs.IDENTITY_KEY) or st.identity
    return st.identity


def pinned_identity(provider: Any, model: Any) -> str | None:
    """The identity CREATE_INDEX pins from ``embedding_provider``/``embedding_model``; None when neither is given."""
    if provider in (None, "") and model in (None, ""):
        return None
    for name, v in (("embedding_provider", provider), ("embedding_model", model)):
        if v is not None and not isinstance(v, str):
            raise InvalidArgument(f"{name} must be a string, got {type(v).__name__}")
    if provider in (None, ""):
        raise InvalidArgument(
            "embedding_model needs embedding_provider too (e.g. embedding_provider='fastembed')"
        )
    try:
        return resolve_identity(provider, model)
    except EmbeddingNotConfigured as exc:
        raise InvalidArgument(exc.message.split(": set GITKB_")[0]) from exc


def effective_identity(ctx: Context, row: IndexRow) -> str:
    """The identity an index's vectors should be in: its pin, else the active one."""
    return row.embedding_identity or active_identity(ctx)


def set_active_identity(ctx: Context, provider: Any, model: Any = None) -> dict[str, Any]:
    """Save a new active identity (explicit model change). Indexes bound to another become stranded."""
    if not isinstance(provider, str) or not provider.strip():
        raise InvalidArgument("provider is required, e.g. 'fastembed' or 'openai'")
    if model is not None and not isinstance(model, str):
        raise InvalidArgument("model must be a string")
    try:
        identity = resolve_identity(provider, model)
    except EmbeddingNotConfigured as exc:
        raise InvalidArgument(exc.message.split(": set GITKB_")[0]) from exc
    previous = identity_state(ctx).identity
    with ctx.catalog.write() as conn:
        vs.set_state(conn, vs.IDENTITY_KEY, identity)
    return {
        "identity": identity,
        "previous_identity": previous,
        "Message": f"Active embedding identity is now {identity}"
        + ("" if previous in (None, identity) else f" (was {previous})"),
    }


def embedder_options(settings: Settings, provider: str) -> dict[str, Any]:
    """Options for ``provider``: the configured ones when it is the configured provider."""
    opts: dict[str, Any] = {}
    try:
        same = (
            settings.embedding_provider is not None
            and normalize_provider(settings.embedding_provider) == provider
        )
    except InvalidArgument:
        same = False
    if same:
        opts.update(settings.embedding_options)
    if provider == "fastembed":
        opts.setdefault("batch_size", settings.embed_batch_size)
        opts.setdefault("query_graph", settings.embed_query_graph)
    return opts


def embedder_for(ctx: Context, identity: str) -> Embedder:
    """The (cached, per context) embedder of ``identity``; EmbeddingNotConfigured when it can't be built."""
    cache = ctx.caches.embedders
    emb = cache.get(identity)
    if emb is not None:
        return emb
    with _embedder_lock:
        emb = cache.get(identity)
        if emb is None:
            provider, model = split_identity(identity)
            emb = create_embedder(
                provider,
                model,
                cache_dir=ctx.settings.models_path,
                options=embedder_options(ctx.settings, provider),
            )
            cache[identity] = emb
    return emb


def give_new_workspace_id(ctx: Context) -> str:
    """A new random workspace id (no legacy collection names): from now on this workspace's vectors go
    to collections of its own, so a restored copy can run beside its original on one Chroma server.
    Its vectors are embedded again there (the catch-up finds none)."""
    import uuid  # only a restore asking for a new id needs it

    new = uuid.uuid4().hex[:12]
    with ctx.catalog.write() as w:
        vs.set_state(w, vs.WORKSPACE_ID_KEY, new)
        vs.set_state(w, vs.LEGACY_IDENTITIES_KEY, "[]")
    if ctx.caches.vectors is not None:  # opened already: it names collections the new way from now on
        ctx.caches.vectors.use_naming(vs.vector_naming(ctx.catalog.conn))
    return new
