"""The explicit, typed registry of embedding providers, and ``create_embedder``.

Configuration (``gitkb.toml``, ``GITKB_EMBEDDING_PROVIDER`` /
``GITKB_EMBEDDING_MODEL``) is resolved by the caller and passed in; nothing
here reads the environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gitkb.core.embedders.base import Embedder, normalize_model, normalize_provider
from gitkb.core.errors import EmbeddingNotConfigured, InvalidArgument

NOT_CONFIGURED = "none"
DEFAULT_PROVIDER = "fastembed"
DEFAULT_MODEL = "all-minilm-l6-v2"
DEFAULT_IDENTITY = f"{DEFAULT_PROVIDER}/{DEFAULT_MODEL}"
_ENV_HINT = "set GITKB_EMBEDDING_PROVIDER and GITKB_EMBEDDING_MODEL (or [embedding] in gitkb.toml)"


class EmbedderFactory(Protocol):
    def __call__(
        self, model: str, *, raw_model: str, cache_dir: Path, options: Mapping[str, Any]
    ) -> Embedder: ...


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    """A provider: its factory, its default model (None: the model must be given), a summary."""

    factory: EmbedderFactory
    default_model: str | None
    summary: str


QUANTIZED_MODEL = "all-minilm-l6-v2-qdyn"  # minilm_qdyn.MODEL, named here without importing it


def _fastembed(model: str, *, raw_model: str, cache_dir: Path, options: Mapping[str, Any]) -> Embedder:
    if model == QUANTIZED_MODEL:
        from gitkb.core.embedders import minilm_qdyn  # optional model: loaded when chosen

        return minilm_qdyn.create(model, cache_dir, options)
    from gitkb.core.embedders import fastembed_minilm  # optional provider: loaded when chosen

    return fastembed_minilm.create(model, cache_dir, options)


def _hashing(model: str, *, raw_model: str, cache_dir: Path, options: Mapping[str, Any]) -> Embedder:
    from gitkb.core.embedders.hashing import DEFAULT_DIMS, HashingEmbedder  # heavy: numpy

    unknown = set(options) - {"dims", "max_input_tokens", "bigrams"}
    if unknown:
        raise InvalidArgument(f"unknown hashing embedder options: {sorted(unknown)}")
    return HashingEmbedder(
        model,
        dims=int(options.get("dims", DEFAULT_DIMS)),
        max_input_tokens=int(options.get("max_input_tokens", 8192)),
        bigrams=bool(options.get("bigrams", True)),
    )


def _openai(model: str, *, raw_model: str, cache_dir: Path, options: Mapping[str, Any]) -> Embedder:
    from gitkb.core.embedders import openai_compat  # optional provider: loaded when chosen

    return openai_compat.create(model, options, raw_model=raw_model)


PROVIDERS: dict[str, ProviderSpec] = {
    "fastembed": ProviderSpec(
        _fastembed,
        DEFAULT_MODEL,
        f"all-MiniLM-L6-v2 int8 ONNX, offline (default); {QUANTIZED_MODEL}: int8 dynamic quantization",
    ),
    "hashing": ProviderSpec(_hashing, "feature-hash-v1", "deterministic lexical feature hashing (tests)"),
    "openai": ProviderSpec(_openai, None, "OpenAI-compatible /v1/embeddings over HTTP"),
}


def provider_names() -> list[str]:
    return sorted(PROVIDERS)


def resolve_identity(provider: str | None, model: str | None) -> str:
    """The normalised identity ``provider`` and ``model`` resolve to, filling a provider's default model.

    Raises EmbeddingNotConfigured for ``none``, an empty or unknown provider,
    or a provider without a default model when ``model`` is empty.
    """
    if provider is None or not str(provider).strip():
        raise EmbeddingNotConfigured(f"no embedding provider is configured: {_ENV_HINT}")
    try:
        p = normalize_provider(provider)
    except InvalidArgument as exc:
        raise EmbeddingNotConfigured(f"{exc.message}; {_ENV_HINT}") from exc
    if p == NOT_CONFIGURED:
        raise EmbeddingNotConfigured(
            f"embeddings are turned off (GITKB_EMBEDDING_PROVIDER=none): {_ENV_HINT} to enable them"
        )
    spec = PROVIDERS.get(p)
    if spec is None:
        raise EmbeddingNotConfigured(
            f"unknown embedding provider {provider!r} (known: {', '.join(provider_names())}): {_ENV_HINT}"
        )
    raw = (model or "").strip()
    if not raw:
        if spec.default_model is None:
            raise EmbeddingNotConfigured(
                f"embedding provider {p!r} needs a model (GITKB_EMBEDDING_MODEL is empty): {_ENV_HINT}"
            )
        raw = spec.default_model
    try:
        return f"{p}/{normalize_model(p, raw)}"
    except InvalidArgument as exc:
        raise EmbeddingNotConfigured(f"{exc.message}; {_ENV_HINT}") from exc


def create_embedder(
    provider: str | None,
    model: str | None,
    *,
    cache_dir: Path,
    options: Mapping[str, Any] | None = None,
) -> Embedder:
    """Build the embedder for ``provider``/``model``. Heavy libraries load only here.

    ``cache_dir`` is where a provider may assemble model files (the fastembed
    default puts ``all-minilm-l6-v2-int8/`` there). ``options`` are
    provider-specific (``batch_size``, ``threads``, ``dims``, ``base_url``, ``api_key`` ...).
    """
    identity = resolve_identity(provider, model)
    p, m = identity.split("/", 1)
    raw_model = (model or "").strip() or m
    return PROVIDERS[p].factory(
        m, raw_model=raw_model, cache_dir=Path(cache_dir), options=dict(options or {})
    )
