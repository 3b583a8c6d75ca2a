"""Proposal branches rebuildable from the catalog: the base commit and every staged commit are in the
catalog, so a lost clone (deleted, or on another node) loses no proposal, and the push carries the same
diff."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from gitkb import Workspace
from gitkb.stores.catalog import proposals as prop_rows
from gitkb.stores.node_proposals import specs_for
from helpers import SOURCE, Upstream, git, ok
from helpers.nodes import node_settings, sqlite_url

BRANCH = "gitkb/proposals/handbook"
ROTATE = "runbooks/rotate-api-keys.md"


def stage_three(ws: Any) -> list[str]:
    out = [
        ok(ws.propose_kb_edit(SOURCE, ROTATE, search="every 90 days", replace="every 60 days")),
        ok(ws.propose_kb_edit(SOURCE, "runbooks/new-drill.md", content="# New drill\n\nRun it monthly.\n")),
        ok(ws.propose_kb_edit(SOURCE, ROTATE, search="Tuesday", replace="Monday")),
    ]
    return [str(p["proposal_id"]) for p in out]


def clone_of(ws: Any) -> Path:
    (clone,) = [p for p in ws.settings.repos_path.iterdir() if p.is_dir()]
    return clone


def staged_diff(ws: Any) -> str:
    """The staged proposals' diff against the tracked branch, read from the clone."""
    clone = clone_of(ws)
    return git(clone, "diff", "refs/remotes/origin/main", f"refs/heads/{BRANCH}")


def pushed_diff(upstream: Upstream) -> str:
    """What the push carries: the remote proposal branch against the remote main."""
    return git(upstream.remote, "diff", "main", BRANCH)


def test_clone_deleted_after_staging_approve_pushes_the_same_diff(source_ws: Any, upstream: Upstream) -> None:
    ws = source_ws
    ids = stage_three(ws)
    specs = specs_for(ws.ctx.catalog.conn, ids)
    rows = {p.id: p for p in prop_rows.list_proposals(ws.ctx.catalog.conn, states=("staged",))}
    assert all(specs[i][0] == rows[i].commit_sha for i in ids)  # every staged commit is in the catalog
    want = staged_diff(ws)
    tip = rows[ids[-1]].commit_sha
    assert "every 60 days" in want and "New drill" in want and "Monday" in want
    pr = ok(ws.open_kb_pull_request(SOURCE))
    shutil.rmtree(clone_of(ws))  # the clone is a cache: lost
    out = ok(ws.approve_review(pr["review_id"]))
    assert out["pushed"] is True
    assert pushed_diff(upstream) == want
    assert git(clone_of(ws), "rev-parse", f"refs/heads/{BRANCH}") == tip  # the same commits, rebuilt


def test_clone_deleted_before_the_review_is_opened(source_ws: Any, upstream: Upstream) -> None:
    ws = source_ws
    ids = stage_three(ws)
    want = staged_diff(ws)
    shutil.rmtree(clone_of(ws))
    shown = ok(ws.show_proposal(ids[0]))
    assert "every 60 days" in shown["diff"]
    pr = ok(ws.open_kb_pull_request(SOURCE))
    assert sorted(pr["proposal_ids"]) == sorted(ids)
    ok(ws.approve_review(pr["review_id"]))
    assert pushed_diff(upstream) == want
    # staging goes on on top of the rebuilt branch
    ok(ws.propose_kb_edit(SOURCE, ROTATE, search="every 60 days", replace="every 45 days"))


def test_another_node_rebuilds_the_branch_the_first_staged(
    source_ws: Any, upstream: Upstream, tmp_path: Path
) -> None:
    """Node a stages; node b (its own home, the same catalog file) approves with no clone of its own."""
    a = source_ws
    stage_three(a)
    want = staged_diff(a)
    pr = ok(a.open_kb_pull_request(SOURCE))
    shared = a.settings.catalog_url or sqlite_url(a.settings.catalog_path)
    b = Workspace(settings=node_settings(tmp_path / "b", shared))
    try:
        a.close()  # node a goes away with its clone
        ok(b.approve_review(pr["review_id"]))
        assert pushed_diff(upstream) == want
        assert b.ctx.node_id != a.ctx.node_id
    finally:
        b.close()


def test_a_proposal_the_catalog_does_not_hold_refuses_the_push(source_ws: Any, upstream: Upstream) -> None:
    ws = source_ws
    ids = stage_three(ws)
    pr = ok(ws.open_kb_pull_request(SOURCE))
    with ws.ctx.catalog.write() as conn:  # what a proposal staged before its commit was recorded looks like
        conn.execute("DELETE FROM proposal_specs WHERE proposal_id = ?", (ids[1],))
    shutil.rmtree(clone_of(ws))
    out = ws.approve_review(pr["review_id"])
    assert out["Success"] is False
    assert upstream.remote_sha(BRANCH) is None  # nothing pushed
