"""When the base moved: `proposals refresh`, and reviews of chosen proposals only (real git repositories)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from gitkb.cli.main import cli
from gitkb.core.config import load_settings
from gitkb.http import create_app
from helpers import SOURCE, Upstream, git, with_roots

BRANCH = "gitkb/proposals/handbook"
ROTATE = "runbooks/rotate-api-keys.md"
RETENTION = "policies/data-retention.md"
PASSWORD = "policies/password-policy.md"


def managed_repo(ws: Any) -> Path:
    [repo] = list((ws.home / "repos").iterdir())
    return repo


def staged_text(ws: Any, path: str) -> str:
    return git(managed_repo(ws), "show", f"{BRANCH}:docs/{path}")


def ok(out: dict[str, Any]) -> dict[str, Any]:
    assert out["Success"], out
    return out


def move_base(upstream: Upstream, edits: dict[str, tuple[str, str]]) -> str:
    """A direct commit to main: each path's old text replaced by the new."""
    for path, (old, new) in edits.items():
        p = upstream.work / "docs" / path
        text = p.read_text()
        assert old in text
        p.write_text(text.replace(old, new, 1))
    return upstream.commit_push("direct commit to main")


def by_id(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["proposal_id"]: p for p in out["Proposals"]}


def test_refresh_reapplies_each_kind_or_reports_the_conflict(source_ws: Any, upstream: Upstream) -> None:
    ws = source_ws
    edit = ok(ws.propose_kb_edit(SOURCE, ROTATE, search="every 90 days", replace="every 60 days"))
    whole = staged_text(ws, RETENTION).replace("Application logs", "Audit logs", 1) + "\n"
    full = ok(ws.propose_kb_edit(SOURCE, RETENTION, content=whole))
    gone = ok(ws.propose_kb_delete(SOURCE, PASSWORD))
    review = ok(ws.open_kb_pull_request(SOURCE))
    head = move_base(upstream, {ROTATE: ("Tuesday", "Wednesday"), RETENTION: ("\n", "\nUpdated.\n")})

    out = ok(ws.refresh_proposals(SOURCE))
    assert out["applied"] == [edit["proposal_id"], gone["proposal_id"]]
    assert out["conflicts"] == [full["proposal_id"]]
    c = by_id(out)[full["proposal_id"]]
    assert c["result"] == "conflict" and "changed since" in c["reason"]
    assert any(ln["text"] == "Updated." for ln in c["current_lines"])
    assert any("gitkb proposals discard " + full["proposal_id"] in s for s in c["next_steps"])
    assert any("propose_kb_edit" in s for s in c["next_steps"])
    # the branch is the new head plus the applied proposals, in order
    repo = managed_repo(ws)
    assert git(repo, "rev-parse", f"{BRANCH}~2") == head
    assert "every 60 days" in staged_text(ws, ROTATE) and "Wednesday" in staged_text(ws, ROTATE)
    assert git(repo, "ls-tree", "--name-only", BRANCH, "docs/policies/").split() == [
        "docs/policies/data-retention.md"
    ]
    assert "Updated." in staged_text(ws, RETENTION)  # the conflicting one is not on the branch
    states = {p["proposal_id"]: p["state"] for p in ws.list_proposals(SOURCE, "all")["Proposals"]}
    assert states == {
        edit["proposal_id"]: "staged",
        gone["proposal_id"]: "staged",
        full["proposal_id"]: "conflict",
    }
    # the review of the old head is stale
    assert out["reviews_superseded"] == [review["review_id"]]
    assert ws.show_review(review["review_id"])["review_state"] == "superseded"
    # refreshing again with nothing new changes nothing
    again = ok(ws.refresh_proposals(SOURCE))
    assert again["unchanged"] is True and again["branch_head"] == out["branch_head"]
    assert ok(ws.discard_proposal(full["proposal_id"]))


def test_refresh_search_replace_must_be_found_exactly_once(source_ws: Any, upstream: Upstream) -> None:
    ws = source_ws
    edit = ok(ws.propose_kb_edit(SOURCE, ROTATE, search="every 90 days", replace="every 60 days"))
    move_base(upstream, {ROTATE: ("every 90 days", "every 30 days")})
    out = ok(ws.refresh_proposals(SOURCE))
    c = by_id(out)[edit["proposal_id"]]
    assert out["applied"] == [] and c["result"] == "conflict" and "occurs 0 times" in c["reason"]
    assert any("every 30 days" in ln["text"] for ln in c["current_lines"])
    assert "discard" in out["Message"]


