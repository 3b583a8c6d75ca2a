"""A deterministic feature-hashing embedder: lexical, weak, fast, dependency-free (numpy).

Each text is lower-cased and split into word tokens; every token and every
adjacent-token bigram is hashed (BLAKE2b, stable across processes) to a bucket
and a sign, counts are damped with ``1 + log(tf)``, and the vector is
L2-normalised. Texts that share words get a positive cosine; texts that share
none are near-orthogonal. Meant for fast tests and as a no-model fallback.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter

import numpy as np

from gitkb.core.embedders.base import check_texts, normalize_identity
from gitkb.core.errors import InvalidArgument

DEFAULT_MODEL = "feature-hash-v1"
DEFAULT_DIMS = 384
_TOKEN_RE = re.compile(r"\w+", re.UNICODE)
_EMPTY = "\x00empty"


def _tokens(text: str) -> list[str]:
    return _TOKEN_RE.findall(text.casefold())


def _bucket(feature: str, dims: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    h = int.from_bytes(digest, "little")
    return h % dims, (1.0 if (h >> 63) & 1 else -1.0)


class HashingEmbedder:
    """Signed feature hashing of unigrams and bigrams into ``dims`` buckets."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        dims: int = DEFAULT_DIMS,
        max_input_tokens: int = 8192,
        bigrams: bool = True,
    ) -> None:
        if isinstance(dims, bool) or not isinstance(dims, int) or not 2 <= dims <= 65536:
            raise InvalidArgument(f"hashing embedder dims must be an integer in 2..65536, got {dims!r}")
        if (
            isinstance(max_input_tokens, bool)
            or not isinstance(max_input_tokens, int)
            or max_input_tokens < 1
        ):
            raise InvalidArgument(f"max_input_tokens must be a positive integer, got {max_input_tokens!r}")
        self.identity = normalize_identity("hashing", model)
        self.dims = dims
        self.max_input_tokens = max_input_tokens
        self._bigrams = bigrams

    def count_tokens(self, texts: list[str]) -> list[int]:
        return [len(_tokens(t)) for t in check_texts(texts)]

    def _embed_one(self, text: str) -> np.ndarray:
        toks = _tokens(text)[: self.max_input_tokens] or [_EMPTY]
        feats: Counter[str] = Counter(toks)
        if self._bigrams:
            feats.update(f"{a} {b}" for a, b in zip(toks, toks[1:], strict=False))
        vec = np.zeros(self.dims, dtype=np.float64)
        for feat, tf in feats.items():
            idx, sign = _bucket(feat, self.dims)
            vec[idx] += sign * (1.0 + math.log(tf))
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:  # every feature cancelled out: fall back to the empty marker's bucket
            idx, sign = _bucket(_EMPTY, self.dims)
            vec[idx] = sign
            norm = 1.0
        return vec / norm

    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        return [self._embed_one(t).tolist() for t in check_texts(texts)]
