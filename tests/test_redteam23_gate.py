"""redteam23: the review gate as an agent sees it (fed_view), and what a human approved.

The world of tests/test_gate21_refresh.py: sources ``pub`` (docs/public/**, KB ka, agent alice in
mode propose) and ``priv`` (docs/private/**) on one repository; the operator may stage on pub
anywhere under the documents root, docs/private/payroll.md too.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client

from gitkb.mcp import build_server
from gitkb.mcp.render import parse_block
from helpers import SOURCE, Upstream, bare_repo, error_code, git, ok, wait_until, with_roots
from test_gate21_refresh import BOT, SECRET, TOML, _world
from test_prleak21_review_view import _as_alice

BRANCH = f"gitkb/proposals/{SOURCE}"
MARK = "kingfishermarker"
PAYROLL_TITLE = "docs: edit docs/private/payroll.md"


def _only_payroll_staged(c: TestClient, tmp_path: Path) -> tuple[Any, str]:
    """_world with alice's and the operator's public proposals discarded: only the payroll edit is
    staged on pub."""
    ws, ids = _world(c, tmp_path)
    ok(ws.discard_proposal(ids["operator_public"]))
    ok(ws.discard_proposal(ids["mine"]))
    return ws, ids["operator_private"]


@pytest.mark.parametrize("how", ["library", "mcp", "http"])
def test_an_agent_cannot_confirm_a_hidden_reviews_title_or_body_by_guessing(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None, how: str
) -> None:
    """The operator's review of the payroll edit has the default title and body, which name the
    file. alice's open_kb_pull_request of the same branch state returns that review with title and
    body hidden; passing a guess as title (or body) showed it back when the guess was right and
    None when wrong: an oracle for a path alice may not see. Now hidden either way."""
    c = make_client(with_roots(TOML, tmp_path))
    ws, hidden = _only_payroll_staged(c, tmp_path)
    full = ok(ws.open_kb_pull_request("pub"))
    assert full["title"] == PAYROLL_TITLE, full
    body = full["body"]
    assert "docs/private/payroll.md" in body, body
    right = _as_alice(
        c, ws, how, "open_kb_pull_request", {"source_id_or_index": "pub", "title": PAYROLL_TITLE}
    )
    wrong = _as_alice(
        c,
        ws,
        how,
        "open_kb_pull_request",
        {"source_id_or_index": "pub", "title": "docs: edit docs/private/x.md"},
    )
    guessed_body = _as_alice(c, ws, how, "open_kb_pull_request", {"source_id_or_index": "pub", "body": body})
    for out in (right, wrong, guessed_body):
        assert out["existing"] and out["review_id"] == full["review_id"], out
        assert out["other_proposals"] == 1 and out["proposal_ids"] == [], out
        assert out["title"] is None and out["body"] is None, out
    assert hidden not in json.dumps([right, wrong, guessed_body])
    assert SECRET not in json.dumps([right, wrong, guessed_body])


def test_an_agent_sees_the_title_it_gave_its_own_review(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None
) -> None:
    """Over-hiding guard: alice opening a review (it holds the hidden payroll edit too) with her own
    title sees it, and sees it again when she asks again with it."""
    c = make_client(with_roots(TOML, tmp_path))
    ws, _hidden = _only_payroll_staged(c, tmp_path)
    agent = ws.as_agent("alice")
    first = ok(agent.open_kb_pull_request("pub", title="my title", body="my body"))
    assert not first["existing"] and first["title"] == "my title" and first["body"] == "my body", first
    again = ok(agent.open_kb_pull_request("pub", title="my title", body="my body"))
    assert again["existing"] and again["review_id"] == first["review_id"], again
    assert again["title"] == "my title" and again["body"] == "my body", again


ROTATE = "runbooks/rotate-api-keys.md"
RETENTION = "policies/data-retention.md"


@pytest.mark.parametrize("point", ["review.approved", "review.before_push"])
@pytest.mark.parametrize("between", ["propose", "refresh", "choose"])
def test_what_is_pushed_is_the_approved_head_whatever_happens_between_approve_and_push(
    source_ws: Any,
    upstream: Upstream,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    between: str,
    point: str,
) -> None:
    """approve_review is paused after it recorded the approval, just before ``git push``; meanwhile
    another caller stages a new proposal, refreshes the branch onto a moved base, or opens a review
    of a chosen proposal (which reorders the branch). The remote gets exactly the approved head
    (its tree: the approved edit, nothing staged later), and the review says so. Paused right after
    the approval was recorded (review.approved), a refresh onto a moved base marked the review
    superseded (its push_sha was not recorded yet), and the push went on: a pushed review reading
    superseded."""
    ws = source_ws
    first = ok(ws.propose_kb_edit(SOURCE, ROTATE, search="every 90 days", replace="every 60 days"))
    if between == "choose":  # a second proposal staged before, not approved: the one a chooser puts first
        second = ok(ws.propose_kb_edit(SOURCE, RETENTION, content="# Retention\n\nLater.\n"))
    review = ok(ws.open_kb_pull_request(SOURCE, proposal_ids=[first["proposal_id"]]))
    where = tmp_path / "pause"
    where.mkdir()
    monkeypatch.setenv("GITKB_PAUSE_AT", point)
    monkeypatch.setenv("GITKB_PAUSE_DIR", str(where))
    out: dict[str, Any] = {}
    t = threading.Thread(target=lambda: out.update(answer=ws.approve_review(review["review_id"])))
    t.start()
    try:
        wait_until(lambda: (where / f"{point}.reached").exists() or out, timeout=60, what="the pause")
        assert not out, out
        monkeypatch.delenv("GITKB_PAUSE_AT")
        if between == "propose":
            ok(ws.propose_kb_edit(SOURCE, RETENTION, content="# Retention\n\nSneaked in.\n"))
        elif between == "refresh":
            upstream.write("docs/policies/password-policy.md", "# Passwords\n\nMoved base.\n")
            upstream.commit_push("base moves")
            ok(ws.refresh_proposals(SOURCE))
        else:
            ok(ws.open_kb_pull_request(SOURCE, proposal_ids=[second["proposal_id"]]))
    finally:
        (where / f"{point}.go").write_text("")
        t.join(90)
    ok(out["answer"])
    pushed = upstream.remote_sha(BRANCH)
    assert pushed == review["push_sha"], (pushed, review)
    assert "every 60 days" in upstream.read_remote(BRANCH, f"docs/{ROTATE}")
    assert "Sneaked in." not in upstream.read_remote(BRANCH, f"docs/{RETENTION}")
    assert "Later." not in upstream.read_remote(BRANCH, f"docs/{RETENTION}")
    shown = ok(ws.show_review(review["review_id"]))
    assert shown["pushed"] and shown["review_state"] == "approved", shown


def _nested_sidecar_world(c: TestClient, tmp_path: Path) -> Any:
    """pub (docs/public/**, alice) and priv (docs/private/**) on one repository, and a file named
    like a sidecar inside the private folder: neither source reads it as configuration (only the
    documents root's are) and no walk indexes it."""
    work = tmp_path / "work"
    (work / "docs" / "public").mkdir(parents=True)
    (work / "docs" / "private").mkdir(parents=True)
    (work / "docs" / "public" / "a.md").write_text("# Public\n\nThe failover runbook.\n")
    (work / "docs" / "private" / "payroll.md").write_text("# Payroll\n\nalice 100, bob 200.\n")
    (work / "docs" / "private" / "gitkb.yml").write_text(f"# notes\nowner: hr\nsecret: {SECRET}\nlast: x\n")
    remote = bare_repo(tmp_path, work)
    ws = c.app.state.gitkb.workspace  # type: ignore[attr-defined]
    ok(ws.source_add("pub", str(remote), include=["public/**"]))
    ok(ws.source_add("priv", str(remote), include=["private/**"]))
    ok(ws.source_sync("pub"))
    ok(ws.source_sync("priv"))
    ok(ws.kb_create("ka", ["pub"]))
    ok(ws.agent_assign("alice", ["ka"], mode="propose"))
    return ws


@pytest.mark.parametrize("how", ["library", "http"])
def test_an_agent_cannot_read_or_stage_a_sidecar_named_file_in_a_folder_its_source_does_not_feed(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None, how: str
) -> None:
    """require_fed let through every file named gitkb.yml / kb-manifest.json at any depth, as if
    it were configuration; only the documents root's are. alice (pub: docs/public/**) staged a
    search/replace edit of docs/private/gitkb.yml: the answer's diff held its lines (the secret),
    and the occurrence count of any search text read it too. Now refused like any file pub does
    not feed, with nothing staged; the documents root's sidecar stays proposable."""
    c = make_client(with_roots(TOML, tmp_path))
    ws = _nested_sidecar_world(c, tmp_path)
    args = {
        "source_id_or_index": "pub",
        "relative_path": "private/gitkb.yml",
        "search": "last: x",
        "replace": "last: y",
    }
    probe = {**args, "search": SECRET, "replace": "z"}
    if how == "library":
        agent = ws.as_agent("alice")
        answers = [agent.propose_kb_edit(**args), agent.propose_kb_edit(**probe)]
    else:
        bot = {"Authorization": f"Bearer {BOT}"}
        answers = [c.post("/proposals", json=a, headers=bot).json() for a in (args, probe)]
    for r in answers:
        assert SECRET not in json.dumps(r), r
        assert r.get("Success") is not True, r
        assert error_code(r) == "invalid_argument" and "not a file source 'pub' feeds" in r["Error"], r
    assert ok(ws.list_proposals("pub"))["Proposals"] == []
    root = ok(ws.as_agent("alice").propose_kb_edit("pub", "gitkb.yml", content="include:\n  - public/**\n"))
    assert root["path"] == "docs/gitkb.yml", root


@pytest.mark.parametrize("how", ["library", "mcp", "http"])
def test_an_agent_is_told_a_fetch_failed_not_the_servers_remote_path_or_gits_words(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None, how: str
) -> None:
    """The remote is unreachable: refresh_proposals and open_kb_pull_request go on with the last
    fetched head and warn. alice's Warnings held git's own message: 'git fetch with
    /tmp/.../remote.git failed: fatal: ... does not appear to be a git repository' (where the
    server keeps the repository, or its internal URL). Now a fixed sentence; the operator's answer
    keeps git's words."""
    c = make_client(with_roots(TOML, tmp_path))
    ws, _ids = _world(c, tmp_path)
    (tmp_path / "remote.git").rename(tmp_path / "moved.git")
    for name, args in (
        ("refresh_proposals", {"source": "pub"}),
        ("open_kb_pull_request", {"source_id_or_index": "pub"}),
    ):
        out = _as_alice(c, ws, how, name, args)
        text = json.dumps(out)
        assert str(tmp_path) not in text and "remote.git" not in text and "fatal" not in text, out
        assert out["Warnings"] and all("could not fetch" in w for w in out["Warnings"]), out
    mine = ok(ws.refresh_proposals("pub"))
    assert any("remote.git" in w for w in mine["Warnings"]), mine


@pytest.mark.parametrize("how", ["library", "mcp"])
def test_an_agents_cite_check_with_the_remote_away_gets_no_git_message(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None, how: str
) -> None:
    """cite_check (offered to agents) checks a citation at the branch head fetched now; with the
    remote away it checks the last fetched head and warned with git's stderr ('fatal: ... does not
    appear to be a git repository | ... access rights'). Now a fixed sentence for an agent; the
    operator's keeps git's words. (The remote's URL itself is in source_uri, as in every citation.)"""
    c = make_client(with_roots(TOML, tmp_path))
    ws, _ids = _world(c, tmp_path)
    hit = ok(ws.as_agent("alice").search_index("failover runbook", mode="keyword"))["Results"][0]
    chunk = hit.get("chunk_id") or hit["id"]
    (tmp_path / "remote.git").rename(tmp_path / "moved.git")
    if how == "library":
        out = ok(ws.as_agent("alice").cite_check(chunk))
    else:
        out = _mcp_as_alice(ws, "cite_check", {"chunk_id": chunk})
    warned = json.dumps(out["Warnings"])  # source_uri names the remote by design, as every citation does
    assert "remote.git" not in warned and "fatal" not in warned and "repository" not in warned, out
    assert all("could not fetch" in w for w in out["Warnings"]), out
    mine = ok(ws.cite_check(chunk))
    assert any("remote.git" in w for w in mine["Warnings"]), mine


def _mcp_as_alice(ws: Any, name: str, args: dict[str, Any]) -> dict[str, Any]:
    async def main() -> Any:
        async with Client(build_server(ws, "alice")) as client:
            return await client.call_tool(name, args)

    r = anyio.run(main)
    assert not r.is_error, r.content[0].text
    text = r.content[0].text
    return dict(parse_block(text) if text.startswith("<<<") else json.loads(text))


@pytest.mark.parametrize("name", ["café.md", 'quote"d.md', "back\\slash.md"])
def test_an_agents_review_answer_shows_the_diff_of_its_own_file_whatever_its_name(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None, name: str
) -> None:
    """fed_view cut the review's diff by its ``diff --git a/P b/P`` lines, but git (libgit2) quotes a
    path with a non-ASCII letter, a tab or a quote ("a/caf\\303\\251.md"): alice's own proposal
    on docs/public/café.md was in changed_files and proposal_ids and missing from the diff she got.
    The hidden payroll edit stays out."""
    c = make_client(with_roots(TOML, tmp_path))
    ws, ids = _world(c, tmp_path)
    agent = ws.as_agent("alice")
    mine = ok(agent.propose_kb_edit("pub", f"public/{name}", content="# New\n\nA fed page, fresh text.\n"))
    out = ok(agent.open_kb_pull_request("pub"))
    assert mine["proposal_id"] in out["proposal_ids"], out
    assert "A fed page, fresh text." in out["diff"], out["diff"]
    assert out["diff"].count("diff --git ") == 3, out["diff"]  # a.md, c.md and the new file
    assert "bob 250" not in out["diff"] and SECRET not in json.dumps(out), out


@pytest.mark.parametrize("how", ["library", "mcp"])
def test_an_agents_cite_check_reads_no_file_its_source_stopped_feeding(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None, how: str
) -> None:
    """alice cited docs/public/a.md; then the documents root's gitkb.yml excluded it (its text
    turned private) and the sync retired its chunks. cite_check of her old chunk id answered
    ``stale`` with ``head_text``: the file's lines at the branch head now, the private text in
    them. Now ``passage: not_fed`` and no text; the operator still reads it."""
    c = make_client(with_roots(TOML, tmp_path))
    ws, _ids = _world(c, tmp_path)
    hit = ok(ws.as_agent("alice").search_index("failover runbook", mode="keyword"))["Results"][0]
    chunk = hit.get("chunk_id") or hit["id"]
    work = tmp_path / "work"
    (work / "docs" / "gitkb.yml").write_text("exclude:\n  - public/a.md\n")
    (work / "docs" / "public" / "a.md").write_text(f"# Public\n\nNow private: {SECRET} bob 999.\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "a.md is private now")
    git(work, "push", "-q", str(tmp_path / "remote.git"), "main")
    ok(ws.source_sync("pub"))
    out = (
        ok(ws.as_agent("alice").cite_check(chunk))
        if how == "library"
        else _mcp_as_alice(ws, "cite_check", {"chunk_id": chunk})
    )
    assert out["status"] == "stale" and out["passage"] == "not_fed", out
    assert SECRET not in json.dumps(out) and "head_text" not in out, out
    mine = ok(ws.cite_check(chunk))
    assert SECRET in mine["head_text"], mine


@pytest.mark.parametrize("how", ["library", "mcp", "http"])
def test_an_agent_is_told_a_push_failed_not_gits_message(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None, how: str
) -> None:
    """The operator approved the review; the remote's pre-receive hook refused the push, so the
    review stays approved with push_error git's stderr (the remote's path on the server, the
    hook's words). alice's open_kb_pull_request of the same branch state returned it in Message:
    'approved but not pushed (git push ... /tmp/.../remote.git ...)'. Now a fixed sentence."""
    c = make_client(with_roots(TOML, tmp_path))
    ws, _ids = _world(c, tmp_path)
    review = ok(ws.open_kb_pull_request("pub"))
    hook = tmp_path / "remote.git" / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\necho 'rejected: {SECRET} policy' >&2\nexit 1\n")
    hook.chmod(0o755)
    refused = ws.approve_review(review["review_id"])
    assert refused["Success"] is False, refused
    assert ok(ws.show_review(review["review_id"]))["push_error"], "the push should have failed"
    out = _as_alice(c, ws, how, "open_kb_pull_request", {"source_id_or_index": "pub"})
    assert out["existing"] and out["review_id"] == review["review_id"], out
    text = json.dumps(out)
    assert SECRET not in text and "remote.git" not in text and str(tmp_path) not in text, out
    assert "approved but not pushed" in out["Message"], out


def test_an_agents_cite_check_reads_no_file_the_head_stopped_feeding_before_the_sync(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None
) -> None:
    """As above, but the exclude is on the branch head and not synced yet: cite_check fetches the
    head and read the excluded file's lines there (the selection was read at the synced commit)."""
    c = make_client(with_roots(TOML, tmp_path))
    ws, _ids = _world(c, tmp_path)
    hit = ok(ws.as_agent("alice").search_index("failover runbook", mode="keyword"))["Results"][0]
    chunk = hit.get("chunk_id") or hit["id"]
    ok(ws.source_sync("pub"))  # _world's upstream edit of a.md: the cited chunk is retired
    work = tmp_path / "work"
    (work / "docs" / "gitkb.yml").write_text("exclude:\n  - public/a.md\n")
    (work / "docs" / "public" / "a.md").write_text(f"# Public\n\nNow private: {SECRET} bob 999.\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "a.md is private now")
    git(work, "push", "-q", str(tmp_path / "remote.git"), "main")
    out = ok(ws.as_agent("alice").cite_check(chunk))  # no sync yet
    assert out["status"] == "stale" and out["passage"] == "not_fed", out
    assert SECRET not in json.dumps(out), out


@pytest.mark.parametrize("how", ["library", "http"])
def test_an_agents_refresh_shows_no_lines_of_a_file_the_new_head_stopped_feeding(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None, how: str
) -> None:
    """alice's staged edit of docs/public/a.md; the branch head then excludes a.md (the documents
    root's gitkb.yml) and puts private text in it. Her refresh_proposals (before any sync) made the
    edit again on that head, conflicting, and answered the file's current lines there: the
    private text. The file is not fed at the head the refresh builds on: not shown."""
    c = make_client(with_roots(TOML, tmp_path))
    ws, ids = _world(c, tmp_path)
    work = tmp_path / "work"
    (work / "docs" / "gitkb.yml").write_text("exclude:\n  - public/a.md\n")
    (work / "docs" / "public" / "a.md").write_text(f"# Public\n\nNow private: {MARK} bob 999.\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "a.md is private now")
    git(work, "push", "-q", str(tmp_path / "remote.git"), "main")
    out = _as_alice(c, ws, how, "refresh_proposals", {"source": "pub"})
    assert MARK not in json.dumps(out) and SECRET not in json.dumps(out), out
    assert ids["operator_public"] in out["applied"], out  # c.md is still fed and shown


def test_an_agents_proposal_reads_no_file_the_fetched_head_stopped_feeding(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None
) -> None:
    """Nothing staged; the head fetched excludes docs/public/a.md (pushed, not synced yet) and holds
    private text in it. alice's search/replace edit of a.md built on that head: the answer's diff
    showed the lines around the edit, and the occurrence count read the file. Refused now."""
    c = make_client(with_roots(TOML, tmp_path))
    ws, ids = _world(c, tmp_path)
    for pid in ids.values():
        ok(ws.discard_proposal(pid))
    ok(ws.source_sync("pub"))
    work = tmp_path / "work"
    (work / "docs" / "gitkb.yml").write_text("exclude:\n  - public/a.md\n")
    (work / "docs" / "public" / "a.md").write_text(f"# Public\n\nNow private: {MARK} bob 999.\nend\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "a.md is private now")
    git(work, "push", "-q", str(tmp_path / "remote.git"), "main")
    ws.as_agent("alice").refresh_proposals("pub")  # fetches the head: the staging base now
    r = ws.as_agent("alice").propose_kb_edit("pub", "public/a.md", search="end", replace="fin")
    assert MARK not in json.dumps(r), r
    assert r.get("Success") is not True and error_code(r) == "invalid_argument", r
