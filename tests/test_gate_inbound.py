"""The inbound side of the review gate, attacked through every path in.

An index fed by a source only ever holds commits reachable from the tracked branch as the
remote has it; no delivery moves an index back. Each case names what it attacks and asserts
that nothing was written: the synced commit, the document rows and the change log are as they
were, no sync job was queued, and the unreviewed text is not found by keyword search.
Real git (a bare repository as the remote), the HTTP app through its client, real signatures.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from gitkb.cli.main import cli
from gitkb.services.changes import webhook_intake
from gitkb.services.changes.webhooks import github_signature
from gitkb.stores.repos import ManagedRepo
from helpers import SOURCE, Upstream, catalog, error_code, error_message, git, wait_until, with_roots

SECRET = "inbound-gate-secret"
TOKENS = {"ci": ("c" * 24, "write"), "viewer": ("v" * 24, "read"), "root": ("a" * 24, "admin")}
TOML = "[server]\n" + "".join(
    f'[[server.tokens]]\nname = "{n}"\ntoken = "{t}"\nscopes = ["{s}"]\n' for n, (t, s) in TOKENS.items()
)
UNREVIEWED = "quokka basilisk"  # only ever in a staged proposal or on another branch
PROPOSAL_BRANCH = f"gitkb/proposals/{SOURCE}"


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name][0]}"}


def page(title: str, text: str) -> str:
    return f"---\ntitle: {title}\n---\n# {title}\n\n{text}\n"


@pytest.fixture
def gate(make_client: Callable[..., TestClient], upstream: Upstream) -> TestClient:
    c = make_client(with_roots(TOML, upstream.remote), peer=("127.0.0.1", 1))
    # a local-path source is the operator's (over HTTP: admin and inside allowed_roots)
    assert c.app.state.gitkb.workspace.source_add(SOURCE, str(upstream.remote))["Success"]  # type: ignore[attr-defined]
    r = c.post(f"/sources/{SOURCE}/sync", json={}, headers=bearer("ci"))
    assert r.status_code == 200, r.text
    if r.json().get("status") == "working":
        wait_job(c, r.json()["job_id"])
    webhook_intake.set_webhook_secret(workspace(c).ctx, SOURCE, SECRET)
    return c


def workspace(c: TestClient) -> Any:
    return c.app.state.gitkb.workspace  # type: ignore[attr-defined]


def wait_job(c: TestClient, job_id: str, timeout: float = 60) -> dict[str, Any]:
    def finished() -> dict[str, Any] | None:
        r = c.get(f"/jobs/{job_id}", headers=bearer("viewer"))
        assert r.status_code == 200, r.text
        return dict(r.json()) if r.json()["status"] in ("completed", "failed", "cancelled") else None

    return wait_until(finished, timeout=timeout, interval=0.05, what=f"job {job_id} to finish")


def staged_proposal(c: TestClient) -> str:
    """Stage an unreviewed edit; its commit exists in the managed clone, on the proposal branch."""
    out = workspace(c).propose_kb_edit(
        SOURCE, "runbooks/rotate-api-keys.md", content=page("Rotate", f"Unreviewed: the {UNREVIEWED} rule.")
    )
    assert out["Success"], out
    return str(out["commit"])


def sync_jobs(home: Path) -> int:
    return int(catalog.rows(home, "SELECT COUNT(*) FROM jobs WHERE kind = 'source_sync'")[0][0])


def state(c: TestClient) -> dict[str, Any]:
    """What the index holds: the synced commit, every document row, the change log head."""
    ws = workspace(c)
    [src] = [s for s in ws.source_list()["Sources"] if s["name"] == SOURCE]
    listed = ws.document_index("LIST_DOCUMENTS", index_name=SOURCE, count=50)
    assert listed["Success"], listed
    rows = sorted((d["path"], d["file_id"], d.get("source_uri")) for d in listed["Documents"])
    seq = ws.ctx.catalog.conn.execute("SELECT COALESCE(MAX(seq), 0) FROM changes").fetchone()[0]
    return {"synced": src["synced_commit"], "documents": rows, "changes": seq}


def keyword_hits(c: TestClient, q: str) -> list[dict[str, Any]]:
    r = c.post("/search", json={"query": q, "mode": "keyword"}, headers=bearer("viewer"))
    assert r.status_code == 200, r.text
    return list(r.json()["Results"])


def http_sync(c: TestClient, token: str, body: dict[str, Any], *, path: str = "sync") -> Any:
    """POST /sources/{name}/<path>; a promoted job is waited for and its outcome answered."""
    r = c.post(f"/sources/{SOURCE}/{path}", json=body, headers=bearer(token))
    if r.status_code == 200 and r.json().get("status") == "working":
        job = wait_job(c, r.json()["job_id"])
        return {"status": job["status"], "job": job}
    return r


def github(c: TestClient, event: str, payload: dict[str, Any], *, delivery: str | None = None) -> Any:
    body = json.dumps(payload).encode()
    return github_raw(c, event, body, delivery=delivery)


def github_raw(c: TestClient, event: str, body: bytes, *, delivery: str | None = None) -> Any:
    hdrs = {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": github_signature(SECRET, body),
    }
    return c.post("/webhooks/github", content=body, headers=hdrs)


def gitlab(c: TestClient, event: str, payload: dict[str, Any], *, delivery: str | None = None) -> Any:
    hdrs = {
        "X-Gitlab-Event": event,
        "X-Gitlab-Token": SECRET,
        "X-Gitlab-Event-UUID": delivery or str(uuid.uuid4()),
    }
    return c.post("/webhooks/gitlab", json=payload, headers=hdrs)


def push_payload(upstream: Upstream, before: str, after: str, branch: str = "main") -> dict[str, Any]:
    return {
        "ref": f"refs/heads/{branch}",
        "before": before,
        "after": after,
        "repository": {"clone_url": f"file://{upstream.remote}"},
        "commits": [],
    }


def gitlab_push(upstream: Upstream, before: str, after: str) -> dict[str, Any]:
    return {
        "ref": "refs/heads/main",
        "before": before,
        "after": after,
        "project": {"git_http_url": str(upstream.remote)},
    }


def refused(r: Any, what: str) -> None:
    assert r.status_code == 400, (what, r.text)
    assert error_code(r) == "invalid_argument", (what, r.text)


def unchanged(c: TestClient, before: dict[str, Any], home: Path, jobs_before: int | None = None) -> None:
    assert state(c) == before
    assert not keyword_hits(c, UNREVIEWED)
    if jobs_before is not None:
        assert sync_jobs(home) == jobs_before, "a sync job was queued"


# -- a staged proposal's commit, through every path in ------------------------------------------


def test_proposal_sha_via_sync_is_refused_for_every_caller(gate: TestClient, home: Path) -> None:
    """Attack: POST /sources/{name}/sync {"commit": <staged proposal>} -- admin included."""
    sha = staged_proposal(gate)
    before = state(gate)
    for token in ("ci", "root"):
        r = http_sync(gate, token, {"commit": sha})
        refused(r, token)
        assert "not on branch 'main'" in error_message(r)
    # a ref name that points at the proposal branch is no commit id either
    for name in (PROPOSAL_BRANCH, f"refs/heads/{PROPOSAL_BRANCH}", f"{sha}^0", "HEAD", "main"):
        refused(http_sync(gate, "root", {"commit": name}), name)
    unchanged(gate, before, home)


def test_proposal_sha_in_every_encoding_is_refused(gate: TestClient, home: Path) -> None:
    """Attack: the same proposal sha as a prefix, in upper case, with whitespace -- by sync and generic."""
    sha = staged_proposal(gate)
    before = state(gate)
    for enc in (
        sha[:12],
        sha[:7],
        sha.upper(),
        sha[:12].upper(),
        f"{sha}\n",
        f" {sha}",
        f"{sha} ",
        f"{sha}\t",
    ):
        refused(http_sync(gate, "root", {"commit": enc}), repr(enc))
    unchanged(gate, before, home)
    jobs_before = sync_jobs(home)
    for enc in (sha[:12], sha.upper(), f"{sha}\n"):
        r = gate.post("/webhooks/generic", json={"source": SOURCE, "commit": enc}, headers=bearer("ci"))
        refused(r, repr(enc))
    unchanged(gate, before, home, jobs_before)


def test_proposal_sha_via_the_library_and_the_cli(gate: TestClient, home: Path) -> None:
    """Attack: Workspace.source_sync(commit=<proposal>), and `gitkb source sync NAME --commit <proposal>`."""
    sha = staged_proposal(gate)
    before = state(gate)
    out = workspace(gate).source_sync(SOURCE, commit=sha)
    assert out["Success"] is False and out["code"] == "invalid_argument", out
    res = CliRunner().invoke(cli, ["--home", str(home), "source", "sync", SOURCE, "--commit", sha])
    assert res.exit_code == 1, res.output
    assert "not on branch 'main'" in res.output
    res = CliRunner().invoke(cli, ["--home", str(home), "source", "rollback", SOURCE, sha])
    assert res.exit_code == 1 and "not on branch 'main'" in res.output, res.output
    unchanged(gate, before, home)


def test_proposal_sha_via_generic_webhook(gate: TestClient, home: Path) -> None:
    """Attack: the CI webhook {source, commit: <proposal>} with a write token."""
    sha = staged_proposal(gate)
    before, jobs_before = state(gate), sync_jobs(home)
    r = gate.post("/webhooks/generic", json={"source": SOURCE, "commit": sha}, headers=bearer("ci"))
    refused(r, "generic")
    unchanged(gate, before, home, jobs_before)


def test_proposal_sha_via_signed_github_and_gitlab_deliveries(
    gate: TestClient, upstream: Upstream, home: Path
) -> None:
    """Attack: correctly signed deliveries naming the proposal: a push with a forged `after`, a merged
    pull_request whose merge_commit_sha is the proposal, and GitLab's push and merge request hooks."""
    sha = staged_proposal(gate)
    head = upstream.remote_sha("main")
    assert head
    before, jobs_before = state(gate), sync_jobs(home)
    refused(github(gate, "push", push_payload(upstream, head, sha)), "github push")
    pr = {"number": 9, "merged": True, "merge_commit_sha": sha, "base": {"ref": "main"}}
    repo = {"clone_url": str(upstream.remote)}
    refused(
        github(gate, "pull_request", {"action": "closed", "pull_request": pr, "repository": repo}),
        "github pr",
    )
    refused(gitlab(gate, "Push Hook", gitlab_push(upstream, head, sha)), "gitlab push")
    mr = {
        "project": {"git_http_url": str(upstream.remote)},
        "object_attributes": {
            "action": "merge",
            "merge_commit_sha": None,
            "last_commit": {"id": sha},
            "target_branch": "main",
        },
    }
    refused(gitlab(gate, "Merge Request Hook", mr), "gitlab merge request")
    unchanged(gate, before, home, jobs_before)
    # a refused delivery id is not spent: nothing was recorded against it
    assert github(gate, "push", push_payload(upstream, head, sha), delivery="same").status_code == 400
    assert github(gate, "push", push_payload(upstream, head, sha), delivery="same").status_code == 400


