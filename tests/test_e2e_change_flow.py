"""The whole change flow on a machine with no network: bare remote + example_kb_repo, local forge.

source add + sync -> propose (search/replace) -> pr open (pending; nothing pushed) -> approve ->
pushed, change request open, changed_files M -> a second proposal adding a file and renaming one
-> pr open -> approve -> same change request updated, changed_files with A and R -> forge merge ->
sync job -> the new text is found with a citation at the merge commit, the old text is gone.
"""

from __future__ import annotations

from typing import Any

from gitkb.services.changes.review_request import local_requester
from gitkb.services.changes.sources.merges import request_sync
from helpers import SOURCE, Upstream, git

BRANCH = "gitkb/proposals/handbook"
ROTATE = "docs/runbooks/rotate-api-keys.md"


def search(ws: Any, query: str) -> list[dict[str, Any]]:
    out = ws.document_index("SEARCH", query=query, index_name=SOURCE, top_n=10)
    assert out["Success"], out
    return list(out["Results"])


def test_end_to_end_change_flow(source_ws: Any, upstream: Upstream) -> None:
    ws = source_ws
    main_before = upstream.remote_sha("main")

    # propose, then ask for review: nothing leaves the machine
    staged = ws.propose_kb_edit(
        SOURCE,
        "runbooks/rotate-api-keys.md",
        search="expire every 90 days",
        replace="expire every 60 days",
        note="Security shortened the key lifetime.",
    )
    assert staged["Success"], staged
    pr = ws.open_kb_pull_request(SOURCE)
    assert pr["Success"] and pr["review_state"] == "pending", pr
    assert pr["changed_files"] == [{"path": ROTATE, "status": "M"}]
    assert "+API keys for the payments gateway expire every 60 days." in pr["diff"]
    assert upstream.remote_sha(BRANCH) is None and upstream.remote_sha("main") == main_before
    again = ws.open_kb_pull_request(SOURCE)
    assert again["review_id"] == pr["review_id"] and again["existing"] is True
    assert ws.list_reviews(state="pending")["total_count"] == 1
    assert ws.list_pull_requests(SOURCE)["count"] == 0

    # approve: pushed with a lease, change request opened
    approved = ws.approve_review(pr["review_id"], reviewer="alice")
    assert approved["Success"], approved
    assert approved["review_state"] == "approved" and approved["created"] is True
    assert approved["number"] == 1 and approved["url"]
    assert approved["changed_files"] == [{"path": ROTATE, "status": "M"}]
    assert upstream.remote_sha(BRANCH) == staged["commit"]
    assert upstream.remote_sha("main") == main_before
    [cr] = ws.list_pull_requests(SOURCE)["PullRequests"]
    assert cr["state"] == "open" and cr["head"] == BRANCH and cr["base"] == "main"
    same = ws.open_kb_pull_request(SOURCE)  # nothing new staged: the pushed review, not a new one
    assert same["review_id"] == pr["review_id"] and same["existing"] is True and same["number"] == 1

    # a second round on the same branch: add a file, rename one
    added = ws.propose_kb_edit(
        SOURCE,
        "faq/billing.md",
        content="---\ntitle: Billing FAQ\n---\n# Billing FAQ\n\n"
        "Invoices are issued on the first business day of each month.\n",
    )
    renamed = ws.propose_kb_rename(SOURCE, "runbooks/database-failover.md", "runbooks/db-failover.md")
    assert added["Success"] and renamed["Success"]
    pr2 = ws.open_kb_pull_request(SOURCE, title="Handbook fixes", body="Three fixes.")
    assert pr2["review_state"] == "pending" and pr2["review_id"] != pr["review_id"]
    assert upstream.remote_sha(BRANCH) == staged["commit"]  # still the first push
    approved2 = ws.approve_review(pr2["review_id"], reviewer="bob")
    assert approved2["number"] == 1 and approved2["created"] is False  # the same change request, updated
    statuses = {(f["path"], f["status"], f.get("old_path")) for f in approved2["changed_files"]}
    assert statuses == {
        (ROTATE, "M", None),
        ("docs/faq/billing.md", "A", None),
        ("docs/runbooks/db-failover.md", "R", "docs/runbooks/database-failover.md"),
    }
    assert upstream.remote_sha(BRANCH) == renamed["commit"]
    [cr] = ws.list_pull_requests(SOURCE)["PullRequests"]
    assert cr["title"] == "Handbook fixes"

    # merge on the local forge -> the same sync a webhook asks for -> searchable at the merge commit
    merged = ws.forge_merge(SOURCE, 1)
    assert merged["Success"], merged
    merge_commit = merged["merge_commit"]
    assert upstream.remote_sha("main") == merge_commit
    parents = git(upstream.remote, "rev-list", "--parents", "-n", "1", merge_commit).split()
    assert parents[1:] == [main_before, renamed["commit"]]  # a real two-parent merge
    assert merged["sync"]["commit"] == merge_commit and merged["sync"]["status"] == "synced"
    assert merged["sync"]["merged"]["proposals_merged"] == sorted(
        [staged["proposal_id"], added["proposal_id"], renamed["proposal_id"]]
    )
    hits = search(ws, "payments gateway expire 60 days")
    assert hits and hits[0]["filepath"] == ROTATE
    assert hits[0]["source_uri"] == f"git+{upstream.remote}@{merge_commit}:{ROTATE}"
    assert not [h for h in search(ws, "expire every 90 days") if "90 days" in h["snippet"]]
    assert search(ws, "invoices first business day")[0]["filepath"] == "docs/faq/billing.md"
    assert search(ws, "promote replica failover")[0]["filepath"] == "docs/runbooks/db-failover.md"
    cite = ws.cite_check(hits[0]["id"])
    assert cite["status"] == "current" and cite["commit"] == merge_commit

    # everything settled
    assert ws.list_proposals(SOURCE)["total_count"] == 0
    assert {r["review_state"] for r in ws.list_reviews(source=SOURCE)["Reviews"]} == {"merged"}
    assert ws.list_pull_requests(SOURCE)["PullRequests"][0]["state"] == "merged"
    again = ws.source_sync(SOURCE)
    assert again["status"] == "unchanged"
    dedup = request_sync(ws.ctx, SOURCE, merge_commit)
    assert dedup["queued"] is False and dedup["deduplicated"] is True

    actions = [(e["action"], e["result"], e["actor"]) for e in reversed(ws.list_audit()["Entries"])]
    for expected in [
        ("review.request", "pending", local_requester()),  # who asked (requested_by)
        ("review.approve", "approved", "alice"),
        ("push", "pushed", "alice"),
        ("change_request.open", "ok", "alice"),
        ("review.approve", "approved", "bob"),
        ("change_request.update", "ok", "bob"),
        ("change_request.merge", "merged", "operator"),
        ("proposals.merged", "ok", "sync"),
    ]:
        assert expected in actions, expected


