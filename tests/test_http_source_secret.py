"""``POST /sources`` takes ``webhook_secret`` as the action ``source_add`` declares it: the forge's
webhooks for that source are then verified with it, and it never comes back in an answer, a log
line or an audit entry."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from helpers import SOURCE, Upstream, github_push, wait_until

HOOK_SECRET = "per-source-hook-secret-report18"
ADMIN = "a" * 24


def signed_push(c: TestClient, upstream: Upstream, secret: str) -> Any:
    head = upstream.remote_sha("main")
    body, headers = github_push(secret, "0" * 40, head, upstream.remote)
    return c.post("/webhooks/github", content=body, headers=headers)


def test_post_sources_sets_the_webhook_secret_and_never_shows_it(
    make_client: Callable[..., TestClient], upstream: Upstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    toml = (
        f'[server]\nallowed_roots = ["{upstream.remote}"]\n'
        f'[[server.tokens]]\nname = "admin"\ntoken = "{ADMIN}"\nscopes = ["admin"]\n'
    )
    c = make_client(toml, peer=("127.0.0.1", 1))
    auth = {"Authorization": f"Bearer {ADMIN}"}
    declared = c.get("/openapi.json").json()["components"]["schemas"]["AddSource"]["properties"]
    assert declared["webhook_secret"]["anyOf"][0]["type"] == "string", declared  # the route's own field
    wrong = c.post(
        "/sources", json={"name": SOURCE, "url": str(upstream.remote), "webhook_secret": 7}, headers=auth
    )
    assert wrong.status_code in (400, 422) and c.get("/sources", headers=auth).json()["total_count"] == 0
    body = {"name": SOURCE, "url": str(upstream.remote), "webhook_secret": HOOK_SECRET}
    added = c.post("/sources", json=body, headers=auth)
    assert added.status_code == 200, added.text
    if added.json().get("status") == "working":  # promoted: its result is the job's
        job = wait_until(
            lambda: (
                (r := c.get(f"/jobs/{added.json()['job_id']}", headers=auth).json())["status"]
                in ("completed", "failed")
                and r
            ),
            timeout=60,
            what="the source add",
        )
        assert job["status"] == "completed", job
    listed = c.get("/sources", headers=auth)
    assert listed.status_code == 200 and listed.json()["Sources"][0]["name"] == SOURCE, listed.text

    refused = signed_push(c, upstream, "another-secret")
    assert refused.status_code == 401, refused.text
    accepted = signed_push(c, upstream, HOOK_SECRET)
    assert accepted.status_code in (200, 202), accepted.text
    assert accepted.json()["source"] == SOURCE, accepted.text

    audit = c.get("/audit", params={"count": 500}, headers=auth)
    assert audit.status_code == 200, audit.text
    assert any(e["action"] == "source.add" for e in audit.json()["Entries"]), audit.text
    for shown in (added.text, listed.text, refused.text, accepted.text, audit.text, caplog.text):
        assert HOOK_SECRET not in shown