# -- commits that are not (or no longer) on the tracked branch -------------------------------------


def test_another_branch_and_unknown_commits_are_refused(
    gate: TestClient, upstream: Upstream, home: Path
) -> None:
    """Attack: a commit of another branch (its objects fetched into the clone), a commit a force-push
    dropped from the branch, and ids no repository has."""
    git(upstream.work, "checkout", "-q", "-b", "feature")
    upstream.write("docs/runbooks/feature.md", page("Feature", f"Feature branch: the {UNREVIEWED} plan."))
    git(upstream.work, "add", "-A")
    git(upstream.work, "commit", "-q", "-m", "feature work")
    git(upstream.work, "push", "-q", "origin", "feature")
    feature = git(upstream.work, "rev-parse", "HEAD")
    [clone] = list((home / "repos").iterdir())
    ManagedRepo.open(clone).fetch("feature")  # now the clone has the commit, as after any fetch of it
    git(upstream.work, "checkout", "-q", "main")
    before = state(gate)
    shas = (feature, "deadbeef" * 5, "0123456789abcdef")
    for sha in shas:
        refused(http_sync(gate, "root", {"commit": sha}), f"{sha} via sync")
    unchanged(gate, before, home)
    jobs_before = sync_jobs(home)  # the sync route runs as a job; the webhook must queue none
    for sha in shas:
        r = gate.post("/webhooks/generic", json={"source": SOURCE, "commit": sha}, headers=bearer("ci"))
        refused(r, f"{sha} via generic")
    unchanged(gate, before, home, jobs_before)


