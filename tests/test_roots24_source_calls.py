"""roots24: every remote call that fetches from, pushes to or writes a local-path source's url is
held to ``[server] allowed_roots``, not only a sync (roots23).

A source added from the library follows a bare repository outside the allowed roots. Before,
over HTTP (an operator token) and MCP over HTTP (an agent bound to its KB, and the operator's
session): staging a proposal fetched from that path, refreshing fetched, asking for a review
fetched, showing or denying a review settled an in-flight push (a fetch), approving pushed there,
``cite_check`` fetched the branch head, the local forge's close wrote it. Now each is refused
(``forbidden``, ``details.refused_roots`` by source; an agent is told the source's name only, no
path of the server) before anything is fetched, pushed or written: the repository's refs, the
managed clone's refs, the proposals, reviews, change requests and the audit log are unchanged.
The same source inside the roots works end to end; the CLI and the library are unchanged.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gitkb.mcp import build_server
from helpers import SOURCE, Upstream, catalog, ok, with_roots
from test_caps21_mcp import _data, _session, mcp_over_http

ROOT = "r" * 24
BOT = "b" * 24
AGENT = "bot"
TOKENS = (
    f'[[server.tokens]]\nname = "root"\ntoken = "{ROOT}"\nscopes = ["admin"]\n'
    f'[[server.tokens]]\nname = "bot"\ntoken = "{BOT}"\nscopes = ["propose"]\nagent = "{AGENT}"\n'
)
PAGE = "docs/runbooks/rotate-api-keys.md"
NEW = "---\ntitle: Quasar\n---\n# Quasar\n\nThe quasar rotation procedure.\n"


@pytest.fixture
def allowed(tmp_path: Path) -> Path:
    path = tmp_path / "allowed"
    path.mkdir()
    return path


def _refs(repo: Path) -> str:
    return subprocess.run(
        ["git", "for-each-ref", "--format=%(refname) %(objectname)"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _state(ws: Any, remote: Path) -> tuple[Any, ...]:
    """What a call could have written: the repository's refs and the managed clone's, the rows."""
    home = ws.home
    clones = sorted((ws.settings.repos_path).iterdir())
    return (
        _refs(remote),
        [_refs(c) for c in clones],
        catalog.rows(home, "SELECT * FROM proposals ORDER BY id"),
        catalog.rows(home, "SELECT * FROM reviews ORDER BY id"),
        catalog.rows(home, "SELECT * FROM change_requests ORDER BY number"),
        catalog.rows(home, "SELECT COUNT(*) FROM audit"),
    )


def _world(ws: Any, url: Path) -> dict[str, Any]:
    """The operator (library): the source synced, a KB with the agent bound to propose; a change
    request open on the local forge (#n, an approved review) and a pending review of a staged edit."""
    ok(ws.source_add(SOURCE, str(url)))
    ok(ws.source_sync(SOURCE))
    ok(ws.kb_create("kb", [SOURCE]))
    ok(ws.agent_assign(AGENT, ["kb"], mode="propose"))
    ok(ws.propose_kb_edit(SOURCE, PAGE, search="every 90 days", replace="every 60 days"))
    first = ok(ws.open_kb_pull_request(SOURCE, title="Rotation"))
    number = ok(ws.approve_review(first["review_id"]))["number"]
    staged = ok(ws.propose_kb_edit(SOURCE, "docs/runbooks/zz-quasar.md", content=NEW))["proposal_id"]
    pending = ok(ws.open_kb_pull_request(SOURCE, title="Quasar"))["review_id"]
    hits = ok(ws.document_index("SEARCH", query="rotation", mode="keyword", index_name=SOURCE))["Results"]
    chunk = hits[0]["id"]
    return {"number": number, "proposal": staged, "review": pending, "chunk": chunk}


def _http_calls(w: dict[str, Any]) -> list[tuple[str, str, dict[str, Any] | None]]:
    return [
        (
            "POST",
            "/proposals",
            {"source_id_or_index": SOURCE, "relative_path": "docs/runbooks/x.md", "content": "# X\n"},
        ),
        ("POST", "/proposals/delete", {"source_id_or_index": SOURCE, "relative_path": PAGE}),
        (
            "POST",
            "/proposals/rename",
            {"source_id_or_index": SOURCE, "relative_path": PAGE, "new_relative_path": "docs/runbooks/y.md"},
        ),
        ("POST", "/proposals/refresh", {"source": SOURCE}),
        ("POST", "/pulls", {"source_id_or_index": SOURCE, "title": "More"}),
        ("GET", f"/reviews/{w['review']}", None),
        ("GET", f"/reviews?source={SOURCE}", None),
        ("POST", f"/reviews/{w['review']}/approve", {}),
        ("POST", f"/reviews/{w['review']}/deny", {"reason": "no"}),
        ("GET", f"/proposals/{w['proposal']}", None),
        ("DELETE", f"/proposals/{w['proposal']}", None),
        ("POST", f"/pulls/{SOURCE}/{w['number']}/close", None),
        ("POST", f"/pulls/{SOURCE}/{w['number']}/merge", None),
    ]


def _mcp_calls(w: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (
            "propose_kb_edit",
            {"source_id_or_index": SOURCE, "relative_path": "docs/runbooks/x.md", "content": "# X\n"},
        ),
        ("propose_kb_delete", {"source_id_or_index": SOURCE, "relative_path": PAGE}),
        ("refresh_proposals", {"source": SOURCE}),
        ("open_kb_pull_request", {"source_id_or_index": SOURCE, "title": "More"}),
        ("cite_check", {"chunk_id": w["chunk"]}),
    ]


def _error(r: Any) -> dict[str, Any]:
    body = r.json()
    return body["error"] if isinstance(body.get("error"), dict) else body  # type: ignore[no-any-return]


def _client(make_client: Any, remote: Path, *roots: Path) -> tuple[Any, Any, dict[str, Any]]:
    c = make_client(with_roots(TOKENS, *roots))
    ws = c.app.state.gitkb.workspace
    return c, ws, _world(ws, remote)


def test_http_calls_on_a_local_path_source_outside_the_roots_are_refused(
    make_client: Any, upstream: Upstream, allowed: Path
) -> None:
    c, ws, w = _client(make_client, upstream.remote, allowed)
    before = _state(ws, upstream.remote)
    auth = {"Authorization": f"Bearer {ROOT}"}
    wrong = []  # every call checked, so a failure names each one not refused
    for method, url, body in _http_calls(w):
        r = c.request(method, url, json=body, headers=auth)
        err = _error(r) if r.status_code == 403 else {}
        if not (
            err.get("code") == "forbidden"
            and err["details"]["refused_roots"] == {SOURCE: [str(upstream.remote)]}
            and err["details"]["allowed_roots"] == [str(allowed)]
            and "allowed_roots" in " ".join(err["next_steps"])
        ):
            wrong.append((method, url, r.status_code, r.text[:200]))
    assert wrong == []
    assert _state(ws, upstream.remote) == before  # nothing fetched, pushed or written
    assert ok(ws.show_review(w["review"]))["review_state"] == "pending"


def test_listing_reviews_over_http_settles_no_in_flight_push_of_a_source_outside_the_roots(
    make_client: Any, upstream: Upstream, allowed: Path
) -> None:
    """A push a dead process left in flight is settled by the next listing (a fetch from the
    source's url): over HTTP not for a source outside the roots (left for the operator)."""
    c, ws, w = _client(make_client, upstream.remote, allowed)
    head = _refs(upstream.remote).split()[1]
    catalog.execute(ws.home, "UPDATE reviews SET pushing_sha = ? WHERE id = ?", head, w["review"])
    before = _state(ws, upstream.remote)
    r = c.get("/reviews", headers={"Authorization": f"Bearer {ROOT}"})
    assert r.status_code == 200, r.text
    assert w["review"] in r.text
    assert _state(ws, upstream.remote) == before  # nothing fetched, the review still in flight
    ok(ws.list_reviews())  # the operator's rights: settled
    [(pushing,)] = catalog.rows(ws.home, "SELECT pushing_sha FROM reviews WHERE id = ?", w["review"])
    assert pushing is None


@pytest.mark.parametrize("agent_id", [AGENT, None])
def test_mcp_over_http_calls_on_a_local_path_source_outside_the_roots_are_refused(
    ws: Any, upstream: Upstream, allowed: Path, agent_id: str | None
) -> None:
    """The agent bound to its KB and the operator's session; the agent is told no path."""
    w = _world(ws, upstream.remote)
    before = _state(ws, upstream.remote)
    with mcp_over_http(ws, agent_id, with_roots(TOKENS, allowed)) as url:
        _, got = _session(url, _mcp_calls(w))
    wrong = []
    for (name, _args), result in zip(_mcp_calls(w), got, strict=True):
        text = result.content[0].text
        data = _data(result) if result.is_error else {}
        if agent_id is None:
            refused = data.get("refused_roots") == {SOURCE: [str(upstream.remote)]} and data.get(
                "allowed_roots"
            ) == [str(allowed)]
        else:  # the source's name only: no path of the server, not even the allowed roots
            refused = (
                data.get("refused_roots") == {SOURCE: []}
                and "allowed_roots" not in data
                and str(upstream.remote.parent) not in text
                and str(allowed) not in text
            )
        if not (data.get("code") == "forbidden" and refused):
            wrong.append((name, text[:200]))
    assert wrong == []
    assert _state(ws, upstream.remote) == before


def test_the_same_source_inside_the_roots_works_end_to_end(
    make_client: Any, upstream: Upstream, allowed: Path
) -> None:
    inside = allowed / "handbook.git"
    shutil.copytree(upstream.remote, inside)
    c, ws, w = _client(make_client, inside, allowed)
    auth = {"Authorization": f"Bearer {ROOT}"}
    bot = {"Authorization": f"Bearer {BOT}"}
    head = _refs(inside)
    assert c.get(f"/reviews/{w['review']}", headers=auth).status_code == 200
    r = c.post(f"/reviews/{w['review']}/approve", json={}, headers=auth)
    assert r.status_code == 200, r.text
    assert _refs(inside) != head  # pushed
    r = c.post(
        "/proposals",
        json={"source_id_or_index": SOURCE, "relative_path": "docs/runbooks/x.md", "content": "# X\n"},
        headers=bot,
    )
    assert r.status_code == 200, r.text
    assert c.post("/proposals/refresh", json={"source": SOURCE}, headers=auth).status_code == 200
    r = c.post("/pulls", json={"source_id_or_index": SOURCE, "title": "X"}, headers=bot)
    assert r.status_code == 200, r.text
    r = c.post(f"/pulls/{SOURCE}/{w['number']}/close", headers=auth)
    assert r.status_code == 200, r.text
    with mcp_over_http(ws, AGENT, with_roots(TOKENS, allowed)) as url:
        _, (cited,) = _session(url, [("cite_check", {"chunk_id": w["chunk"]})])
    assert not cited.is_error and _data(cited)["status"] in ("current", "moved"), cited.content[0].text


def test_a_network_url_source_is_not_judged_as_a_path(
    make_client: Any, upstream: Upstream, allowed: Path
) -> None:
    """https:// (rewritten by git config to the bare repository: no network) is never refused here."""
    import os  # HOME: the test's git config

    network = "https://git.example.invalid/handbook.git"
    (Path(os.environ["HOME"]) / ".gitconfig").write_text(
        f'[url "{upstream.remote}"]\n\tinsteadOf = {network}\n'
    )
    c = make_client(with_roots(TOKENS, allowed))
    ws = c.app.state.gitkb.workspace
    ok(ws.source_add(SOURCE, network, forge={"kind": "local"}))
    ok(ws.source_sync(SOURCE))
    ok(ws.kb_create("kb", [SOURCE]))
    ok(ws.agent_assign(AGENT, ["kb"], mode="propose"))
    r = c.post(
        "/proposals",
        json={"source_id_or_index": SOURCE, "relative_path": "docs/runbooks/x.md", "content": "# X\n"},
        headers={"Authorization": f"Bearer {BOT}"},
    )
    assert r.status_code == 200, r.text
    r = c.post(
        "/pulls",
        json={"source_id_or_index": SOURCE, "title": "X"},
        headers={"Authorization": f"Bearer {BOT}"},
    )
    assert r.status_code == 200, r.text
    r = c.get(f"/reviews/{r.json()['review_id']}", headers={"Authorization": f"Bearer {ROOT}"})
    assert r.status_code == 200, r.text


def test_cli_library_and_stdio_mcp_keep_the_operators_rights(
    home: Path, upstream: Upstream, allowed: Path, make_ws: Any
) -> None:
    from gitkb.cli.main import cli  # the CLI entry, as `gitkb` runs it

    home.mkdir(parents=True, exist_ok=True)
    (home / "gitkb.toml").write_text(with_roots(TOKENS, allowed))
    ws = make_ws()
    w = _world(ws, upstream.remote)  # the library: proposed, asked, approved (pushed), all outside the roots
    env = {
        "GITKB_HOME": str(home),
        "GITKB_EMBEDDING_PROVIDER": "hashing",
        "GITKB_EMBEDDING_MODEL": "hashing-384",
    }
    head = _refs(upstream.remote)
    res = CliRunner().invoke(cli, ["review", "approve", w["review"]], env=env, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert _refs(upstream.remote) != head  # pushed
    agent = ws.as_agent(AGENT)
    ok(agent.propose_kb_edit(SOURCE, "docs/runbooks/x.md", content="# X\n"))
    ok(agent.cite_check(w["chunk"]))
    _, (stdio,) = _session(build_server(ws, AGENT), [("refresh_proposals", {"source": SOURCE})])
    assert not stdio.is_error, stdio.content[0].text
    res = CliRunner().invoke(
        cli, ["forge", "close", SOURCE, str(w["number"])], env=env, catch_exceptions=False
    )
    assert res.exit_code == 0, res.output
    assert json.dumps(ok(ws.list_pull_requests(SOURCE)))


def test_a_repair_over_http_clones_no_source_outside_the_roots(
    make_client: Any, upstream: Upstream, allowed: Path
) -> None:
    """``verify --repair`` re-clones a missing clone from the source's url: over HTTP not a source
    outside the roots (left, said so); the operator's repair (the library) clones it."""
    c, ws, _w = _client(make_client, upstream.remote, allowed)
    [clone] = list(ws.settings.repos_path.iterdir())
    shutil.rmtree(clone)
    r = c.post("/verify", json={"repair": True}, headers={"Authorization": f"Bearer {ROOT}"})
    assert r.status_code == 200, r.text
    body = r.json()
    if body.get("status") == "working":  # promoted: the job's own answer
        from gitkb.services.runtime import jobs  # the job queue: wait for the repair

        body = jobs.wait(ws.ctx, body["job_id"], timeout=60).result or {}
    assert not clone.exists(), body  # nothing cloned from outside the roots
    assert any(line.startswith(f"left source {SOURCE}") for line in body["repaired"]), body
    assert str(upstream.remote) not in json.dumps(body)
    ok(ws.verify(repair=True))
    assert clone.exists()


def test_an_agent_learns_nothing_of_a_source_outside_its_knowledge_bases(
    ws: Any, upstream: Upstream, allowed: Path
) -> None:
    """A second source outside the roots, in no KB of the agent: its scope's answer (unknown and
    out of scope alike), never the roots' refusal naming the source."""
    _world(ws, upstream.remote)
    ok(ws.source_add("other", str(upstream.remote), index="other-index"))
    calls: list[tuple[str, dict[str, Any]]] = [
        ("propose_kb_edit", {"source_id_or_index": "other", "relative_path": PAGE, "content": "# X\n"}),
        ("refresh_proposals", {"source": "other"}),
        ("open_kb_pull_request", {"source_id_or_index": "nosuch"}),
    ]
    with mcp_over_http(ws, AGENT, with_roots(TOKENS, allowed)) as url:
        _, got = _session(url, calls)
    for result in got:
        data = _data(result)
        assert result.is_error and "refused_roots" not in data, data
        assert "knowledge bases of agent" in data["Error"], data


def test_the_web_page_does_not_show_a_review_of_a_source_outside_the_roots(
    make_client: Any, upstream: Upstream, allowed: Path
) -> None:
    """The page is an interface others reach (the loopback operator's too): the review page says
    why (403, no traceback), nothing fetched. (Its approve form runs the same held approve_review.)"""
    c = make_client(with_roots("", allowed))
    ws = c.app.state.gitkb.workspace
    w = _world(ws, upstream.remote)
    before = _state(ws, upstream.remote)
    page = c.get(f"/ui/reviews/{w['review']}")
    assert page.status_code == 403 and "allowed_roots" in page.text, page.text[:500]
    assert "Traceback" not in page.text
    listed = c.get("/ui/reviews")  # the pending list still shows, and says what it cannot
    assert listed.status_code == 200 and 'id="held-reviews"' in listed.text, listed.text[:500]
    assert str(upstream.remote) not in listed.text
    assert _state(ws, upstream.remote) == before


def test_every_reaches_source_names_a_parameter_the_rule_resolves() -> None:
    """The table's ``reaches_source`` is one of the action's parameters, of a kind reach resolves
    (a source or index, a review, a proposal, a chunk); and the actions the rule must hold have it."""
    from gitkb.core import action_table  # the table under test

    marked = {a.name: a.reaches_source for a in action_table.ACTIONS.values() if a.reaches_source}
    for name, param in marked.items():
        assert param in action_table.ACTIONS[name].fields, (name, param)
        assert param in ("source", "source_id_or_index", "review_id", "proposal_id", "chunk_id"), name
    must = {
        "propose_kb_edit", "propose_kb_delete", "propose_kb_rename", "refresh_proposals",
        "open_kb_pull_request", "show_review", "approve_review", "deny_review", "discard_proposal",
        "cite_check", "forge_close", "forge_merge", "source_sync", "source_rollback", "list_reviews",
        "show_proposal", "checkout",
    }  # fmt: skip
    assert must <= set(marked), must - set(marked)
