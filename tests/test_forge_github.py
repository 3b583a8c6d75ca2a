"""The GitHub forge (github3.py) against a local mock that validates every
request, and every answer, against GitHub's REST description
(tests/fixtures/github-openapi, from @octokit/openapi). No internet."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from forge_servers.github_mock import GitHubMock, rate_limited
from forge_servers.http import refused_url
from gitkb.core.errors import ForgeError, InvalidArgument
from gitkb.forges import (
    FORGES,
    ChangeRequest,
    Forge,
    ForgeConfig,
    Secret,
    create_forge,
    load_secret,
    open_or_update,
    redact,
    register_forge,
)
from gitkb.forges.github import GitHubForge
from gitkb.http.errors import status_for

BRANCH = "gitkb/proposals/docs"
FILES = [
    {"filename": "guide/new.md", "status": "added"},
    {"filename": "guide/intro.md", "status": "modified"},
    {"filename": "guide/old.md", "status": "removed"},
    {"filename": "guide/moved.md", "status": "renamed", "previous_filename": "guide/was.md"},
    {"filename": "guide/copy.md", "status": "copied"},
    {"filename": "guide/mode.md", "status": "changed"},
]


@pytest.fixture
def github() -> Iterator[GitHubMock]:
    mock = GitHubMock().start()
    try:
        yield mock
    finally:
        mock.stop()
    assert not mock.failures, "outside GitHub's REST description:\n" + "\n".join(mock.failures)


def config_for(mock: GitHubMock, **kw: Any) -> ForgeConfig:
    base: dict[str, Any] = {
        "kind": "github",
        "repo": f"{mock.owner}/{mock.repo}",
        "api_url": mock.base_url,
        "token": Secret(mock.token),
        "timeout": 5.0,
    }
    base.update(kw)
    return ForgeConfig(**base)


@pytest.fixture
def forge(github: GitHubMock) -> GitHubForge:
    return GitHubForge(config_for(github))


def kind_of(exc: pytest.ExceptionInfo[ForgeError]) -> str:
    return str(exc.value.details["kind"])


# -- the flow -------------------------------------------------------------------


def test_open_update_and_list_files(github: GitHubMock, forge: GitHubForge) -> None:
    assert forge.find_open_by_head(BRANCH) is None
    assert github.ops() == ["repos/get", "pulls/list"]
    listed = github.seen[-1]
    assert listed.query["head"] == f"octo-org:{BRANCH}" and listed.query["state"] == "open"
    assert "application/vnd.github" in listed.headers["accept"]

    github.push_branch(BRANCH, FILES)
    cr, created = open_or_update(forge, head=BRANCH, base="main", title="Fix typo", body="One fix")
    assert created is True
    assert cr == ChangeRequest(
        number=1,
        url="https://github.com/octo-org/docs/pull/1",
        state="open",
        head=BRANCH,
        base="main",
        title="Fix typo",
    )
    assert github.seen[-1].operation == "pulls/create"
    assert github.seen[-1].body == {"title": "Fix typo", "body": "One fix", "base": "main", "head": BRANCH}

    found = forge.find_open_by_head(BRANCH)
    assert found is not None and found.number == 1

    cr2, created2 = open_or_update(forge, head=BRANCH, base="main", title="Fix typos", body="Two fixes")
    assert created2 is False and cr2.number == 1 and cr2.title == "Fix typos"
    assert github.pulls[1].title == "Fix typos" and github.pulls[1].body == "Two fixes"
    patch = [s for s in github.seen if s.operation == "pulls/update"][-1]
    assert patch.body == {"title": "Fix typos", "body": "Two fixes"}

    assert forge.changed_files(1) == [
        {"path": "guide/new.md", "status": "A"},
        {"path": "guide/intro.md", "status": "M"},
        {"path": "guide/old.md", "status": "D"},
        {"path": "guide/moved.md", "status": "R", "old_path": "guide/was.md"},
        {"path": "guide/copy.md", "status": "A"},
        {"path": "guide/mode.md", "status": "M"},
    ]
    assert forge.get(1).state == "open"
    assert github.ops().count("repos/get") == 1  # the repository is fetched once


def test_merged_and_closed_states(github: GitHubMock, forge: GitHubForge) -> None:
    github.push_branch(BRANCH, FILES[:1])
    number = forge.create(head=BRANCH, base="main", title="t", body="b").number
    github.pulls[number].merged = True
    github.pulls[number].state = "closed"
    github.pulls[number].merge_commit_sha = "e5bd3914e2e596debea16f433f57875b5b90bcd6"
    got = forge.get(number)
    assert (got.state, got.merged, got.merge_commit_sha) == (
        "merged",
        True,
        "e5bd3914e2e596debea16f433f57875b5b90bcd6",
    )
    github.pulls[number].merged = False
    assert forge.get(number).state == "closed"
    assert forge.find_open_by_head(BRANCH) is None


def test_already_exists_race_lists_again_and_updates(github: GitHubMock, forge: GitHubForge) -> None:
    github.push_branch(BRANCH, FILES)
    forge.create(head=BRANCH, base="main", title="first", body="by someone else")
    github.hide_open_pulls = 1  # our first list misses it, as if it were created in between
    cr, created = open_or_update(forge, head=BRANCH, base="main", title="ours", body="ours")
    assert created is False and cr.number == 1 and cr.title == "ours"
    assert github.ops()[-5:] == ["pulls/list", "pulls/create", "pulls/list", "pulls/get", "pulls/update"]
    assert len(github.pulls) == 1


def test_mock_rejects_requests_outside_the_description(github: GitHubMock) -> None:
    """The contract check is live: undescribed requests fail the test."""
    import requests

    auth = {"Authorization": f"token {github.token}", "Accept": "application/json"}
    base = f"{github.base_url}/repos/octo-org/docs"
    bad: list[tuple[str, str, Any]] = [
        ("GET", f"{base}/pulls?state=bogus", None),
        ("GET", f"{base}/pulls?labels=x", None),
        ("POST", f"{base}/pulls", {"title": "t", "head": "h", "base": "main", "bodyy": "typo"}),
        ("POST", f"{base}/pulls", {"title": 5, "head": "h", "base": "main"}),
        ("PATCH", f"{base}/pulls/1", {"state": "merged"}),
        ("PUT", f"{base}/pulls/1", {"title": "t"}),
        ("GET", f"{base}/pulls/one", None),
        ("GET", f"{base}/branches", None),
    ]
    with requests.Session() as s:
        for method, url, body in bad:
            assert s.request(method, url, json=body, headers=auth, timeout=5).status_code == 400
    assert len(github.failures) == len(bad)
    github.failures.clear()


def test_changed_files_follow_pagination(github: GitHubMock, forge: GitHubForge) -> None:
    many = [{"filename": f"docs/{i:03}.md", "status": "added"} for i in range(130)]
    github.push_branch(BRANCH, many)
    number = forge.create(head=BRANCH, base="main", title="many", body="").number
    files = forge.changed_files(number)
    assert [f["path"] for f in files] == [f["filename"] for f in many]
    assert github.ops().count("pulls/list-files") == 2


# -- errors ---------------------------------------------------------------------


def test_bad_token_is_auth(github: GitHubMock) -> None:
    forge = GitHubForge(config_for(github, token=Secret("ghp_" + "W" * 36)))
    with pytest.raises(ForgeError) as exc:
        forge.find_open_by_head(BRANCH)
    assert kind_of(exc) == "auth" and exc.value.details["status"] == 401
    assert "Bad credentials" in exc.value.message
    assert "W" * 36 not in exc.value.message and "W" * 36 not in str(exc.value.to_response())


def test_unknown_repo_is_not_found(github: GitHubMock) -> None:
    forge = GitHubForge(config_for(github, repo="octo-org/nope"))
    with pytest.raises(ForgeError) as exc:
        forge.get(1)
    assert kind_of(exc) == "not_found" and exc.value.details["status"] == 404
    assert exc.value.code == "forge_error" and status_for(exc.value.code) == 502


def test_unknown_pull_is_not_found(github: GitHubMock, forge: GitHubForge) -> None:
    with pytest.raises(ForgeError) as exc:
        forge.get(99)
    assert kind_of(exc) == "not_found"


def test_rate_limit_403_reports_reset_time(github: GitHubMock, forge: GitHubForge) -> None:
    body, headers = rate_limited(reset_in=90)
    github.force(403, body, operation="pulls/list", headers=headers)
    with pytest.raises(ForgeError) as exc:
        forge.find_open_by_head(BRANCH)
    d = exc.value.details
    assert d["kind"] == "rate_limit" and d["status"] == 403
    reset = datetime.strptime(d["reset_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert timedelta(seconds=80) < reset - datetime.now(UTC) < timedelta(seconds=100)
    assert 80 <= d["retry_after_s"] <= 100
    assert d["reset_at"] in exc.value.message


def test_secondary_rate_limit_retry_after(github: GitHubMock, forge: GitHubForge) -> None:
    body = {
        "message": "You have exceeded a secondary rate limit.",
        "documentation_url": "https://docs.github.com",
    }
    github.force(403, body, operation="pulls/create", headers={"Retry-After": "60"})
    github.push_branch(BRANCH, FILES)
    with pytest.raises(ForgeError) as exc:
        forge.create(head=BRANCH, base="main", title="t", body="b")
    assert kind_of(exc) == "rate_limit" and exc.value.details["retry_after_s"] == 60


def test_429_is_rate_limit(github: GitHubMock, forge: GitHubForge) -> None:
    github.force(429, {"message": "Too many requests"}, operation="pulls/get", headers={"Retry-After": "7"})
    with pytest.raises(ForgeError) as exc:
        forge.get(1)
    assert kind_of(exc) == "rate_limit" and exc.value.details["retry_after_s"] == 7


def test_403_without_rate_limit_is_auth(github: GitHubMock, forge: GitHubForge) -> None:
    github.force(403, {"message": "Resource not accessible by integration"}, operation="pulls/create")
    github.push_branch(BRANCH, FILES)
    with pytest.raises(ForgeError) as exc:
        forge.create(head=BRANCH, base="main", title="t", body="b")
    assert kind_of(exc) == "auth" and "Resource not accessible by integration" in exc.value.message


def test_422_validation_carries_github_message(github: GitHubMock, forge: GitHubForge) -> None:
    github.push_branch(BRANCH, [])  # nothing to merge
    with pytest.raises(ForgeError) as exc:
        forge.create(head=BRANCH, base="main", title="t", body="b")
    assert kind_of(exc) == "validation" and exc.value.details["status"] == 422
    assert f"No commits between main and {BRANCH}" in exc.value.message

    github.push_branch(BRANCH, FILES)
    with pytest.raises(ForgeError) as exc:
        forge.create(head=BRANCH, base="no-such-base", title="t", body="b")
    assert kind_of(exc) == "validation" and "PullRequest base invalid" in exc.value.message


def test_500_is_server(github: GitHubMock, forge: GitHubForge) -> None:
    github.force(500, {"message": "Server Error"}, operation="pulls/get")
    with pytest.raises(ForgeError) as exc:
        forge.get(1)
    assert kind_of(exc) == "server" and exc.value.details["status"] == 500


def test_connection_refused() -> None:
    forge = GitHubForge(
        ForgeConfig(
            kind="github", repo="o/r", api_url=refused_url(), token=Secret("ghp_" + "x" * 36), timeout=2
        )
    )
    with pytest.raises(ForgeError) as exc:
        forge.find_open_by_head(BRANCH)
    assert kind_of(exc) == "connection"
    assert "connection refused" in exc.value.message and "Traceback" not in exc.value.message
    assert exc.value.__cause__ is None and exc.value.__suppress_context__


def test_token_never_in_errors_or_logs(
    github: GitHubMock, forge: GitHubForge, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    github.force(500, {"message": f"echo: Authorization: token {github.token}"}, operation="pulls/list")
    with pytest.raises(ForgeError) as exc:
        forge.find_open_by_head(BRANCH)
    github.push_branch(BRANCH, FILES)
    open_or_update(forge, head=BRANCH, base="main", title="t", body="b")
    assert github.token not in exc.value.message
    assert github.token not in str(exc.value.details) and "***" in exc.value.message
    assert github.token not in caplog.text
    assert github.token not in repr(config_for(github))


# -- GitHub App -----------------------------------------------------------------


def _rsa_pair() -> tuple[bytes, bytes]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public


def test_github_app_installation_auth_and_renewal(
    github: GitHubMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    private, public = _rsa_pair()
    github.app_public_key = public
    cfg = config_for(github, token=None, app_id=github.app_id, app_private_key=Secret(private.decode()))
    forge = GitHubForge(cfg)
    assert forge.find_open_by_head(BRANCH) is None
    assert github.ops() == [
        "apps/get-repo-installation",
        "apps/create-installation-access-token",
        "repos/get",
        "pulls/list",
    ]
    assert github.seen[0].headers["authorization"].startswith("Bearer ")
    first = github.installation_tokens[0]
    assert github.seen[-1].headers["authorization"] == f"token {first}"

    # Two hours later the installation token has expired: it is renewed once.
    import github3.session

    later = datetime.now(UTC) + timedelta(hours=2)
    monkeypatch.setattr(github3.session, "_utcnow", lambda: later)
    github.installation_token_ttl = timedelta(hours=3)
    assert forge.find_open_by_head(BRANCH) is None
    assert github.ops()[4:] == ["apps/create-installation-access-token", "repos/get", "pulls/list"]
    assert github.seen[-1].headers["authorization"] == f"token {github.installation_tokens[1]}"


def test_github_app_with_installation_id_and_wrong_key(github: GitHubMock) -> None:
    private, public = _rsa_pair()
    other, _ = _rsa_pair()
    github.app_public_key = public
    cfg = config_for(
        github, token=None, app_id=github.app_id, app_private_key=Secret(other.decode()), installation_id=77
    )
    with pytest.raises(ForgeError) as exc:
        GitHubForge(cfg).get(1)
    assert kind_of(exc) == "auth" and exc.value.details["status"] == 401
    assert github.ops() == ["apps/create-installation-access-token"]
    assert "PRIVATE KEY" not in exc.value.message


# -- config, registry, secrets -----------------------------------------------------


def test_registry_builds_forges_and_stays_open(github: GitHubMock) -> None:
    assert {"github", "gitlab"} <= set(FORGES)
    forge = create_forge(config_for(github))
    assert isinstance(forge, GitHubForge) and isinstance(forge, Forge) and forge.name == "github"
    with pytest.raises(InvalidArgument, match="known kinds: github, gitlab"):
        create_forge(ForgeConfig(kind="nope", repo="a/b"))

    class Custom:
        name = "custom"

    saved = dict(FORGES)
    try:
        register_forge("custom", lambda cfg: Custom())
        assert (
            create_forge(ForgeConfig(kind="custom", repo="src", options={"catalog": object()})).name
            == "custom"
        )
        with pytest.raises(InvalidArgument, match="already registered"):
            register_forge("local", lambda cfg: Custom())  # built in
    finally:
        FORGES.clear()
        FORGES.update(saved)


def test_config_validation() -> None:
    with pytest.raises(InvalidArgument, match="owner/name"):
        GitHubForge(ForgeConfig(kind="github", repo="just-a-name", token=Secret("t0k3n")))
    with pytest.raises(InvalidArgument, match="token, or a GitHub App"):
        GitHubForge(ForgeConfig(kind="github", repo="o/r"))
    with pytest.raises(InvalidArgument, match="must be a Secret"):
        ForgeConfig(kind="github", repo="o/r", token=cast(Secret, "plain"))


def test_load_secret_from_env_and_file(tmp_path: Path) -> None:
    token = "ghp_" + "s" * 36
    assert load_secret("GH_TOKEN", environ={"GH_TOKEN": token}).reveal() == token
    f = tmp_path / "secrets.toml"
    f.write_text(f'github_token = "{token}"\n[gitlab]\ntoken = "glpat-{"g" * 20}"\n')
    os.chmod(f, 0o600)
    assert load_secret("UNSET_VAR", f, "github_token", environ={}).reveal() == token
    assert load_secret(secrets_file=f, key="gitlab.token").reveal().startswith("glpat-")
    s = load_secret(secrets_file=f, key="github_token")
    assert token not in repr(s) and token not in str(s) and token not in f"{s}"

    os.chmod(f, 0o644)
    with pytest.raises(InvalidArgument, match="mode 0644") as exc:
        load_secret(secrets_file=f, key="github_token")
    assert exc.value.next_steps == [f"chmod 600 {f}"]
    os.chmod(f, 0o640)
    with pytest.raises(InvalidArgument, match="0600"):
        load_secret(secrets_file=f, key="github_token")
    os.chmod(f, 0o400)
    assert load_secret(secrets_file=f, key="github_token").reveal() == token  # stricter is fine

    with pytest.raises(InvalidArgument, match="no key 'nope'"):
        load_secret(secrets_file=f, key="nope")
    with pytest.raises(InvalidArgument, match="GH_TOKEN is not set"):
        load_secret("GH_TOKEN", environ={})
    with pytest.raises(InvalidArgument, match="does not exist"):
        load_secret(secrets_file=tmp_path / "missing.toml", key="k")


def test_redact_known_values_and_token_shapes() -> None:
    secret = Secret("s3cr3t-value")
    text = (
        "bad s3cr3t-value; Authorization: token abcdef123; PRIVATE-TOKEN: zzz999; "
        f"ghp_{'a' * 36} glpat-{'b' * 20} https://user:pass@host/x "
        "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----"
    )
    out = redact(text, [secret])
    for leaked in ("s3cr3t-value", "abcdef123", "zzz999", "a" * 36, "b" * 20, "pass@", "MIIE"):
        assert leaked not in out
    assert out.count("***") >= 7