def test_a_commit_dropped_by_a_force_push_is_refused(
    gate: TestClient, upstream: Upstream, home: Path
) -> None:
    """Attack: replaying the push of a commit the remote has since force-pushed away (a leaked page)."""
    base = upstream.remote_sha("main")
    assert base
    upstream.write("docs/runbooks/leak.md", page("Leak", f"Leaked: the {UNREVIEWED} key."))
    leaked = upstream.commit_push("oops")
    delivery = push_payload(upstream, base, leaked)
    r = github(gate, "push", delivery)
    assert r.status_code == 202 and wait_job(gate, r.json()["job_id"])["status"] == "completed"
    assert keyword_hits(gate, UNREVIEWED)
    git(upstream.work, "reset", "-q", "--hard", base)
    upstream.write("docs/runbooks/fixed.md", page("Fixed", "The heron rotation."))
    git(upstream.work, "add", "-A")
    git(upstream.work, "commit", "-q", "-m", "the fix")
    git(upstream.work, "push", "-q", "--force", "origin", "HEAD:main")
    r = github(gate, "push", push_payload(upstream, leaked, git(upstream.work, "rev-parse", "HEAD")))
    assert r.status_code == 202 and wait_job(gate, r.json()["job_id"])["status"] == "completed"
    before, jobs_before = state(gate), sync_jobs(home)
    refused(github(gate, "push", delivery), "replay of the dropped commit")  # a new delivery id
    assert sync_jobs(home) == jobs_before
    refused(http_sync(gate, "root", {"commit": leaked}), "sync to the dropped commit")
    unchanged(gate, before, home)


