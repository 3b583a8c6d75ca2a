"""The HTTP API end to end through an in-process ASGI client (real workspace on disk):
indexes, documents, search, ask, status and jobs; allowed_roots; caps; timeouts;
a slow call never blocks the others."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from gitkb.core.config import load_settings
from gitkb.http import create_app
from gitkb.http.config import load_server_config
from gitkb.services.runtime import jobs
from helpers import error_code, error_message, wait_until

LOCAL = ("127.0.0.1", 50000)


def client_for(home: Path, toml: str = "") -> TestClient:
    home.mkdir(parents=True, exist_ok=True)
    if toml:
        (home / "gitkb.toml").write_text(toml)
    settings = load_settings(home, embedding_provider="hashing", embedding_model="hashing-384")
    return TestClient(create_app(settings), client=LOCAL)


def ok(r: Any, status: int = 200) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert body.get("Success") is True, body
    return body


def err(r: Any, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["Success"] is False and error_code(body) == code, body
    assert isinstance(error_message(body), str) and error_message(body)
    return body


def test_health_and_openapi(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"Success": True}
    ready = client.get("/readyz").json()
    assert ready["Success"] is True and ready["checks"]["catalog"] == "ok" and "ok" not in ready
    spec = client.get("/openapi.json").json()
    for path in ("/search", "/ask", "/status", "/indexes", "/actions/document_index", "/healthz", "/readyz"):
        assert path in spec["paths"], path
    assert client.get("/docs").status_code == 200


def test_index_and_document_lifecycle(client: TestClient) -> None:
    ok(client.post("/indexes", json={"index_name": "kb", "chunk_size": 200, "chunk_overlap": 20}))
    assert ok(client.get("/indexes"))["Indices"] == ["kb"]
    added = ok(
        client.post("/indexes/kb/texts", json={"text": "The rollback checklist.", "filepath": "ops/rb.md"})
    )
    hits = ok(client.post("/search", json={"query": "rollback", "index_name": "kb", "top_n": 3}))["Results"]
    assert hits and hits[0]["filepath"] == "ops/rb.md" and hits[0]["id"].startswith("kchk_")
    by_path = ok(client.get("/indexes/kb/files/ops/rb.md"))
    by_id = ok(client.get(f"/indexes/kb/documents/{added['file_id']}", params={"pagination_mode": "lines"}))
    assert by_path["file_id"] == by_id["file_id"] == added["file_id"]
    listing = ok(client.get("/indexes/kb/documents", params={"start": 0, "count": 10}))
    assert listing["Success"]
    ok(
        client.post(
            "/indexes/kb/documents/rename", json={"filepath": "ops/rb.md", "new_filename": "rollback.md"}
        )
    )
    ok(client.get("/indexes/kb/files/ops/rollback.md"))
    ok(client.delete("/indexes/kb/files/ops/rollback.md"))
    err(client.get("/indexes/kb/files/ops/rollback.md"), 404, "not_found")
    assert ok(client.get("/indexes/stats"))["Success"]
    tuned = ok(
        client.post("/indexes/kb/search-settings", json={"settings": {"bm25_k1": 0.9, "fusion": "rrf"}})
    )
    assert tuned["search"] == {"bm25_k1": 0.9, "fusion": "rrf"} and tuned["effective"]["bm25_b"] == 0.75
    err(client.post("/indexes/kb/search-settings", json={"settings": {"bm25_b": 7}}), 400, "invalid_argument")
    assert ok(client.get("/indexes/stats"))["Stats"]["kb"]["search_settings"] == tuned["search"]
    shown = ok(client.get("/indexes/kb/search-settings"))
    assert shown["search"] == tuned["search"] and shown["from"]["bm25_k1"] == "index"
    assert ok(client.post("/indexes/kb/search-settings", json={"reset": True}))["search"] == {}
    ok(client.post("/indexes/kb/rename", json={"new_index_name": "kb2"}))
    ok(client.delete("/indexes/kb2"))
    assert ok(client.get("/indexes"))["Indices"] == []


def test_action_api_as_is(client: TestClient) -> None:
    ok(client.post("/actions/document_index", json={"action": "CREATE_INDEX", "index_name": "kb"}))
    ok(
        client.post(
            "/actions/document_index", json={"action": "add_text", "index_name": "kb", "text": "alpha beta"}
        )
    )
    r = ok(client.post("/actions/document_index", json={"action": "SEARCH", "query": "alpha"}))
    assert r["action"] == "SEARCH" and r["Results"]
    e = err(
        client.post("/actions/document_index", json={"action": "SEARCH", "query": "a", "bogus": 1}),
        400,
        "invalid_argument",
    )
    assert "bogus" in e["Error"]
    err(client.post("/actions/document_index", json={"action": "NOPE"}), 400, "invalid_argument")
    err(client.post("/actions/document_index", json={"query": "x"}), 400, "invalid_argument")
    err(
        client.post("/actions/document_index", json={"action": "SEARCH", "query": "a", "progress": 1}),
        400,
        "invalid_argument",
    )


def test_failed_action_keeps_its_fields_under_details(client: TestClient) -> None:
    ok(client.post("/indexes", json={"index_name": "kb"}))
    e = err(client.post("/indexes", json={"index_name": "kb"}), 409, "conflict")
    assert "already" in e["Error"]
    e = err(client.post("/search", json={"query": "x", "index_name": "missing"}), 404, "not_found")
    assert "missing" in e["Error"]


def test_ask_and_status_and_jobs(client: TestClient) -> None:
    ok(client.post("/indexes", json={"index_name": "kb"}))
    ok(client.post("/indexes/kb/texts", json={"text": "Deploys roll back with the rollback checklist."}))
    ask = ok(client.post("/ask", json={"query": "how do deploys roll back?"}))
    assert ask["action"] == "ASK"
    st = ok(client.get("/status"))
    assert st["status"] in ("queryable", "building")
    listed = ok(client.get("/jobs", params={"limit": 5}))["Jobs"]
    assert listed
    job = ok(client.get(f"/jobs/{listed[0]['job_id']}"))
    assert job["status"] == "completed"
    err(client.get("/jobs/job_missing"), 404, "not_found")
    assert "available" in ok(client.get("/embeddings"))


def test_long_call_is_promoted_and_polled(client: TestClient) -> None:
    def slow(ctx: Any, params: dict[str, Any], progress: Any) -> dict[str, Any]:
        time.sleep(0.6)
        return {"Message": "done"}

    jobs.add_kind("reindex_slow_test", jobs.JobKind(slow))
    try:
        state = client.app.state.gitkb  # type: ignore[attr-defined]
        r = state.workspace.promoted("reindex_slow_test", wait=0.05)
        assert r["status"] == "working"
        got = wait_until(
            lambda: (job := ok(client.get(f"/jobs/{r['job_id']}")))["status"] == "completed" and job,
            timeout=10,
            interval=0.05,
            what="the promoted job to complete",
        )
        assert got["status"] == "completed" and got["result"]["Message"] == "done"
    finally:
        jobs.remove_kind("reindex_slow_test")


def test_a_cancelled_job_answers_409_cancelled(home: Path) -> None:
    """POST /reindex whose job is cancelled while it waits in the queue: 409 ``cancelled`` (was 500 internal)."""
    release = threading.Event()

    def block(ctx: Any, params: dict[str, Any], progress: Any) -> dict[str, Any]:
        assert release.wait(30)
        return {"Message": "released"}

    def cancel_queued_reindex() -> None:
        try:
            queued = wait_until(
                lambda: [j for j in ws.list_jobs(state="queued")["Jobs"] if j["kind"] == "reindex"],
                timeout=30,
                interval=0.02,
                what="a queued reindex job",
            )
            assert ws.cancel_job(queued[0]["job_id"])["status"] == "cancelled"
        finally:
            release.set()

    jobs.add_kind("http_block_test", jobs.JobKind(block))
    home.mkdir(parents=True)
    settings = load_settings(
        home, embedding_provider="hashing", embedding_model="hashing-384", promote_after_seconds=30
    )
    try:
        with TestClient(create_app(settings), client=LOCAL) as c:
            ws = c.app.state.gitkb.workspace  # type: ignore[attr-defined]
            assert ws.promoted("http_block_test", wait=0)["status"] == "working"  # holds the writer
            t = threading.Thread(target=cancel_queued_reindex)
            t.start()
            r = c.post("/reindex", json={})
            t.join(30)
            body = err(r, 409, "cancelled")
            assert "cancelled before it started" in error_message(body)
    finally:
        release.set()
        jobs.remove_kind("http_block_test")


def test_reindex_route_answers(client: TestClient) -> None:
    r = ok(client.post("/reindex", json={"force": False}))
    assert r.get("status") == "working" or "added" in r


def test_server_caps_refuse_a_bigger_top_n_or_count_on_every_route(home: Path) -> None:
    with client_for(home, "[server]\nmax_top_n = 5\nmax_count = 7\n") as c:
        ok(c.post("/indexes", json={"index_name": "kb"}))
        err(c.post("/search", json={"query": "x", "top_n": 6}), 400, "invalid_argument")
        ok(c.post("/search", json={"query": "x", "top_n": 5}))
        err(c.post("/ask", json={"query": "x", "top_n": 6}), 400, "invalid_argument")
        err(c.get("/indexes/kb/documents", params={"count": 8}), 400, "invalid_argument")
        err(
            c.post("/actions/document_index", json={"action": "SEARCH", "query": "x", "top_n": 99}),
            400,
            "invalid_argument",
        )
        err(c.post("/search", json={"query": "x", "top_n": "5"}), 422, "validation")  # strict: no "5" → 5


def test_add_documents_over_http_stays_inside_allowed_roots_and_refuses_escapes(
    home: Path, tmp_path: Path
) -> None:
    root = tmp_path / "docs"
    (root / "team").mkdir(parents=True)
    (root / "team" / "a.md").write_text("# A\n\nInside the root.\n")
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "s.md").write_text("# S\n\nOutside the root.\n")
    os.symlink(outside, root / "escape")
    os.symlink(outside / "s.md", root / "team" / "s-link.md")
    with client_for(home / "closed") as c:  # no allowed_roots: refused
        ok(c.post("/indexes", json={"index_name": "kb"}))
        err(c.post("/indexes/kb/documents", json={"filepath": str(root)}), 403, "forbidden")
    with client_for(home / "open", f'[server]\nallowed_roots = ["{root}"]\n') as c:
        ok(c.post("/indexes", json={"index_name": "kb"}))
        err(c.post("/indexes/kb/documents", json={"filepath": str(outside)}), 403, "forbidden")
        err(c.post("/indexes/kb/documents", json={"filepath": str(root / "escape")}), 403, "forbidden")
        err(
            c.post("/indexes/kb/documents", json={"filepath": str(root / "team" / "..") + "/../secret"}),
            403,
            "forbidden",
        )
        err(c.post("/indexes/kb/documents", json={"filepath": "team"}), 400, "invalid_argument")  # relative
        err(
            c.post(
                "/actions/document_index",
                json={"action": "ADD_DOCUMENTS", "index_name": "kb", "filepath": str(outside)},
            ),
            403,
            "forbidden",
        )
        r = ok(c.post("/indexes/kb/documents", json={"filepath": str(root)}))
        if r.get("status") == "working":
            r = ok(c.get(f"/jobs/{r['job_id']}"))
        listed = ok(c.get("/indexes/kb/documents"))
        paths = {
            d.get("path") or d.get("filepath") for d in listed.get("Documents", listed.get("documents", []))
        }
        assert any(p and p.endswith("a.md") for p in paths), listed
        assert not any(p and "s-link" in p or p and p.endswith("s.md") for p in paths), paths
        hits = ok(c.post("/search", json={"query": "Outside", "mode": "keyword"}))["Results"]
        assert hits == []


def test_timeout_answers_504_and_other_requests_go_on(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    release, finished = threading.Event(), threading.Event()
    with client_for(home, "[server]\nrequest_timeout_s = 0.5\n") as c:
        ok(c.post("/indexes", json={"index_name": "kb"}))
        ws = c.app.state.gitkb.workspace  # type: ignore[attr-defined]
        real = ws.document_index

        def slow(action: str, **params: Any) -> dict[str, Any]:
            if action == "SEARCH" and params.get("query") == "slow":
                release.wait(5)
                time.sleep(0.3)  # still running when the client leaves: shutdown must wait for it
                out = real(action, **params)
                finished.set()
                return out
            return real(action, **params)

        monkeypatch.setattr(ws, "document_index", slow)
        results: dict[str, Any] = {}

        def slow_call() -> None:
            results["slow"] = c.post("/search", json={"query": "slow"})

        t = threading.Thread(target=slow_call)
        t.start()
        time.sleep(0.1)
        t0 = time.perf_counter()
        fast = c.post("/search", json={"query": "fast"})
        fast_s = time.perf_counter() - t0
        t.join(5)
        release.set()
        assert fast.status_code == 200 and fast_s < 0.45, fast_s
        e = err(results["slow"], 504, "timeout")
        assert e["next_steps"]
    assert finished.is_set()  # the Workspace closed only after the abandoned call ended


def test_server_config_validation(home: Path) -> None:
    from gitkb.core.errors import InvalidArgument

    for bad in (
        "[server]\nmax_top_n = 0\n",
        "[server]\nallowed_roots = 'x'\n",
        "[[server.tokens]]\nname = 'a'\nscopes = ['read']\n",  # no token at all
        "[[server.tokens]]\nname = 'a'\ntoken = 'short'\n",
        "[[server.tokens]]\nname = 'a'\ntoken = '0123456789abcdef'\nscopes = ['root']\n",
        "[[server.tokens]]\nname = 'a'\ntoken_sha256 = 'zz'\n",
        "[[server.tokens]]\nname = 'a'\ntoken = '0123456789abcdef'\n[[server.tokens]]\nname = 'a'\n"
        "token = '0123456789abcdeg'\n",
    ):
        home.mkdir(parents=True, exist_ok=True)
        (home / "gitkb.toml").write_text(bad)
        with pytest.raises(InvalidArgument):
            load_server_config(load_settings(home), env={})