def test_proposals_staged_after_a_push_survive_the_merge(source_ws: Any, upstream: Upstream) -> None:
    ws = source_ws
    first = ws.propose_kb_edit(SOURCE, "runbooks/rotate-api-keys.md", search="Tuesday", replace="Thursday")
    pr = ws.open_kb_pull_request(SOURCE)
    ws.approve_review(pr["review_id"])
    later = ws.propose_kb_edit(
        SOURCE, "policies/password-policy.md", content="---\ntitle: Passwords\n---\n# New\n"
    )
    merged = ws.forge_merge(SOURCE, 1)
    settled = merged["sync"]["merged"]
    assert settled["proposals_merged"] == [first["proposal_id"]] and settled["kept"] == [later["proposal_id"]]
    [left] = ws.list_proposals(SOURCE)["Proposals"]
    assert left["proposal_id"] == later["proposal_id"] and left["parent"] == merged["merge_commit"]
    repo = next((ws.home / "repos").iterdir())
    assert git(repo, "rev-parse", f"{BRANCH}^") == merged["merge_commit"]
    assert "# New" in git(repo, "show", f"{BRANCH}:docs/policies/password-policy.md")
    pr2 = ws.open_kb_pull_request(SOURCE)
    assert pr2["changed_files"] == [{"path": "docs/policies/password-policy.md", "status": "M"}]
    out = ws.approve_review(pr2["review_id"])
    assert out["Success"] and out["number"] == 2 and out["created"] is True  # #1 is merged: a new one


def test_a_later_proposal_that_conflicts_with_the_new_base_is_reported(
    source_ws: Any, upstream: Upstream
) -> None:
    ws = source_ws
    ws.propose_kb_edit(SOURCE, "runbooks/incident-response.md", search="30 minutes", replace="15 minutes")
    pr = ws.open_kb_pull_request(SOURCE)
    ws.approve_review(pr["review_id"])
    clash = ws.propose_kb_edit(SOURCE, "runbooks/rotate-api-keys.md", search="Tuesday", replace="Friday")
    text = (upstream.work / ROTATE).read_text()
    upstream.write(ROTATE, text.replace("Tuesday", "Monday"))
    upstream.commit_push("someone else moved the change window")
    merged = ws.forge_merge(SOURCE, 1)
    assert merged["Success"], merged
    assert merged["sync"]["merged"]["conflicts"] == [clash["proposal_id"]]
    [p] = ws.list_proposals(SOURCE, "conflict")["Proposals"]
    assert p["detail"]["conflicting_paths"] == [ROTATE]
    assert p["detail"]["next_steps"][0] == f"discard it: gitkb proposals discard {clash['proposal_id']}"
    assert ws.list_proposals(SOURCE)["total_count"] == 0
    assert ws.discard_proposal(clash["proposal_id"])["Success"]