def test_a_source_tracking_a_proposal_branch_never_syncs(
    gate: TestClient, upstream: Upstream, home: Path
) -> None:
    """Attack: register a second source on the proposal branch (pushed for review) to index it."""
    staged_proposal(gate)
    [clone] = list((home / "repos").iterdir())
    git(upstream.work, "fetch", "-q", str(clone), PROPOSAL_BRANCH)  # as a review's push would put it there
    git(upstream.work, "push", "-q", "origin", f"FETCH_HEAD:refs/heads/{PROPOSAL_BRANCH}")
    ws = workspace(gate)
    added = ws.source_add("sneaky", str(upstream.remote), branch=PROPOSAL_BRANCH, index=SOURCE)
    assert added["Success"], added
    before = state(gate)
    out = ws.source_sync("sneaky")
    assert out["Success"] is False and out["code"] == "invalid_argument" and "proposal branch" in out["Error"]
    unchanged(gate, before, home)


# -- no delivery rolls an index back -----------------------------------------------------------


def test_replayed_github_push_under_a_new_delivery_id_is_stale(
    gate: TestClient, upstream: Upstream, home: Path
) -> None:
    """Attack: the finding -- a signed push delivery replayed under a new X-GitHub-Delivery id (the id is
    not covered by the signature) must not roll the index back to the older commit."""
    c0 = upstream.remote_sha("main")
    assert c0
    upstream.write("docs/runbooks/one.md", page("One", "The osprey drill."))
    c1 = upstream.commit_push("one")
    first = json.dumps(push_payload(upstream, c0, c1)).encode()
    r = github_raw(gate, "push", first, delivery="d-1")
    assert r.status_code == 202 and wait_job(gate, r.json()["job_id"])["status"] == "completed"
    upstream.write("docs/runbooks/two.md", page("Two", "The pelican checklist."))
    c2 = upstream.commit_push("two")
    r = github(gate, "push", push_payload(upstream, c1, c2), delivery="d-2")
    assert r.status_code == 202 and wait_job(gate, r.json()["job_id"])["status"] == "completed"
    before, jobs_before = state(gate), sync_jobs(home)
    assert before["synced"] == c2
    for delivery in ("d-replayed", str(uuid.uuid4())):
        r = github_raw(gate, "push", first, delivery=delivery)  # the same signed body
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["queued"] is False and body["job_id"] is None and body["status"] == "stale", body
    assert state(gate) == before and sync_jobs(home) == jobs_before
    assert keyword_hits(gate, "pelican checklist")


