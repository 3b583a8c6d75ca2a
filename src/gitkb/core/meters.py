"""In-process counters and latency histograms of one workspace (``Context.meters``).

The services record what happened in this process (a search and its mode, an embedding batch,
a forge call that failed); ``GET /metrics`` renders them with ``prometheus-client``
(``gitkb.http.metrics``). Plain Python and a lock, so importing it costs nothing for the CLI.
Names follow Prometheus' conventions: counters end in ``_total``, durations are ``_seconds``.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field

Labels = tuple[tuple[str, str], ...]
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# name -> help text: the one list of in-process metric names.
COUNTERS: dict[str, str] = {
    "gitkb_searches_total": "searches answered, by the mode they ran in",
    "gitkb_embedded_texts_total": "texts the embedding model embedded, by identity",
    "gitkb_embedded_tokens_total": "model tokens read by the embedding model, by identity",
    "gitkb_embedding_seconds_total": "seconds spent in the embedding model, by identity",
    "gitkb_embedding_failures_total": "embedding batches that failed, by identity",
    "gitkb_forge_errors_total": "forge calls that failed, by forge kind, operation and error code",
}
HISTOGRAMS: dict[str, str] = {
    "gitkb_search_duration_seconds": "search latency, by mode",
}


@dataclass
class Histogram:
    buckets: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))  # per bucket, not cumulative
    count: int = 0
    total: float = 0.0

    def observe(self, value: float) -> None:
        i = bisect.bisect_left(BUCKETS, value)
        if i < len(BUCKETS):
            self.buckets[i] += 1
        self.count += 1
        self.total += value

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, observations <= it), ending with +Inf."""
        out, running = [], 0
        for bound, n in zip(BUCKETS, self.buckets, strict=True):
            running += n
            out.append((bound, running))
        out.append((float("inf"), self.count))
        return out


def _labels(labels: dict[str, str]) -> Labels:
    return tuple(sorted((k, str(v)) for k, v in labels.items()))


class Meters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[tuple[str, Labels], float] = {}
        self._histograms: dict[tuple[str, Labels], Histogram] = {}

    def inc(self, name: str, value: float = 1.0, **labels: str) -> None:
        assert name in COUNTERS, name
        key = (name, _labels(labels))
        with self._lock:
            self._counters[key] = self._counters.get(key, 0.0) + value

    def observe(self, name: str, value: float, **labels: str) -> None:
        assert name in HISTOGRAMS, name
        key = (name, _labels(labels))
        with self._lock:
            self._histograms.setdefault(key, Histogram()).observe(value)

    # -- what the services record ---------------------------------------------------

    def search(self, mode: str, seconds: float) -> None:
        self.inc("gitkb_searches_total", mode=mode)
        self.observe("gitkb_search_duration_seconds", seconds, mode=mode)

    def embedded(self, identity: str, texts: int, tokens: int, seconds: float) -> None:
        self.inc("gitkb_embedded_texts_total", texts, identity=identity)
        self.inc("gitkb_embedded_tokens_total", tokens, identity=identity)
        self.inc("gitkb_embedding_seconds_total", seconds, identity=identity)

    def embedding_failed(self, identity: str) -> None:
        self.inc("gitkb_embedding_failures_total", identity=identity)

    def forge_error(self, kind: str, operation: str, code: str) -> None:
        self.inc("gitkb_forge_errors_total", forge=kind, operation=operation, code=code)

    # -- what /metrics reads ---------------------------------------------------------

    def counters(self) -> dict[tuple[str, Labels], float]:
        with self._lock:
            return dict(self._counters)

    def histograms(self) -> dict[tuple[str, Labels], Histogram]:
        with self._lock:
            return {k: Histogram(list(h.buckets), h.count, h.total) for k, h in self._histograms.items()}
