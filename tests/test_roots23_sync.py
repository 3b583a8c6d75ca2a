"""A remote sync of a source that follows a path of this server's disk is held to allowed_roots.

A source's url may be a local path or ``file://`` URL. Added over HTTP it must lie inside
``[server] allowed_roots`` (roots21), but one added from the CLI or the library (the operator's
rights) was then synced by any remote caller: ``POST /sources/{name}/sync`` (and rollback), a
generic CI webhook or a signed forge delivery fetched from that path on the disk and indexed what
it found there. Now such a sync is refused (``forbidden``, ``details.refused_roots`` by source and
``details.allowed_roots``, as roots22's refused reindex, next steps: the CLI or allowed_roots)
before anything is fetched or queued. A webhook is remote: deny by default holds for it too (the
delivery is refused before it is claimed, so a redelivery once the roots allow it is not a
duplicate). A source with a network url syncs as before; the CLI, the library and ``gitkb mcp``
over stdio keep the operator's rights. No MCP tool syncs (over HTTP or stdio).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gitkb.mcp import build_server
from gitkb.services.changes import webhook_intake
from helpers import SOURCE, Upstream, catalog, error_message, github_push, ok, with_roots
from test_caps21_mcp import _session, mcp_over_http

OPS = "o" * 24
ROOT = "a" * 24
REVIEWER = "v" * 24
SECRET = "roots23-webhook-secret"
TOKENS = (
    f'[[server.tokens]]\nname = "ops"\ntoken = "{OPS}"\nscopes = ["write"]\n'  # write: + operate
    f'[[server.tokens]]\nname = "root"\ntoken = "{ROOT}"\nscopes = ["admin"]\n'
    f'[[server.tokens]]\nname = "alice"\ntoken = "{REVIEWER}"\nscopes = ["review"]\n'
)
NEW_PAGE = "---\ntitle: Quasar\n---\n# Quasar\n\nThe quasar rotation procedure.\n"


@pytest.fixture
def allowed(tmp_path: Path) -> Path:
    """An allowed root that holds nothing of the upstream (its bare repository is outside)."""
    path = tmp_path / "allowed"
    path.mkdir()
    return path


def _toml(*roots: Path) -> str:
    return with_roots(TOKENS, *roots)


def _counts(home: Path) -> tuple[int, int]:
    [(jobs, deliveries)] = catalog.rows(
        home, "SELECT (SELECT COUNT(*) FROM jobs), (SELECT COUNT(*) FROM webhook_deliveries)"
    )
    return int(jobs), int(deliveries)


def _added(ws: Any, url: str, upstream: Upstream, word: str = "quasar") -> tuple[str | None, str]:
    """The operator adds and syncs the source (the library); then the upstream moves on: the
    synced commit and the new head only a sync would fetch."""
    ok(ws.source_add(SOURCE, url))
    synced = ok(ws.source_sync(SOURCE))["commit"]
    upstream.write(f"docs/runbooks/zz-quasar-{uuid.uuid4().hex[:8]}.md", NEW_PAGE.replace("quasar", word))
    return synced, upstream.commit_push("a page only a sync reads")


def _unread(ws: Any, synced: str | None, word: str = "quasar") -> None:
    assert ok(ws.source_list())["Sources"][0]["synced_commit"] == synced
    found = ok(ws.document_index("SEARCH", query=word, mode="keyword"))["Results"]
    assert found == []


def _refused(r: Any, path: Path | str, allowed: list[Path]) -> None:
    assert r.status_code == 403, r.text
    body = r.json()
    err = body["error"] if isinstance(body.get("error"), dict) else body
    assert err["code"] == "forbidden", body
    assert err["details"]["refused_roots"] == {SOURCE: [str(path)]}, body
    assert err["details"]["allowed_roots"] == [str(a) for a in allowed], body
    steps = " ".join(err["next_steps"])
    assert "gitkb source sync" in steps and "allowed_roots" in steps, body
    assert "zz-quasar" not in r.text


@pytest.mark.parametrize("auth", ["token", "open"])
def test_http_sync_of_a_local_path_source_outside_the_roots_is_refused(
    make_client: Any, upstream: Upstream, allowed: Path, home: Path, auth: str
) -> None:
    """An operate token and the open API's loopback operator alike; with and without a commit,
    a full sync, and the admin's rollback."""
    c = make_client(_toml(allowed) if auth == "token" else with_roots("", allowed))
    ws = c.app.state.gitkb.workspace
    synced, head = _added(ws, str(upstream.remote), upstream)
    before = _counts(home)
    ops = {"Authorization": f"Bearer {OPS}"} if auth == "token" else {}
    admin = {"Authorization": f"Bearer {ROOT}"} if auth == "token" else {}
    for body in ({}, {"commit": head}, {"full": True}):
        _refused(c.post(f"/sources/{SOURCE}/sync", json=body, headers=ops), upstream.remote, [allowed])
    assert synced is not None
    r = c.post(f"/sources/{SOURCE}/rollback", json={"commit": synced}, headers=admin)
    _refused(r, upstream.remote, [allowed])
    assert _counts(home) == before  # no job queued
    _unread(ws, synced)