def test_older_commits_by_every_path_are_stale(gate: TestClient, upstream: Upstream, home: Path) -> None:
    """Attack: an ancestor of the synced commit by sync (admin too), the library, the generic webhook,
    GitLab's push and merge request hooks replayed with new ids."""
    c0 = upstream.remote_sha("main")
    assert c0
    upstream.write("docs/runbooks/one.md", page("One", "The osprey drill."))
    c1 = upstream.commit_push("one")
    r = gitlab(gate, "Push Hook", gitlab_push(upstream, c0, c1))
    assert r.status_code == 202 and wait_job(gate, r.json()["job_id"])["status"] == "completed"
    before, jobs_before = state(gate), sync_jobs(home)
    assert before["synced"] == c1
    for token in ("ci", "root"):
        r = http_sync(gate, token, {"commit": c0})
        assert r.status_code == 200 and r.json()["status"] == "stale", r.text
        assert "rollback" in r.json()["Message"]
    assert workspace(gate).source_sync(SOURCE, commit=c0[:10].upper())["status"] == "stale"
    r = gate.post("/webhooks/generic", json={"source": SOURCE, "commit": c0}, headers=bearer("ci"))
    assert r.status_code == 200 and r.json()["status"] == "stale" and r.json()["job_id"] is None, r.text
    jobs_before = sync_jobs(home)  # the sync route runs as a job; webhooks must queue none
    r = gitlab(gate, "Push Hook", gitlab_push(upstream, "0" * 40, c0))
    assert r.status_code == 200 and r.json()["status"] == "stale", r.text
    mr = {
        "project": {"git_http_url": str(upstream.remote)},
        "object_attributes": {"action": "merge", "merge_commit_sha": c0, "target_branch": "main"},
    }
    r = gitlab(gate, "Merge Request Hook", mr)
    assert r.status_code == 200 and r.json()["status"] == "stale", r.text
    assert state(gate) == before and sync_jobs(home) == jobs_before
    assert keyword_hits(gate, "osprey drill")


# -- what must keep working ----------------------------------------------------------------------


