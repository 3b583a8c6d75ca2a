"""services.changes.webhooks: signatures, payload parsing and repository URL matching (pure, no I/O)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitkb.core.errors import InvalidArgument
from gitkb.services.changes import webhooks as wh

A = "a" * 40
B = "b" * 40
ZERO = "0" * 40


def test_github_documented_vector() -> None:
    # https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
    secret, body = "It's a Secret to Everybody", b"Hello, World!"
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert wh.github_signature(secret, body) == expected
    assert wh.verify_github_signature(secret, body, expected)


@pytest.mark.parametrize(
    "secret, header",
    [
        ("It's a Secret to Everybody", "sha256=" + "0" * 64),  # wrong digest
        ("It's a Secret to Everybody", None),  # missing header
        ("It's a Secret to Everybody", ""),
        (
            "It's a Secret to Everybody",
            "sha1=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
        ),
        ("wrong secret", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"),
        (None, "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"),  # no secret
        ("", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"),
    ],
)
def test_github_bad_signatures(secret: str | None, header: str | None) -> None:
    assert not wh.verify_github_signature(secret, b"Hello, World!", header)


def test_github_signature_covers_every_byte() -> None:
    sig = wh.github_signature("s", b"Hello, World!")
    assert not wh.verify_github_signature("s", b"Hello, World! ", sig)


def test_gitlab_token_must_match_exactly_and_not_be_empty() -> None:
    assert wh.verify_gitlab_token("tok", "tok")
    assert not wh.verify_gitlab_token("tok", "tok2")
    assert not wh.verify_gitlab_token("tok", None)
    assert not wh.verify_gitlab_token(None, "tok")
    assert not wh.verify_gitlab_token("", "")


def _gh_repo() -> dict[str, str]:
    return {
        "clone_url": "https://github.com/Org/Docs.git",
        "ssh_url": "git@github.com:Org/Docs.git",
        "html_url": "https://github.com/Org/Docs",
    }


def test_github_merged_pull_request() -> None:
    ev = wh.parse_github(
        "pull_request",
        {
            "action": "closed",
            "repository": _gh_repo(),
            "pull_request": {"number": 7, "merged": True, "merge_commit_sha": A, "base": {"ref": "main"}},
        },
    )
    assert (ev.kind, ev.branch, ev.commit, ev.before) == ("merge", "main", A, None)
    assert ev.wants_sync and ev.extra["number"] == 7
    assert "git@github.com:Org/Docs.git" in ev.repo_urls


@pytest.mark.parametrize(
    "action, merged, reason",
    [("opened", False, "action"), ("closed", False, "without merging"), ("synchronize", True, "action")],
)
def test_github_other_pull_request_events_are_ignored(action: str, merged: bool, reason: str) -> None:
    ev = wh.parse_github(
        "pull_request",
        {
            "action": action,
            "pull_request": {"merged": merged, "merge_commit_sha": A, "base": {"ref": "main"}},
        },
    )
    assert ev.kind == "ignored" and reason in ev.reason and not ev.wants_sync


def test_github_merged_without_commit_is_invalid() -> None:
    with pytest.raises(InvalidArgument):
        wh.parse_github(
            "pull_request", {"action": "closed", "pull_request": {"merged": True, "base": {"ref": "m"}}}
        )


def test_github_push_range_new_branch_deleted_and_tags() -> None:
    ev = wh.parse_github(
        "push", {"ref": "refs/heads/main", "before": A, "after": B, "repository": _gh_repo()}
    )
    assert (ev.kind, ev.branch, ev.before, ev.commit, ev.new_branch) == ("push", "main", A, B, False)
    new = wh.parse_github("push", {"ref": "refs/heads/feat", "before": ZERO, "after": B})
    assert new.new_branch and new.before is None and new.commit == B
    gone = wh.parse_github("push", {"ref": "refs/heads/feat", "before": A, "after": ZERO, "deleted": True})
    assert gone.kind == "ignored" and "deleted" in gone.reason
    tag = wh.parse_github("push", {"ref": "refs/tags/v1", "before": ZERO, "after": B})
    assert tag.kind == "ignored"
    with pytest.raises(InvalidArgument):
        wh.parse_github("push", {"ref": "refs/heads/main", "before": A, "after": "nope"})


def test_github_ping_and_unknown_events() -> None:
    assert wh.parse_github("ping", {"zen": "Keep it logically awesome.", "hook_id": 1}).kind == "ping"
    assert wh.parse_github("issues", {}).kind == "ignored"
    assert wh.parse_github(None, {}).kind == "ignored"


def test_gitlab_merge_request_and_push() -> None:
    project = {
        "git_http_url": "https://gitlab.example.com/grp/docs.git",
        "git_ssh_url": "git@gitlab.example.com:grp/docs.git",
    }
    ev = wh.parse_gitlab(
        "Merge Request Hook",
        {
            "project": project,
            "object_attributes": {
                "iid": 3,
                "action": "merge",
                "state": "merged",
                "merge_commit_sha": A,
                "target_branch": "main",
                "last_commit": {"id": B},
            },
        },
    )
    assert (ev.kind, ev.branch, ev.commit) == ("merge", "main", A)
    ff = wh.parse_gitlab(
        "Merge Request Hook",
        {
            "object_attributes": {
                "state": "merged",
                "merge_commit_sha": None,
                "target_branch": "main",
                "last_commit": {"id": B},
            }
        },
    )
    assert ff.commit == B  # fast-forward merge: the target's head is the source's last commit
    opened = wh.parse_gitlab(
        "Merge Request Hook", {"object_attributes": {"action": "open", "state": "opened"}}
    )
    assert opened.kind == "ignored"
    push = wh.parse_gitlab(
        "Push Hook", {"ref": "refs/heads/main", "before": A, "after": B, "project": project}
    )
    assert (push.kind, push.before, push.commit) == ("push", A, B)
    assert wh.parse_gitlab("Tag Push Hook", {}).kind == "ignored"


def test_generic_payload_needs_exactly_a_source_and_a_full_commit() -> None:
    assert wh.parse_generic({"source": "docs", "commit": A}) == ("docs", A)
    for bad in (
        {"source": "docs"},
        {"commit": A},
        {"source": "", "commit": A},
        {"source": "d", "commit": "xyz"},
        {"source": "d", "commit": A, "extra": 1},
        {"source": "d", "commit": ZERO},
    ):
        with pytest.raises(InvalidArgument):
            wh.parse_generic(bad)


def test_decode_json() -> None:
    assert wh.decode_json(b'{"a": 1}') == {"a": 1}
    for bad in (b"[1]", b"{", b"\xff\xfe"):
        with pytest.raises(InvalidArgument):
            wh.decode_json(bad)


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/Org/Docs.git",
        "https://github.com/org/docs",
        "https://x-access-token:secret@github.com/org/docs/",
        "http://github.com:80/org/docs.git",
        "git@github.com:org/docs.git",
        "ssh://git@github.com/org/docs.git",
        "ssh://git@github.com:22/Org/Docs",
        "git://github.com/org/docs.git",
    ],
)
def test_normalise_remote_urls(url: str) -> None:
    assert wh.normalise_repo_url(url) == "github.com/org/docs"


def test_normalise_local_paths() -> None:
    assert wh.normalise_repo_url("/srv/git/Docs.git") == "file:/srv/git/Docs"
    assert wh.normalise_repo_url("file:///srv/git/Docs.git/") == "file:/srv/git/Docs"
    assert wh.same_repository("/srv/git/docs.git", "file:///srv/git/docs")
    assert not wh.same_repository("/srv/git/docs", "/srv/git/Docs")  # local paths keep their case
    assert not wh.same_repository("https://github.com/org/docs", "https://gitlab.com/org/docs")
    assert not wh.same_repository("", "")


@given(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=20),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=20),
)
def test_normalised_forms_agree(owner: str, repo: str) -> None:
    forms = [
        f"https://host.example/{owner}/{repo}.git",
        f"git@host.example:{owner}/{repo}",
        f"ssh://git@host.example/{owner}/{repo}",
    ]
    assert len({wh.normalise_repo_url(f) for f in forms}) == 1


def test_repository_urls_before_parsing() -> None:
    gh = wh.repository_urls("github", {"repository": _gh_repo(), "pull_request": "not a dict"})
    assert "https://github.com/Org/Docs.git" in gh
    gl = wh.repository_urls("gitlab", {"project": {"git_ssh_url": "git@gl.example:g/d.git"}})
    assert gl == ("git@gl.example:g/d.git",)
    assert wh.repository_urls("generic", {"repository": _gh_repo()}) == ()
