"""prleak21: an agent's open_kb_pull_request (and refresh_proposals) tell only of proposals on files
its binding reads.

The world of tests/test_gate21_refresh.py: sources ``pub`` (docs/public/**, KB ka, agent alice in
mode propose) and ``priv`` (docs/private/**) on one repository; on pub alice staged an edit of
public/a.md, the operator one of public/c.md and one of private/payroll.md. alice's
open_kb_pull_request('pub') answered the whole staged branch: the payroll edit's id, its path in
changed_files and its diff (the salary line). The review (the PR/MR, for people) still holds every
staged proposal; the agent's answer shows the fed ones and how many others there are.
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

from gitkb.core import action_table
from gitkb.mcp import build_server
from gitkb.mcp.render import parse_block
from helpers import error_code, git, ok, with_roots
from test_gate21_refresh import BOT, SECRET, TOML, _world

PUBLIC = {"docs/public/a.md", "docs/public/c.md"}


def _as_alice(c: TestClient, ws: Any, how: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    if how == "library":
        return ok(getattr(ws.as_agent("alice"), name)(**args))
    if how == "mcp":

        async def main() -> Any:
            async with Client(build_server(ws, "alice")) as client:
                return await client.call_tool(name, args)

        r = anyio.run(main)
        assert not r.is_error, r.content[0].text
        text = r.content[0].text
        return dict(parse_block(text) if text.startswith("<<<") else json.loads(text))
    path = {"open_kb_pull_request": "/pulls", "refresh_proposals": "/proposals/refresh"}[name]
    r = c.post(path, json=args, headers={"Authorization": f"Bearer {BOT}"})
    assert r.status_code == 200, r.text
    return dict(r.json())


def _leaks(out: dict[str, Any], hidden: str) -> list[str]:
    text = json.dumps(out)
    return [w for w in (SECRET, "payroll", "salary", "private", hidden) if w in text]


@pytest.mark.parametrize("how", ["library", "mcp", "http"])
def test_an_agents_pull_request_answer_shows_only_the_fed_proposals(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None, how: str
) -> None:
    c = make_client(with_roots(TOML, tmp_path))
    ws, ids = _world(c, tmp_path)
    out = _as_alice(c, ws, how, "open_kb_pull_request", {"source_id_or_index": "pub"})
    assert _leaks(out, ids["operator_private"]) == [], out
    assert set(out["proposal_ids"]) == {ids["mine"], ids["operator_public"]}, out
    assert {f["path"] for f in out["changed_files"]} == PUBLIC, out
    assert "every team" in out["diff"] and "rollout" in out["diff"], out["diff"]
    assert out["diff"].count("diff --git ") == 2, out["diff"]
    assert out["other_proposals"] == 1 and "1 other staged proposal" in out["Message"], out
    assert out["requested_by"] == "agent:alice" and out["review_state"] == "pending", out
    # the review itself (for the reviewer) holds every staged proposal, unchanged
    full = ok(ws.show_review(out["review_id"]))
    assert set(full["proposal_ids"]) == set(ids.values()), full
    assert "docs/private/payroll.md" in {f["path"] for f in full["changed_files"]}, full
    assert "bob 250" in full["diff"] and "docs/private/payroll.md" in full["body"], full
    # the operator's own call returns that review again, whole
    again = ok(ws.open_kb_pull_request("pub"))
    assert again["existing"] and again["review_id"] == out["review_id"], again
    assert set(again["proposal_ids"]) == set(ids.values()) and "bob 250" in again["diff"], again
    assert "other_proposals" not in again, again
    # alice asking again gets the same cut view
    twice = _as_alice(c, ws, how, "open_kb_pull_request", {"source_id_or_index": "pub"})
    assert twice["existing"] and twice["review_id"] == out["review_id"], twice
    assert _leaks(twice, ids["operator_private"]) == [], twice


def test_an_agent_choosing_proposals_names_only_fed_ones(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None
) -> None:
    """An agent's proposal_ids: a fed proposal (the operator's c.md edit) may be chosen; the hidden
    payroll proposal reads exactly like an unknown id (not_found), so its id is confirmed to nobody."""
    c = make_client(with_roots(TOML, tmp_path))
    ws, ids = _world(c, tmp_path)
    chosen = [ids["operator_public"], ids["operator_private"]]
    mine = ok(ws.open_kb_pull_request("pub", title="payroll raise", proposal_ids=chosen))
    out = ok(ws.as_agent("alice").open_kb_pull_request("pub", proposal_ids=[ids["operator_public"]]))
    assert out["review_id"] != mine["review_id"], out  # only c.md: another head, another review
    assert out["proposal_ids"] == [ids["operator_public"]] and out["other_proposals"] == 0, out
    assert out["title"] == "docs: edit docs/public/c.md", out  # nothing hidden: the title is shown
    # naming the hidden proposal reads as not staged, like an unknown id
    agent = ws.as_agent("alice")
    fake = "prop_" + "0" * 20
    r = agent.open_kb_pull_request("pub", proposal_ids=[ids["operator_private"]])
    unknown = agent.open_kb_pull_request("pub", proposal_ids=[fake])
    assert error_code(r) == error_code(unknown) == "not_found", (r, unknown)
    assert r["Error"].replace(ids["operator_private"], fake) == unknown["Error"], (r, unknown)


def test_the_returned_review_hides_another_callers_title_body_and_name(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None
) -> None:
    c = make_client(with_roots(TOML, tmp_path))
    ws, ids = _world(c, tmp_path)
    first = ok(ws.open_kb_pull_request("pub", title="payroll raise for bob", body="see private/payroll.md"))
    assert first["requested_by"].startswith("local:"), first
    out = ok(ws.as_agent("alice").open_kb_pull_request("pub"))
    assert out["existing"] and out["review_id"] == first["review_id"], out
    assert _leaks(out, ids["operator_private"]) == [], out
    assert out["title"] is None and out["body"] is None and out["requested_by"] == "local", out


def test_no_action_offered_to_agents_takes_a_commit() -> None:
    """Why an agent may see commit ids (branch_head, base, head, push_sha): none of its actions
    reads a commit, so such an id fetches nothing by itself. A new agent action that takes one
    must revisit fed_view's rule first."""
    offered = [a for a in action_table.ACTIONS.values() if a.agents]
    assert offered
    words = {"commit", "sha", "ref", "head", "base", "rev", "revision", "branch", "tree"}
    for a in offered:
        for p in a.wire_params:
            parts = set(p.name.lower().split("_"))
            assert not (parts & words) or p.name == "commit_message", (a.name, p.name)


