"""Forge webhooks through the HTTP API against a real source (a bare git remote):
valid GitHub/GitLab/generic events enqueue the sync and the index catches up;
forged ones (bad or missing signature, replayed delivery, oversize body, wrong
content type, unknown source) are refused and enqueue nothing."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from gitkb.services.changes import webhook_intake
from gitkb.services.changes.webhooks import github_signature
from helpers import SOURCE, Upstream, catalog, error_code, error_message, wait_until, with_roots

SECRET = "It's a Secret to Everybody"
WRITER = "w" * 24
READER = "r" * 24
TOML = (
    f"[server]\nwebhook_max_body_bytes = 65536\n"
    f'[[server.tokens]]\nname = "ci"\ntoken = "{WRITER}"\nscopes = ["write"]\n'
    f'[[server.tokens]]\nname = "viewer"\ntoken = "{READER}"\nscopes = ["read"]\n'
)


@pytest.fixture
def hook(make_client: Callable[..., TestClient], upstream: Upstream) -> TestClient:
    c = make_client(with_roots(TOML, upstream.remote), peer=("127.0.0.1", 1))
    auth = {"Authorization": f"Bearer {WRITER}"}
    # adding a source is admin (the operator here); syncing it is operate, which write includes
    assert c.app.state.gitkb.workspace.source_add(SOURCE, str(upstream.remote))["Success"]  # type: ignore[attr-defined]
    r = c.post(f"/sources/{SOURCE}/sync", json={}, headers=auth)
    assert r.status_code == 200, r.text
    if r.json().get("status") == "working":
        wait_job(c, r.json()["job_id"])
    ws = c.app.state.gitkb.workspace  # type: ignore[attr-defined]
    webhook_intake.set_webhook_secret(ws.ctx, SOURCE, SECRET)
    return c


def page(title: str, text: str) -> str:
    return f"---\ntitle: {title}\n---\n# {title}\n\n{text}\n"


def wait_job(c: TestClient, job_id: str, timeout: float = 60) -> dict[str, Any]:
    def finished() -> dict[str, Any] | None:
        r = c.get(f"/jobs/{job_id}", headers={"Authorization": f"Bearer {READER}"})
        assert r.status_code == 200, r.text
        return dict(r.json()) if r.json()["status"] in ("completed", "failed", "cancelled") else None

    return wait_until(finished, timeout=timeout, interval=0.05, what=f"job {job_id} to finish")


def counts(home: Path) -> tuple[int, int]:
    [(jobs, deliveries)] = catalog.rows(
        home, "SELECT (SELECT COUNT(*) FROM jobs), (SELECT COUNT(*) FROM webhook_deliveries)"
    )
    return int(jobs), int(deliveries)


def push_payload(upstream: Upstream, before: str, after: str, *, branch: str = "main") -> dict[str, Any]:
    return {
        "ref": f"refs/heads/{branch}",
        "before": before,
        "after": after,
        "repository": {"clone_url": f"file://{upstream.remote}", "html_url": "https://example.invalid/x"},
        "commits": [],
    }


def github(
    c: TestClient,
    event: str,
    payload: dict[str, Any],
    *,
    secret: str = SECRET,
    delivery: str | None = None,
    query: str = "",
    headers: dict[str, str] | None = None,
) -> Any:
    body = json.dumps(payload).encode()
    hdrs = {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": github_signature(secret, body),
        **(headers or {}),
    }
    return c.post("/webhooks/github" + query, content=body, headers=hdrs)


def search(c: TestClient, q: str) -> list[dict[str, Any]]:
    r = c.post("/search", json={"query": q, "mode": "keyword"}, headers={"Authorization": f"Bearer {READER}"})
    assert r.status_code == 200, r.text
    return list(r.json()["Results"])


def test_github_push_syncs_and_replay_is_a_duplicate(
    hook: TestClient, upstream: Upstream, home: Path
) -> None:
    before = upstream.remote_sha("main")
    assert before
    upstream.write("docs/runbooks/zz-webhook.md", page("Webhook page", "The quasar rotation procedure."))
    after = upstream.commit_push("add a page")
    payload = push_payload(upstream, before, after)
    r = github(hook, "push", payload, delivery="d-1")
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["queued"] is True and body["duplicate"] is False and body["source"] == SOURCE
    assert body["commit"] == after and body["before"] == before
    job = wait_job(hook, body["job_id"])
    assert job["status"] == "completed", job
    hits = search(hook, "quasar rotation")
    assert hits and hits[0]["filepath"].endswith("zz-webhook.md")
    assert after in (hits[0]["source_uri"] or "")
    n = counts(home)
    again = github(hook, "push", payload, delivery="d-1")
    assert again.status_code == 200 and again.json()["duplicate"] is True
    assert again.json()["job_id"] == body["job_id"]
    assert counts(home) == n


def test_forged_deliveries_enqueue_nothing(hook: TestClient, upstream: Upstream, home: Path) -> None:
    upstream.write("docs/runbooks/forged.md", page("Forged", "The photon replay guard."))
    head = upstream.commit_push("a change")
    payload = push_payload(upstream, "0" * 40, head)
    body = json.dumps(payload).encode()
    base = {"Content-Type": "application/json", "X-GitHub-Event": "push", "X-GitHub-Delivery": "forged"}
    n = counts(home)
    cases = {
        "bad signature": (base | {"X-Hub-Signature-256": github_signature("wrong", body)}, body, 401),
        "missing signature": (base, body, 401),
        "sha1 only": (base | {"X-Hub-Signature": "sha1=" + "0" * 40}, body, 401),
        "tampered body": (base | {"X-Hub-Signature-256": github_signature(SECRET, body)}, body + b" ", 401),
        "wrong content type": (
            base | {"Content-Type": "application/x-www-form-urlencoded", "X-Hub-Signature-256": "sha256=0"},
            b"payload=" + body,
            415,
        ),
        "oversize": (
            base | {"X-Hub-Signature-256": github_signature(SECRET, b"x" * 70000)},
            b"x" * 70000,
            413,
        ),
    }
    for name, (headers, content, status) in cases.items():
        r = hook.post("/webhooks/github", content=content, headers=headers)
        assert r.status_code == status, (name, r.text)
        assert r.json()["Success"] is False, name
    assert counts(home) == n  # no job, no delivery recorded
    # a replay of a delivery id already seen is refused as a duplicate, also enqueueing nothing
    first = github(hook, "push", payload, delivery="seen")
    assert first.status_code == 202 and first.json()["job_id"]
    n2 = counts(home)
    replay = github(hook, "push", payload, delivery="seen")
    assert replay.status_code == 200 and replay.json()["duplicate"] is True
    assert replay.json()["job_id"] == first.json()["job_id"]
    assert counts(home) == n2


def test_source_matching(hook: TestClient, upstream: Upstream, home: Path) -> None:
    head = upstream.remote_sha("main")
    assert head
    payload = push_payload(upstream, "0" * 40, head)
    r = github(hook, "push", payload, query="?source=nope")
    assert r.status_code == 404 and error_code(r) == "not_found"
    other = dict(payload, repository={"clone_url": "https://github.com/someone/else.git"})
    r = github(hook, "push", other)
    assert r.status_code == 404 and "else" in json.dumps(r.json()["details"])
    r = github(hook, "push", other, query=f"?source={SOURCE}")  # named explicitly: still its repository only
    assert r.status_code == 403 and error_code(r) == "forbidden" and "repository_mismatch" in r.text
    r = github(hook, "push", payload, query=f"?source={SOURCE}")
    assert r.status_code == 200, r.text  # matched; the source is already at that commit: nothing to queue
    assert r.json()["queued"] is False and r.json()["job_id"] is None and "already" in r.json()["reason"]


def test_github_pull_request_ping_and_other_branches(hook: TestClient, upstream: Upstream) -> None:
    upstream.write("docs/policies/merged.md", page("Merged", "The nebula intake policy."))
    sha = upstream.commit_push("merge a PR")
    repo = {"clone_url": str(upstream.remote)}
    pr = {"number": 3, "merged": True, "merge_commit_sha": sha, "base": {"ref": "main"}}
    r = github(hook, "pull_request", {"action": "closed", "pull_request": pr, "repository": repo})
    assert r.status_code == 202, r.text
    assert wait_job(hook, r.json()["job_id"])["status"] == "completed"
    assert search(hook, "nebula intake")
    closed = {**pr, "merged": False}
    r = github(hook, "pull_request", {"action": "closed", "pull_request": closed, "repository": repo})
    assert r.status_code == 200 and r.json()["queued"] is False and r.json()["job_id"] is None
    r = github(hook, "ping", {"zen": "Design for failure.", "repository": repo})
    assert r.status_code == 200 and r.json()["event"] == "ping"
    r = github(hook, "push", push_payload(upstream, sha, sha, branch="feature"))
    assert r.status_code == 200 and r.json()["queued"] is False and "branch" in r.json()["reason"]


def test_gitlab_merge_and_push_hooks_sync_and_a_replay_is_a_duplicate(
    hook: TestClient, upstream: Upstream, home: Path
) -> None:
    upstream.write("docs/runbooks/gl.md", page("GitLab", "The pulsar drain steps."))
    sha = upstream.commit_push("gitlab merge")
    payload = {
        "object_kind": "merge_request",
        "project": {"git_http_url": f"file://{upstream.remote}"},
        "object_attributes": {
            "action": "merge",
            "state": "merged",
            "merge_commit_sha": sha,
            "target_branch": "main",
        },
    }
    body = json.dumps(payload).encode()
    hdrs = {
        "Content-Type": "application/json",
        "X-Gitlab-Event": "Merge Request Hook",
        "X-Gitlab-Event-UUID": "g-1",
    }
    n = counts(home)
    for bad in ({}, {"X-Gitlab-Token": "wrong"}):
        r = hook.post("/webhooks/gitlab", content=body, headers=hdrs | bad)
        assert r.status_code == 401, r.text
    assert counts(home) == n
    r = hook.post("/webhooks/gitlab", content=body, headers=hdrs | {"X-Gitlab-Token": SECRET})
    assert r.status_code == 202, r.text
    assert wait_job(hook, r.json()["job_id"])["status"] == "completed"
    assert search(hook, "pulsar drain")
    r = hook.post("/webhooks/gitlab", content=body, headers=hdrs | {"X-Gitlab-Token": SECRET})
    assert r.status_code == 200 and r.json()["duplicate"] is True
    upstream.write("docs/runbooks/gl2.md", page("GitLab push", "The comet rollback note."))
    sha2 = upstream.commit_push("gitlab push")
    push = {
        "ref": "refs/heads/main",
        "before": sha,
        "after": sha2,
        "project": {"git_http_url": str(upstream.remote)},
    }
    r = hook.post(
        "/webhooks/gitlab", json=push, headers={"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": SECRET}
    )
    assert r.status_code == 202, r.text
    assert wait_job(hook, r.json()["job_id"])["status"] == "completed"
    assert search(hook, "comet rollback")


def test_generic_needs_write_scope(hook: TestClient, upstream: Upstream, home: Path) -> None:
    head = upstream.remote_sha("main")
    body = {"source": SOURCE, "commit": head}
    n = counts(home)
    assert hook.post("/webhooks/generic", json=body).status_code == 401
    assert (
        hook.post("/webhooks/generic", json=body, headers={"Authorization": f"Bearer {READER}"}).status_code
        == 403
    )
    r = hook.post(
        "/webhooks/generic",
        json={"source": SOURCE, "commit": "xyz"},
        headers={"Authorization": f"Bearer {WRITER}"},
    )
    assert r.status_code == 400
    r = hook.post(
        "/webhooks/generic",
        json={"source": "nope", "commit": head},
        headers={"Authorization": f"Bearer {WRITER}"},
    )
    assert r.status_code == 404
    assert counts(home) == n
    r = hook.post("/webhooks/generic", json=body, headers={"Authorization": f"Bearer {WRITER}"})
    assert r.status_code == 200 and r.json()["queued"] is False  # already synced at that commit
    upstream.write("docs/runbooks/ci.md", page("CI", "The meteor deploy gate."))
    body["commit"] = upstream.commit_push("ci change")
    r = hook.post("/webhooks/generic", json=body, headers={"Authorization": f"Bearer {WRITER}"})
    assert r.status_code == 202, r.text
    assert wait_job(hook, r.json()["job_id"])["status"] == "completed"
    assert search(hook, "meteor deploy")


def test_no_secret_anywhere_refuses_and_env_fallback_works(
    hook: TestClient, upstream: Upstream, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = hook.app.state.gitkb.workspace  # type: ignore[attr-defined]
    webhook_intake.set_webhook_secret(ws.ctx, SOURCE, None)
    upstream.write("docs/runbooks/env.md", page("Env", "The galaxy secret fallback."))
    head = upstream.commit_push("env change")
    payload = push_payload(upstream, "0" * 40, head)
    r = github(hook, "push", payload)
    assert r.status_code == 401 and "no webhook secret" in error_message(r)
    state = hook.app.state.gitkb  # type: ignore[attr-defined]
    monkeypatch.setattr(
        state, "cfg", state.cfg.__class__(**{**state.cfg.__dict__, "webhook_secret": "from-env"})
    )
    assert github(hook, "push", payload).status_code == 401  # signed with the old secret
    r = github(hook, "push", payload, secret="from-env")
    assert r.status_code == 202, r.text
    wait_job(hook, r.json()["job_id"])
