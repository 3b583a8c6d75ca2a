"""gate21: an agent's refresh_proposals tells only of proposals on files its binding reads.

One repository, two sources: ``pub`` feeds docs/public/** (KB ka, agent alice in mode propose),
``priv`` feeds docs/private/**. The operator may stage on source pub anywhere under the documents
root, docs/private/payroll.md too. refresh_proposals('pub') run by alice answered every staged
proposal of pub: the operator's payroll edit with its id, its path and, as it conflicts, the
file's current lines ('salary table: alice 100, bob 210'). Now an agent sees the proposals on
the files pub feeds (its own and the operator's there: the rule is the path, not who staged it),
through the library, MCP and HTTP; the others are refreshed all the same, and the operator sees all.
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
from helpers import bare_repo, git, ok, with_roots

SECRET = "zebrafishcanary"
BOT = "b" * 24
TOML = f'[[server.tokens]]\nname = "bot"\ntoken = "{BOT}"\nscopes = ["propose"]\nagent = "alice"\n'


def _world(c: TestClient, tmp_path: Path) -> tuple[Any, dict[str, str]]:
    work = tmp_path / "work"
    (work / "docs" / "public").mkdir(parents=True)
    (work / "docs" / "private").mkdir(parents=True)
    (work / "docs" / "public" / "a.md").write_text("# Public\n\nThe failover runbook for everyone.\n")
    (work / "docs" / "public" / "c.md").write_text("# C\n\nThe release checklist.\n")
    payroll = work / "docs" / "private" / "payroll.md"
    payroll.write_text(f"# Payroll\n\nThe {SECRET} salary table: alice 100, bob 200.\n")
    remote = bare_repo(tmp_path, work)
    ws = c.app.state.gitkb.workspace  # type: ignore[attr-defined]
    ok(ws.source_add("pub", str(remote), include=["public/**"]))
    ok(ws.source_add("priv", str(remote), include=["private/**"]))
    ok(ws.source_sync("pub"))
    ok(ws.source_sync("priv"))
    ok(ws.kb_create("ka", ["pub"]))
    ok(ws.kb_create("kpriv", ["priv"]))
    ok(ws.agent_assign("alice", ["ka"], mode="propose"))
    agent = ws.as_agent("alice")
    ids = {
        "mine": ok(agent.propose_kb_edit("pub", "public/a.md", search="everyone", replace="every team"))[
            "proposal_id"
        ],
        "operator_public": ok(ws.propose_kb_edit("pub", "public/c.md", search="release", replace="rollout"))[
            "proposal_id"
        ],
        "operator_private": ok(
            ws.propose_kb_edit("pub", "private/payroll.md", search="bob 200", replace="bob 250")
        )["proposal_id"],
    }
    # the branch moves on: alice's edit and the payroll edit conflict, c.md's still applies
    (work / "docs" / "public" / "a.md").write_text("# Public\n\nThe failover runbook for all staff.\n")
    payroll.write_text(f"# Payroll\n\nThe {SECRET} salary table: alice 100, bob 210.\n")
    git(work, "commit", "-q", "-am", "upstream edits")
    git(work, "push", "-q", str(remote), "main")
    return ws, ids


def _refresh(c: TestClient, ws: Any, how: str) -> dict[str, Any]:
    if how == "library":
        return ok(ws.as_agent("alice").refresh_proposals("pub"))
    if how == "mcp":

        async def main() -> Any:
            async with Client(build_server(ws, "alice")) as client:
                return await client.call_tool("refresh_proposals", {"source": "pub"})

        r = anyio.run(main)
        assert not r.is_error, r.content[0].text
        text = r.content[0].text
        return dict(parse_block(text) if text.startswith("<<<") else json.loads(text))
    r = c.post("/proposals/refresh", json={"source": "pub"}, headers={"Authorization": f"Bearer {BOT}"})
    assert r.status_code == 200, r.text
    return dict(r.json())


@pytest.mark.parametrize("how", ["library", "mcp", "http"])
def test_an_agents_refresh_shows_only_proposals_on_files_its_binding_reads(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None, how: str
) -> None:
    c = make_client(with_roots(TOML, tmp_path))
    ws, ids = _world(c, tmp_path)
    out = _refresh(c, ws, how)
    text = json.dumps(out)
    assert SECRET not in text and "payroll" not in text and "salary" not in text, out
    assert ids["operator_private"] not in text, out
    # both ways: alice's own conflict and the operator's applied edit on a file pub feeds are shown
    assert {p["proposal_id"] for p in out["Proposals"]} == {ids["mine"], ids["operator_public"]}, out
    assert out["conflicts"] == [ids["mine"]] and out["applied"] == [ids["operator_public"]], out
    [mine] = [p for p in out["Proposals"] if p["proposal_id"] == ids["mine"]]
    assert any("all staff" in line["text"] for line in mine["current_lines"]), mine
    assert "1 applied, 1 conflict(s)" in out["Message"], out
    # the hidden proposal was refreshed too, and the operator sees it
    states = {p["proposal_id"]: p["state"] for p in ok(ws.list_proposals("pub", state="all"))["Proposals"]}
    assert states[ids["operator_private"]] == "conflict", states
    again = ok(ws.refresh_proposals("pub"))  # the operator: nothing hidden (one staged proposal left)
    assert [p["proposal_id"] for p in again["Proposals"]] == [ids["operator_public"]], again


def test_the_operators_refresh_shows_every_proposal(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None
) -> None:
    c = make_client(with_roots(TOML, tmp_path))
    ws, ids = _world(c, tmp_path)
    out = ok(ws.refresh_proposals("pub"))
    assert {p["proposal_id"] for p in out["Proposals"]} == set(ids.values()), out
    assert sorted(out["conflicts"]) == sorted([ids["mine"], ids["operator_private"]]), out
    assert "1 applied, 2 conflict(s)" in out["Message"], out
