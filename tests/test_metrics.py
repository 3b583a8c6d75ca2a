"""GET /metrics: scraped over HTTP and parsed with prometheus-client's own parser; every figure
checked against what happened (documents indexed, a job run, a search per mode, refused tokens)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from gitkb.http import create_app
from gitkb.http.config import load_server_config
from helpers.http_shape import error_code
from helpers.sources import SOURCE

TOKENS = {"reader": "r" * 24, "bot": "b" * 24, "writer": "w" * 24}
TOML = (
    f'[[server.tokens]]\nname = "reader"\ntoken = "{TOKENS["reader"]}"\nscopes = ["read"]\n'
    f'[[server.tokens]]\nname = "writer"\ntoken = "{TOKENS["writer"]}"\nscopes = ["write"]\n'
    f'[[server.tokens]]\nname = "bot"\ntoken = "{TOKENS["bot"]}"\nscopes = ["read"]\nagent = "bot"\n'
)


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(c: TestClient, who: str = "reader") -> Samples:
    r = c.get("/metrics", headers=bearer(who))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=")
    out: Samples = {}
    for fam in text_string_to_metric_families(r.text):
        assert fam.name.startswith("gitkb_"), fam.name
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


@pytest.fixture
def served(make_ws: Any, home: Any) -> Iterator[tuple[Any, TestClient]]:
    home.mkdir(parents=True, exist_ok=True)
    (home / "gitkb.toml").write_text(TOML)
    ws = make_ws()
    cfg = load_server_config(ws.settings)
    app = create_app(ws.settings, server=cfg, workspace=ws)
    with TestClient(app, client=("203.0.113.9", 40000)) as c:
        yield ws, c


def test_a_scrape_reports_what_happened(served: tuple[Any, TestClient]) -> None:
    ws, c = served
    assert ws.document_index("CREATE_INDEX", index_name="kb", embeddings=True)["Success"]
    for i, text in enumerate(("Rotate the API keys monthly.", "Backups run nightly at two.")):
        added = ws.document_index("ADD_TEXT", index_name="kb", text=text, filepath=f"d{i}.md")
        assert added["Success"], added
    assert ws.build_embeddings()["Success"]
    before = scrape(c)
    for mode in ("keyword", "semantic", "hybrid"):
        r = c.post("/search", json={"query": "rotate keys", "mode": mode}, headers=bearer("reader"))
        assert r.status_code == 200 and r.json()["mode"] == mode, r.text
    s = scrape(c)

    assert value(s, "gitkb_documents", index="kb") == 2
    chunks = ws.document_index("LIST_DOCUMENTS", index_name="kb")
    assert value(s, "gitkb_chunks", index="kb") == sum(d["chunk_count"] for d in chunks["Documents"]) >= 2
    completed = ws.list_jobs(state="completed")["Jobs"]
    by_kind = {j["kind"] for j in completed}
    assert "action" in by_kind
    assert value(s, "gitkb_jobs", kind="action", state="completed") == sum(
        1 for j in completed if j["kind"] == "action"
    )
    assert value(s, "gitkb_queue_depth") == 0
    assert value(s, "gitkb_writer_lease_this_process") == 1 and value(s, "gitkb_writer_lease_held") == 1
    assert value(s, "gitkb_dirty_paths") == 0 and value(s, "gitkb_dirty_embeddings") == 0
    for mode in ("keyword", "semantic", "hybrid"):
        assert value(s, "gitkb_searches_total", mode=mode) == 1, mode
        assert value(s, "gitkb_search_duration_seconds_count", mode=mode) == 1
        assert value(s, "gitkb_search_duration_seconds_bucket", mode=mode, le="+Inf") == 1
        assert (("gitkb_searches_total", frozenset({("mode", mode)}))) not in before
    assert value(s, "gitkb_http_requests_total", method="POST", route="/search", status="200") == 3
    assert value(s, "gitkb_http_request_duration_seconds_count", method="POST", route="/search") == 3
    assert value(s, "gitkb_http_requests_total", method="GET", route="/metrics", status="200") == 1
    identity = ws.embeddings_status()["identity"]
    texts = value(s, "gitkb_embedded_texts_total", identity=identity)
    assert texts >= 2 and value(s, "gitkb_embedded_tokens_total", identity=identity) > 0
    assert value(s, "gitkb_embedding_texts_per_second", identity=identity) > 0


def test_refused_scrapes_are_401_or_403_and_counted(served: tuple[Any, TestClient]) -> None:
    _, c = served
    assert c.get("/metrics").status_code == 401
    wrong = c.get("/metrics", headers={"Authorization": "Bearer " + "x" * 24})
    assert wrong.status_code == 401 and error_code(wrong) == "unauthorized"
    agent = c.get("/metrics", headers=bearer("bot"))  # an agent-bound token: never an operator read
    assert agent.status_code == 403 and error_code(agent) == "forbidden", agent.text
    s = scrape(c, "writer")  # write includes read
    assert value(s, "gitkb_http_requests_total", method="GET", route="/metrics", status="401") == 2
    assert value(s, "gitkb_http_requests_total", method="GET", route="/metrics", status="403") == 1
    assert c.get("/nothing/here", headers=bearer("reader")).status_code == 404
    s = scrape(c)
    assert value(s, "gitkb_http_requests_total", method="GET", route="unmatched", status="404") == 1


def test_every_response_carries_a_request_id(served: tuple[Any, TestClient]) -> None:
    _, c = served
    a, b = c.get("/healthz"), c.get("/healthz")
    assert a.headers["x-request-id"] != b.headers["x-request-id"] and len(a.headers["x-request-id"]) == 32
    assert c.get("/healthz", headers={"X-Request-Id": "trace-42.a"}).headers["x-request-id"] == "trace-42.a"
    for given in ('a b"}', "x" * 129):  # a space, a quote: never echoed nor logged as given
        got = c.get("/healthz", headers={"X-Request-Id": given}).headers["x-request-id"]
        assert got != given and len(got) == 32


def test_webhook_deliveries_are_counted_by_outcome(served: tuple[Any, TestClient]) -> None:
    _, c = served
    assert c.post("/webhooks/github", json={}).status_code == 401  # no signature
    s = scrape(c)
    assert value(s, "gitkb_webhook_deliveries_total", provider="github", outcome="refused") == 1


def test_forge_errors_are_counted(source_ws: Any) -> None:
    """A failed call to the (embedded local) forge is counted by forge, operation and failure kind."""
    out = source_ws.forge_close(SOURCE, 999)
    assert out["code"] == "forge_error", out
    app = create_app(source_ws.settings, workspace=source_ws)
    with TestClient(app, client=("127.0.0.1", 1)) as c:  # no tokens: loopback is the operator
        r = c.get("/metrics")
    assert r.status_code == 200, r.text
    samples = {
        (s.name, frozenset(s.labels.items())): s.value
        for fam in text_string_to_metric_families(r.text)
        for s in fam.samples
    }
    key = frozenset({"forge": "local", "operation": "close", "code": "not_found"}.items())
    assert samples[("gitkb_forge_errors_total", key)] == 1, [k for k in samples if "forge" in k[0]]


def test_embedding_failures_are_counted(make_ws: Any) -> None:
    """An embedding server that does not answer (the network edge: a closed loopback port)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed once the block ends: connections are refused
    opts = {"base_url": f"http://127.0.0.1:{port}/v1", "dims": 8, "retries": 0, "timeout_s": 2}
    ws = make_ws(embedding_provider="openai", embedding_model="m", embedding_options=opts)
    assert ws.document_index("CREATE_INDEX", index_name="kb", embeddings=True)["Success"]
    assert ws.document_index("ADD_TEXT", index_name="kb", text="Rotate the keys.", filepath="a.md")["Success"]
    built = ws.build_embeddings()
    assert not built["Success"], built
    failures = {k: v for k, v in ws.ctx.meters.counters().items() if k[0] == "gitkb_embedding_failures_total"}
    assert failures and all(v >= 1 for v in failures.values()), failures
    assert ws.ctx.meters.counters().get(("gitkb_embedded_texts_total", (("identity", "openai/m"),))) is None
