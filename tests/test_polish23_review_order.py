"""polish23: a whole-branch review lists its ``proposal_ids`` in branch order, the order its branch,
its diff and a choice of proposals follow, on every interface that shows the list.

As in tests/test_order21_branch_order.py: proposals a, c, e are staged in that order on source
handbook, then a review of [c] alone moves c first on the branch (c, a, e). Before: a review of
every staged proposal opened after that listed them a, c, e (the catalog's staging order).
"""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from mcp import Client

from gitkb.cli.main import cli
from gitkb.mcp import build_server
from gitkb.mcp.render import parse_block
from helpers import SOURCE, Upstream, git, ok, with_roots

BRANCH = f"gitkb/proposals/{SOURCE}"
FILES = {
    "a": "runbooks/rotate-api-keys.md",
    "c": "policies/password-policy.md",
    "e": "onboarding/first-week.md",
}
AGENT = "docs-bot"


@pytest.fixture
def client(make_client: Any, upstream: Upstream) -> Any:
    """The open API over a fresh workspace, the bare upstream inside allowed_roots (HTTP is held to them)."""
    return make_client(with_roots("", upstream.remote))


def _stage(ws: Any, upstream: Upstream) -> dict[str, str]:
    """a, c, e staged in that order, then c chosen alone (the branch holds c, a, e)."""
    ok(ws.source_add(SOURCE, str(upstream.remote)))
    ok(ws.source_sync(SOURCE))
    ids = {}
    for key, path in FILES.items():
        text = (upstream.work / "docs" / path).read_text()
        ids[key] = ok(ws.propose_kb_edit(SOURCE, path, content=text + f"\nmarker-{key}\n"))["proposal_id"]
    ok(ws.open_kb_pull_request(SOURCE, proposal_ids=[ids["c"]]))
    return ids


def _branch_order(ws: Any, upstream: Upstream) -> list[str]:
    """The staged proposals as the branch holds them, read from git: base first, tip last."""
    [repo] = list((ws.home / "repos").iterdir())
    by_commit = {p["commit"]: p for p in ok(ws.list_proposals(SOURCE))["Proposals"]}
    base = git(upstream.work, "rev-parse", "HEAD")
    walk, at = [], git(repo, "rev-parse", f"refs/heads/{BRANCH}")
    while at != base:
        walk.append(by_commit[at]["proposal_id"])
        at = by_commit[at]["parent"]
    return walk[::-1]


def test_a_whole_branch_review_lists_its_proposals_in_branch_order(
    client: TestClient, upstream: Upstream
) -> None:
    ws = client.app.state.gitkb.workspace  # type: ignore[attr-defined]
    ids = _stage(ws, upstream)
    order = _branch_order(ws, upstream)
    assert order == [ids["c"], ids["a"], ids["e"]], (order, ids)  # staging order differs
    review = ok(ws.open_kb_pull_request(SOURCE))  # was [a, c, e]
    assert review["proposal_ids"] == order, (review["proposal_ids"], order)
    assert all(f"marker-{k}" in review["diff"] for k in ids), review["diff"]
    rid = review["review_id"]
    assert ok(ws.show_review(rid))["proposal_ids"] == order
    r = client.get(f"/reviews/{rid}")
    assert r.status_code == 200 and r.json()["proposal_ids"] == order, r.text
    listed = [x for x in ok(client.get("/reviews").json())["Reviews"] if x["review_id"] == rid]
    assert [x["proposal_ids"] for x in listed] == [order], listed
    page = client.get(f"/ui/reviews/{rid}")
    assert page.status_code == 200, page.text
    shown = re.findall(r"/proposals/(prop_[^/\"]+)/discard", page.text)
    assert shown == order, (shown, order)
    titles = [f"docs/{FILES[k]}" for k in ("c", "a", "e")]
    body = review["body"]
    assert sorted(titles, key=body.index) == titles, body  # the default body lists them so too


def test_the_cli_json_shows_the_branch_order(ws: Any, upstream: Upstream) -> None:
    ids = _stage(ws, upstream)
    order = _branch_order(ws, upstream)
    home = str(ws.home)
    ws.close()

    def gitkb(*args: str) -> dict[str, Any]:
        res = CliRunner().invoke(cli, ["--home", home, "--json", *args], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return json.loads(res.output)  # type: ignore[no-any-return]

    opened = gitkb("pr", "open", SOURCE)
    assert opened["proposal_ids"] == order == [ids["c"], ids["a"], ids["e"]], (opened, ids)
    assert gitkb("review", "show", opened["review_id"])["proposal_ids"] == order


def test_an_agents_whole_branch_review_over_mcp_lists_branch_order(ws: Any, upstream: Upstream) -> None:
    ids = _stage(ws, upstream)
    ok(ws.kb_create("handbook-kb", [SOURCE]))
    ok(ws.agent_assign(AGENT, ["handbook-kb"], mode="propose"))
    order = _branch_order(ws, upstream)

    async def main() -> dict[str, Any]:
        async with Client(build_server(ws, AGENT)) as mcp:
            got = await mcp.call_tool("open_kb_pull_request", {"source_id_or_index": SOURCE})
            assert not got.is_error, got.content[0].text
            return parse_block(got.content[0].text)  # type: ignore[no-any-return]

    out = anyio.run(main)
    assert out["proposal_ids"] == order == [ids["c"], ids["a"], ids["e"]], (out, ids)
    assert ok(ws.show_review(out["review_id"]))["proposal_ids"] == order


def test_a_whole_branch_review_in_staging_order_stays_so(ws: Any, upstream: Upstream) -> None:
    """Where nothing was chosen, the branch and staging order agree and the list is that order."""
    ok(ws.source_add(SOURCE, str(upstream.remote)))
    ok(ws.source_sync(SOURCE))
    made = []
    for key, path in FILES.items():
        text = (upstream.work / "docs" / path).read_text()
        made.append(ok(ws.propose_kb_edit(SOURCE, path, content=text + f"\nmarker-{key}\n"))["proposal_id"])
    assert _branch_order(ws, upstream) == made
    assert ok(ws.open_kb_pull_request(SOURCE))["proposal_ids"] == made
