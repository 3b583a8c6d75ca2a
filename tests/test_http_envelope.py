"""One envelope over HTTP: every JSON answer is ``{"Success": true, ...}`` or
``{"Success": false, "Error", "code", "next_steps", "details"}`` at the top level, with no
``ok`` or ``error`` key. (Every error path of every route is walked in test_http_errors.py
with the same ``ERROR_KEYS``; here each route family's success and error answers.)"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from gitkb.core.config import load_settings
from gitkb.http import create_app
from gitkb.http.errors import STATUS_BY_CODE

LOCAL = ("127.0.0.1", 50000)
ERROR_KEYS = ("Success", "Error", "code", "next_steps", "details")  # pinned: the contract


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client(raise_server_exceptions=False)


def success(r: Any, status: int = 200) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert isinstance(body, dict) and body.get("Success") is True, body
    assert "ok" not in body and not isinstance(body.get("error"), dict), body  # (a status's error: a string)
    return body


def failure(r: Any, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == set(ERROR_KEYS), body
    assert body["Success"] is False and body["code"] == code and STATUS_BY_CODE[code] == status
    assert isinstance(body["Error"], str) and body["Error"]
    assert isinstance(body["next_steps"], list) and isinstance(body["details"], dict)
    return body


def test_health_probes_carry_the_envelope(client: TestClient) -> None:
    assert success(client.get("/healthz")) == {"Success": True}
    ready = success(client.get("/readyz"))
    assert ready["checks"]["catalog"] == "ok" and isinstance(ready["writer"], bool)


def test_every_parameterless_get_answers_the_envelope(client: TestClient) -> None:
    """Walk the app's own routes: each JSON GET without path parameters succeeds in the envelope."""
    spec = client.get("/openapi.json").json()
    gets = [
        p
        for p, ops in spec["paths"].items()
        if "get" in ops
        and "{" not in p
        and "application/json" in ops["get"]["responses"].get("200", {}).get("content", {})  # not /metrics
    ]
    skipped = {"/pulls"}  # needs ?source=; its error is checked below
    walked = []
    for path in gets:
        if path in skipped:
            continue
        success(client.get(path))
        walked.append(path)
    for family in (
        "/healthz",
        "/readyz",
        "/indexes",
        "/status",
        "/jobs",
        "/sources",
        "/proposals",
        "/reviews",
        "/kbs",
        "/audit",
    ):
        assert family in walked, family
    failure(client.get("/pulls"), 422, "validation")


def test_route_families_success_and_error(client: TestClient) -> None:
    # indexes
    success(client.post("/indexes", json={"index_name": "kb"}))
    failure(client.post("/indexes", json={"index_name": "kb"}), 409, "conflict")
    # documents
    added = success(
        client.post("/indexes/kb/texts", json={"text": "The rollback checklist.", "filepath": "a.md"})
    )
    listed = success(client.get("/indexes/kb/documents"))
    assert listed["total_count"] == 1 and listed["Documents"]
    success(client.get("/indexes/kb/files/a.md"))
    failure(client.get("/indexes/kb/files/nope.md"), 404, "not_found")
    # search and ask
    assert success(client.post("/search", json={"query": "rollback", "index_name": "kb"}))
    failure(client.post("/search", json={"query": "x", "index_name": "missing"}), 404, "not_found")
    # the action API
    success(client.post("/actions/document_index", json={"action": "LIST_INDICES"}))
    failure(client.post("/actions/document_index", json={"action": "NOPE"}), 400, "invalid_argument")
    # jobs
    jid = added.get("job_id")
    if jid:
        success(client.get(f"/jobs/{jid}"))
    failure(client.get("/jobs/job_missing"), 404, "not_found")
    # sources, proposals, reviews, knowledge bases
    failure(client.post("/sources/nope/sync", json={}), 404, "not_found")
    failure(client.get("/proposals/prop_missing"), 404, "not_found")
    failure(client.get("/reviews/rev_missing"), 404, "not_found")
    failure(client.delete("/kbs/nope"), 404, "not_found")
    # framework errors: validation, unknown route, wrong method
    body = failure(client.post("/search", json={"query": 1}), 422, "validation")
    assert body["details"]["errors"]
    failure(client.get("/nowhere"), 404, "not_found")
    failure(client.put("/search"), 405, "method_not_allowed")
    failure(client.post("/webhooks/github", json={}), 401, "unauthorized")


def test_the_status_panel_json_is_the_envelope(client: TestClient, tmp_path: Path) -> None:
    assert success(client.get("/ui/status.json"))["status"] == "queryable"  # loopback, no tokens: open
    home = tmp_path / "secured"
    home.mkdir()
    (home / "gitkb.toml").write_text(
        '[[server.tokens]]\nname = "reader"\ntoken = "' + "r" * 24 + '"\nscopes = ["read"]\n'
    )
    settings = load_settings(home, embedding_provider="hashing", embedding_model="hashing-384")
    with TestClient(create_app(settings), client=LOCAL) as c:
        failure(c.get("/ui/status.json"), 401, "unauthorized")  # no session: not {"ok": false, ...}


def test_docs_and_openapi_describe_the_envelope(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    desc = spec["info"]["description"]
    assert '"Success": false' in desc and '"ok"' not in desc
    text = (Path(__file__).parent.parent / "docs" / "deployment.md").read_text()
    assert not re.search(r'\{"ok": (true|false)', text.replace('older\nversions answered `{"ok": false', ""))
    assert '"Success": false, "Error"' in text
