"""The change flow over HTTP with the local forge: propose → pull request (pending review,
nothing pushed) → approve (needs the `review` scope; the token's name is the recorded
reviewer) → merge → the sync brings the new text into the index. Deny records its reason."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from helpers import SOURCE, Upstream, wait_until, with_roots

TOKENS = {"writer": "w" * 24, "alice": "v" * 24, "reader": "r" * 24, "root": "a" * 24}
SCOPES = {"writer": "write", "alice": "review", "reader": "read", "root": "admin"}
TOML = "".join(
    f'[[server.tokens]]\nname = "{n}"\ntoken = "{t}"\nscopes = ["{SCOPES[n]}"]\n' for n, t in TOKENS.items()
)
PAGE = "docs/runbooks/rotate-api-keys.md"


def as_(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


def ok(r: Any) -> dict[str, Any]:
    assert r.status_code == 200, r.text
    return dict(r.json())


@pytest.fixture
def api(make_client: Callable[..., TestClient], upstream: Upstream) -> TestClient:
    c = make_client(with_roots(TOML, upstream.remote), peer=("127.0.0.1", 1))
    # adding a source is admin (here the operator, in-process); a write token syncs it (operate)
    assert c.app.state.gitkb.workspace.source_add(SOURCE, str(upstream.remote))["Success"]  # type: ignore[attr-defined]
    ok(c.post(f"/sources/{SOURCE}/sync", json={}, headers=as_("writer")))
    return c


def open_pull(c: TestClient, search: str, replace: str) -> dict[str, Any]:
    body = {
        "source_id_or_index": SOURCE,
        "relative_path": PAGE,
        "search": search,
        "replace": replace,
        "note": "fix the rotation period",
    }
    ok(c.post("/proposals", json=body, headers=as_("writer")))
    pr = ok(c.post("/pulls", json={"source_id_or_index": SOURCE, "title": "Rotation"}, headers=as_("writer")))
    assert pr["review_state"] == "pending"
    return pr


def test_approve_needs_review_scope_and_records_the_token_name(api: TestClient, upstream: Upstream) -> None:
    before = upstream.remote_sha(f"gitkb/proposals/{SOURCE}")
    pr = open_pull(api, "every 90 days", "every 60 days")
    rid = pr["review_id"]
    assert upstream.remote_sha(f"gitkb/proposals/{SOURCE}") == before  # nothing pushed while pending
    assert ok(api.get("/reviews", headers=as_("reader")))["Reviews"][0]["review_id"] == rid
    for who in ("reader", "writer"):
        r = api.post(f"/reviews/{rid}/approve", headers=as_(who))
        assert r.status_code == 403 and r.json()["details"]["required_class"] == "review"
    done = ok(api.post(f"/reviews/{rid}/approve", headers=as_("alice")))
    assert done["review_state"] == "approved" and done["number"]
    assert {"path": PAGE, "status": "M"} in [
        {k: f[k] for k in ("path", "status")} for f in done["changed_files"]
    ]
    shown = ok(api.get(f"/reviews/{rid}", headers=as_("reader")))
    assert "alice" in str(shown)
    audit = ok(api.get("/audit", headers=as_("root")))
    assert any(e.get("actor") == "alice" for e in audit.get("Entries", audit.get("entries", [])))
    assert api.get("/audit", headers=as_("alice")).status_code == 403
    # the local forge merges; the sync (queued like a webhook's) brings the new text in
    pulls = ok(api.get("/pulls", params={"source": SOURCE}, headers=as_("reader")))
    assert pulls
    # merging on the local forge is a reviewer's act (class review): a write token may not
    r = api.post(f"/pulls/{SOURCE}/{done['number']}/merge", headers=as_("writer"))
    assert r.status_code == 403 and r.json()["details"]["required_class"] == "review"
    merged = ok(api.post(f"/pulls/{SOURCE}/{done['number']}/merge", headers=as_("alice")))
    job = merged.get("job_id") or (merged.get("sync") or {}).get("job_id")
    if job:
        wait_until(
            lambda: ok(api.get(f"/jobs/{job}", headers=as_("reader")))["status"] in ("completed", "failed"),
            timeout=60,
            interval=0.05,
            what=f"the merge's job {job} to end",
        )

    def merged_text_found() -> bool:
        hits = ok(
            api.post("/search", json={"query": "every 60 days", "mode": "keyword"}, headers=as_("reader"))
        )
        return bool(hits["Results"]) and "60 days" in hits["Results"][0]["snippet"]

    wait_until(
        merged_text_found, timeout=60, interval=0.1, what=f"the merged text to become searchable: {merged}"
    )


def test_deny_records_reason_and_reviewer(api: TestClient, upstream: Upstream) -> None:
    pr = open_pull(api, "every 90 days", "every 30 days")
    r = api.post(f"/reviews/{pr['review_id']}/deny", json={}, headers=as_("alice"))
    assert r.status_code == 422  # a reason is required
    denied = ok(
        api.post(f"/reviews/{pr['review_id']}/deny", json={"reason": "policy says 90"}, headers=as_("alice"))
    )
    assert denied["review_state"] == "denied"
    shown = ok(api.get(f"/reviews/{pr['review_id']}", headers=as_("reader")))
    assert "policy says 90" in str(shown) and "alice" in str(shown)
    assert upstream.remote_sha(f"gitkb/proposals/{SOURCE}") is None
    r = api.post(f"/reviews/{pr['review_id']}/approve", headers=as_("alice"))
    assert r.status_code == 409 and r.json()["Success"] is False
