"""gate21: an agent's status keeps exactly what says whether its search is current.

get_index_status dropped a few keys for an agent (writer, catalog, in_flight_job) and passed the
rest, so each new workspace-wide view reached agents: retired_chunks (counts and retention),
vectors (ef_search per Chroma collection, whose names its Warnings list), query_embedding (the
graph and the embedding identities loaded). Now an agent's status is an allowlist
(scope.AGENT_STATUS_KEYS), checked here through the library, the MCP tool and an agent's HTTP token.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client

from gitkb.mcp import build_server
from gitkb.mcp.render import parse_block
from helpers import ok

BOT = "b" * 24
TOML = f'[[server.tokens]]\nname = "bot"\ntoken = "{BOT}"\nscopes = ["read"]\nagent = "alice"\n'
KEPT = {
    "Success",
    "Message",
    "status",
    "caught_up",
    "error",
    "queue_depth",
    "in_flight",
    "dirty_paths",
    "dirty_embeddings",
    "documents_indexed",
    "documents_indexed_error",
    "skipped_files",
}
OPERATOR_ONLY = {"retired_chunks", "vectors", "query_embedding", "writer", "catalog", "in_flight_job"}


def _world(c: TestClient) -> tuple[Any, str]:
    ws = c.app.state.gitkb.workspace  # type: ignore[attr-defined]
    ids = {n: ok(ws.document_index("CREATE_INDEX", index_name=n))["index_id"] for n in ("a", "hrsecret")}
    ok(ws.document_index("ADD_TEXT", index_name="a", text="alpha failover runbook", filepath="a.md"))
    for i in range(3):
        ok(ws.document_index("ADD_TEXT", index_name="hrsecret", text=f"payroll {i}", filepath=f"p{i}.md"))
    ok(ws.document_index("ADD_TEXT", index_name="a", text="alpha v2", filepath="a.md"))  # a retired chunk
    ok(ws.kb_create("ka", ["a"]))
    ok(ws.agent_assign("alice", ["ka"]))
    return ws, ids["hrsecret"]


def _status(c: TestClient, ws: Any, how: str) -> dict[str, Any]:
    if how == "library":
        return ok(ws.as_agent("alice").get_index_status())
    if how == "mcp":

        async def main() -> Any:
            async with Client(build_server(ws, "alice")) as client:
                return await client.call_tool("get_index_status", {})

        r = anyio.run(main)
        assert not r.is_error, r.content[0].text
        text = r.content[0].text
        return dict(parse_block(text) if text.startswith("<<<") else json.loads(text))
    r = c.get("/status", headers={"Authorization": f"Bearer {BOT}"})
    assert r.status_code == 200, r.text
    return dict(r.json())


@pytest.mark.parametrize("how", ["library", "mcp", "http"])
def test_an_agents_status_keeps_exactly_the_listed_keys(
    make_client: Callable[..., TestClient], tmp_path: Path, how: str
) -> None:
    c = make_client(TOML)
    ws, other = _world(c)
    operator = ok(ws.get_index_status())
    assert set(operator) >= OPERATOR_ONLY, sorted(operator)  # the operator still sees them all
    assert operator["retired_chunks"]["rows"] >= 1 and operator["documents_indexed"] == 4, operator
    out = _status(c, ws, how)
    assert set(out) == KEPT, sorted(set(out) ^ KEPT)
    assert out["documents_indexed"] == 1, out  # its own index's documents only
    text = json.dumps(out)
    assert other not in text and "hrsecret" not in text and "hashing" not in text, out
