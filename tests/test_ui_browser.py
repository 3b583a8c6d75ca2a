"""The web page end to end in headless Chromium (Debian's ``chromium``, driven by Playwright for
Python pointed at it: no browser download) against ``gitkb serve`` on 127.0.0.1, with a real
workspace whose source is example_kb_repo/ behind a bare git remote.

Reviews are created the way an agent creates them (propose + open a pull request, over the HTTP
API); a person logs in, reads the diff, approves one (the bare remote gets the branch and the page
shows the change request) and denies another with a reason; searches, asks, and opens citations
at their lines; watches the status panel refresh without a reload.

Screenshots of the review page and the status page go to the test's tmp dir, or to
docs/screenshots/ when UPDATE_SCREENSHOTS=1 (how the committed ones were made).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers import SOURCE, Upstream, WaitTimeout, wait_until, with_roots

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
GITKB = [sys.executable, "-c", "import sys; from gitkb.cli.main import main; main(sys.argv[1:])"]
REPO = Path(__file__).resolve().parents[1]
ROTATE = "docs/runbooks/rotate-api-keys.md"
BRANCH = "gitkb/proposals/handbook"
ALICE = "alice-review-token-0123456"
TOML = f"""
[[server.tokens]]
name = "alice"
token = "{ALICE}"
scopes = ["review", "write", "admin"]  # admin: the status test creates an index through the API
"""

if CHROMIUM is None:
    pytest.skip(
        "chromium is not installed (apt-get install chromium; scripts/test does it)", allow_module_level=True
    )


@dataclass
class Served:
    url: str
    remote: Path
    upstream: Upstream
    shots: Path

    def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        r = httpx.request(
            method, self.url + path, json=body, headers={"Authorization": f"Bearer {ALICE}"}, timeout=60
        )
        assert r.status_code == 200, r.text
        return dict(r.json())

    def propose_and_open(self, search: str, replace: str, note: str, title: str) -> str:
        """What an agent does: stage an edit, then ask for a pull request (a pending review)."""
        staged = {"source_id_or_index": SOURCE, "relative_path": ROTATE, "search": search, "replace": replace}
        self.api("POST", "/proposals", {**staged, "note": note})
        opened = self.api("POST", "/pulls", {"source_id_or_index": SOURCE, "title": title})
        assert opened["review_state"] == "pending", opened
        return str(opened["review_id"])


def screenshots_dir(tmp_path: Path) -> Path:
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        out = REPO / "docs" / "screenshots"
    else:
        out = tmp_path / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture
def served(tmp_path: Path, upstream: Upstream) -> Iterator[Served]:
    """``gitkb serve`` on a free loopback port over a workspace with the handbook source synced."""
    from gitkb import Workspace

    notes = tmp_path / "notes"  # a directory-fed index with a file the loader skips (parse_error)
    notes.mkdir()
    (notes / "draft-notes.md").write_text("---\ntitle: [never closed\n---\n# Draft\n")
    (notes / "on-call.md").write_text("# On call\n\nThe on-call rota lives in the ops calendar.\n")
    home = tmp_path / "ws"
    home.mkdir()
    (home / "gitkb.toml").write_text(with_roots(TOML, upstream.remote))  # the page is held to them
    with Workspace(home, embedding_provider="hashing", embedding_model="hashing-384") as ws:
        assert ws.source_add(SOURCE, str(upstream.remote))["Success"]
        assert ws.source_sync(SOURCE)["Success"]
        assert ws.document_index("CREATE_INDEX", index_name="notes")["Success"]
        assert ws.document_index("ADD_DOCUMENTS", index_name="notes", filepath=str(notes))["Success"]
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GITKB_")},
        "GITKB_EMBEDDING_PROVIDER": "hashing",
        "GITKB_EMBEDDING_MODEL": "hashing-384",
    }
    log = open(tmp_path / "serve.log", "w+", encoding="utf-8")  # noqa: SIM115 - closed below
    cmd = [
        *GITKB,
        "--home",
        str(home),
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)

    def served_url() -> str | None:
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()
        m = re.search(r"on (http://127\.0\.0\.1:\d+)", (tmp_path / "serve.log").read_text())
        return m.group(1) if m else None

    try:
        try:
            url = wait_until(served_url, timeout=60, interval=0.1, what="gitkb serve to print its address")
        except WaitTimeout as e:
            raise AssertionError("gitkb serve did not start: " + (tmp_path / "serve.log").read_text()) from e
        wait_until(
            lambda: httpx.get(url + "/healthz", timeout=5).status_code == 200,
            timeout=60,
            interval=0.1,
            what="gitkb serve's /healthz to answer 200",
        )
        yield Served(url, upstream.remote, upstream, screenshots_dir(tmp_path))
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


@pytest.fixture
def browser() -> Iterator[Any]:
    """A fresh headless Chromium with a new empty profile."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="gitkb-chromium-") as profile, sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        ctx.set_default_timeout(20_000)
        try:
            yield ctx
        finally:
            ctx.close()