def test_merges_that_reach_the_branch_still_sync(gate: TestClient, upstream: Upstream, home: Path) -> None:
    """A squash merge (a new commit on main) by GitHub, a fast-forward merge by GitLab whose only sha is
    the merged branch's last commit, and an explicit sync to a commit between the synced one and the head."""
    upstream.write("docs/runbooks/squash.md", page("Squash", "The lynx squash note."))
    squash = upstream.commit_push("squash merge of #4")
    pr = {"number": 4, "merged": True, "merge_commit_sha": squash, "base": {"ref": "main"}}
    r = github(
        gate,
        "pull_request",
        {"action": "closed", "pull_request": pr, "repository": {"clone_url": str(upstream.remote)}},
    )
    assert r.status_code == 202 and wait_job(gate, r.json()["job_id"])["status"] == "completed"
    assert keyword_hits(gate, "lynx squash")
    git(upstream.work, "checkout", "-q", "-b", "ff")
    upstream.write("docs/runbooks/ff.md", page("FF", "The ibis fast forward."))
    git(upstream.work, "add", "-A")
    git(upstream.work, "commit", "-q", "-m", "ff work")
    git(upstream.work, "push", "-q", "origin", "ff")
    ff = git(upstream.work, "rev-parse", "HEAD")
    mr = {
        "project": {"git_http_url": str(upstream.remote)},
        "object_attributes": {
            "action": "merge",
            "merge_commit_sha": None,
            "last_commit": {"id": ff},
            "target_branch": "main",
        },
    }
    refused(gitlab(gate, "Merge Request Hook", mr), "not merged yet")
    git(upstream.work, "push", "-q", "origin", "ff:main")  # the fast-forward merge
    r = gitlab(gate, "Merge Request Hook", mr)
    assert r.status_code == 202, r.text
    assert wait_job(gate, r.json()["job_id"])["status"] == "completed"
    assert keyword_hits(gate, "ibis fast forward") and state(gate)["synced"] == ff
    upstream.write("docs/runbooks/mid.md", page("Mid", "The wren midpoint."))
    mid = upstream.commit_push("mid")
    upstream.write("docs/runbooks/top.md", page("Top", "The kite summit."))
    upstream.commit_push("top")
    r = http_sync(gate, "ci", {"commit": mid[:12]})
    assert r.status_code == 200 and r.json()["status"] == "synced" and r.json()["commit"] == mid, r.text
    assert keyword_hits(gate, "wren midpoint") and not keyword_hits(gate, "kite summit")


def test_rollback_is_an_admin_action_on_branch_commits_only(
    gate: TestClient, upstream: Upstream, home: Path
) -> None:
    """POST /sources/{name}/rollback: a write token is refused; the admin moves the index back, but only
    to a commit of the tracked branch (never a proposal, never an unknown id)."""
    c0 = upstream.remote_sha("main")
    assert c0
    upstream.write("docs/runbooks/one.md", page("One", "The osprey drill."))
    c1 = upstream.commit_push("one")
    assert workspace(gate).source_sync(SOURCE)["commit"] == c1
    sha = staged_proposal(gate)
    before = state(gate)
    for token in ("ci", "viewer"):
        r = http_sync(gate, token, {"commit": c0}, path="rollback")
        assert r.status_code == 403, (token, r.text)
    refused(http_sync(gate, "root", {"commit": sha}, path="rollback"), "rollback to the proposal")
    refused(http_sync(gate, "root", {"commit": "deadbeef" * 5}, path="rollback"), "rollback to nothing")
    unchanged(gate, before, home)
    r = http_sync(gate, "root", {"commit": c0}, path="rollback")
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "synced" and r.json()["rolled_back"] is True and r.json()["commit"] == c0
    assert state(gate)["synced"] == c0 and not keyword_hits(gate, "osprey drill")


def test_a_refused_sync_leaves_no_job_behind(gate: TestClient, home: Path) -> None:
    """Validation refusals (an unknown source, a commit that is no commit id) answer before any job row
    exists, over HTTP and the library (issue 15: a refused call leaves no failed job)."""
    ws = gate.app.state.gitkb.workspace  # type: ignore[attr-defined]

    def jobs() -> int:
        return int(ws.list_jobs(state="all")["total_count"])

    before = jobs()
    for body in ({"commit": "HEAD"}, {"commit": "main"}, {"commit": "zz" * 10}):
        r = gate.post(f"/sources/{SOURCE}/sync", json=body, headers=bearer("ci"))
        assert r.status_code == 400 and error_code(r) == "invalid_argument", r.text
    r = gate.post("/sources/no-such/sync", json={}, headers=bearer("ci"))
    assert r.status_code == 404, r.text
    assert ws.source_sync(SOURCE, commit="gitkb/proposals/x")["code"] == "invalid_argument"
    assert jobs() == before
