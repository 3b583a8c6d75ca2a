"""One error shape on every error path of every route.

The routes are read from the app's own OpenAPI description, so a route added
later is walked too: for each one, no token (401), a token without the scope
(403), a malformed body (422 / 400), a missing resource (4xx), a wrong method
(405), an oversize body (413) and a non-JSON body (415) must all answer
the envelope ``{"Success": false, "Error", "code", "next_steps", "details"}`` with the
status of the code.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from gitkb.core.config import load_settings
from gitkb.http import create_app
from gitkb.http.errors import ERROR_KEYS, STATUS_BY_CODE, respond

TOKENS = {"reader": "r" * 24, "admin": "a" * 24}
TOML = (
    "[server]\nmax_body_bytes = 4096\nwebhook_max_body_bytes = 2048\n"
    '[[server.tokens]]\nname = "reader"\ntoken = "' + TOKENS["reader"] + '"\nscopes = ["read"]\n'
    '[[server.tokens]]\nname = "admin"\ntoken = "' + TOKENS["admin"] + '"\nscopes = ["admin"]\n'
)
OPEN = {("get", "/healthz"), ("get", "/readyz")}
SIGNED = {("post", "/webhooks/github"), ("post", "/webhooks/gitlab")}  # a signature, not a bearer token
READ_POSTS = {"/search", "/ask", "/search_index"}
FILL = {
    "index_name": "no-such-index",
    "file_id": "doc_missing",
    "filepath": "no/such.md",
    "job_id": "job_missing",
    "name": "no-such",
    "proposal_id": "prop_missing",
    "review_id": "rev_missing",
    "number": "1",
    "source": "no-such",
}


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client(TOML, peer=("127.0.0.1", 1), raise_server_exceptions=False)


class Walk:
    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.spec = client.get("/openapi.json").json()
        self.covered: dict[tuple[str, str], set[int]] = {}

    def routes(self) -> list[tuple[str, str, dict[str, Any]]]:
        return [(m, p, op) for p, ops in self.spec["paths"].items() for m, op in ops.items()]

    def url(self, template: str) -> str:
        return re.sub(r"\{(\w+)(?::path)?\}", lambda m: FILL.get(m.group(1), "x"), template)

    def expect(self, method: str, template: str, r: Any, status: int | None = None) -> dict[str, Any]:
        assert r.status_code >= 400, (method, template, r.status_code, r.text)
        if status is not None:
            assert r.status_code == status, (method, template, r.status_code, r.text)
        err = r.json()
        assert set(err) == set(ERROR_KEYS) and err["Success"] is False, (method, template, err)
        assert isinstance(err["code"], str) and isinstance(err["Error"], str) and err["Error"]
        assert "Traceback" not in r.text
        assert STATUS_BY_CODE.get(err["code"], 500) == r.status_code, (err, r.status_code)
        assert isinstance(err["next_steps"], list) and all(isinstance(s, str) for s in err["next_steps"])
        assert isinstance(err["details"], dict)
        self.covered.setdefault((method, template), set()).add(r.status_code)
        return err

    def minimal_body(self, op: dict[str, Any]) -> Any:
        content = op.get("requestBody", {}).get("content", {}).get("application/json")
        if content is None:
            return None
        schema = self._resolve(content.get("schema", {}))
        refs = [a for a in schema.get("anyOf", []) if "$ref" in a]  # an optional body: Model | None
        if refs:
            schema = self._resolve(refs[0])
        if "properties" not in schema:  # the action API's free-form object
            return {"action": "LIST_INDICES"}
        sample = {"string": "x", "integer": 1, "number": 1, "boolean": False, "array": [], "object": {}}
        out: dict[str, Any] = {}
        for name in schema.get("required", []):
            prop = self._resolve(schema["properties"][name])
            kinds = [prop.get("type")] + [self._resolve(a).get("type") for a in prop.get("anyOf", [])]
            out[name] = next(sample[k] for k in kinds if k in sample)
        return out

    def _resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        ref = schema.get("$ref")
        if not ref:
            return schema
        return dict(self.spec["components"]["schemas"][ref.rsplit("/", 1)[1]])


def test_every_route_every_error_path(client: TestClient) -> None:
    w = Walk(client)
    routes = w.routes()
    assert len(routes) >= 20
    for method, tpl, op in routes:
        url = w.url(tpl)
        body = w.minimal_body(op)
        send = functools.partial(client.request, method.upper(), url)
        if (method, tpl) in OPEN:
            continue
        # 1. no credentials
        r = send(json=body) if body is not None else send()
        w.expect(method, tpl, r, 401)
        if (method, tpl) in SIGNED:
            bad = send(json=body, headers={"X-Hub-Signature-256": "sha256=00", "X-Gitlab-Token": "nope"})
            w.expect(method, tpl, bad)
        else:
            # 2. a token without the scope
            if method != "get" and tpl not in READ_POSTS and not tpl.startswith("/actions"):
                w.expect(method, tpl, send(json=body, headers=auth("reader")), 403)
            # 3. a missing resource (path parameters name nothing that exists)
            if "{" in tpl:
                w.expect(
                    method,
                    tpl,
                    send(json=body, headers=auth("admin"))
                    if body is not None
                    else send(headers=auth("admin")),
                )
        if body is not None:
            # 4. malformed bodies: not an object; not JSON; too big; not declared as JSON
            hdrs = {**auth("admin"), "X-Hub-Signature-256": "sha256=00", "X-Gitlab-Token": "t"}
            w.expect(method, tpl, send(json=[1, 2], headers=hdrs))
            w.expect(
                method, tpl, send(content=b"{nope", headers={**hdrs, "Content-Type": "application/json"})
            )
            w.expect(
                method,
                tpl,
                send(content=b"x" * 5000, headers={**hdrs, "Content-Type": "application/json"}),
                413,
            )
            w.expect(method, tpl, send(content=b"a=1", headers={**hdrs, "Content-Type": "text/plain"}), 415)
        # 5. a method the route does not have
        wrong = next(m for m in ("put", "patch") if m not in w.spec["paths"][tpl])
        w.expect(method, tpl, client.request(wrong.upper(), url, headers=auth("admin")), 405)
    missing = [(m, p) for m, p, _ in routes if (m, p) not in OPEN and (m, p) not in w.covered]
    assert not missing, missing
    # unknown routes
    w.expect("get", "/nowhere", client.get("/nowhere", headers=auth("admin")), 404)
    w.expect("get", "/nowhere", client.get("/nowhere"), 404)


def test_validation_error_detail(client: TestClient) -> None:
    r = client.post("/search", json={"query": 1, "top_n": "3"}, headers=auth("admin"))
    assert r.status_code == 422
    err = r.json()
    assert err["code"] == "validation" and "and 1 more" in err["Error"]
    assert {tuple(e["loc"]) for e in err["details"]["errors"]} == {("body", "query"), ("body", "top_n")}


def test_query_parameter_errors(client: TestClient) -> None:
    r = client.get("/jobs", params={"start": -1}, headers=auth("admin"))  # out of range: the library says
    assert r.status_code == 400 and r.json()["code"] == "invalid_argument"
    r = client.get("/jobs", params={"limit": "many"}, headers=auth("admin"))
    assert r.status_code == 422


def test_crash_is_internal_with_a_log_path(
    client: TestClient, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = client.app.state.gitkb.workspace  # type: ignore[attr-defined]

    def boom(*a: Any, **k: Any) -> dict[str, Any]:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(ws, "get_index_status", boom)  # bypasses the library's own @tool guard
    r = client.get("/status", headers=auth("admin"))
    assert r.status_code == 500
    err = r.json()
    assert err["code"] == "internal" and "gitkb.log" in err["Error"] and "kaboom" not in err["Error"]
    assert "kaboom" in (home / "logs" / "gitkb.log").read_text()


def test_failure_dict_maps_to_shape_with_details() -> None:
    r = respond(
        {
            "Success": False,
            "Error": "index 'x' is fed by a source",
            "code": "managed_repo_guard",
            "next_steps": ["Use propose_kb_edit"],
            "managed_document_repo": True,
        }
    )
    assert r.status_code == 409
    import json

    body = json.loads(bytes(r.body))
    assert body == {
        "Success": False,
        "Error": "index 'x' is fed by a source",
        "code": "managed_repo_guard",
        "next_steps": ["Use propose_kb_edit"],
        "details": {"managed_document_repo": True},
    }
    busy = respond({"Success": False, "Error": "writer busy", "code": "busy"}, retry_after_s=7)
    assert busy.status_code == 409 and busy.headers["Retry-After"] == "7"
    assert respond({"Success": False, "Error": "?", "code": "made_up"}).status_code == 500
    assert respond({"Success": True, "x": 1}).status_code == 200


def test_readyz_reports_an_unreachable_chroma_server(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    settings = load_settings(
        tmp_path / "ws",
        embedding_provider="hashing",
        embedding_model="hashing-384",
        chroma_host="127.0.0.1",
        chroma_port=port,
    )
    with TestClient(create_app(settings), client=("127.0.0.1", 1)) as c:
        r = c.get("/readyz")
        assert r.status_code == 503
        err = r.json()
        assert err["code"] == "store_unavailable" and "vectors" in err["Error"]
        assert err["details"]["checks"]["catalog"] == "ok"


def test_every_error_code_has_its_status() -> None:
    """The HTTP layer maps every code of the error tree (and its own) to a status; a code missing
    from ``STATUS_BY_CODE`` would answer 500."""
    from gitkb.core.errors import ALL_ERRORS
    from gitkb.http.errors import HTTP_ONLY

    assert [c.code for c in (*ALL_ERRORS, *HTTP_ONLY) if c.code not in STATUS_BY_CODE] == []
    assert STATUS_BY_CODE["cancelled"] == 409 and STATUS_BY_CODE["internal"] == 500