def log_in(page: Any, served: Served, path: str) -> None:
    page.goto(served.url + path)
    assert "/ui/login" in page.url
    page.get_by_label("API token").fill(ALICE)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(served.url + path)
    assert page.locator(".who-name").inner_text() == "alice"


def test_review_approve_and_deny(served: Served, browser: Any) -> None:
    from playwright.sync_api import expect

    first = served.propose_and_open(
        "expire every 90 days",
        "expire every 60 days",
        "Keys expire after 60 days since the 2024 notice.",
        "Rotate keys every 60 days",
    )
    page = browser.new_page()
    log_in(page, served, "/ui/reviews")

    card = page.locator(f"#review-{first}")
    expect(card.get_by_role("heading", name="Rotate keys every 60 days")).to_be_visible()
    expect(card.locator(".proposals")).to_contain_text("Keys expire after 60 days since the 2024 notice.")
    expect(card.locator(".changed-files")).to_contain_text(ROTATE)
    expect(card.locator(".changed-files .fs-M")).to_be_visible()
    expect(card.locator(".diff tr.del")).to_contain_text("expire every 90 days")
    expect(card.locator(".diff tr.add")).to_contain_text("expire every 60 days")
    assert card.locator(".diff .code span[class]").count() > 0  # syntax-highlighted
    page.screenshot(path=str(served.shots / "review.png"), full_page=True)
    page.get_by_role("link", name="side by side").click()
    expect(card.locator("table.diff.split")).to_be_visible()
    assert served.upstream.remote_sha(BRANCH) is None  # nothing pushed while pending

    card.get_by_role("button", name="Approve and push").click()
    page.wait_for_url(re.compile(rf"/ui/reviews/{first}\?done=approved$"))
    result = page.locator("#decide-result")
    expect(result).to_contain_text("Approved and pushed")
    expect(result.locator(".cr-link")).to_contain_text("change-request-1")
    pushed = served.upstream.remote_sha(BRANCH)
    assert pushed is not None
    assert "expire every 60 days" in served.upstream.read_remote(BRANCH, ROTATE)

    second = served.propose_and_open(
        "the Tuesday change window",
        "the Thursday change window",
        "Change windows moved to Thursday.",
        "Thursday change window",
    )
    page.goto(served.url + "/ui/reviews")
    card = page.locator(f"#review-{second}")
    card.locator("summary", has_text="Deny").click()
    reason = card.get_by_label("Reason for denying")
    expect(reason).to_be_focused()
    reason.fill("The change window is still Tuesday; see the ops calendar.")
    card.get_by_role("button", name="Deny review").click()
    page.wait_for_url(re.compile(rf"/ui/reviews/{second}\?done=denied$"))
    expect(page.locator(".outcome")).to_contain_text("The change window is still Tuesday")
    assert served.upstream.remote_sha(BRANCH) == pushed  # the denied change was not pushed

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Reviews").click()
    page.get_by_role("link", name="History").click()
    rows = page.locator("#history-table tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.filter(has_text="Thursday change window")).to_contain_text("alice")
    expect(rows.filter(has_text="Thursday change window")).to_contain_text("denied")
    expect(rows.filter(has_text="Rotate keys every 60 days")).to_contain_text("approved")


def test_search_ask_and_citations_open_at_their_lines(served: Served, browser: Any) -> None:
    from playwright.sync_api import expect

    page = browser.new_page()
    log_in(page, served, "/ui/search")
    page.get_by_label("Query").fill("rotate api keys")
    page.get_by_label("Mode").select_option("keyword")
    page.get_by_label("Index").select_option(SOURCE)
    page.get_by_role("button", name="Search").click()
    first = page.locator(".citation").first
    expect(first.locator("mark").first).to_be_visible()
    expect(first.locator(".path")).to_have_text(ROTATE)
    line_range = first.locator(".range").inner_text()  # "lines A–B"
    a, b = (int(x) for x in re.findall(r"\d+", line_range))
    first.locator("a.cite-link").click()
    page.wait_for_url(re.compile(rf"#L{a}$"))
    expect(page.locator("tr.cited")).to_have_count(b - a + 1)
    expect(page.locator(f"tr#L{a}")).to_have_class("cited")

    page.goto(served.url + "/ui/search?tab=ask")
    page.get_by_label("Question").fill("How often do API keys expire?")
    page.get_by_role("button", name="Ask").click()
    expect(page.locator(".answer-text")).to_contain_text("90 days")
    page.locator(".answer-text a[href='#fn-1']").first.click()
    expect(page.locator("#fn-1")).to_be_in_viewport()
    link = page.locator("#fn-1 a.cite-link", has_text="line 7")
    link.click()
    page.wait_for_url(re.compile(r"start=7&end=7#L7$"))
    cited = page.locator("tr.cited")
    expect(cited).to_have_count(1)
    expect(cited).to_have_id("L7")
    expect(cited).to_contain_text("expire every 90 days")
    expect(cited).to_be_in_viewport()


def test_status_panel_refreshes_in_place(served: Served, browser: Any) -> None:
    from playwright.sync_api import expect

    page = browser.new_page()
    log_in(page, served, "/ui")
    panel = page.locator(".status-panel")
    expect(panel.locator('[data-field="status"]')).to_have_text(re.compile("queryable|building"))
    expect(panel.locator('[data-field="updated"]')).not_to_have_text("now")  # polled at least once
    expect(panel.locator('[data-field="skipped_files"]')).to_contain_text("notes/draft-notes.md")
    expect(panel.locator('[data-field="skipped_files"]')).to_contain_text("parse_error")
    before = panel.bounding_box()
    docs = panel.locator('[data-field="documents_indexed"]')
    count = int(docs.inner_text())
    served.api("POST", "/indexes", {"index_name": "scratch"})
    served.api("POST", "/indexes/scratch/texts", {"text": "Freshly added.", "filepath": "fresh.md"})
    expect(docs).to_have_text(str(count + 1), timeout=15_000)  # no reload
    expect(panel.locator('[data-field="in_flight_text"]')).to_have_text("idle", timeout=15_000)
    assert panel.bounding_box() == before  # no layout jump
    page.screenshot(path=str(served.shots / "status.png"), full_page=True)

    page.keyboard.press("Tab")  # keyboard: the skip link comes first, with a visible focus ring
    focused = page.evaluate(
        "[document.activeElement.className, getComputedStyle(document.activeElement).outlineStyle]"
    )
    assert focused == ["skip-link", "solid"]

    page.set_viewport_size({"width": 390, "height": 844})  # a phone: nothing wider than the screen
    for path in ("/ui", "/ui/reviews", "/ui/indexes", "/ui/search?q=keys"):
        page.goto(served.url + path)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, path