def test_forge_merge_conflict_names_the_next_step(source_ws: Any, upstream: Upstream) -> None:
    ws = source_ws
    ok(ws.propose_kb_edit(SOURCE, ROTATE, search="every 90 days", replace="every 60 days"))
    ok(ws.approve_review(ok(ws.open_kb_pull_request(SOURCE))["review_id"]))
    move_base(upstream, {ROTATE: ("every 90 days", "every 45 days")})
    out = ws.forge_merge(SOURCE, 1)
    assert out["code"] == "conflict" and "conflicts in: docs/runbooks/rotate-api-keys.md" in out["Error"]
    assert any(f"gitkb proposals refresh {SOURCE}" in s for s in out["next_steps"])


def test_review_of_chosen_proposals_only(source_ws: Any, upstream: Upstream) -> None:
    ws = source_ws
    first = ok(ws.propose_kb_edit(SOURCE, ROTATE, search="every 90 days", replace="every 60 days"))
    second = ok(ws.propose_kb_edit(SOURCE, RETENTION, content=staged_text(ws, RETENTION) + "\nReviewed.\n"))
    pr = ok(ws.open_kb_pull_request(SOURCE, proposal_ids=[second["proposal_id"]]))
    assert pr["proposal_ids"] == [second["proposal_id"]]
    assert pr["changed_files"] == [{"path": "docs/policies/data-retention.md", "status": "M"}]
    assert "every 60 days" not in pr["diff"] and "Reviewed." in pr["diff"]
    # the chosen one is first on the branch now; the other stays staged on top of it
    assert ok(ws.show_proposal(first["proposal_id"]))["parent"] == pr["head"]
    done = ok(ws.approve_review(pr["review_id"]))
    assert upstream.read_remote(BRANCH, "docs/runbooks/rotate-api-keys.md").count("every 90 days") == 1
    assert "Reviewed." in upstream.read_remote(BRANCH, "docs/policies/data-retention.md")
    merged = ok(ws.forge_merge(SOURCE, done["number"]))
    assert merged["sync"]
    states = {p["proposal_id"]: p["state"] for p in ws.list_proposals(SOURCE, "all")["Proposals"]}
    assert states == {first["proposal_id"]: "staged", second["proposal_id"]: "merged"}
    # a denied review leaves its proposals staged for another review or for discarding
    again = ok(ws.open_kb_pull_request(SOURCE, proposal_ids=[first["proposal_id"]]))
    ok(ws.deny_review(again["review_id"], "not now"))
    assert [p["proposal_id"] for p in ws.list_proposals(SOURCE)["Proposals"]] == [first["proposal_id"]]
    assert ok(ws.discard_proposal(first["proposal_id"]))


def test_choosing_bad_or_dependent_proposals_is_refused(source_ws: Any) -> None:
    ws = source_ws
    one = ok(ws.propose_kb_edit(SOURCE, ROTATE, search="every 90 days", replace="every 60 days"))
    two = ok(ws.propose_kb_edit(SOURCE, ROTATE, search="every 60 days", replace="every 45 days"))
    head = git(managed_repo(ws), "rev-parse", BRANCH)
    out = ws.open_kb_pull_request(SOURCE, proposal_ids=[two["proposal_id"]])
    assert (
        out["code"] == "conflict"
        and one["proposal_id"] not in out["Error"]
        and two["proposal_id"] in out["Error"]
    )
    assert "choose those earlier proposals too" in " ".join(out["next_steps"])
    assert git(managed_repo(ws), "rev-parse", BRANCH) == head  # nothing moved
    assert ws.open_kb_pull_request(SOURCE, proposal_ids=["prop_nope"])["code"] == "not_found"
    assert ws.open_kb_pull_request(SOURCE, proposal_ids="prop_x")["code"] == "invalid_argument"
    assert ok(ws.open_kb_pull_request(SOURCE, proposal_ids=[one["proposal_id"]]))["head"] == one["commit"]


