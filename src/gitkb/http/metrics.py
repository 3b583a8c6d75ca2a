"""``GET /metrics``: the Prometheus text format, behind the API's auth (the ``metrics`` action).

Three sources, rendered with ``prometheus-client`` into one answer:

* this app's registry (one ``CollectorRegistry`` per app, never the global one): requests by
  method, route template and status, their latency, and webhook deliveries by outcome, counted by
  :class:`RequestMeter` (an ASGI middleware that also gives every request its ``X-Request-Id`` and
  writes the access log line, see ``gitkb.http.logs``);
* the catalog, read at scrape time through the library (``Workspace.metrics``, which the policy
  checks like any call): jobs by kind and state, queue depth, writer lease, documents and chunks
  per index, dirty paths and embeddings, reviews by state, recorded webhook deliveries;
* the Workspace's in-process meters (``gitkb.core.meters``): searches and their latency by mode,
  embedding texts/tokens/seconds and failures, forge call errors.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gitkb.core.meters import BUCKETS, COUNTERS, HISTOGRAMS, Meters
from gitkb.http.auth import Principal, authenticated
from gitkb.http.calls import caller_view
from gitkb.http.errors import respond
from gitkb.http.limits import run_blocking
from gitkb.http.logs import request_id_from, request_id_var
from gitkb.http.state import get_state

access_log = logging.getLogger("gitkb.http.access")
UNMATCHED = "unmatched"  # a path no route answers: one label, not one per path tried


class HttpMeters:
    """The per-app registry and what the middleware counts into it."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "gitkb_http_requests_total",
            "HTTP requests answered, by method, route template and status",
            ("method", "route", "status"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "gitkb_http_request_duration_seconds",
            "HTTP request latency, by method and route template",
            ("method", "route"),
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.deliveries = Counter(
            "gitkb_webhook_deliveries_total",
            "webhook deliveries answered, by provider and outcome"
            " (queued, duplicate, stale, ignored, ping, refused)",
            ("provider", "outcome"),
            registry=self.registry,
        )


def _route(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return str(path) if path else UNMATCHED


def _principal(scope: Scope) -> str | None:
    p = (scope.get("state") or {}).get("principal")
    return p.label if isinstance(p, Principal) else None


class RequestMeter:
    """Request id, counts, latency and the access line of every HTTP request."""

    def __init__(self, app: ASGIApp, meters: HttpMeters) -> None:
        self.app = app
        self.meters = meters

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((v for k, v in scope.get("headers", []) if k.lower() == b"x-request-id"), None)
        rid = request_id_from(given.decode("latin-1") if given else None)
        token = request_id_var.set(rid)
        scope.setdefault("state", {})
        status = [500]

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"x-request-id"]
                message = {**message, "headers": [*headers, (b"x-request-id", rid.encode("latin-1"))]}
            await send(message)

        start = time.perf_counter()
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            took = time.perf_counter() - start
            self._record(scope, status[0], took, rid)
            request_id_var.reset(token)

    def _record(self, scope: Scope, status: int, took: float, rid: str) -> None:
        route, method = _route(scope), str(scope.get("method", ""))
        self.meters.requests.labels(method, route, str(status)).inc()
        self.meters.latency.labels(method, route).observe(took)
        if route.startswith("/webhooks/"):
            outcome = (scope.get("state") or {}).get("webhook_outcome")
            self.meters.deliveries.labels(
                route.rsplit("/", 1)[-1], "refused" if status >= 400 else outcome or "ok"
            ).inc()
        access_log.info(
            "%s %s %s %.1fms",
            method,
            route,
            status,
            took * 1000,
            extra={
                "request_id": rid,
                "method": method,
                "route": route,
                "status": status,
                "duration_s": round(took, 6),
                "principal": _principal(scope),
            },
        )


def _bound(b: float) -> str:
    """A bucket's ``le`` as Prometheus spells it (``+Inf``, ``0.5``, ``1.0``)."""
    return "+Inf" if b == float("inf") else repr(float(b))


def _labelled(key: tuple[str, tuple[tuple[str, str], ...]]) -> tuple[list[str], list[str]]:
    return [k for k, _ in key[1]], [v for _, v in key[1]]


class Snapshot(Collector):
    """The catalog's figures of one scrape and the Workspace's in-process meters."""

    def __init__(self, snap: dict[str, Any], meters: Meters) -> None:
        self.snap = snap
        self.meters = meters

    def collect(self) -> Iterator[Metric]:
        s = self.snap
        jobs = GaugeMetricFamily(
            "gitkb_jobs", "jobs in the catalog, by kind and state", labels=("kind", "state")
        )
        for j in s["jobs"]:
            jobs.add_metric((j["kind"], j["state"]), j["count"])
        yield jobs
        yield GaugeMetricFamily("gitkb_queue_depth", "jobs queued for the writer", value=s["queue_depth"])
        w = s["writer"]
        yield GaugeMetricFamily(
            "gitkb_writer_lease_held", "1 when a process holds the writer lease", value=int(w["held"])
        )
        yield GaugeMetricFamily(
            "gitkb_writer_lease_this_process",
            "1 when this server holds the writer lease",
            value=int(w["this_process"]),
        )
        yield GaugeMetricFamily(
            "gitkb_writer_lease_holder_pid", "pid of the lease holder (0: none)", value=w["pid"] or 0
        )
        for name, what in (("documents", "documents"), ("chunks", "chunks")):
            g = GaugeMetricFamily(f"gitkb_{name}", f"{what} per index", labels=("index",))
            for index, n in sorted(s[name].items()):
                g.add_metric((index,), n)
            yield g
        yield GaugeMetricFamily(
            "gitkb_dirty_paths", "documents the keyword index has not caught up with", value=s["dirty_paths"]
        )
        yield GaugeMetricFamily(
            "gitkb_dirty_embeddings", "chunks without their vector yet", value=s["dirty_embeddings"]
        )
        reviews = GaugeMetricFamily("gitkb_reviews", "reviews, by state", labels=("state",))
        for state, n in sorted(s["reviews"].items()):
            reviews.add_metric((state,), n)
        yield reviews
        rec = GaugeMetricFamily(
            "gitkb_webhook_deliveries_recorded",
            "webhook deliveries recorded in the catalog (replay protection), by provider and outcome",
            labels=("provider", "outcome"),
        )
        for d in s["webhook_deliveries"]:
            rec.add_metric((d["provider"], d["outcome"]), d["count"])
        yield rec
        yield from self._meters()

    def _meters(self) -> Iterator[Metric]:
        counters = self.meters.counters()
        for name, doc in COUNTERS.items():
            keys = [k for k in counters if k[0] == name]
            fam = CounterMetricFamily(name, doc, labels=_labelled(keys[0])[0] if keys else ())
            for k in keys:
                fam.add_metric(_labelled(k)[1], counters[k])
            yield fam
        for unit in ("texts", "tokens"):
            rate = GaugeMetricFamily(
                f"gitkb_embedding_{unit}_per_second",
                f"{unit} per second of embedding-model time since the server started, by identity",
                labels=("identity",),
            )
            for (name, labels), seconds in counters.items():
                if name == "gitkb_embedding_seconds_total" and seconds > 0:
                    done = counters.get((f"gitkb_embedded_{unit}_total", labels), 0.0)
                    rate.add_metric([v for _, v in labels], done / seconds)
            yield rate
        histograms = self.meters.histograms()
        for name, doc in HISTOGRAMS.items():
            keys = [k for k in histograms if k[0] == name]
            hfam = HistogramMetricFamily(name, doc, labels=_labelled(keys[0])[0] if keys else ())
            for k in keys:
                h = histograms[k]
                buckets = [(_bound(b), float(n)) for b, n in h.cumulative()]
                hfam.add_metric(_labelled(k)[1], buckets, sum_value=h.total)
            yield hfam


def render(app_meters: HttpMeters, snap: dict[str, Any], meters: Meters) -> bytes:
    scrape = CollectorRegistry(auto_describe=False)
    scrape.register(Snapshot(snap, meters))
    return generate_latest(app_meters.registry) + generate_latest(scrape)


router = APIRouter(tags=["operations"])


@router.get(
    "/metrics",
    summary="Prometheus metrics (the API's auth; the read class)",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}},
)
async def metrics(request: Request, _: Principal = Depends(authenticated)) -> Response:  # noqa: B008
    state = get_state(request)
    ws = caller_view(request)
    out: dict[str, Any] = await run_blocking(state, ws.metrics)
    if not out.get("Success"):
        resp: JSONResponse = respond(out, retry_after_s=state.cfg.busy_retry_after_s)
        return resp
    app_meters: HttpMeters = request.app.state.gitkb_metrics
    body = render(app_meters, out, state.workspace.ctx.meters)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