def test_http_sync_of_a_file_url_or_a_symlink_out_of_the_roots_is_refused(
    make_client: Any, upstream: Upstream, allowed: Path, home: Path
) -> None:
    """``file://`` is the same path; a folder inside the roots that became a symlink out of them
    since the source was added is judged where it resolves now."""
    c = make_client(_toml(allowed))
    ws = c.app.state.gitkb.workspace
    synced, _ = _added(ws, f"file://{upstream.remote}", upstream)
    r = c.post(f"/sources/{SOURCE}/sync", json={}, headers={"Authorization": f"Bearer {OPS}"})
    _refused(r, upstream.remote, [allowed])
    _unread(ws, synced)
    ok(ws.source_remove(SOURCE))
    inside = allowed / "handbook.git"
    shutil.copytree(upstream.remote, inside)
    synced, _ = _added(ws, str(inside), upstream, word="magnetar")  # its page only outside
    assert (
        c.post(f"/sources/{SOURCE}/sync", json={}, headers={"Authorization": f"Bearer {OPS}"}).status_code
        == 200
    )
    shutil.rmtree(inside)
    os.symlink(upstream.remote, inside)  # the upstream's new page is only out there
    r = c.post(f"/sources/{SOURCE}/sync", json={}, headers={"Authorization": f"Bearer {OPS}"})
    _refused(r, inside, [allowed])
    _unread(ws, synced, "magnetar")


def test_http_sync_reads_no_path_when_no_root_is_allowed(
    make_client: Any, upstream: Upstream, home: Path
) -> None:
    c = make_client(TOKENS)
    ws = c.app.state.gitkb.workspace
    synced, _ = _added(ws, str(upstream.remote), upstream)
    r = c.post(f"/sources/{SOURCE}/sync", json={}, headers={"Authorization": f"Bearer {OPS}"})
    _refused(r, upstream.remote, [])
    assert "disabled" in error_message(r), r.text
    _unread(ws, synced)