def test_cli_refresh_and_pr_open_with_proposal(source_ws: Any, upstream: Upstream) -> None:
    ws = source_ws
    a = ok(ws.propose_kb_edit(SOURCE, ROTATE, search="every 90 days", replace="every 60 days"))
    b = ok(ws.propose_kb_edit(SOURCE, RETENTION, content=staged_text(ws, RETENTION) + "\nReviewed.\n"))
    move_base(upstream, {RETENTION: ("\n", "\nUpdated.\n")})
    home = str(ws.home)
    ws.close()
    res = CliRunner().invoke(cli, ["--home", home, "proposals", "refresh", SOURCE], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "1 applied, 1 conflict" in res.output and f"conflict {b['proposal_id']}" in res.output
    assert f"next: discard it: gitkb proposals discard {b['proposal_id']}" in res.output
    assert "| Updated." in res.output
    res = CliRunner().invoke(
        cli, ["--home", home, "pr", "open", SOURCE, "--proposal", a["proposal_id"]], catch_exceptions=False
    )
    assert res.exit_code == 0, res.output
    assert "review_state: pending" in res.output and "M  docs/runbooks/rotate-api-keys.md" in res.output


TOKEN = "w" * 24


@pytest.fixture
def api(home: Path, upstream: Upstream) -> Iterator[TestClient]:
    home.mkdir(parents=True)
    (home / "gitkb.toml").write_text(
        with_roots(
            f'[[server.tokens]]\nname = "writer"\ntoken = "{TOKEN}"\nscopes = ["write"]\n', upstream.remote
        )
    )
    settings = load_settings(home, embedding_provider="hashing", embedding_model="hashing-384")
    with TestClient(create_app(settings), client=("127.0.0.1", 1)) as c:
        assert c.app.state.gitkb.workspace.source_add(SOURCE, str(upstream.remote))["Success"]  # type: ignore[attr-defined]
        c.post(f"/sources/{SOURCE}/sync", json={}, headers={"Authorization": f"Bearer {TOKEN}"})
        yield c


def test_http_refresh_and_chosen_pull(api: TestClient, upstream: Upstream) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    made = []
    for path, search, replace in ((ROTATE, "every 90 days", "every 60 days"), (ROTATE, "Tuesday", "Friday")):
        r = api.post(
            "/proposals",
            json={"source_id_or_index": SOURCE, "relative_path": path, "search": search, "replace": replace},
            headers=auth,
        )
        assert r.status_code == 200, r.text
        made.append(r.json()["proposal_id"])
    move_base(upstream, {ROTATE: ("Tuesday", "Monday")})
    r = api.post("/proposals/refresh", json={"source": SOURCE}, headers=auth)
    assert r.status_code == 200, r.text
    assert r.json()["applied"] == [made[0]] and r.json()["conflicts"] == [made[1]]
    r = api.post("/pulls", json={"source_id_or_index": SOURCE, "proposal_ids": [made[0]]}, headers=auth)
    assert r.status_code == 200, r.text
    assert r.json()["proposal_ids"] == [made[0]] and r.json()["review_state"] == "pending"


def test_review_page_discards_one_proposal_of_a_denied_review(home: Path, upstream: Upstream) -> None:
    from test_ui_pages import csrf, make_client, seed, ws_of

    with make_client(home) as c:
        rid = seed(c, upstream.remote)
        ws = ws_of(c)
        other = ok(
            ws.propose_kb_edit(SOURCE, RETENTION, content=staged_text(ws, RETENTION) + "\nReviewed.\n")
        )
        [pid] = ws.show_review(rid)["proposal_ids"]
        token = csrf(c.get(f"/ui/reviews/{rid}").text)
        assert (
            c.post(f"/ui/reviews/{rid}/deny", data={"csrf_token": token, "reason": "not yet"}).status_code
            == 200
        )
        page = c.get(f"/ui/reviews/{rid}").text
        assert f"/ui/reviews/{rid}/proposals/{pid}/discard" in page
        r = c.post(
            f"/ui/reviews/{rid}/proposals/{pid}/discard", data={"csrf_token": token}, follow_redirects=False
        )
        assert r.status_code == 303 and r.headers["location"].endswith("done=discarded")
        assert "Discarded the proposal" in c.get(r.headers["location"]).text
        states = {p["proposal_id"]: p["state"] for p in ws.list_proposals(SOURCE, "all")["Proposals"]}
        assert states == {pid: "discarded", other["proposal_id"]: "staged"}
        assert (
            c.post(f"/ui/reviews/{rid}/proposals/{pid}/discard", data={}).status_code == 403
        )  # no CSRF token


def test_agent_refreshes_over_mcp_and_a_reader_is_not_offered_it(source_ws: Any, upstream: Upstream) -> None:
    import json

    import anyio
    from mcp import Client

    from gitkb.mcp import build_server
    from gitkb.mcp.render import parse_block

    ws = source_ws
    assert ws.kb_create("handbook-kb", [SOURCE])["Success"]
    assert ws.agent_assign("docs-bot", ["handbook-kb"], mode="propose")["Success"]
    assert ws.agent_assign("reader-bot", ["handbook-kb"], mode="read")["Success"]
    edit = ok(ws.propose_kb_edit(SOURCE, ROTATE, search="every 90 days", replace="every 60 days"))
    move_base(upstream, {ROTATE: ("Tuesday", "Monday")})

    async def main() -> tuple[Any, list[str]]:
        async with Client(build_server(ws, "docs-bot")) as client:
            got = await client.call_tool("refresh_proposals", {"source": SOURCE})
        async with Client(build_server(ws, "reader-bot")) as client:
            names = [t.name for t in (await client.list_tools()).tools]
        return got, names

    got, reader_tools = anyio.run(main)
    assert not got.is_error, got.content[0].text
    text = got.content[0].text
    try:
        data = parse_block(text)
    except ValueError:
        data = json.loads(text)
    assert data["applied"] == [edit["proposal_id"]]
    assert "refresh_proposals" not in reader_tools
    entry = next(e for e in ws.list_audit()["Entries"] if e["action"] == "proposals.refresh")
    assert entry["actor"] == "agent:docs-bot"
