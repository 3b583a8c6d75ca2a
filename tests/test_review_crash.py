"""Issue 15: a process killed (SIGKILL) in the middle of approving a review -- after ``git push``
but before recording it, after the change request was opened but before recording that, or
before the push -- leaves a review the next review call reconciles with the remote: pushed
and with exactly one change request, or "interrupted" and approvable again. Real crashes:
a child process armed with ``GITKB_CRASH_AT`` (gitkb.core.faults)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gitkb import Workspace
from gitkb.services.changes.review_push import INTERRUPTED, push_lock
from gitkb.stores.catalog import proposals as prop_rows
from helpers import SOURCE, Upstream, git

BRANCH = f"gitkb/proposals/{SOURCE}"
CHILD = """
import sys
from gitkb import Workspace
ws = Workspace(sys.argv[1], embedding_provider="hashing", embedding_model="hashing-384")
print(ws.approve_review(sys.argv[2], reviewer="dana"))
ws.close()
"""


def open_ws(home: Path) -> Any:
    return Workspace(home, embedding_provider="hashing", embedding_model="hashing-384")


def pending_review(home: Path, upstream: Upstream) -> tuple[str, str]:
    with open_ws(home) as ws:
        assert ws.source_add(SOURCE, str(upstream.remote))["Success"]
        assert ws.source_sync(SOURCE)["Success"]
        staged = ws.propose_kb_edit(
            SOURCE, "runbooks/rotate-api-keys.md", search="every 90 days", replace="every 60 days"
        )
        assert staged["Success"], staged
        pr = ws.open_kb_pull_request(SOURCE)
        assert pr["Success"], pr
        return str(pr["review_id"]), str(pr["push_sha"])


def approve_and_crash(home: Path, rid: str, point: str) -> None:
    env = {**os.environ, "GITKB_CRASH_AT": point}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(home), rid], env=env, capture_output=True, timeout=120
    )
    assert proc.returncode == -9, (
        proc.returncode,
        proc.stdout.decode()[-1000:],
        proc.stderr.decode()[-2000:],
    )


def row(ws: Any, rid: str) -> prop_rows.ReviewRow:
    r = prop_rows.get_review(ws.ctx.catalog.conn, rid)
    assert r is not None
    return r


@pytest.mark.usefixtures("catalog_url")  # both backends: GITKB_CATALOG_URL for the child too
@pytest.mark.parametrize("point", ["review.after_push", "review.after_change_request"])
def test_killed_after_the_push_is_reconciled_as_pushed_with_one_change_request(
    home: Path, upstream: Upstream, point: str
) -> None:
    rid, sha = pending_review(home, upstream)
    approve_and_crash(home, rid, point)
    assert upstream.remote_sha(BRANCH) == sha  # the push happened
    with open_ws(home) as ws:
        before = row(ws, rid)  # what the dead process left: approved, in flight, nothing recorded after
        assert before.state == "approved" and before.pushing_sha == sha and before.cr_number is None
        assert before.pushed is (point == "review.after_change_request")
        crs = ws.list_pull_requests(SOURCE)["PullRequests"]
        assert len(crs) == (1 if point == "review.after_change_request" else 0)
        shown = ws.show_review(rid)  # the next call reconciles with the remote
        assert shown["pushed"] is True and shown["number"] == 1 and shown["push_in_flight"] is False, shown
        assert shown["push_error"] is None and shown["review_state"] == "approved"
        crs = ws.list_pull_requests(SOURCE)["PullRequests"]
        assert [c["number"] for c in crs] == [1] and crs[0]["state"] == "open"
        entries = ws.list_audit()["Entries"]
        if point == "review.after_push":
            assert any(e["action"] == "push" and e["detail"].get("reconciled") for e in entries)
        assert any(e["action"].startswith("change_request.") and e["result"] == "ok" for e in entries)
        again = ws.approve_review(rid)  # idempotent: the same change request, updated
        assert again["Success"] and again["number"] == 1 and again["created"] is False
        assert len(ws.list_pull_requests(SOURCE)["PullRequests"]) == 1
        assert upstream.remote_sha(BRANCH) == sha


@pytest.mark.usefixtures("catalog_url")  # both backends: GITKB_CATALOG_URL for the child too
def test_killed_before_the_push_is_reconciled_as_interrupted_and_can_be_approved_again(
    home: Path, upstream: Upstream
) -> None:
    rid, sha = pending_review(home, upstream)
    approve_and_crash(home, rid, "review.before_push")
    assert upstream.remote_sha(BRANCH) is None  # nothing reached the remote
    with open_ws(home) as ws:
        r = row(ws, rid)
        assert r.pushing_sha == sha and not r.pushed
        with push_lock(ws.ctx, r.source_id) as held:  # a live process pushing it: left alone
            assert held
            shown = ws.show_review(rid)
            assert shown["push_in_flight"] is True and shown["push_error"] is None
        shown = ws.show_review(rid)
        assert (
            shown["push_in_flight"] is False
            and shown["pushed"] is False
            and shown["push_error"] == INTERRUPTED
        )
        assert ws.list_pull_requests(SOURCE)["PullRequests"] == []
        done = ws.approve_review(rid)
        assert done["Success"] and done["number"] == 1 and done["created"] is True, done
        assert upstream.remote_sha(BRANCH) == sha


@pytest.mark.usefixtures("catalog_url")  # both backends: GITKB_CATALOG_URL for the child too
def test_a_crashed_push_counts_when_the_branch_is_merged(home: Path, upstream: Upstream) -> None:
    """The sync settles merges: a review left mid-push is reconciled first, so its merge is seen."""
    rid, sha = pending_review(home, upstream)
    approve_and_crash(home, rid, "review.after_push")
    git(upstream.work, "fetch", "-q", "origin", BRANCH)  # someone merges the pushed branch by hand
    git(upstream.work, "merge", "-q", "--no-ff", "-m", "merge the proposals", "FETCH_HEAD")
    git(upstream.work, "push", "-q", "origin", "HEAD:main")
    with open_ws(home) as ws:
        assert row(ws, rid).pushing_sha == sha and not row(ws, rid).pushed
        synced = ws.source_sync(SOURCE)
        assert synced["Success"], synced
        r = row(ws, rid)
        assert r.state == "merged" and r.pushed and r.pushing_sha is None and r.cr_number is None
        assert ws.list_proposals(SOURCE)["total_count"] == 0
        assert ws.list_pull_requests(SOURCE)["PullRequests"] == []  # none opened for a merged branch