def test_others_commits_a_push_would_overwrite_are_counted_not_named(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None
) -> None:
    """Someone pushed a commit by hand to gitkb/proposals/pub (its message names the payroll file):
    the reviewer sees it in overwrites, the Warnings and the diff's # lines; alice sees how many."""
    c = make_client(with_roots(TOML, tmp_path))
    ws, ids = _world(c, tmp_path)
    work = tmp_path / "work"
    git(work, "checkout", "-q", "-b", "hand")
    (work / "docs" / "public" / "hand.md").write_text("# Hand\n\nBy hand.\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", f"fix {SECRET} in docs/private/payroll.md")
    git(work, "push", "-q", str(tmp_path / "remote.git"), "hand:gitkb/proposals/pub")
    out = _as_alice(c, ws, "mcp", "open_kb_pull_request", {"source_id_or_index": "pub"})
    assert _leaks(out, ids["operator_private"]) == [], out
    assert "overwrites" not in out and any("overwrites 1 commit(s)" in w for w in out["Warnings"]), out
    full = ok(ws.show_review(out["review_id"]))
    assert len(full["overwrites"]) == 1 and SECRET in full["diff"], full


def test_a_denied_reviews_reason_is_not_shown_when_it_holds_other_proposals(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None
) -> None:
    """The reviewer denied the review of every staged proposal with a reason about the payroll
    edit; alice asking for a review of the same branch state is refused without that reason."""
    c = make_client(with_roots(TOML, tmp_path))
    ws, ids = _world(c, tmp_path)
    review = ok(ws.open_kb_pull_request("pub"))["review_id"]
    ok(ws.deny_review(review, f"{SECRET}: bob's salary stays at 200"))
    r = ws.as_agent("alice").open_kb_pull_request("pub")
    assert error_code(r) == "review_denied" and review in r["Error"], r
    assert _leaks(r, ids["operator_private"]) == [] and "bob" not in json.dumps(r), r
    mine = ws.open_kb_pull_request("pub")  # the operator reads the reason
    assert error_code(mine) == "review_denied" and SECRET in json.dumps(mine), mine