def test_a_merged_branch_the_forge_deleted_does_not_block_the_next_push(
    source_ws: Any, upstream: Upstream
) -> None:
    ws = source_ws
    ws.propose_kb_edit(SOURCE, "runbooks/rotate-api-keys.md", search="Tuesday", replace="Thursday")
    ws.approve_review(ws.open_kb_pull_request(SOURCE)["review_id"])
    # merge the way a forge would, then delete the head branch ("delete branch on merge")
    from gitkb.stores.git_merge import merge_into

    merge_commit = merge_into(upstream.remote, BRANCH, "main", "Merge pull request #1")
    git(upstream.remote, "update-ref", "-d", f"refs/heads/{BRANCH}")
    assert ws.source_sync(SOURCE)["merged"]["reviews_merged"]
    ws.propose_kb_edit(SOURCE, "runbooks/rotate-api-keys.md", search="Thursday", replace="Friday")
    out = ws.approve_review(ws.open_kb_pull_request(SOURCE)["review_id"])
    assert out["Success"], out
    assert (
        upstream.remote_sha(BRANCH) is not None
        and git(upstream.remote, "rev-parse", f"{BRANCH}^") == merge_commit
    )


def test_moved_base_refresh_chosen_review_and_squash_merge(source_ws: Any, upstream: Upstream) -> None:
    """Two proposals, a direct commit to main, refresh (one applied, one conflict), a review of the
    applied one only, a squash merge settled from the merge webhook, the index at the squash commit,
    the conflicting proposal still held (state ``conflict``: listed, discardable, never pushed)."""
    from gitkb.services.changes import webhook_intake
    from gitkb.services.changes.webhooks import parse_github
    from gitkb.services.runtime import jobs
    from gitkb.stores.catalog import sources as source_rows

    ws = source_ws
    retention = "docs/policies/data-retention.md"
    edit = ws.propose_kb_edit(
        SOURCE, "runbooks/rotate-api-keys.md", search="expire every 90 days", replace="expire every 60 days"
    )
    text = (upstream.work / retention).read_text()
    whole = ws.propose_kb_edit(
        SOURCE,
        "policies/data-retention.md",
        content=text.replace("deleted after 30 days", "deleted after 14 days"),
    )
    assert edit["Success"] and whole["Success"]
    upstream.write(retention, text.replace("Backups are", "Backups are always", 1))
    direct = upstream.commit_push("legal: backups wording")  # a direct commit to the target branch

    refreshed = ws.refresh_proposals(SOURCE)
    assert refreshed["applied"] == [edit["proposal_id"]] and refreshed["conflicts"] == [whole["proposal_id"]]
    [conflict] = [p for p in refreshed["Proposals"] if p["result"] == "conflict"]
    assert (
        any("Backups are always" in ln["text"] for ln in conflict["current_lines"]) and conflict["next_steps"]
    )

    pr = ws.open_kb_pull_request(SOURCE, proposal_ids=[edit["proposal_id"]])
    assert pr["proposal_ids"] == [edit["proposal_id"]] and pr["changed_files"] == [
        {"path": ROTATE, "status": "M"}
    ]
    approved = ws.approve_review(pr["review_id"], reviewer="alice")
    assert approved["Success"], approved
    assert git(upstream.remote, "rev-parse", f"{BRANCH}^") == direct

    # the forge squashes: one new commit on main, not the pushed head
    git(upstream.work, "fetch", "-q", "origin", BRANCH)
    git(upstream.work, "merge", "-q", "--squash", "FETCH_HEAD")
    squash = upstream.commit_push("Rotate keys every 60 days (#1)", add=False)
    assert git(upstream.remote, "rev-list", "--parents", "-n", "1", squash).split()[1:] == [direct]
    event = parse_github(
        "pull_request",
        {
            "action": "closed",
            "pull_request": {
                "number": approved["number"],
                "merged": True,
                "merge_commit_sha": squash,
                "base": {"ref": "main"},
            },
            "repository": {"clone_url": str(upstream.remote)},  # a delivery is for its source's repository
        },
    )
    row = source_rows.get_by_name(ws.ctx.catalog.conn, SOURCE)
    assert row is not None
    got = webhook_intake.accept(ws.ctx, provider="github", delivery_id="squash-1", row=row, event=event)
    assert got["settled"]["reviews_merged"] == [pr["review_id"]] and got["job_id"]
    assert jobs.wait(ws.ctx, got["job_id"], timeout=60).state == "completed"

    assert ws.show_review(pr["review_id"])["review_state"] == "merged"
    hits = search(ws, "payments gateway expire 60 days")
    assert hits and hits[0]["source_uri"] == f"git+{upstream.remote}@{squash}:{ROTATE}"
    assert not [h for h in search(ws, "expire every 90 days") if "90 days" in h["snippet"]]
    assert ws.cite_check(hits[0]["id"])["status"] == "current"
    states = {p["proposal_id"]: p["state"] for p in ws.list_proposals(SOURCE, "all")["Proposals"]}
    assert states == {edit["proposal_id"]: "merged", whole["proposal_id"]: "conflict"}
    [held] = ws.list_proposals(SOURCE, "conflict")["Proposals"]
    assert held["proposal_id"] == whole["proposal_id"] and held["detail"]["base"] == direct
    assert ws.discard_proposal(whole["proposal_id"])["Success"]
