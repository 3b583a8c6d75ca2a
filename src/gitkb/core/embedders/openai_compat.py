"""An OpenAI-compatible embeddings provider: ``POST {base_url}/embeddings`` over httpx.

Works with OpenAI itself and with servers that speak the same API (vLLM,
llama.cpp, Ollama's ``/v1``, LiteLLM ...). ``base_url`` includes the API
prefix, e.g. ``https://api.openai.com/v1`` or ``http://127.0.0.1:11434/v1``.
The model name is sent as given (case kept); the identity is normalised.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from gitkb.core.embedders.base import check_texts, normalize_identity
from gitkb.core.errors import EmbeddingNotConfigured, InvalidArgument, StoreUnavailable

DEFAULT_BATCH_SIZE = 64
DEFAULT_MAX_INPUT_TOKENS = 8191
_RETRY_STATUSES = {429, 500, 502, 503, 504}


class OpenAICompatEmbedder:
    """Embeddings from an OpenAI-compatible HTTP server. ``dims`` is probed once if not given."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        dims: int | None = None,
        max_input_tokens: int = DEFAULT_MAX_INPUT_TOKENS,
        batch_size: int = DEFAULT_BATCH_SIZE,
        timeout_s: float = 60.0,
        retries: int = 2,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        import httpx  # heavy: httpx (~80 ms), only when this provider is used

        if not base_url or not str(base_url).strip():
            raise EmbeddingNotConfigured(
                "the openai embedding provider needs a base_url (e.g. https://api.openai.com/v1)"
            )
        if batch_size < 1:
            raise InvalidArgument(f"batch_size must be a positive integer, got {batch_size!r}")
        self.identity = normalize_identity("openai", model)
        request_model = model.strip()
        if request_model.casefold().startswith("openai/"):
            request_model = request_model[len("openai/") :]
        self.request_model = request_model
        self.max_input_tokens = max_input_tokens
        self.batch_size = batch_size
        self.retries = max(0, retries)
        self._dims = dims
        hdrs = dict(headers or {})
        if api_key:
            hdrs["Authorization"] = f"Bearer {api_key}"
        self.base_url = str(base_url).rstrip("/")
        self._client = httpx.Client(base_url=self.base_url, headers=hdrs, timeout=timeout_s)
        self._lock = threading.Lock()

    @property
    def dims(self) -> int:
        if self._dims is None:
            self._dims = len(self._post(["dimension probe"])[0])
        return self._dims

    def close(self) -> None:
        self._client.close()

    def _post(self, texts: list[str]) -> list[list[float]]:
        import httpx  # heavy: httpx (~80 ms), only when this provider is used

        payload = {"model": self.request_model, "input": texts, "encoding_format": "float"}
        for attempt in range(self.retries + 1):
            try:
                resp = self._client.post("/embeddings", json=payload)
            except httpx.TransportError as exc:
                if attempt < self.retries:
                    time.sleep(0.2 * 2**attempt)
                    continue
                raise StoreUnavailable(f"embedding server {self.base_url} unreachable: {exc}") from exc
            if resp.status_code in _RETRY_STATUSES and attempt < self.retries:
                time.sleep(0.2 * 2**attempt)
                continue
            return self._parse(resp, len(texts))
        raise AssertionError("unreachable")  # pragma: no cover

    def _parse(self, resp: Any, n: int) -> list[list[float]]:
        status = resp.status_code
        if status in (401, 403):
            raise EmbeddingNotConfigured(f"embedding server {self.base_url} refused the API key ({status})")
        if status == 404:
            raise EmbeddingNotConfigured(
                f"embedding server {self.base_url}: model {self.request_model!r} or /embeddings not found"
            )
        if status >= 500 or status == 429:
            raise StoreUnavailable(f"embedding server {self.base_url} failed ({status}): {resp.text[:200]}")
        if status >= 400:
            raise InvalidArgument(
                f"embedding server {self.base_url} rejected the request ({status}): {resp.text[:200]}"
            )
        try:
            rows = sorted(resp.json()["data"], key=lambda r: r["index"])
            vectors = [[float(x) for x in r["embedding"]] for r in rows]
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreUnavailable(
                f"embedding server {self.base_url} sent a malformed response: {exc}"
            ) from exc
        if len(vectors) != n:
            raise StoreUnavailable(
                f"embedding server {self.base_url} returned {len(vectors)} vectors for {n} texts"
            )
        return vectors

    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        items = check_texts(texts)
        out: list[list[float]] = []
        for start in range(0, len(items), self.batch_size):
            with self._lock:
                vecs = self._post(items[start : start + self.batch_size])
            if self._dims is None:
                self._dims = len(vecs[0])
            if any(len(v) != self._dims for v in vecs):
                raise StoreUnavailable(
                    f"embedding server {self.base_url} returned vectors of varying size (expected {self._dims})"
                )
            out.extend(vecs)
        return out


def create(model: str, options: Mapping[str, Any], raw_model: str | None = None) -> OpenAICompatEmbedder:
    """Factory for the registry: options ``base_url`` (required), ``api_key``, ``dims``, ``batch_size``,
    ``max_input_tokens``, ``timeout_s``, ``headers``."""
    allowed = {
        "base_url",
        "api_key",
        "dims",
        "batch_size",
        "max_input_tokens",
        "timeout_s",
        "retries",
        "headers",
    }
    unknown = set(options) - allowed
    if unknown:
        raise InvalidArgument(f"unknown openai embedding options: {sorted(unknown)}")
    if not options.get("base_url"):
        raise EmbeddingNotConfigured(
            "the openai embedding provider needs options.base_url (e.g. https://api.openai.com/v1)"
        )
    kwargs: dict[str, Any] = {k: options[k] for k in allowed if options.get(k) is not None}
    return OpenAICompatEmbedder(model=raw_model or model, **kwargs)
