"""A review whose push would overwrite commits someone else pushed to the proposal branch says so
wherever it is shown, and approving it needs an explicit acknowledgement -- through the library,
the CLI, HTTP and the web page; ``requested_by`` is recorded and shown. Every refusal checks that
the remote branch did not move (nothing was pushed)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from gitkb.cli.main import cli
from gitkb.core.config import load_settings
from gitkb.http import create_app
from gitkb.services.changes.review_request import local_requester
from helpers import SOURCE, Upstream, error_code, error_message, git, with_roots

BRANCH = f"gitkb/proposals/{SOURCE}"
ROTATE = "runbooks/rotate-api-keys.md"
HAND = {
    "GIT_AUTHOR_NAME": "Hana Hand",
    "GIT_AUTHOR_EMAIL": "hana@example.org",
    "GIT_COMMITTER_NAME": "Hana Hand",
    "GIT_COMMITTER_EMAIL": "hana@example.org",
}


def stage(ws: Any, search: str = "every 90 days", replace: str = "every 60 days") -> None:
    out = ws.propose_kb_edit(SOURCE, ROTATE, search=search, replace=replace)
    assert out["Success"], out


def hand_push(up: Upstream, message: str, name: str = "hand.md") -> str:
    """Someone pushes a commit of their own to the proposal branch (on top of it, or of main)."""
    on_branch = up.remote_sha(BRANCH) is not None
    if on_branch:
        git(up.work, "fetch", "-q", "origin", BRANCH)
    git(up.work, "checkout", "-q", "-B", "hand", "FETCH_HEAD" if on_branch else "origin/main")
    up.write(f"docs/runbooks/{name}", f"# {message}\n")
    git(up.work, "add", "-A")
    git(up.work, "commit", "-q", "-m", f"{message}\n\nmore detail", env=HAND)
    git(up.work, "push", "-q", "-f", "origin", f"hand:{BRANCH}")
    git(up.work, "checkout", "-q", "main")
    sha = up.remote_sha(BRANCH)
    assert sha is not None
    return sha


# -- the library -----------------------------------------------------------------------------------


def test_hand_commit_is_shown_everywhere_and_needs_overwrite(source_ws: Any, upstream: Upstream) -> None:
    ws = source_ws
    stage(ws)
    hand = hand_push(upstream, "a fix made by hand")
    pr = ws.open_kb_pull_request(SOURCE)
    entry = {"sha": hand, "author": "Hana Hand <hana@example.org>", "message": "a fix made by hand"}
    assert pr["Success"] and pr["overwrites"] == [entry], pr
    assert any("overwrites 1 commit" in w and "--overwrite" in w for w in pr["Warnings"])
    shown = ws.show_review(pr["review_id"])
    assert shown["overwrites"] == [entry] and any(hand[:12] in w for w in shown["Warnings"])
    assert (
        shown["diff"].startswith("# WARNING: approving this review force-replaces")
        and hand[:12] in shown["diff"]
    )
    assert "diff --git" in shown["diff"]
    assert ws.list_reviews()["Reviews"][0]["overwrites"] == [entry]
    refused = ws.approve_review(pr["review_id"])
    assert refused["Success"] is False and refused["code"] == "conflict" and refused["pushed"] is False
    assert "Nothing was pushed" in refused["Error"] and hand[:12] in refused["Error"]
    assert any("--overwrite" in s for s in refused["next_steps"]) and refused["overwrites"] == [entry]
    assert upstream.remote_sha(BRANCH) == hand
    assert ws.show_review(pr["review_id"])["review_state"] == "pending"  # the refusal decided nothing
    done = ws.approve_review(pr["review_id"], reviewer="carol", overwrite=True)
    assert done["Success"] and done["number"] == 1, done
    local = git(next((ws.home / "repos").iterdir()), "rev-parse", BRANCH)
    assert upstream.remote_sha(BRANCH) == local != hand
    after = ws.show_review(pr["review_id"])
    assert after["pushed"] and "Warnings" not in after and after["diff"].startswith("diff --git")
    approved = next(
        e for e in ws.list_audit()["Entries"] if e["action"] == "review.approve" and e["result"] == "approved"
    )
    assert approved["detail"]["overwrites"] == [hand] and approved["actor"] == "carol"


def test_a_hand_push_after_the_review_was_opened_is_caught(source_ws: Any, upstream: Upstream) -> None:
    ws = source_ws
    stage(ws)
    pr = ws.open_kb_pull_request(SOURCE)
    assert pr["overwrites"] == [] and "Warnings" not in pr
    first = hand_push(upstream, "pushed while the review waited")
    refused = ws.approve_review(pr["review_id"])
    assert refused["code"] == "conflict" and [c["sha"] for c in refused["overwrites"]] == [first]
    assert upstream.remote_sha(BRANCH) == first
    assert [c["sha"] for c in ws.show_review(pr["review_id"])["overwrites"]] == [first]  # now shown
    # the acknowledgement covers what the review listed, not a commit pushed after it was shown
    second = hand_push(upstream, "and one more", name="more.md")
    again = ws.approve_review(pr["review_id"], overwrite=True)
    assert again["code"] == "conflict" and "did not list" in again["Error"] and second[:12] in again["Error"]
    assert upstream.remote_sha(BRANCH) == second
    assert [c["sha"] for c in ws.show_review(pr["review_id"])["overwrites"]] == [second, first]
    done = ws.approve_review(pr["review_id"], overwrite=True)
    assert done["Success"], done
    assert upstream.remote_sha(BRANCH) not in (first, second)


def test_replacing_gitkbs_own_push_or_mains_commits_needs_no_acknowledgement(
    source_ws: Any, upstream: Upstream
) -> None:
    ws = source_ws
    stage(ws)
    assert ws.approve_review(ws.open_kb_pull_request(SOURCE)["review_id"])["Success"]
    # the staged edit is discarded and another staged from the base: the push replaces gitkb's own commit
    (p,) = ws.list_proposals(SOURCE)["Proposals"]
    assert ws.discard_proposal(p["proposal_id"])["Success"]
    stage(ws, "Tuesday", "Friday")
    pr = ws.open_kb_pull_request(SOURCE)
    assert pr["overwrites"] == [], pr
    assert ws.approve_review(pr["review_id"])["Success"]
    # someone pushes main's own head there: nothing of theirs is lost by replacing it
    upstream.write("docs/runbooks/new-on-main.md", "# new\n")
    main_head = upstream.commit_push("main moves on")
    git(upstream.work, "push", "-q", "-f", "origin", f"main:{BRANCH}")
    stage(ws, "Friday", "Monday")
    redo = ws.open_kb_pull_request(SOURCE)
    assert redo["overwrites"] == [] and ws.approve_review(redo["review_id"])["Success"], redo
    assert upstream.remote_sha(BRANCH) != main_head


def test_requested_by_is_recorded_and_checked(source_ws: Any, upstream: Upstream) -> None:
    ws = source_ws
    stage(ws)
    assert ws.open_kb_pull_request(SOURCE, requested_by="someone")["code"] == "invalid_argument"
    assert ws.open_kb_pull_request(SOURCE, requested_by=7)["code"] == "invalid_argument"
    assert ws.list_reviews()["total_count"] == 0
    pr = ws.open_kb_pull_request(SOURCE)
    assert pr["requested_by"] == local_requester() and pr["requested_by"].startswith("local:")
    stage(ws, "Tuesday", "Friday")
    by_agent = ws.open_kb_pull_request(SOURCE, requested_by="agent:support-bot")
    assert by_agent["requested_by"] == "agent:support-bot"
    assert ws.show_review(by_agent["review_id"])["requested_by"] == "agent:support-bot"
    listed = {r["review_id"]: r["requested_by"] for r in ws.list_reviews(state="all")["Reviews"]}
    assert listed == {pr["review_id"]: local_requester(), by_agent["review_id"]: "agent:support-bot"}
    entry = next(e for e in ws.list_audit()["Entries"] if e["action"] == "review.request")
    assert entry["actor"] == "agent:support-bot"


# -- the CLI --------------------------------------------------------------------------------------


def test_cli_show_warns_and_approve_needs_the_flag(tmp_path: Path, upstream: Upstream) -> None:
    home = tmp_path / "cli-ws"
    home.mkdir()
    (home / "gitkb.toml").write_text('[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n')

    def gitkb(*args: str) -> Any:
        return CliRunner().invoke(cli, ["--home", str(home), *args], catch_exceptions=False)

    assert gitkb("source", "add", SOURCE, str(upstream.remote)).exit_code == 0
    assert gitkb("source", "sync", SOURCE).exit_code == 0
    assert (
        gitkb("propose", SOURCE, ROTATE, "--search", "every 90 days", "--replace", "every 60 days").exit_code
        == 0
    )
    hand = hand_push(upstream, "a fix made by hand")
    opened = gitkb("pr", "open", SOURCE)
    assert opened.exit_code == 0, opened.output
    rid = opened.output.split("review_id: ")[1].split()[0]
    listed = gitkb("review", "list")
    assert rid in listed.output and local_requester() in listed.output
    shown = gitkb("review", "show", rid)
    assert f"requested by: {local_requester()}" in shown.output
    assert (
        "overwrites 1 commit(s)" in shown.output
        and f"{hand[:12]}  Hana Hand <hana@example.org>" in shown.output
    )
    assert "# WARNING" in shown.output
    as_json = json.loads(gitkb("--json", "review", "show", rid).stdout)
    assert [c["sha"] for c in as_json["overwrites"]] == [hand] and as_json["overwrites"][0][
        "author"
    ].startswith("Hana")
    refused = gitkb("review", "approve", rid)
    assert (
        refused.exit_code == 1 and "--overwrite" in refused.stderr and "Nothing was pushed" in refused.stderr
    )
    assert upstream.remote_sha(BRANCH) == hand
    done = gitkb("review", "approve", rid, "--overwrite")
    assert done.exit_code == 0 and "number: 1" in done.output, done.output
    assert upstream.remote_sha(BRANCH) != hand


# -- HTTP -----------------------------------------------------------------------------------------

TOKENS = {"writer": "w" * 24, "alice": "v" * 24, "reader": "r" * 24}
SCOPES = {"writer": "write", "alice": "review", "reader": "read"}
TOML = "".join(
    f'[[server.tokens]]\nname = "{n}"\ntoken = "{t}"\nscopes = ["{SCOPES[n]}"]\n' for n, t in TOKENS.items()
)


def as_(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


@pytest.fixture
def api(make_client: Callable[..., TestClient], upstream: Upstream) -> TestClient:
    c = make_client(with_roots(TOML, upstream.remote), peer=("127.0.0.1", 1))
    # a local-path source is the operator's (over HTTP: admin and inside allowed_roots)
    assert c.app.state.gitkb.workspace.source_add(SOURCE, str(upstream.remote))["Success"]  # type: ignore[attr-defined]
    assert c.post(f"/sources/{SOURCE}/sync", json={}, headers=as_("writer")).status_code == 200
    return c


def test_http_review_shows_overwrites_and_approve_needs_overwrite_true(
    api: TestClient, upstream: Upstream
) -> None:
    c = api
    body = {
        "source_id_or_index": SOURCE,
        "relative_path": "docs/" + ROTATE,
        "search": "every 90 days",
        "replace": "every 60 days",
    }
    assert c.post("/proposals", json=body, headers=as_("writer")).status_code == 200
    hand = hand_push(upstream, "a fix made by hand")
    # who asks is the token, whatever the body claims
    r = c.post(
        "/pulls", json={"source_id_or_index": SOURCE, "requested_by": "local:root"}, headers=as_("writer")
    )
    assert r.status_code == 200, r.text
    pr = r.json()
    assert pr["requested_by"] == "token:writer" and [x["sha"] for x in pr["overwrites"]] == [hand]
    rid = pr["review_id"]
    shown = c.get(f"/reviews/{rid}", headers=as_("reader")).json()
    assert (
        shown["requested_by"] == "token:writer"
        and shown["overwrites"][0]["author"] == "Hana Hand <hana@example.org>"
    )
    assert shown["diff"].startswith("# WARNING") and hand[:12] in shown["diff"]
    assert c.get("/reviews", headers=as_("reader")).json()["Reviews"][0]["requested_by"] == "token:writer"
    for sent in (None, {}, {"overwrite": False}):
        r = c.post(
            f"/reviews/{rid}/approve", headers=as_("alice"), **({} if sent is None else {"json": sent})
        )
        assert r.status_code == 409 and error_code(r) == "conflict", r.text
        assert "Nothing was pushed" in error_message(r)
        assert upstream.remote_sha(BRANCH) == hand
    for bad in ({"overwrite": "yes"}, {"overwrite": True, "force": True}):
        r = c.post(f"/reviews/{rid}/approve", json=bad, headers=as_("alice"))
        assert r.status_code in (400, 422), r.text
        assert upstream.remote_sha(BRANCH) == hand
    r = c.post(f"/reviews/{rid}/approve", json={"overwrite": True}, headers=as_("writer"))
    assert r.status_code == 403 and upstream.remote_sha(BRANCH) == hand  # the scope still decides
    done = c.post(f"/reviews/{rid}/approve", json={"overwrite": True}, headers=as_("alice"))
    assert done.status_code == 200, done.text
    assert done.json()["reviewer"] == "alice" and upstream.remote_sha(BRANCH) != hand


# -- the web page ---------------------------------------------------------------------------------


def csrf(html: str) -> str:
    m = re.search(r'name="csrf_token" value="([0-9a-f]{64})"', html)
    assert m, "no CSRF token in the page"
    return m.group(1)


def test_web_page_warns_above_the_diff_and_needs_the_checkbox(home: Path, upstream: Upstream) -> None:
    home.mkdir(parents=True)
    (home / "gitkb.toml").write_text(with_roots("", upstream.remote))  # the page is held to them
    settings = load_settings(home, embedding_provider="hashing", embedding_model="hashing-384")
    with TestClient(create_app(settings), client=("127.0.0.1", 50000)) as c:
        ws = c.app.state.gitkb.workspace  # type: ignore[attr-defined]
        assert ws.source_add(SOURCE, str(upstream.remote))["Success"] and ws.source_sync(SOURCE)["Success"]
        stage(ws)
        hand = hand_push(upstream, "a fix <b>made</b> by hand")
        rid = ws.open_kb_pull_request(SOURCE, requested_by="agent:support-bot")["review_id"]
        for url in ("/ui/reviews", f"/ui/reviews/{rid}"):
            page = c.get(url).text
            warning = page.index(f'id="overwrite-warning-{rid}"')
            assert warning < page.index('class="diff-file"'), url  # above the diff
            assert (
                hand[:12] in page and "Hana Hand" in page and "a fix &lt;b&gt;made&lt;/b&gt; by hand" in page
            )
            assert '<input type="checkbox" name="overwrite" value="yes" required>' in page
            assert "agent:support-bot" in page
            assert "# WARNING" not in page  # the diff's warning lines are not shown as a file
        token = csrf(c.get(f"/ui/reviews/{rid}").text)
        for data in ({"csrf_token": token}, {"csrf_token": token, "overwrite": "no"}):
            r = c.post(f"/ui/reviews/{rid}/approve", data=data)
            assert r.status_code == 409 and 'id="decide-error"' in r.text and "--overwrite" in r.text
            assert upstream.remote_sha(BRANCH) == hand
        assert ws.show_review(rid)["review_state"] == "pending"
        ok = c.post(
            f"/ui/reviews/{rid}/approve",
            data={"csrf_token": token, "overwrite": "yes"},
            follow_redirects=False,
        )
        assert ok.status_code == 303, ok.text
        assert upstream.remote_sha(BRANCH) != hand and ws.show_review(rid)["pushed"] is True
        page = c.get(ok.headers["location"]).text
        assert f'id="overwrite-warning-{rid}"' not in page and 'name="overwrite"' not in page
        assert "agent:support-bot" in c.get("/ui/reviews?tab=history").text