def test_http_sync_inside_the_roots_and_of_a_network_url_still_syncs(
    make_client: Any, upstream: Upstream, allowed: Path, tmp_path: Path
) -> None:
    """Inside the roots: synced. A network url (here rewritten by the operator's git config to the
    bare repository, so the test needs no network) is never judged as a path."""
    c = make_client(_toml(allowed, upstream.remote))
    ws = c.app.state.gitkb.workspace
    _added(ws, str(upstream.remote), upstream)
    r = c.post(f"/sources/{SOURCE}/sync", json={}, headers={"Authorization": f"Bearer {OPS}"})
    assert r.status_code == 200, r.text
    assert ok(ws.document_index("SEARCH", query="quasar", mode="keyword"))["Results"]
    ok(ws.source_remove(SOURCE))
    network = "https://git.example.invalid/handbook.git"
    gitconfig = Path(os.environ["HOME"]) / ".gitconfig"
    gitconfig.write_text(f'[url "{upstream.remote}"]\n\tinsteadOf = {network}\n')
    ok(ws.source_add("net", network))
    upstream.write(
        "docs/runbooks/zz-nebula.md", NEW_PAGE.replace("Quasar", "Nebula").replace("quasar", "nebula")
    )
    upstream.commit_push("a page for the network source")
    r = c.post("/sources/net/sync", json={}, headers={"Authorization": f"Bearer {OPS}"})
    assert r.status_code == 200, r.text
    assert ok(ws.document_index("SEARCH", query="nebula", mode="keyword"))["Results"]


def test_webhooks_refuse_to_sync_a_local_path_source_outside_the_roots(
    make_client: Any, upstream: Upstream, allowed: Path, home: Path
) -> None:
    """A webhook is remote: the generic CI hook and a signed GitHub push alike, refused before the
    delivery is claimed (nothing recorded, nothing queued, nothing fetched)."""
    c = make_client(_toml(allowed))
    ws = c.app.state.gitkb.workspace
    synced, head = _added(ws, str(upstream.remote), upstream)
    webhook_intake.set_webhook_secret(ws.ctx, SOURCE, SECRET)
    before = _counts(home)
    r = c.post(
        "/webhooks/generic",
        json={"source": SOURCE, "commit": head},
        headers={"Authorization": f"Bearer {OPS}"},
    )
    _refused(r, upstream.remote, [allowed])
    body, headers = github_push(SECRET, synced, head, upstream.remote)
    _refused(c.post("/webhooks/github", content=body, headers=headers), upstream.remote, [allowed])
    assert _counts(home) == before  # no delivery claimed, no job
    _unread(ws, synced)


def test_no_mcp_tool_syncs_a_source(ws: Any, allowed: Path) -> None:
    """Neither ``gitkb mcp --transport http`` nor stdio offers a sync or a rollback (nothing to hold)."""
    with mcp_over_http(ws, None, _toml(allowed)) as url:
        listed, (got,) = _session(url, [("source_sync", {"source": SOURCE})])
    _, (stdio,) = _session(build_server(ws), [("source_sync", {"source": SOURCE})])
    names = {t.name for t in listed}
    assert not names & {"source_sync", "source_rollback"}, names
    for result in (got, stdio):
        assert result.is_error and "not offered" in result.content[0].text, result.content[0].text


