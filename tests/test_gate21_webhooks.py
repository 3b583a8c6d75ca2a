"""gate21: a signed GitHub / GitLab delivery is taken only for the repository its source follows.

A delivery for repository X posted to ``?source=NAME`` (NAME follows Y) was taken as NAME's event:
its commit was checked against Y's branch, but the refs, the merged PR / MR number and so the
review it settles came from X. Now it is refused (403 ``forbidden``, ``refused:
repository_mismatch``) on every webhook route, ping included, with nothing claimed or queued,
and the refusal is in the audit log and counted as ``refused``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from gitkb.core.errors import Forbidden
from gitkb.services.changes import webhook_intake
from gitkb.services.changes.webhooks import (
    RepositoryIdentity,
    github_signature,
    names_repository,
    parse_github,
    repository_identity,
)
from helpers import SOURCE, Upstream, catalog, error_code, with_roots

SECRET = "gate21 webhook secret"
READER = "r" * 24
TOML = f'[[server.tokens]]\nname = "viewer"\ntoken = "{READER}"\nscopes = ["read"]\n'


@pytest.fixture
def hook(make_client: Callable[..., TestClient], upstream: Upstream) -> TestClient:
    c = make_client(with_roots(TOML, upstream.remote), peer=("127.0.0.1", 1))
    ws = c.app.state.gitkb.workspace  # type: ignore[attr-defined]
    assert ws.source_add(SOURCE, str(upstream.remote))["Success"]
    assert ws.source_sync(SOURCE)["Success"]
    webhook_intake.set_webhook_secret(ws.ctx, SOURCE, SECRET)
    return c


def _state(home: Path) -> tuple[int, int, int]:
    [(jobs, deliveries, refused)] = catalog.rows(
        home,
        "SELECT (SELECT COUNT(*) FROM jobs), (SELECT COUNT(*) FROM webhook_deliveries),"
        " (SELECT COUNT(*) FROM audit WHERE action = 'webhook.refused' AND result = 'repository_mismatch')",
    )
    return int(jobs), int(deliveries), int(refused)


def _refused(c: TestClient, provider: str) -> float:
    r = c.get("/metrics", headers={"Authorization": f"Bearer {READER}"})
    assert r.status_code == 200, r.text
    for fam in text_string_to_metric_families(r.text):
        for s in fam.samples:
            if s.name == "gitkb_webhook_deliveries_total" and s.labels == {
                "provider": provider,
                "outcome": "refused",
            }:
                return float(s.value)
    return 0.0


def _github(c: TestClient, event: str, payload: dict[str, Any], query: str = "") -> Any:
    body = json.dumps(payload).encode()
    hdrs = {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": github_signature(SECRET, body),
    }
    return c.post("/webhooks/github" + query, content=body, headers=hdrs)


def _gitlab(c: TestClient, event: str, payload: dict[str, Any], query: str = "") -> Any:
    hdrs = {"X-Gitlab-Event": event, "X-Gitlab-Token": SECRET, "X-Gitlab-Event-UUID": str(uuid.uuid4())}
    return c.post("/webhooks/gitlab" + query, json=payload, headers=hdrs)


def _is_mismatch(r: Any) -> None:
    assert r.status_code == 403, r.text
    assert error_code(r) == "forbidden" and "repository_mismatch" in r.text, r.text


def test_a_github_delivery_for_another_repository_is_refused(
    hook: TestClient, upstream: Upstream, home: Path, tmp_path: Path
) -> None:
    before = upstream.remote_sha("main")
    upstream.write("docs/runbooks/gate21.md", "# Gate\n\nThe galaxy drift note.\n")
    after = upstream.commit_push("a change on the source's repository")
    mine = {"clone_url": f"file://{upstream.remote}"}
    other = {
        "clone_url": f"file://{tmp_path / 'other.git'}",
        "html_url": "https://github.com/acme/other",
        "full_name": "acme/other",
        "homepage": f"file://{upstream.remote}",  # set by X's owner: names nothing
    }
    pr = {"number": 7, "merged": True, "merge_commit_sha": after, "base": {"ref": "main", "repo": mine}}
    deliveries = {
        "push": {"ref": "refs/heads/main", "before": before, "after": after, "repository": other},
        "pull_request": {"action": "closed", "pull_request": pr, "repository": other},
        "ping": {"zen": "Keep it logically awesome.", "repository": other},
    }
    n = _state(home)
    for event, payload in deliveries.items():
        _is_mismatch(_github(hook, event, payload, f"?source={SOURCE}"))
    assert _state(home) == (n[0], n[1], n[2] + 3)  # no job, no claimed delivery; three refusals audited
    assert _refused(hook, "github") == 3
    # without ?source= X's URLs (its owner-set homepage neither) find no source
    r = _github(hook, "push", deliveries["push"])
    assert r.status_code == 404 and error_code(r) == "not_found", r.text
    assert _state(home)[:2] == n[:2]
    # the same push for the source's own repository is taken
    r = _github(hook, "push", {**deliveries["push"], "repository": mine}, f"?source={SOURCE}")
    assert r.status_code == 202 and r.json()["queued"] is True, r.text


def test_a_gitlab_delivery_for_another_repository_is_refused(
    hook: TestClient, upstream: Upstream, home: Path, tmp_path: Path
) -> None:
    before = upstream.remote_sha("main")
    upstream.write("docs/runbooks/gate21-gl.md", "# Gate\n\nThe nebula drift note.\n")
    after = upstream.commit_push("a change on the source's repository")
    mine = {"git_http_url": f"file://{upstream.remote}"}
    other = {
        "git_http_url": f"file://{tmp_path / 'other.git'}",
        "web_url": "https://gitlab.example/acme/other",
        "path_with_namespace": "acme/other",
    }
    attrs = {
        "iid": 4,
        "action": "merge",
        "state": "merged",
        "merge_commit_sha": after,
        "target_branch": "main",
    }
    merge = {"object_kind": "merge_request", "project": other, "object_attributes": {**attrs, "target": mine}}
    push = {"ref": "refs/heads/main", "before": before, "after": after, "project": other}
    n = _state(home)
    _is_mismatch(_gitlab(hook, "Merge Request Hook", merge, f"?source={SOURCE}"))
    _is_mismatch(_gitlab(hook, "Push Hook", push, f"?source={SOURCE}"))
    _is_mismatch(
        _gitlab(hook, "Push Hook", {k: v for k, v in push.items() if k != "project"}, f"?source={SOURCE}")
    )
    assert _state(home) == (n[0], n[1], n[2] + 3)
    assert _refused(hook, "gitlab") == 3
    r = _gitlab(hook, "Push Hook", {**push, "project": mine}, f"?source={SOURCE}")
    assert r.status_code == 202 and r.json()["queued"] is True, r.text


def test_the_repository_is_its_urls_and_its_full_name() -> None:
    """The pure rule: one forge-made URL must be the remote, and owner/name, when given, agree."""
    remote = "git@github.com:Acme/Docs.git"
    gh = repository_identity(
        "github", {"repository": {"clone_url": "https://github.com/acme/docs.git", "full_name": "Acme/Docs"}}
    )
    assert names_repository(gh, remote)
    assert not names_repository(RepositoryIdentity(gh.urls, ("acme/other",)), remote)
    assert not names_repository(RepositoryIdentity((), ("acme/docs",)), remote)
    assert (
        repository_identity("github", {"repository": {"homepage": "https://github.com/acme/docs"}}).urls == ()
    )
    gl = repository_identity(
        "gitlab", {"project": {"git_ssh_url": "git@gl.example:g/d.git", "path_with_namespace": "g/d"}}
    )
    assert names_repository(gl, "https://gl.example/g/d") and not names_repository(
        gl, "https://gl.example/g/e"
    )
    rooted = RepositoryIdentity(("https://gl.example/gitlab/g/d.git",), ("g/d",))  # a relative URL root
    assert names_repository(rooted, "https://gl.example/gitlab/g/d")
    assert not names_repository(RepositoryIdentity(rooted.urls, ("x/g/d",)), "https://gl.example/gitlab/g/d")
    assert not names_repository(RepositoryIdentity(rooted.urls, ("",)), "https://gl.example/gitlab/g/d")
    assert repository_identity("generic", {"repository": {"clone_url": remote}}) == RepositoryIdentity()


def test_the_library_intake_refuses_it_too(
    hook: TestClient, upstream: Upstream, home: Path, tmp_path: Path
) -> None:
    """No CLI command replays a delivery; the library's entry, ``webhook_intake.accept``, makes the check itself."""
    ws = hook.app.state.gitkb.workspace  # type: ignore[attr-defined]
    before = upstream.remote_sha("main")
    upstream.write("docs/runbooks/gate21-lib.md", "# Gate\n\nThe quasar drift note.\n")
    after = upstream.commit_push("a change")
    other = {"clone_url": f"file://{tmp_path / 'other.git'}"}
    event = parse_github(
        "push", {"ref": "refs/heads/main", "before": before, "after": after, "repository": other}
    )
    row = webhook_intake.find_source(ws.ctx, SOURCE, ())
    n = _state(home)
    with pytest.raises(Forbidden) as refused:
        webhook_intake.accept(ws.ctx, provider="github", delivery_id="lib-1", row=row, event=event)
    assert refused.value.details["refused"] == "repository_mismatch"
    assert _state(home) == (n[0], n[1], n[2] + 1)
