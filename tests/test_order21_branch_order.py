"""order21: after a review chose some staged proposals, the proposal branch holds them in another
order than the catalog's (staging) order; everything that walks the staged proposals walks them in
branch order.

Three proposals a, c, e are staged in that order on source handbook; ``open_kb_pull_request`` of
[c] alone moves c first on the branch (c, a, e). Before: discarding c replayed "the proposals staged
after c" (e only) onto c's parent, so a's change left the branch while the catalog still listed it
as staged; a refresh with nothing new upstream rebuilt the branch in staging order (superseding the
pending review of c); and opening the clone reset the branch to the last-staged proposal's commit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from helpers import SOURCE, Upstream, git, ok, with_roots

BRANCH = f"gitkb/proposals/{SOURCE}"
FILES = {
    "a": "runbooks/rotate-api-keys.md",
    "c": "policies/password-policy.md",
    "e": "onboarding/first-week.md",
}


@pytest.fixture
def client(make_client: Any, upstream: Upstream) -> Any:
    """The open API over a fresh workspace, the bare upstream inside allowed_roots (HTTP is held to them)."""
    return make_client(with_roots("", upstream.remote))


def _repo(ws: Any) -> Path:
    [repo] = list((ws.home / "repos").iterdir())
    return repo


def _on_branch(ws: Any, path: str) -> str:
    return git(_repo(ws), "show", f"{BRANCH}:docs/{path}")


def _head(ws: Any) -> str:
    return git(_repo(ws), "rev-parse", f"refs/heads/{BRANCH}")


def _world(client: TestClient, upstream: Upstream, choose: str = "c") -> tuple[Any, dict[str, str]]:
    ws = client.app.state.gitkb.workspace  # type: ignore[attr-defined]
    ok(ws.source_add(SOURCE, str(upstream.remote)))
    ok(ws.source_sync(SOURCE))
    ids = {}
    for key, path in FILES.items():
        text = (upstream.work / "docs" / path).read_text()
        ids[key] = ok(ws.propose_kb_edit(SOURCE, path, content=text + f"\nmarker-{key}\n"))["proposal_id"]
    ok(ws.open_kb_pull_request(SOURCE, proposal_ids=[ids[choose]]))
    return ws, ids


def _branch_matches_catalog(ws: Any, upstream: Upstream) -> None:
    """Every staged proposal's change is on the branch, the others' are not, and the staged
    commits make one chain from the base to the branch head."""
    staged = {p["proposal_id"]: p for p in ok(ws.list_proposals(SOURCE))["Proposals"]}
    every = {p["proposal_id"]: p for p in ok(ws.list_proposals(SOURCE, state="all"))["Proposals"]}
    for p in every.values():
        key = next(k for k, path in FILES.items() if p["path"] == f"docs/{path}")
        assert (f"marker-{key}" in _on_branch(ws, p["path"].removeprefix("docs/"))) == (
            p["proposal_id"] in staged
        ), (p, staged)
    commits = {p["commit"]: p for p in staged.values()}
    base = git(upstream.work, "rev-parse", "HEAD")
    walk, at = [], _head(ws)
    while at != base:
        assert at in commits, (at, commits)
        walk.append(commits[at]["proposal_id"])
        at = commits[at]["parent"]
    assert sorted(walk) == sorted(staged), (walk, staged)


@pytest.mark.parametrize("how", ["library", "http"])
def test_discarding_a_chosen_proposal_keeps_the_ones_staged_before_it(
    client: TestClient, upstream: Upstream, how: str
) -> None:
    ws, ids = _world(client, upstream)
    if how == "library":
        out = ok(ws.discard_proposal(ids["c"]))
    else:
        r = client.delete(f"/proposals/{ids['c']}")
        assert r.status_code == 200, r.text
        out = ok(r.json())
    assert sorted(out["kept"]) == sorted([ids["a"], ids["e"]]), out
    _branch_matches_catalog(ws, upstream)
    assert "marker-a" in _on_branch(ws, FILES["a"]) and "marker-e" in _on_branch(ws, FILES["e"])
    # the next review holds what is staged: a and e, not c
    review = ok(ws.open_kb_pull_request(SOURCE))
    assert sorted(review["proposal_ids"]) == sorted([ids["a"], ids["e"]]), review
    assert "marker-a" in review["diff"] and "marker-e" in review["diff"], review
    assert "marker-c" not in review["diff"], review


def test_discarding_one_staged_before_the_chosen_keeps_the_chosen_one(
    client: TestClient, upstream: Upstream
) -> None:
    ws, ids = _world(client, upstream)
    out = ok(ws.discard_proposal(ids["a"]))  # branch c, a, e: a's later proposal is e only
    assert sorted(out["kept"]) == [ids["e"]], out
    _branch_matches_catalog(ws, upstream)
    assert "marker-c" in _on_branch(ws, FILES["c"]) and "marker-a" not in _on_branch(ws, FILES["a"])


@pytest.mark.parametrize("how", ["library", "http"])
def test_a_refresh_with_nothing_new_upstream_leaves_a_chosen_review_pending(
    client: TestClient, upstream: Upstream, how: str
) -> None:
    ws, ids = _world(client, upstream)
    head = _head(ws)
    if how == "library":
        out = ok(ws.refresh_proposals(SOURCE))
    else:
        r = client.post("/proposals/refresh", json={"source": SOURCE})
        assert r.status_code == 200, r.text
        out = ok(r.json())
    assert out.get("unchanged") is True and out["reviews_superseded"] == [], out
    assert _head(ws) == head
    [review] = ok(ws.list_reviews(source=SOURCE))["Reviews"]
    assert review["review_state"] == "pending" and review["proposal_ids"] == [ids["c"]], review
    _branch_matches_catalog(ws, upstream)


def test_opening_the_clone_after_a_choice_keeps_the_branch(client: TestClient, upstream: Upstream) -> None:
    ws, ids = _world(client, upstream, choose="e")  # branch e, a, c: the last staged is not the tip
    head = _head(ws)
    ok(ws.show_proposal(ids["a"]))  # opens the managed clone (ensure_branch)
    assert _head(ws) == head
    _branch_matches_catalog(ws, upstream)
