"""The agent's limit of search results is one constant (``core.action_table.MAX_TOP_K``), and
what the HTTP API documents about ``top_n`` is what it does."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from gitkb.core import action_table as table
from helpers import error_code, ok

SRC = Path(__file__).resolve().parents[1] / "src" / "gitkb"


def _assigned(name: str) -> list[str]:
    """The modules under src/gitkb that assign ``name`` at module level (an import is not one)."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                out.append(str(path.relative_to(SRC)))
    return out


def test_the_agent_limit_is_declared_once() -> None:
    """Before: ``MAX_TOP_K = 50`` in core/action_table.py and services/access/knowledge.py, and
    ``MAX_TOP_K = knowledge.MAX_TOP_K`` in services/dispatch/scope.py."""
    assert _assigned("MAX_TOP_K") == ["core/action_table.py"]
    assert table.MAX_TOP_K == 50


OPERATOR, BOT = "o" * 24, "b" * 24
TOKENS = (
    f'[[server.tokens]]\nname = "ops"\ntoken = "{OPERATOR}"\nscopes = ["read"]\n'
    f'[[server.tokens]]\nname = "bot"\ntoken = "{BOT}"\nscopes = ["read"]\nagent = "alice"\n'
)


def _ranges(description: str) -> tuple[int, int]:
    """(the highest top_n the description gives a caller, the highest it gives an agent)."""
    everyone = re.search(r"\b1-(\d+)\b", description)
    agent = re.search(r"agent[^.;]*?\b1-(\d+)\b|\b1-(\d+)\b[^.;]*?agent", description)
    assert everyone and agent, description
    return int(everyone.group(1)), int(agent.group(1) or agent.group(2))


@pytest.mark.parametrize("route", ["/search", "/ask"])
def test_the_documented_top_n_range_is_what_each_caller_gets(make_client: Any, route: str) -> None:
    """Before: /search and /ask documented top_n "1-100" to agent tokens, refused over 50."""
    c = make_client(TOKENS)
    ws = c.app.state.gitkb.workspace
    ok(ws.document_index("CREATE_INDEX", index_name="a"))
    ok(ws.document_index("ADD_TEXT", index_name="a", text="failover runbook", filepath="a.md"))
    ok(ws.kb_create("ka", ["a"]))
    ok(ws.agent_assign("alice", ["ka"]))
    schema = c.get("/openapi.json").json()
    body = schema["paths"][route]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    top_n = schema["components"]["schemas"][body.rsplit("/", 1)[1]]["properties"]["top_n"]
    most, agents_most = _ranges(top_n["description"])
    for token, hi in ((OPERATOR, most), (BOT, agents_most)):
        auth = {"Authorization": f"Bearer {token}"}
        q = {"query": "failover", "index_name": "a", "mode": "keyword"}
        at = c.post(route, json={**q, "top_n": hi}, headers=auth)
        assert at.status_code == 200 and at.json()["Success"], (token[0], hi, at.json())
        over = c.post(route, json={**q, "top_n": hi + 1}, headers=auth)
        assert over.status_code == 400 and error_code(over.json()) == "invalid_argument", (token[0], hi + 1)
