"""A PR/MR merged by squash or rebase on GitHub/GitLab settles its review from the merge webhook.

The forges are the REST mocks of tests/forge_servers (the change request is opened there); the
merge itself is a real squash commit pushed to the bare remote, and the webhook goes through the
HTTP app with a real signature, as a forge would send it."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from forge_servers.github_mock import GitHubMock
from forge_servers.gitlab_mock import GitLabMock
from gitkb.core.config import load_settings
from gitkb.http import create_app
from gitkb.services.changes import webhook_intake
from gitkb.services.changes.webhooks import github_signature
from helpers import SOURCE, Upstream, git, with_roots

SECRET = "squash-secret"
READER = "r" * 24
BRANCH = "gitkb/proposals/handbook"
ROTATE = "docs/runbooks/rotate-api-keys.md"
TOML = (
    f'[[server.tokens]]\nname = "viewer"\ntoken = "{READER}"\nscopes = ["read"]\n'
    '[[credentials]]\nname = "github-mock"\nhosts = ["127.0.0.1"]\ntoken_env = "KB_GH_TOKEN"\n'
    '[[credentials]]\nname = "gitlab-mock"\nhosts = ["127.0.0.1"]\ntoken_env = "KB_GL_TOKEN"\n'
)


@pytest.fixture
def github() -> Iterator[GitHubMock]:
    mock = GitHubMock().start()
    try:
        yield mock
    finally:
        mock.stop()
    assert not mock.failures, "outside GitHub's REST description:\n" + "\n".join(mock.failures)


@pytest.fixture
def gitlab() -> Iterator[GitLabMock]:
    mock = GitLabMock().start()
    try:
        yield mock
    finally:
        mock.stop()
    assert not mock.failures, "outside GitLab's documented API:\n" + "\n".join(mock.failures)


def client(home: Path, upstream: Upstream, forge: dict[str, Any]) -> TestClient:
    home.mkdir(parents=True)
    (home / "gitkb.toml").write_text(with_roots(TOML, upstream.remote))
    settings = load_settings(home, embedding_provider="hashing", embedding_model="hashing-384")
    c = TestClient(create_app(settings), client=("127.0.0.1", 1))
    c.__enter__()
    ws = c.app.state.gitkb.workspace  # type: ignore[attr-defined]
    assert ws.source_add(SOURCE, str(upstream.remote), forge=forge)["Success"]
    assert ws.source_sync(SOURCE)["Success"]
    webhook_intake.set_webhook_secret(ws.ctx, SOURCE, SECRET)
    return c


def squash_merge(upstream: Upstream, message: str) -> str:
    """What the forge's "Squash and merge" does: one new commit on main with the branch's tree."""
    git(upstream.work, "fetch", "-q", "origin", BRANCH)
    git(upstream.work, "merge", "-q", "--squash", "FETCH_HEAD")
    return upstream.commit_push(message, add=False)


def wait_job(c: TestClient, job_id: str) -> None:
    deadline = time.time() + 60
    while time.time() < deadline:
        r = c.get(f"/jobs/{job_id}", headers={"Authorization": f"Bearer {READER}"})
        if r.json()["status"] in ("completed", "failed", "cancelled"):
            assert r.json()["status"] == "completed", r.text
            return
        time.sleep(0.05)
    raise AssertionError("sync job did not finish")


def approve_then_stage_more(ws: Any, push: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    first = ws.propose_kb_edit(
        SOURCE, "runbooks/rotate-api-keys.md", search="every 90 days", replace="every 60 days"
    )
    pr = ws.open_kb_pull_request(SOURCE)
    push()
    done = ws.approve_review(pr["review_id"])
    assert done["Success"] and done["number"] == 1, done
    later = ws.propose_kb_edit(SOURCE, "runbooks/rotate-api-keys.md", search="Tuesday", replace="Friday")
    assert first["Success"] and later["Success"]
    return pr, later


def settled_as_after_a_merge(
    c: TestClient,
    upstream: Upstream,
    pr: dict[str, Any],
    later: dict[str, Any],
    sha: str,
    out: dict[str, Any],
) -> None:
    ws = c.app.state.gitkb.workspace  # type: ignore[attr-defined]
    assert out["settled"]["reviews_merged"] == [pr["review_id"]], out
    wait_job(c, out["job_id"])
    assert ws.show_review(pr["review_id"])["review_state"] == "merged"
    states = {p["proposal_id"]: p["state"] for p in ws.list_proposals(SOURCE, "all")["Proposals"]}
    assert states == {pr["proposal_ids"][0]: "merged", later["proposal_id"]: "staged"}
    assert ws.show_proposal(later["proposal_id"])["parent"] == sha  # replayed onto the squash commit
    repo = next((ws.home / "repos").iterdir())
    assert git(repo, "rev-parse", f"{BRANCH}^") == sha
    assert [s for s in ws.source_list()["Sources"] if s["name"] == SOURCE][0]["synced_commit"] == sha
    hits = ws.document_index("SEARCH", query="every 60 days", index_name=SOURCE, mode="keyword")["Results"]
    assert hits and hits[0]["filepath"].endswith("rotate-api-keys.md") and sha in hits[0]["source_uri"]


def test_github_squash_merge_settles_from_the_webhook(
    home: Path, upstream: Upstream, github: GitHubMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KB_GH_TOKEN", github.token)
    forge = {
        "kind": "github",
        "repo": f"{github.owner}/{github.repo}",
        "api_url": github.base_url,
        "credential": "github-mock",
    }
    c = client(home, upstream, forge)
    try:
        ws = c.app.state.gitkb.workspace  # type: ignore[attr-defined]
        pr, later = approve_then_stage_more(
            ws, lambda: github.push_branch(BRANCH, [{"filename": ROTATE, "status": "modified"}])
        )
        sha = squash_merge(upstream, "Rotate keys every 60 days (#1)")
        pull = github.pulls[1]
        pull.state, pull.merged, pull.merge_commit_sha = "closed", True, sha
        payload = {
            "action": "closed",
            "number": 1,
            "pull_request": github._pull_json(pull, full=True),
            "repository": {"clone_url": f"file://{upstream.remote}"},
        }
        body = json.dumps(payload).encode()

        def deliver() -> dict[str, Any]:
            r = c.post(
                f"/webhooks/github?source={SOURCE}",
                content=body,
                headers={
                    "Content-Type": "application/json",
                    "X-GitHub-Event": "pull_request",
                    "X-GitHub-Delivery": str(uuid.uuid4()),
                    "X-Hub-Signature-256": github_signature(SECRET, body),
                },
            )
            assert r.status_code in (200, 202), r.text
            return dict(r.json())

        settled_as_after_a_merge(c, upstream, pr, later, sha, deliver())
        again = deliver()  # the same event under a new delivery id settles nothing twice
        assert again["settled"]["reviews_merged"] == [] and again["queued"] is False
        assert ws.show_proposal(later["proposal_id"])["state"] == "staged"
    finally:
        c.__exit__(None, None, None)


def test_gitlab_squash_merge_settles_from_the_webhook(
    home: Path, upstream: Upstream, gitlab: GitLabMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KB_GL_TOKEN", gitlab.token)
    forge = {
        "kind": "gitlab",
        "repo": gitlab.project_path,
        "api_url": gitlab.base_url,
        "credential": "gitlab-mock",
    }
    c = client(home, upstream, forge)
    try:
        ws = c.app.state.gitkb.workspace  # type: ignore[attr-defined]
        pr, later = approve_then_stage_more(ws, lambda: gitlab.push_branch(BRANCH, [{"new_path": ROTATE}]))
        sha = squash_merge(upstream, "Rotate keys every 60 days")
        payload = {
            "object_kind": "merge_request",
            "project": {"git_http_url": f"file://{upstream.remote}"},
            "object_attributes": {
                "iid": 1,
                "action": "merge",
                "state": "merged",
                "target_branch": "main",
                "source_branch": BRANCH,
                "merge_commit_sha": None,
                "squash_commit_sha": sha,
            },
        }
        r = c.post(
            f"/webhooks/gitlab?source={SOURCE}",
            json=payload,
            headers={"X-Gitlab-Event": "Merge Request Hook", "X-Gitlab-Token": SECRET},
        )
        assert r.status_code in (200, 202), r.text
        settled_as_after_a_merge(c, upstream, pr, later, sha, dict(r.json()))
    finally:
        c.__exit__(None, None, None)


def test_a_merge_commit_not_on_the_branch_settles_nothing(
    home: Path, upstream: Upstream, github: GitHubMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The webhook's sha is a hint: one that is not on the target branch settles no review."""
    from gitkb.services.changes.sources.merges import change_request_merged

    monkeypatch.setenv("KB_GH_TOKEN", github.token)
    forge = {
        "kind": "github",
        "repo": f"{github.owner}/{github.repo}",
        "api_url": github.base_url,
        "credential": "github-mock",
    }
    c = client(home, upstream, forge)
    try:
        ws = c.app.state.gitkb.workspace  # type: ignore[attr-defined]
        pr, _ = approve_then_stage_more(
            ws, lambda: github.push_branch(BRANCH, [{"filename": ROTATE, "status": "modified"}])
        )
        head = upstream.remote_sha(BRANCH)
        assert head is not None
        out = change_request_merged(ws.ctx, SOURCE, 1, head)  # the pushed head, not on main
        assert out["reviews_merged"] == [] and "not on 'main'" in out["reason"]
        assert ws.show_review(pr["review_id"])["review_state"] == "approved"
    finally:
        c.__exit__(None, None, None)
