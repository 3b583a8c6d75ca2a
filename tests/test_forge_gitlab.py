"""The GitLab forge (python-gitlab) against a local mock answering in GitLab's
documented shapes and refusing undocumented requests. No internet."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from forge_servers.gitlab_mock import GitLabMock, rate_limited
from forge_servers.http import refused_url
from gitkb.core.errors import ForgeError, InvalidArgument
from gitkb.forges import ChangeRequest, Forge, ForgeConfig, Secret, create_forge, open_or_update
from gitkb.forges.gitlab import GitLabForge

BRANCH = "gitkb/proposals/handbook"
DIFFS: list[dict[str, Any]] = [
    {"new_path": "guide/new.md", "new_file": True},
    {"new_path": "guide/intro.md"},
    {"old_path": "guide/old.md", "new_path": "guide/old.md", "deleted_file": True},
    {"old_path": "guide/was.md", "new_path": "guide/moved.md", "renamed_file": True},
]
EXPECTED_FILES = [
    {"path": "guide/new.md", "status": "A"},
    {"path": "guide/intro.md", "status": "M"},
    {"path": "guide/old.md", "status": "D"},
    {"path": "guide/moved.md", "status": "R", "old_path": "guide/was.md"},
]


@pytest.fixture
def gitlab_mock() -> Iterator[GitLabMock]:
    mock = GitLabMock().start()
    try:
        yield mock
    finally:
        mock.stop()
    assert not mock.failures, "outside GitLab's documented API:\n" + "\n".join(mock.failures)


def config_for(mock: GitLabMock, **kw: Any) -> ForgeConfig:
    base: dict[str, Any] = {
        "kind": "gitlab",
        "repo": mock.project_path,
        "api_url": mock.base_url,
        "token": Secret(mock.token),
        "timeout": 5.0,
    }
    base.update(kw)
    return ForgeConfig(**base)


@pytest.fixture
def forge(gitlab_mock: GitLabMock) -> GitLabForge:
    return GitLabForge(config_for(gitlab_mock))


def kind_of(exc: pytest.ExceptionInfo[ForgeError]) -> str:
    return str(exc.value.details["kind"])


def test_open_update_and_list_files(gitlab_mock: GitLabMock, forge: GitLabForge) -> None:
    assert forge.find_open_by_head(BRANCH) is None
    assert gitlab_mock.endpoints() == ["project", "mr_list"]
    assert gitlab_mock.seen[0].path == "/api/v4/projects/docs-group%2Fhandbook"
    assert gitlab_mock.seen[1].path == "/api/v4/projects/7/merge_requests"
    assert gitlab_mock.seen[1].query == {"source_branch": BRANCH, "state": "opened"}

    gitlab_mock.push_branch(BRANCH, DIFFS)
    cr, created = open_or_update(forge, head=BRANCH, base="main", title="Fix typo", body="One fix")
    assert created is True
    assert cr == ChangeRequest(
        number=1,
        url=f"{gitlab_mock.base_url}/docs-group/handbook/-/merge_requests/1",
        state="open",
        head=BRANCH,
        base="main",
        title="Fix typo",
    )
    assert gitlab_mock.seen[-1].body == {
        "source_branch": BRANCH,
        "target_branch": "main",
        "title": "Fix typo",
        "description": "One fix",
    }

    cr2, created2 = open_or_update(forge, head=BRANCH, base="main", title="Fix typos", body="Two fixes")
    assert (created2, cr2.number, cr2.title) == (False, 1, "Fix typos")
    assert gitlab_mock.seen[-1].endpoint == "mr_update"
    assert gitlab_mock.seen[-1].body == {"title": "Fix typos", "description": "Two fixes"}
    assert gitlab_mock.mrs[1].description == "Two fixes"

    assert forge.changed_files(1) == EXPECTED_FILES
    assert forge.get(1).state == "open"
    assert gitlab_mock.endpoints().count("project") == 1


def test_merged_and_closed_merge_requests_read_back_their_state(
    gitlab_mock: GitLabMock, forge: GitLabForge
) -> None:
    gitlab_mock.push_branch(BRANCH, DIFFS)
    number = forge.create(head=BRANCH, base="main", title="t", body="b").number
    gitlab_mock.mrs[number].state = "merged"
    gitlab_mock.mrs[number].merge_commit_sha = "a" * 40
    got = forge.get(number)
    assert (got.state, got.merged, got.merge_commit_sha) == ("merged", True, "a" * 40)
    gitlab_mock.mrs[number].state = "closed"
    assert forge.get(number).state == "closed"
    assert forge.find_open_by_head(BRANCH) is None


def test_duplicate_409_is_handled_as_update(gitlab_mock: GitLabMock, forge: GitLabForge) -> None:
    gitlab_mock.push_branch(BRANCH, DIFFS)
    forge.create(head=BRANCH, base="main", title="first", body="someone else's")
    with pytest.raises(ForgeError) as exc:
        forge.create(head=BRANCH, base="main", title="again", body="")
    assert kind_of(exc) == "already_exists" and exc.value.details["status"] == 409
    assert "Another open merge request already exists for this source branch: !1" in exc.value.message

    # A list that misses the open MR (created in between) -> 409 -> list again -> update.
    gitlab_mock.force(200, [], endpoint="mr_list")
    cr, created = open_or_update(forge, head=BRANCH, base="main", title="ours", body="ours")
    assert (created, cr.number, cr.title) == (False, 1, "ours")
    assert gitlab_mock.endpoints()[-4:] == ["mr_list", "mr_create", "mr_list", "mr_update"]
    assert len(gitlab_mock.mrs) == 1


def test_changed_files_follow_pagination_and_old_gitlab(gitlab_mock: GitLabMock, forge: GitLabForge) -> None:
    many = [{"new_path": f"docs/{i:03}.md", "new_file": True} for i in range(45)]
    gitlab_mock.push_branch(BRANCH, many)
    number = forge.create(head=BRANCH, base="main", title="many", body="").number
    files = forge.changed_files(number)
    assert [f["path"] for f in files] == [d["new_path"] for d in many]
    assert gitlab_mock.endpoints().count("mr_diffs") == 3  # 20 + 20 + 5

    gitlab_mock.push_branch(BRANCH, DIFFS)
    gitlab_mock.has_diffs_endpoint = False  # GitLab before 15.7: only /changes
    assert forge.changed_files(number) == EXPECTED_FILES
    assert gitlab_mock.endpoints()[-2:] == ["mr_diffs", "mr_changes"]


def test_forks_with_the_same_branch_name_are_ignored(gitlab_mock: GitLabMock, forge: GitLabForge) -> None:
    gitlab_mock.push_branch(BRANCH, DIFFS)
    forge.create(head=BRANCH, base="main", title="t", body="b")
    gitlab_mock.mrs[1].source_project_id = 99  # an MR from a fork's branch of the same name
    assert forge.find_open_by_head(BRANCH) is None


# -- errors ---------------------------------------------------------------------


def test_bad_token_is_auth(gitlab_mock: GitLabMock) -> None:
    bad = "glpat-" + "Z" * 20
    with pytest.raises(ForgeError) as exc:
        GitLabForge(config_for(gitlab_mock, token=Secret(bad))).find_open_by_head(BRANCH)
    assert kind_of(exc) == "auth" and exc.value.details["status"] == 401
    assert "401 Unauthorized" in exc.value.message and bad not in exc.value.message


def test_403_is_auth(gitlab_mock: GitLabMock, forge: GitLabForge) -> None:
    gitlab_mock.push_branch(BRANCH, DIFFS)
    gitlab_mock.force(403, {"message": "403 Forbidden"}, endpoint="mr_create")
    with pytest.raises(ForgeError) as exc:
        forge.create(head=BRANCH, base="main", title="t", body="b")
    assert kind_of(exc) == "auth" and exc.value.details["status"] == 403


def test_unknown_project_and_mr_are_not_found(gitlab_mock: GitLabMock) -> None:
    with pytest.raises(ForgeError) as exc:
        GitLabForge(config_for(gitlab_mock, repo="docs-group/nope")).get(1)
    assert kind_of(exc) == "not_found" and "404 Project Not Found" in exc.value.message
    assert "docs-group/nope" in exc.value.message
    forge = GitLabForge(config_for(gitlab_mock))
    calls: list[Callable[[], object]] = [
        lambda: forge.get(5),
        lambda: forge.update(5, title="t", body="b"),
        lambda: forge.changed_files(5),
    ]
    for call in calls:
        with pytest.raises(ForgeError) as exc:
            call()
        assert kind_of(exc) == "not_found" and exc.value.details["status"] == 404


def test_429_reports_retry_after_without_sleeping(gitlab_mock: GitLabMock, forge: GitLabForge) -> None:
    body, headers = rate_limited(retry_after=45)
    gitlab_mock.force(429, body, endpoint="mr_list", headers=headers)
    start = time.monotonic()
    with pytest.raises(ForgeError) as exc:
        forge.find_open_by_head(BRANCH)
    assert time.monotonic() - start < 5  # python-gitlab would otherwise sleep 45 s and retry
    d = exc.value.details
    assert d["kind"] == "rate_limit" and d["status"] == 429 and 40 <= d["retry_after_s"] <= 45
    assert d["reset_at"] in exc.value.message
    assert gitlab_mock.endpoints().count("mr_list") == 1


def test_validation_errors_carry_gitlab_message(gitlab_mock: GitLabMock, forge: GitLabForge) -> None:
    with pytest.raises(ForgeError) as exc:
        forge.create(head="no-such-branch", base="main", title="t", body="b")
    assert kind_of(exc) == "validation" and exc.value.details["status"] == 422
    assert 'Source branch "no-such-branch" does not exist' in exc.value.message
    gitlab_mock.push_branch(BRANCH, DIFFS)
    with pytest.raises(ForgeError) as exc:
        forge.create(head=BRANCH, base="main", title="  ", body="b")
    assert kind_of(exc) == "validation" and "title can't be blank" in exc.value.message


def test_500_is_server(gitlab_mock: GitLabMock, forge: GitLabForge) -> None:
    gitlab_mock.force(500, {"message": "500 Internal Server Error"}, endpoint="mr_get")
    with pytest.raises(ForgeError) as exc:
        forge.get(1)
    assert kind_of(exc) == "server" and exc.value.details["status"] == 500
    assert gitlab_mock.endpoints().count("mr_get") == 1  # no silent retries


def test_connection_refused() -> None:
    cfg = ForgeConfig(
        kind="gitlab", repo="g/p", api_url=refused_url(), token=Secret("glpat-" + "x" * 20), timeout=2
    )
    with pytest.raises(ForgeError) as exc:
        GitLabForge(cfg).find_open_by_head(BRANCH)
    assert kind_of(exc) == "connection" and "connection refused" in exc.value.message
    assert exc.value.__cause__ is None and exc.value.__suppress_context__


def test_token_never_in_errors_or_logs(
    gitlab_mock: GitLabMock, forge: GitLabForge, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    gitlab_mock.force(500, {"message": f"PRIVATE-TOKEN: {gitlab_mock.token} rejected"}, endpoint="mr_list")
    with pytest.raises(ForgeError) as exc:
        forge.find_open_by_head(BRANCH)
    gitlab_mock.push_branch(BRANCH, DIFFS)
    open_or_update(forge, head=BRANCH, base="main", title="t", body="b")
    assert gitlab_mock.token not in exc.value.message and gitlab_mock.token not in str(exc.value.details)
    assert gitlab_mock.token not in caplog.text
    assert gitlab_mock.token not in repr(config_for(gitlab_mock))


def test_registry_and_config(gitlab_mock: GitLabMock) -> None:
    forge = create_forge(config_for(gitlab_mock, api_url=gitlab_mock.base_url + "/api/v4/"))
    assert isinstance(forge, GitLabForge) and isinstance(forge, Forge) and forge.name == "gitlab"
    assert forge.find_open_by_head(BRANCH) is None  # a trailing /api/v4 is accepted
    with pytest.raises(InvalidArgument, match="access token"):
        GitLabForge(ForgeConfig(kind="gitlab", repo="g/p"))


def test_mock_rejects_undocumented_requests(gitlab_mock: GitLabMock) -> None:
    """The shape check is live: undocumented requests fail the test."""
    import requests

    headers = {"PRIVATE-TOKEN": gitlab_mock.token}
    base = f"{gitlab_mock.base_url}/api/v4/projects/7"
    bad: list[tuple[str, str, Any]] = [
        ("GET", f"{base}/merge_requests?state=open", None),  # GitLab says "opened"
        ("GET", f"{base}/merge_requests?head=x", None),
        (
            "POST",
            f"{base}/merge_requests",
            {"source_branch": "a", "target_branch": "main", "title": "t", "body": "x"},
        ),
        ("PUT", f"{base}/merge_requests/1", {}),
        ("PATCH", f"{base}/merge_requests/1", {"title": "t"}),
        ("GET", f"{base}/merge_requests/1/files", None),
    ]
    with requests.Session() as s:
        for method, url, body in bad:
            assert s.request(method, url, json=body, headers=headers, timeout=5).status_code == 400
    assert len(gitlab_mock.failures) == len(bad)
    gitlab_mock.failures.clear()
