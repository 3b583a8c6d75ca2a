"""The web page through the in-process ASGI client, on a real workspace with a git source and a
bare remote: every page, the login cookie, scopes, CSRF, approve and deny, and HTML (never JSON)
errors. The browser-driven version of the same flows is tests/test_ui_browser.py."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from gitkb.core.config import load_settings
from gitkb.http import create_app
from gitkb.http.ui.session import load_secret
from gitkb.services.runtime import jobs
from helpers import SOURCE, Upstream, git, wait_until, with_roots

LOCAL = ("127.0.0.1", 50000)
TOKENS = {
    "alice": "alice-review-token-0123",
    "reader": "reader-read-token-0123",
    "bot": "bot-agent-token-01234",
}
TOML = f"""
[[server.tokens]]
name = "alice"
token = "{TOKENS["alice"]}"
scopes = ["review", "write"]

[[server.tokens]]
name = "reader"
token = "{TOKENS["reader"]}"
scopes = ["read"]

[[server.tokens]]
name = "bot"
token = "{TOKENS["bot"]}"
scopes = ["read"]
agent = "support-bot"
"""
ROTATE = "docs/runbooks/rotate-api-keys.md"


def make_client(home: Path, toml: str = "", client: tuple[str, int] = LOCAL) -> TestClient:
    home.mkdir(parents=True, exist_ok=True)
    # the tests' bare upstream (tmp_path/remote.git) inside allowed_roots: the page is held to them
    (home / "gitkb.toml").write_text(with_roots(toml, home.parent))
    settings = load_settings(home, embedding_provider="hashing", embedding_model="hashing-384")
    return TestClient(create_app(settings), client=client)


def ws_of(c: TestClient) -> Any:
    return c.app.state.gitkb.workspace  # type: ignore[attr-defined]


def seed(c: TestClient, remote: Path) -> str:
    """Source + sync + one staged edit sent for review; returns the pending review's id."""
    ws = ws_of(c)
    assert ws.source_add(SOURCE, str(remote))["Success"]
    assert ws.source_sync(SOURCE)["Success"]
    staged = ws.propose_kb_edit(
        SOURCE,
        ROTATE,
        search="expire every 90 days",
        replace="expire every 60 days",
        note="Keys expire after 60 days <b>now</b>",
    )
    assert staged["Success"], staged
    pr = ws.open_kb_pull_request(SOURCE, title="Rotate keys every 60 days")
    assert pr["Success"] and pr["review_state"] == "pending", pr
    return str(pr["review_id"])


def csrf(html: str) -> str:
    m = re.search(r'name="csrf_token" value="([0-9a-f]{64})"', html)
    assert m, "no CSRF token in the page"
    return m.group(1)


