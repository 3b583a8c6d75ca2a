"""The embedder contract, identity normalisation, fingerprints and cost reporting.

An embedder turns texts into fixed-size vectors. Its *identity* is the
normalised ``provider/model`` pair; its *fingerprint* adds the dimensions,
``provider/model@dims``. Vectors of different fingerprints never share a
collection.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from gitkb.core.errors import InvalidArgument

_PROVIDER_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
# Model names: case-folded, no whitespace, no ``@`` (it separates the dims in a fingerprint).
_MODEL_RE = re.compile(r"^[a-z0-9][a-z0-9._:/+-]{0,255}$")

# Alternate spellings of one model, per provider, mapped to the canonical model name.
# Keys and values are already case-folded.
MODEL_ALIASES: dict[str, dict[str, str]] = {
    "fastembed": {
        "sentence-transformers/all-minilm-l6-v2": "all-minilm-l6-v2",
        "local/all-minilm-l6-v2-int8": "all-minilm-l6-v2",
        "all-minilm-l6-v2-int8": "all-minilm-l6-v2",
        "qdrant/all-minilm-l6-v2-onnx": "all-minilm-l6-v2",
        "all-minilm-l6-v2-onnx": "all-minilm-l6-v2",
    },
}


@runtime_checkable
class Embedder(Protocol):
    """What every embedding provider offers. ``embed_batch`` is the only required method.

    ``identity``: normalised ``provider/model``; ``dims``: vector size;
    ``max_input_tokens``: the model's input window (longer texts are embedded
    from their leading part only). Plain attributes satisfy these.
    """

    @property
    def identity(self) -> str: ...

    @property
    def dims(self) -> int: ...

    @property
    def max_input_tokens(self) -> int: ...

    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order; an empty list gives an empty list."""
        ...


@runtime_checkable
class TokenCounter(Protocol):
    """Optional: an embedder that can count its model's tokens exactly."""

    def count_tokens(self, texts: list[str]) -> list[int]: ...


@runtime_checkable
class QueryEmbedder(Protocol):
    """Optional: an embedder with a cheaper path for one short text (a search query), giving the
    vector ``embed_batch([text])[0]`` gives."""

    def embed_query(self, text: str) -> list[float]: ...


def embed_query(embedder: Embedder, text: str) -> list[float]:
    """The vector of one query: the embedder's query path when it has one, else a batch of one."""
    if isinstance(embedder, QueryEmbedder):
        return embedder.embed_query(text)
    return embedder.embed_batch([text])[0]


@dataclass(frozen=True, slots=True)
class EmbedCost:
    """What one embedding run cost: how many texts, model tokens, and wall seconds."""

    texts: int
    tokens: int
    seconds: float

    def as_dict(self) -> dict[str, float | int]:
        return {"texts": self.texts, "tokens": self.tokens, "seconds": round(self.seconds, 6)}


def normalize_provider(provider: str) -> str:
    if not isinstance(provider, str):
        raise InvalidArgument(f"embedding provider must be a string, got {type(provider).__name__}")
    p = provider.strip().casefold()
    if not _PROVIDER_RE.match(p):
        raise InvalidArgument(
            f"invalid embedding provider {provider!r}: use letters, digits, '_' or '-' (e.g. 'fastembed')"
        )
    return p


def normalize_model(provider: str, model: str) -> str:
    """Case-fold ``model``, strip a leading ``provider/`` that repeats the provider, apply aliases."""
    p = normalize_provider(provider)
    if not isinstance(model, str):
        raise InvalidArgument(f"embedding model must be a string, got {type(model).__name__}")
    m = model.strip().casefold()
    while m.startswith(p + "/"):
        m = m[len(p) + 1 :].strip()
    m = MODEL_ALIASES.get(p, {}).get(m, m)
    if not _MODEL_RE.match(m) or m.endswith("/") or "//" in m:
        raise InvalidArgument(
            f"invalid embedding model {model!r} for provider {p!r}: "
            "use letters, digits and . _ - : / + (no spaces, no '@')"
        )
    return m


def normalize_identity(provider: str, model: str) -> str:
    """The one spelling of an embedding identity: ``provider/model``.

    >>> normalize_identity("FastEmbed", "fastembed/All-MiniLM-L6-v2")
    'fastembed/all-minilm-l6-v2'
    """
    p = normalize_provider(provider)
    return f"{p}/{normalize_model(p, model)}"


def split_identity(identity: str) -> tuple[str, str]:
    """``provider/model`` -> ``(provider, model)``, normalised; raises InvalidArgument."""
    if not isinstance(identity, str) or "/" not in identity:
        raise InvalidArgument(f"invalid embedding identity {identity!r}: expected 'provider/model'")
    provider, model = identity.split("/", 1)
    p = normalize_provider(provider)
    return p, normalize_model(p, model)


def make_fingerprint(identity: str, dims: int) -> str:
    provider, model = split_identity(identity)
    if isinstance(dims, bool) or not isinstance(dims, int) or dims <= 0:
        raise InvalidArgument(f"embedding dims must be a positive integer, got {dims!r}")
    return f"{provider}/{model}@{dims}"


def fingerprint(embedder: Embedder) -> str:
    """``<identity>@<dims>`` of an embedder."""
    return make_fingerprint(embedder.identity, embedder.dims)


def parse_fingerprint(fp: str) -> tuple[str, int]:
    """``provider/model@dims`` -> ``(identity, dims)``; raises InvalidArgument."""
    if not isinstance(fp, str) or "@" not in fp:
        raise InvalidArgument(f"invalid embedding fingerprint {fp!r}: expected 'provider/model@dims'")
    identity, dims_s = fp.rsplit("@", 1)
    if not dims_s.isdigit() or int(dims_s) <= 0:
        raise InvalidArgument(f"invalid embedding fingerprint {fp!r}: dims must be a positive integer")
    provider, model = split_identity(identity)
    return f"{provider}/{model}", int(dims_s)


def count_tokens(embedder: object, texts: list[str]) -> list[int]:
    """Token counts per text: exact when the embedder can count, else a whitespace split."""
    if isinstance(embedder, TokenCounter):
        return list(embedder.count_tokens(texts))
    return [len(t.split()) for t in texts]


def embed_with_cost(embedder: Embedder, texts: list[str]) -> tuple[list[list[float]], EmbedCost]:
    """Embed ``texts`` and report the cost.

    ``tokens`` is what the model read: each text's count capped at the
    embedder's ``max_input_tokens`` (longer texts are embedded from their
    leading part only).
    """
    texts = list(texts)
    start = time.perf_counter()
    vectors = embedder.embed_batch(texts)
    seconds = time.perf_counter() - start
    cap = embedder.max_input_tokens
    tokens = sum(min(n, cap) for n in count_tokens(embedder, texts))
    return vectors, EmbedCost(texts=len(texts), tokens=tokens, seconds=seconds)


def check_texts(texts: list[str]) -> list[str]:
    """Validate an ``embed_batch`` argument: a list (or sequence) of strings."""
    if isinstance(texts, str):
        raise InvalidArgument("embed_batch takes a list of strings, not a single string")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise InvalidArgument(f"embed_batch: text {i} is {type(t).__name__}, expected str")
    return out