def test_cli_and_library_sync_a_local_path_source_outside_the_roots(
    home: Path, upstream: Upstream, allowed: Path, make_ws: Any
) -> None:
    from gitkb.cli.main import cli  # the CLI entry, as `gitkb` runs it

    home.mkdir(parents=True, exist_ok=True)
    (home / "gitkb.toml").write_text(with_roots("", allowed))
    ws = make_ws()
    synced, head = _added(ws, str(upstream.remote), upstream)
    assert synced != head
    env = {
        "GITKB_HOME": str(home),
        "GITKB_EMBEDDING_PROVIDER": "hashing",
        "GITKB_EMBEDDING_MODEL": "hashing-384",
    }
    res = CliRunner().invoke(cli, ["source", "sync", SOURCE], env=env, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert ok(ws.document_index("SEARCH", query="quasar", mode="keyword"))["Results"]
    upstream.write(
        "docs/runbooks/zz-pulsar.md", NEW_PAGE.replace("Quasar", "Pulsar").replace("quasar", "pulsar")
    )
    upstream.commit_push("another page")
    assert ok(ws.source_sync(SOURCE))["status"] == "synced"
    assert ok(ws.document_index("SEARCH", query="pulsar", mode="keyword"))["Results"]


def test_a_source_re_added_outside_the_roots_while_the_remote_sync_waits_is_not_fetched(
    make_client: Any, upstream: Upstream, allowed: Path, home: Path
) -> None:
    """Checked when queued (the source inside the roots), checked again when the job runs: the
    operator removed the source and added one of the same name outside the roots meanwhile."""
    from gitkb.services.runtime import jobs  # the job queue: a kind that holds the writer

    inside = allowed / "handbook.git"
    shutil.copytree(upstream.remote, inside)
    c = make_client(_toml(allowed))
    ws = c.app.state.gitkb.workspace
    ok(ws.source_add(SOURCE, str(inside)))
    ok(ws.source_sync(SOURCE))
    upstream.write("docs/runbooks/zz-magnetar.md", NEW_PAGE.replace("quasar", "magnetar"))
    upstream.commit_push("a page only outside the roots")

    def hold(ctx: Any, params: dict[str, Any], progress: Any) -> dict[str, Any]:
        from helpers import wait_until  # the test's own poll

        wait_until(
            lambda: [j for j in ok(ws.list_jobs(state="queued"))["Jobs"] if j["kind"] == "source_sync"],
            timeout=30,
            interval=0.02,
            what="the remote sync queued",
        )
        ok(ws.source_remove(SOURCE))
        ok(ws.source_add(SOURCE, str(upstream.remote)))  # the operator's rights: outside the roots
        return {"Message": "held"}

    jobs.add_kind("roots23_hold_sync", jobs.JobKind(hold))
    try:
        assert ok(ws.promoted("roots23_hold_sync", wait=0))["status"] == "working"
        r = c.post(f"/sources/{SOURCE}/sync", json={}, headers={"Authorization": f"Bearer {OPS}"})
        body = r.json()
        if body.get("status") == "working":  # promoted: the job's own answer
            done = jobs.wait(ws.ctx, body["job_id"], timeout=30)
            assert done.state == "failed", done
            answer = done.result or {}
        else:
            assert r.status_code == 403, r.text
            answer = body["error"] if isinstance(body.get("error"), dict) else body
    finally:
        jobs.remove_kind("roots23_hold_sync")
    assert answer["code"] == "forbidden", answer
    assert answer["details"]["refused_roots"] == {SOURCE: [str(upstream.remote)]}, answer
    assert "zz-magnetar" not in json.dumps(answer)
    assert ok(ws.source_list())["Sources"][0]["synced_commit"] is None  # the re-added one: never synced
    assert ok(ws.document_index("SEARCH", query="magnetar", mode="keyword"))["Results"] == []


def test_http_merge_on_the_local_forge_of_a_source_outside_the_roots_is_refused(
    make_client: Any, upstream: Upstream, allowed: Path, home: Path
) -> None:
    """The local forge's merge (its remote a path of this disk) writes the merge there and syncs it,
    as a webhook would: over HTTP refused before anything is merged; the operator merges."""
    c = make_client(_toml(allowed))
    ws = c.app.state.gitkb.workspace
    ok(ws.source_add(SOURCE, str(upstream.remote)))
    ok(ws.source_sync(SOURCE))
    page = "docs/runbooks/rotate-api-keys.md"
    ok(ws.propose_kb_edit(SOURCE, page, search="every 90 days", replace="every 60 days"))
    pr = ok(ws.open_kb_pull_request(SOURCE, title="Rotation"))
    number = ok(ws.approve_review(pr["review_id"]))["number"]
    head, before = upstream.remote_sha("main"), _counts(home)
    r = c.post(f"/pulls/{SOURCE}/{number}/merge", headers={"Authorization": f"Bearer {REVIEWER}"})
    _refused(r, upstream.remote, [allowed])
    assert upstream.remote_sha("main") == head  # nothing merged
    assert _counts(home) == before  # no sync queued
    merged = ok(ws.forge_merge(SOURCE, number))  # the operator's rights
    assert merged["merge_commit"] == upstream.remote_sha("main") != head
