"""``gitkb mcp --transport http`` answers only the Host names the HTTP API answers (issue 21): the
``[server]`` allowlist (localhost, ``public_host``, ``allowed_hosts``, the address reached) is
checked before the MCP transport reads a request, also on a non-loopback bind (``--allow-remote``),
where the MCP SDK checks nothing."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from gitkb.core.config import load_settings
from gitkb.http.config import load_server_config
from gitkb.mcp import build_server
from gitkb.mcp.server import http_app

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def app(ws: Any) -> Any:
    toml = ws.home / "gitkb.toml"
    old = toml.read_text() if toml.exists() else ""
    toml.write_text(old + '\n[server]\npublic_host = "kb.example.com"\n')
    cfg = load_server_config(load_settings(ws.home))
    return http_app(build_server(ws), cfg, host="0.0.0.0")


@pytest.mark.parametrize("host", ["evil.example", "kb.example.com.evil.example", "127.0.0.1.nip.io:8781"])
def test_a_foreign_host_is_refused_before_the_transport(app: Any, host: str) -> None:
    with TestClient(app, base_url=f"http://{host}") as client:
        r = client.post("/mcp", json=INIT, headers=HEADERS)
    assert r.status_code == 403, r.text
    assert r.json()["code"] == "forbidden" and "Host" in r.json()["Error"]


@pytest.mark.parametrize("host", ["localhost:8781", "127.0.0.1:8781", "kb.example.com"])
def test_allowed_hosts_reach_the_mcp_server(app: Any, host: str) -> None:
    with TestClient(app, base_url=f"http://{host}") as client:
        r = client.post("/mcp", json=INIT, headers=HEADERS)
    assert r.status_code == 200, r.text
    assert '"serverInfo"' in r.text and "gitkb" in r.text
