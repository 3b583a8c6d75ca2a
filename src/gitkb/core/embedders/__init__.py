"""Embedders: the contract, identity normalisation, the provider registry.

Importing this package is cheap: fastembed, onnxruntime and httpx load only
when ``create_embedder`` builds an embedder that needs them.
"""

from gitkb.core.embedders.base import (
    EmbedCost,
    Embedder,
    count_tokens,
    embed_with_cost,
    fingerprint,
    make_fingerprint,
    normalize_identity,
    parse_fingerprint,
    split_identity,
)
from gitkb.core.embedders.registry import (
    DEFAULT_IDENTITY,
    NOT_CONFIGURED,
    PROVIDERS,
    EmbedderFactory,
    ProviderSpec,
    create_embedder,
    provider_names,
    resolve_identity,
)

__all__ = [
    "DEFAULT_IDENTITY",
    "NOT_CONFIGURED",
    "PROVIDERS",
    "EmbedCost",
    "Embedder",
    "EmbedderFactory",
    "ProviderSpec",
    "count_tokens",
    "create_embedder",
    "embed_with_cost",
    "fingerprint",
    "make_fingerprint",
    "normalize_identity",
    "parse_fingerprint",
    "provider_names",
    "resolve_identity",
    "split_identity",
]
