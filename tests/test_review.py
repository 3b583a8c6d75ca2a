"""The review gate: deny, stale lease, closed change requests, bad calls, GitHub, CLI."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from forge_servers.github_mock import GitHubMock
from forge_servers.gitlab_mock import GitLabMock
from gitkb.cli.main import cli
from helpers import SOURCE, Upstream, git

BRANCH = "gitkb/proposals/handbook"
ROTATE = "runbooks/rotate-api-keys.md"
# The forge mocks listen on 127.0.0.1: admin-configured credentials bound to that host.
CREDENTIALS = [
    {"name": "github-mock", "hosts": ["127.0.0.1"], "token_env": "KB_GH_TOKEN"},
    {"name": "gitlab-mock", "hosts": ["127.0.0.1"], "token_env": "KB_GL_TOKEN"},
]


@pytest.fixture
def ws(make_ws: Callable[..., Any]) -> Any:
    return make_ws(credentials=CREDENTIALS)


def stage(ws: Any, search: str = "every 90 days", replace: str = "every 60 days") -> dict[str, Any]:
    out = ws.propose_kb_edit(SOURCE, ROTATE, search=search, replace=replace)
    assert out["Success"], out
    return dict(out)


def test_deny_pushes_nothing_and_keeps_the_proposals(source_ws: Any, upstream: Upstream) -> None:
    ws = source_ws
    p = stage(ws)
    pr = ws.open_kb_pull_request(SOURCE)
    assert ws.deny_review(pr["review_id"], "")["code"] == "invalid_argument"
    denied = ws.deny_review(pr["review_id"], "60 days is too short for partners", reviewer="carol")
    assert denied["Success"] and denied["review_state"] == "denied" and denied["reason"].startswith("60 days")
    assert upstream.remote_sha(BRANCH) is None
    assert [x["proposal_id"] for x in ws.list_proposals(SOURCE)["Proposals"]] == [p["proposal_id"]]
    again = ws.open_kb_pull_request(SOURCE)
    assert again["Success"] is False and again["code"] == "review_denied" and "too short" in again["Error"]
    assert ws.approve_review(pr["review_id"])["code"] == "review_denied"
    assert upstream.remote_sha(BRANCH) is None
    stage(ws, "Tuesday", "Wednesday")  # a changed branch state may be reviewed again
    fresh = ws.open_kb_pull_request(SOURCE)
    assert fresh["Success"] and fresh["review_state"] == "pending" and fresh["review_id"] != pr["review_id"]
    entry = next(e for e in ws.list_audit()["Entries"] if e["action"] == "review.deny")
    assert entry["actor"] == "carol" and entry["detail"]["reason"].startswith("60 days")


def test_foreign_commits_refuse_the_push_until_acknowledged(source_ws: Any, upstream: Upstream) -> None:
    ws = source_ws
    stage(ws)
    first = ws.approve_review(ws.open_kb_pull_request(SOURCE)["review_id"])
    assert first["Success"] and first["number"] == 1
    # someone else pushes to the proposal branch
    git(upstream.work, "fetch", "-q", "origin", BRANCH)
    git(upstream.work, "checkout", "-q", "-b", "theirs", "FETCH_HEAD")
    upstream.write("docs/runbooks/theirs.md", "# theirs\n")
    git(upstream.work, "add", "-A")
    git(upstream.work, "commit", "-q", "-m", "not from gitkb")
    git(upstream.work, "push", "-q", "origin", f"theirs:{BRANCH}")
    foreign = upstream.remote_sha(BRANCH)
    stage(ws, "Tuesday", "Thursday")
    pr = ws.open_kb_pull_request(SOURCE)
    assert [c["sha"] for c in pr["overwrites"]] == [foreign] and "overwrites" in " ".join(pr["Warnings"])
    out = ws.approve_review(pr["review_id"])
    assert out["Success"] is False and out["code"] == "conflict" and out["pushed"] is False
    assert "Nothing was pushed" in out["Error"] and "--overwrite" in " ".join(out["next_steps"])
    assert upstream.remote_sha(BRANCH) == foreign
    shown = ws.show_review(pr["review_id"])
    assert (
        shown["review_state"] == "pending"
        and shown["pushed"] is False
        and shown["overwrites"][0]["sha"] == foreign
    )
    assert ws.approve_review(pr["review_id"])["code"] == "conflict"  # retrying does not overwrite either
    assert upstream.remote_sha(BRANCH) == foreign
    assert any(
        e["action"] == "review.approve" and e["result"] == "refused_overwrite"
        for e in ws.list_audit()["Entries"]
    )
    # acknowledged: approving then replaces the foreign commit
    done = ws.approve_review(pr["review_id"], overwrite=True)
    assert done["Success"] and done["number"] == 1 and done["created"] is False
    assert upstream.remote_sha(BRANCH) == git(next((ws.home / "repos").iterdir()), "rev-parse", BRANCH)


def test_closed_change_request_closes_its_review(source_ws: Any, upstream: Upstream) -> None:
    ws = source_ws
    p = stage(ws)
    pr = ws.open_kb_pull_request(SOURCE)
    ws.approve_review(pr["review_id"])
    closed = ws.forge_close(SOURCE, 1)
    assert closed["Success"] and closed["reviews_closed"] == [pr["review_id"]]
    assert ws.show_review(pr["review_id"])["review_state"] == "closed"
    assert [x["proposal_id"] for x in ws.list_proposals(SOURCE)["Proposals"]] == [p["proposal_id"]]
    again = ws.open_kb_pull_request(SOURCE)
    assert again["review_id"] != pr["review_id"]
    reopened = ws.approve_review(again["review_id"])
    assert reopened["number"] == 2 and reopened["created"] is True
    assert ws.forge_merge(SOURCE, 1)["code"] == "conflict"  # closed: cannot merge


def test_pending_review_is_superseded_by_newer_proposals(source_ws: Any) -> None:
    ws = source_ws
    stage(ws)
    old = ws.open_kb_pull_request(SOURCE)
    stage(ws, "Tuesday", "Monday")
    assert ws.approve_review(old["review_id"])["code"] == "conflict"
    assert ws.show_review(old["review_id"])["review_state"] == "superseded"
    new = ws.open_kb_pull_request(SOURCE)
    assert new["review_state"] == "pending" and len(new["proposal_ids"]) == 2


def test_bad_calls(source_ws: Any, upstream: Upstream) -> None:
    ws = source_ws
    assert ws.open_kb_pull_request(SOURCE)["code"] == "invalid_argument"  # nothing staged
    assert ws.open_kb_pull_request("nope")["code"] == "not_found"
    assert ws.show_review("rev_nope")["code"] == "not_found"
    assert ws.approve_review("")["code"] == "invalid_argument"
    assert ws.forge_merge(SOURCE, 7)["code"] == "forge_error"
    assert ws.forge_merge(SOURCE, "x")["code"] == "invalid_argument"
    stage(ws)
    bad = ws.open_kb_pull_request(SOURCE, target_index="other")
    assert bad["code"] == "invalid_argument" and bad["candidates"] == ["handbook"]
    assert ws.open_kb_pull_request(SOURCE, title=3)["code"] == "invalid_argument"
    assert upstream.remote_sha(BRANCH) is None and ws.list_reviews()["total_count"] == 0


def test_target_index_is_required_when_a_source_feeds_several(ws: Any, upstream: Upstream) -> None:
    assert ws.source_add(SOURCE, str(upstream.remote), index=["a", "b"])["Success"]
    assert ws.source_sync(SOURCE)["Success"]
    stage(ws)
    out = ws.open_kb_pull_request(SOURCE)
    assert out["code"] == "invalid_argument" and out["candidates"] == ["a", "b"] and "a, b" in out["Error"]
    by_index = ws.open_kb_pull_request("b")  # the index names the target
    assert by_index["Success"] and by_index["target_index"] == "b"
    explicit = ws.open_kb_pull_request(SOURCE, target_index="b")
    assert explicit["review_id"] == by_index["review_id"]


def test_commit_message_squashes_the_staged_proposals(source_ws: Any, upstream: Upstream) -> None:
    ws = source_ws
    stage(ws)
    stage(ws, "Tuesday", "Monday")
    pr = ws.open_kb_pull_request(SOURCE, commit_message="docs: key rotation every 60 days, on Mondays")
    out = ws.approve_review(pr["review_id"])
    assert out["Success"]
    pushed = upstream.remote_sha(BRANCH)
    assert (
        git(upstream.remote, "log", "-1", "--format=%s", pushed)
        == "docs: key rotation every 60 days, on Mondays"
    )
    assert git(upstream.remote, "rev-parse", f"{pushed}^") == upstream.remote_sha("main")
    merged = ws.forge_merge(SOURCE, 1)
    assert merged["sync"]["merged"]["proposals_merged"] == sorted(pr["proposal_ids"])
    assert ws.list_proposals(SOURCE)["total_count"] == 0


# -- GitHub: the push goes to a bare remote, the pull request to the REST mock --------------


@pytest.fixture
def github() -> Iterator[GitHubMock]:
    mock = GitHubMock().start()
    try:
        yield mock
    finally:
        mock.stop()
    assert not mock.failures, "outside GitHub's REST description:\n" + "\n".join(mock.failures)


def test_github_pull_request_flow(
    ws: Any, upstream: Upstream, github: GitHubMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KB_GH_TOKEN", github.token)
    forge = {
        "kind": "github",
        "repo": f"{github.owner}/{github.repo}",
        "api_url": github.base_url,
        "credential": "github-mock",
    }
    assert ws.source_add(SOURCE, str(upstream.remote), forge=forge)["Success"]
    assert ws.source_sync(SOURCE)["Success"]
    stage(ws)
    pr = ws.open_kb_pull_request(SOURCE)
    assert github.ops() == []  # pending: GitHub is not even asked
    github.push_branch(
        BRANCH, [{"filename": "docs/" + ROTATE, "status": "modified"}]
    )  # what GitHub sees after the push
    out = ws.approve_review(pr["review_id"], reviewer="alice")
    assert out["Success"], out
    assert out["number"] == 1 and out["url"] == f"https://github.com/{github.owner}/{github.repo}/pull/1"
    assert out["created"] is True and out["changed_files"] == [{"path": "docs/" + ROTATE, "status": "M"}]
    assert github.ops() == ["repos/get", "pulls/list", "pulls/create"]
    assert upstream.remote_sha(BRANCH) is not None  # the push went to git, not to the API
    create = github.seen[-1]
    assert create.body["head"] == BRANCH and create.body["base"] == "main"
    # second round: an update; GitHub's 422 "already exists" after an empty list is handled as update too
    stage(ws, "Tuesday", "Friday")
    github.hide_open_pulls = 1
    out2 = ws.approve_review(ws.open_kb_pull_request(SOURCE, title="Two fixes")["review_id"])
    assert out2["Success"] and out2["number"] == 1 and out2["created"] is False, out2
    assert github.pulls[1].title == "Two fixes"
    assert github.token not in json.dumps([out, out2, ws.list_audit(), ws.source_list()])
    assert ws.forge_merge(SOURCE, 1)["code"] == "invalid_argument"  # merge happens on GitHub
    listed = ws.list_pull_requests(SOURCE)
    assert listed["forge"] == "github" and listed["PullRequests"][0]["number"] == 1


def test_github_failure_keeps_the_push_and_retries_the_pr_step(
    ws: Any, upstream: Upstream, github: GitHubMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KB_GH_TOKEN", github.token)
    forge = {
        "kind": "github",
        "repo": f"{github.owner}/{github.repo}",
        "api_url": github.base_url,
        "credential": "github-mock",
    }
    ws.source_add(SOURCE, str(upstream.remote), forge=forge)
    ws.source_sync(SOURCE)
    stage(ws)
    github.push_branch(BRANCH, [{"filename": "docs/" + ROTATE, "status": "modified"}])
    github.force(500, {"message": "Server Error"}, operation="pulls/create")
    pr = ws.open_kb_pull_request(SOURCE)
    out = ws.approve_review(pr["review_id"])
    assert out["Success"] is False and out["code"] == "forge_error" and out["pushed"] is True
    assert ws.show_review(pr["review_id"])["push_error"].startswith("change request:")
    retry = ws.approve_review(pr["review_id"])
    assert retry["Success"] and retry["number"] == 1


def test_gitlab_merge_request_flow(ws: Any, upstream: Upstream, monkeypatch: pytest.MonkeyPatch) -> None:
    mock = GitLabMock().start()
    try:
        monkeypatch.setenv("KB_GL_TOKEN", mock.token)
        forge = {
            "kind": "gitlab",
            "repo": mock.project_path,
            "api_url": mock.base_url,
            "credential": "gitlab-mock",
        }
        assert ws.source_add(SOURCE, str(upstream.remote), forge=forge)["Success"]
        assert ws.source_sync(SOURCE)["Success"]
        stage(ws)
        mock.push_branch(BRANCH, [{"new_path": "docs/" + ROTATE}])
        out = ws.approve_review(ws.open_kb_pull_request(SOURCE)["review_id"])
        assert out["Success"] and out["number"] == 1 and out["created"] is True, out
        stage(ws, "Tuesday", "Friday")
        out2 = ws.approve_review(ws.open_kb_pull_request(SOURCE, title="Two fixes")["review_id"])
        assert out2["Success"] and out2["number"] == 1 and out2["created"] is False, out2
        assert mock.token not in json.dumps([out, out2, ws.list_audit()])
    finally:
        mock.stop()
    assert not mock.failures, "outside GitLab's documented API:\n" + "\n".join(mock.failures)


# -- the CLI ---------------------------------------------------------------------------------


def test_review_pr_forge_commands(tmp_path: Path, upstream: Upstream) -> None:
    home = tmp_path / "ws"
    home.mkdir()
    (home / "gitkb.toml").write_text('[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n')

    def gitkb(*args: str) -> Any:
        return CliRunner().invoke(cli, ["--home", str(home), *args], catch_exceptions=False)

    assert gitkb("source", "add", SOURCE, str(upstream.remote)).exit_code == 0
    assert gitkb("source", "sync", SOURCE).exit_code == 0
    assert (
        gitkb("propose", SOURCE, ROTATE, "--search", "every 90 days", "--replace", "every 60 days").exit_code
        == 0
    )
    opened = gitkb("pr", "open", SOURCE, "--title", "Shorter keys")
    assert opened.exit_code == 0 and "review_state: pending" in opened.output and "M  docs/" in opened.output
    review_id = opened.output.split("review_id: ")[1].split()[0]
    assert review_id in gitkb("review", "list").output
    assert (
        "+API keys for the payments gateway expire every 60 days."
        in gitkb("review", "show", review_id).output
    )
    assert gitkb("review", "deny", review_id).exit_code == 2  # --reason is required
    approved = gitkb("review", "approve", review_id, "--reviewer", "dana")
    assert approved.exit_code == 0, approved.output
    assert "number: 1" in approved.output and "review_state: approved" in approved.output
    assert "Shorter keys" in gitkb("pr", "list", SOURCE).output
    merged = gitkb("forge", "merge", SOURCE, "1")
    assert merged.exit_code == 0 and "Merged change request #1" in merged.output, merged.output
    res = CliRunner().invoke(
        cli, ["--home", str(home), "--json", "search", "expire 60 days"], catch_exceptions=False
    )
    assert json.loads(res.stdout)["Results"][0]["filepath"] == "docs/" + ROTATE
    assert gitkb("review", "approve", "rev_missing").exit_code == 1
