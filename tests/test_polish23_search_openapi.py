"""polish23: the OpenAPI of ``/search`` (and ``/ask``, ``/search_index``) documents this server's
maximum of ``top_n``, built from its ``[server]`` config, and the error a value over it gets.

Before: the schema carried no maximum and its description the action table's fixed ranges
("1-100 ... 1-50"), whatever ``[server] max_top_n`` said; a 400 was not documented at all (only
FastAPI's 422).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gitkb.core.action_table import MAX_TOP_K, MAX_TOP_N
from helpers import error_code, ok

OPERATOR, BOT = "o" * 24, "b" * 24
TOKENS = (
    f'[[server.tokens]]\nname = "ops"\ntoken = "{OPERATOR}"\nscopes = ["read"]\n'
    f'[[server.tokens]]\nname = "bot"\ntoken = "{BOT}"\nscopes = ["read"]\nagent = "alice"\n'
)
ROUTES = ("/search", "/ask", "/search_index")


def _server(make_client: Any, at: Path, max_top_n: int | None) -> Any:
    cap = f"[server]\nmax_top_n = {max_top_n}\n" if max_top_n is not None else ""
    c = make_client(cap + TOKENS, at=at)
    ws = c.app.state.gitkb.workspace
    ok(ws.document_index("CREATE_INDEX", index_name="a"))
    ok(ws.document_index("ADD_TEXT", index_name="a", text="failover runbook", filepath="a.md"))
    ok(ws.kb_create("ka", ["a"]))
    ok(ws.agent_assign("alice", ["ka"]))
    return c


def _top_n(schema: dict[str, Any], route: str) -> dict[str, Any]:
    body = schema["paths"][route]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    return schema["components"]["schemas"][body.rsplit("/", 1)[1]]["properties"]["top_n"]  # type: ignore[no-any-return]


def _maximum(prop: dict[str, Any]) -> int:
    [integer] = [b for b in prop.get("anyOf", [prop]) if b.get("type") == "integer"]
    assert integer.get("minimum") == 1, prop
    return int(integer["maximum"])


def _agents_most(description: str) -> int:
    """The highest top_n the description gives an agent (as tests/test_roots21_limits.py reads it)."""
    m = re.search(r"agent[^.;]*?\b1-(\d+)\b|\b1-(\d+)\b[^.;]*?agent", description)
    assert m, description
    return int(m.group(1) or m.group(2))


def _documented_400(schema: dict[str, Any], route: str) -> str:
    refused = schema["paths"][route]["post"]["responses"]["400"]
    env = refused["content"]["application/json"]["schema"]
    assert set(env["required"]) == {"Success", "Error", "code", "next_steps", "details"}, env
    return str(refused["description"])


def _calls(c: Any, route: str, token: str, top_n: int) -> Any:
    q = {"query": "failover", "mode": "keyword", "top_n": top_n}
    q |= {"indexes": ["a"]} if route == "/search_index" else {"index_name": "a"}
    return c.post(route, json=q, headers={"Authorization": f"Bearer {token}"})


@pytest.mark.parametrize(
    ("cap", "most", "agents"),
    [(30, 30, 30), (None, MAX_TOP_N, MAX_TOP_K), (70, 70, MAX_TOP_K)],
)
def test_the_schema_documents_this_servers_top_n_and_the_refusal_over_it(
    make_client: Any, tmp_path: Path, cap: int | None, most: int, agents: int
) -> None:
    c = _server(make_client, tmp_path / f"ws{cap}", cap)
    schema = c.get("/openapi.json").json()
    for route in ROUTES:
        prop = _top_n(schema, route)
        documented = _maximum(prop)
        assert documented == (agents if route == "/search_index" else most), (route, prop)
        assert f"1-{documented}" in prop["description"], prop
        assert _agents_most(prop["description"]) == agents, (route, prop["description"])
        said = _documented_400(schema, route)
        assert "invalid_argument" in said and f"top_n over {documented}" in said, said
        for token, hi in ((OPERATOR, documented), (BOT, agents)):
            at = _calls(c, route, token, hi)
            assert at.status_code == 200 and at.json()["Success"], (route, token[0], hi, at.text)
            over = _calls(c, route, token, hi + 1)
            assert over.status_code == 400, (route, token[0], hi + 1, over.text)
            assert error_code(over.json()) == "invalid_argument", over.text


def test_two_servers_in_one_process_document_their_own_caps(make_client: Any, tmp_path: Path) -> None:
    """The maximum is built per app from its config (the body models are shared by every app)."""
    low = _server(make_client, tmp_path / "low", 30).get("/openapi.json").json()
    high = _server(make_client, tmp_path / "high", None).get("/openapi.json").json()
    assert _maximum(_top_n(low, "/search")) == 30 and _maximum(_top_n(high, "/search")) == MAX_TOP_N
    assert "1-30 on this server" in _top_n(low, "/search")["description"]
    assert f"1-{MAX_TOP_N} on this server" in _top_n(high, "/search")["description"]