def login(c: TestClient, who: str) -> None:
    page = c.get("/ui/login")
    r = c.post(
        "/ui/login",
        data={"token": TOKENS[who], "csrf_token": csrf(page.text), "next": "/ui"},
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"] == "/ui", r.text


def is_html(r: Any) -> bool:
    return str(r.headers.get("content-type", "")).startswith("text/html")


@pytest.fixture
def open_client(home: Path) -> Iterator[TestClient]:
    """No tokens configured: the page asks for no login (loopback only)."""
    with make_client(home) as c:
        yield c


@pytest.fixture
def auth_client(home: Path) -> Iterator[TestClient]:
    with make_client(home, TOML) as c:
        yield c


# -- every page, no tokens --------------------------------------------------------------------


def test_every_page_renders_without_login(open_client: TestClient, upstream: Upstream) -> None:
    c = open_client
    rid = seed(c, upstream.remote)
    for url in (
        "/ui",
        "/ui/indexes",
        "/ui/search",
        "/ui/search?q=rotate+api+keys",
        "/ui/search?tab=ask&q=how+often+do+keys+expire",
        f"/ui/doc?index={SOURCE}&path={ROTATE}&start=7&end=8",
        "/ui/reviews",
        "/ui/reviews?tab=history",
        f"/ui/reviews/{rid}",
        f"/ui/reviews/{rid}?view=split",
    ):
        r = c.get(url)
        assert r.status_code == 200 and is_html(r), (url, r.text[:500])
        assert "<title>" in r.text and 'href="#main"' in r.text
        assert "Content-Security-Policy" in r.headers
    assert c.get("/ui/login", follow_redirects=False).headers["location"] == "/ui"
    for asset in ("ui.css", "ui.js", "pygments.css"):
        assert c.get(f"/ui/static/{asset}").status_code == 200
    status = c.get("/ui/status.json").json()
    assert status["status"] in ("queryable", "building") and "skipped_files" in status
    assert not [p for p in c.get("/openapi.json").json()["paths"] if p.startswith("/ui")]


def test_overview_indexes_and_status_panel(open_client: TestClient, upstream: Upstream) -> None:
    c = open_client
    seed(c, upstream.remote)
    page = c.get("/ui").text
    for field in ("queue_depth", "dirty_paths", "dirty_embeddings", "skipped_files", "in_flight_text"):
        assert f'data-field="{field}"' in page
    assert 'data-status-url="/ui/status.json"' in page and "<progress" in page
    assert "1 pending review" in page
    idx = c.get("/ui/indexes").text
    head = ws_of(c).source_list()["Sources"][0]["synced_commit"]
    assert head[:12] in idx and "hashing/hashing-384" in idx and ">6</td>" in idx


def test_status_panel_shows_the_job_in_flight(open_client: TestClient) -> None:
    c = open_client
    started, release = threading.Event(), threading.Event()

    def slow(ctx: Any, params: dict[str, Any], progress: Any) -> dict[str, Any]:
        progress(3, 4, "batch 3 of 4")
        started.set()
        release.wait(20)
        return {"Message": "done"}

    jobs.add_kind("ui_progress_test", jobs.JobKind(slow))
    try:
        job = ws_of(c).promoted("ui_progress_test", wait=0.01)
        assert started.wait(10)
        status = c.get("/ui/status.json").json()
        assert status["status"] == "building" and status["progress_percent"] == 75
        assert status["in_flight_job"]["job_id"] == job["job_id"]
        page = c.get("/ui").text
        assert 'value="75"' in page and "3 / 4 · batch 3 of 4" in page and job["job_id"] in page
    finally:
        release.set()
        jobs.remove_kind("ui_progress_test")
    wait_until(
        lambda: c.get("/ui/status.json").json()["in_flight_job"] is None,
        timeout=10,
        interval=0.05,
        what="the status panel to show no job in flight",
    )
    assert "no job running" in c.get("/ui").text


def test_search_citations_and_document_lines(open_client: TestClient, upstream: Upstream) -> None:
    c = open_client
    seed(c, upstream.remote)
    r = c.get("/ui/search", params={"q": "rotate api keys", "mode": "keyword", "index": SOURCE})
    assert "<mark>Rotate</mark>" in r.text and "score " in r.text
    link = re.search(r'class="cite-link" href="(/ui/doc\?[^"]+)"', r.text)
    assert link and f"path={ROTATE}" in link.group(1)
    doc = c.get(link.group(1).replace("&amp;", "&"))
    assert doc.status_code == 200 and 'id="L1" class="cited"' in doc.text
    narrow = c.get("/ui/doc", params={"index": SOURCE, "path": ROTATE, "start": 7, "end": 8}).text
    cited = re.findall(r'<tr id="L(\d+)" class="cited">', narrow)
    assert cited == ["7", "8"] and 'id="L6"' in narrow
    ask = c.get("/ui/search", params={"q": "how often do API keys expire", "tab": "ask"}).text
    assert 'href="#fn-1"' in ask and 'id="fn-1"' in ask and "start=7" in ask
    bad = c.get("/ui/search", params={"q": "x", "mode": "psychic"})
    assert bad.status_code == 400 and "alert-error" in bad.text
    missing = c.get("/ui/doc", params={"index": SOURCE, "path": "docs/nope.md"})
    assert missing.status_code == 404 and is_html(missing)
    assert c.get("/ui/search", params={"top_n": "many"}).status_code == 400


# -- reviews --------------------------------------------------------------------------------------


def test_review_page_shows_diff_badges_and_notes(open_client: TestClient, upstream: Upstream) -> None:
    c = open_client
    rid = seed(c, upstream.remote)
    queue = c.get("/ui/reviews").text
    assert f'id="review-{rid}"' in queue and "Rotate keys every 60 days" in queue
    assert "Keys expire after 60 days &lt;b&gt;now&lt;/b&gt;" in queue  # notes escaped
    assert 'class="badge fs fs-M"' in queue and "gitkb/proposals/handbook" in queue
    assert 'expire every <mark class="wd">90</mark> days' in queue  # the changed word marked (word diff)
    assert 'expire every <mark class="wd">60</mark> days' in queue
    split = c.get(f"/ui/reviews/{rid}", params={"view": "split"}).text
    assert 'class="diff split"' in split and 'class="diff unified"' not in split
    assert c.get("/ui/reviews/rev_missing").status_code == 404


def test_approve_pushes_and_shows_the_change_request(open_client: TestClient, upstream: Upstream) -> None:
    c = open_client
    rid = seed(c, upstream.remote)
    assert upstream.remote_sha("gitkb/proposals/handbook") is None
    token = csrf(c.get(f"/ui/reviews/{rid}").text)
    r = c.post(f"/ui/reviews/{rid}/approve", data={"csrf_token": token}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/ui/reviews/{rid}?done=approved"
    page = c.get(r.headers["location"]).text
    assert 'id="decide-result"' in page and "change-request-1" in page and 'class="cr-link"' in page
    assert "expire every 60 days" in upstream.read_remote("gitkb/proposals/handbook", ROTATE)
    shown = ws_of(c).show_review(rid)
    assert shown["review_state"] == "approved" and shown["reviewer"].startswith("local:")
    history = c.get("/ui/reviews?tab=history").text
    assert rid in history and "approved" in history
    again = c.post(f"/ui/reviews/{rid}/deny", data={"csrf_token": token, "reason": "late"})
    assert again.status_code == 409 and is_html(again) and "alert-error" in again.text


def test_a_hand_push_is_shown_and_refuses_the_approval(open_client: TestClient, upstream: Upstream) -> None:
    c = open_client
    rid = seed(c, upstream.remote)
    upstream.write("docs/runbooks/hand.md", "# by hand\n")
    git(upstream.work, "add", "-A")
    git(upstream.work, "commit", "-q", "-m", "a fix made by hand")
    git(upstream.work, "push", "-q", "origin", "HEAD:refs/heads/gitkb/proposals/handbook")  # someone else
    before = upstream.remote_sha("gitkb/proposals/handbook")
    token = csrf(c.get(f"/ui/reviews/{rid}").text)
    r = c.post(f"/ui/reviews/{rid}/approve", data={"csrf_token": token})
    assert r.status_code == 409 and 'id="decide-error"' in r.text and "Nothing was pushed" in r.text
    assert upstream.remote_sha("gitkb/proposals/handbook") == before
    page = c.get(f"/ui/reviews/{rid}").text
    assert "a fix made by hand" in page and 'name="overwrite"' in page


def test_deny_needs_a_reason(open_client: TestClient, upstream: Upstream) -> None:
    c = open_client
    rid = seed(c, upstream.remote)
    token = csrf(c.get("/ui/reviews").text)
    empty = c.post(f"/ui/reviews/{rid}/deny", data={"csrf_token": token, "reason": "  "})
    assert empty.status_code == 400 and ws_of(c).show_review(rid)["review_state"] == "pending"
    r = c.post(f"/ui/reviews/{rid}/deny", data={"csrf_token": token, "reason": "cite the notice"})
    assert r.status_code == 200 and 'id="decide-result"' in r.text
    assert ws_of(c).show_review(rid)["reason"] == "cite the notice"
    assert "cite the notice" in c.get("/ui/reviews?tab=history").text
    assert upstream.remote_sha("gitkb/proposals/handbook") is None  # nothing pushed


# -- auth, scopes, CSRF ---------------------------------------------------------------------------


def test_login_cookie_and_redirects(auth_client: TestClient, upstream: Upstream) -> None:
    c = auth_client
    r = c.get("/ui/reviews?tab=history", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/login?next=%2Fui%2Freviews%3Ftab%3Dhistory"
    assert c.get("/ui/status.json").status_code == 401
    page = c.get("/ui/login")
    wrong = c.post("/ui/login", data={"token": "not-a-token-at-all", "csrf_token": csrf(page.text)})
    assert wrong.status_code == 401 and "unknown or revoked token" in wrong.text
    agent = c.post("/ui/login", data={"token": TOKENS["bot"], "csrf_token": csrf(page.text)})
    assert agent.status_code == 403 and "bound to agent" in agent.text
    no_csrf = c.post("/ui/login", data={"token": TOKENS["alice"]})
    assert no_csrf.status_code == 403 and "gitkb_session" not in no_csrf.headers.get("set-cookie", "")
    r = c.post(
        "/ui/login",
        data={"token": TOKENS["alice"], "csrf_token": csrf(page.text), "next": "https://evil.example/x"},
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"] == "/ui"
    cookie = r.headers["set-cookie"]
    assert "gitkb_session=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert "Path=/ui" in cookie
    home = c.get("/ui")
    assert home.status_code == 200 and "alice" in home.text and "Log out" in home.text
    out = c.post("/ui/logout", data={"csrf_token": csrf(home.text)}, follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/ui/login"
    assert c.get("/ui", follow_redirects=False).status_code == 303


def test_approving_needs_the_review_scope(auth_client: TestClient, upstream: Upstream) -> None:
    c = auth_client
    rid = seed(c, upstream.remote)
    login(c, "reader")
    page = c.get(f"/ui/reviews/{rid}").text
    assert "Approve and push" not in page and "needs a token with the <code>review</code> scope" in page
    r = c.post(f"/ui/reviews/{rid}/approve", data={"csrf_token": csrf(page)})
    assert r.status_code == 403 and "lacks the &#39;review&#39; scope" in r.text
    assert ws_of(c).show_review(rid)["review_state"] == "pending"
    login(c, "alice")
    page = c.get(f"/ui/reviews/{rid}").text
    r = c.post(f"/ui/reviews/{rid}/approve", data={"csrf_token": csrf(page)}, follow_redirects=False)
    assert r.status_code == 303
    assert ws_of(c).show_review(rid)["reviewer"] == "alice"  # the token's name is the reviewer


def test_csrf_refusals(auth_client: TestClient, upstream: Upstream) -> None:
    c = auth_client
    rid = seed(c, upstream.remote)
    login(c, "alice")
    token = csrf(c.get(f"/ui/reviews/{rid}").text)
    url = f"/ui/reviews/{rid}/approve"
    assert c.post(url, data={}).status_code == 403
    assert c.post(url, data={"csrf_token": "0" * 64}).status_code == 403
    cross = c.post(url, data={"csrf_token": token}, headers={"Origin": "http://evil.example"})
    assert cross.status_code == 403 and "another site" in cross.text
    ref = c.post(url, data={"csrf_token": token}, headers={"Referer": "http://evil.example/page"})
    assert ref.status_code == 403
    login(c, "reader")  # a token rendered for alice's session is void in another session
    assert c.post(url, data={"csrf_token": token}).status_code == 403
    login(c, "alice")  # a new session: a new id, so the page's token is rendered again
    assert c.post(url, data={"csrf_token": token}).status_code == 403
    token = csrf(c.get(f"/ui/reviews/{rid}").text)
    assert ws_of(c).show_review(rid)["review_state"] == "pending"
    same = c.post(
        url, data={"csrf_token": token}, headers={"Origin": "http://testserver"}, follow_redirects=False
    )
    assert same.status_code == 303


def test_csrf_secret_belongs_to_the_workspace(tmp_path: Path) -> None:
    home = tmp_path / "h"
    first = load_secret(home)
    assert load_secret(home) == first and len(first) == 32  # every server of the workspace, every restart
    assert ((home / "ui-secret").stat().st_mode & 0o777) == 0o600


def test_no_tokens_means_loopback_only(home: Path) -> None:
    with make_client(home, client=("203.0.113.9", 4000)) as c:
        r = c.get("/ui")
        assert r.status_code == 401 and is_html(r) and "only answers loopback" in r.text
