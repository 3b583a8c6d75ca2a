"""Git sources against real repositories: add, sync (incremental, renames, force-push), sidecars, guard."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

from gitkb import Workspace
from helpers import SOURCE, Upstream, git


def docs(ws: Any, index: str = SOURCE) -> dict[str, dict[str, Any]]:
    out = ws.document_index("LIST_DOCUMENTS", index_name=index, count=50)
    assert out["Success"], out
    return {d["path"]: d for d in out["Documents"]}


def chunk_ids(ws: Any, path: str, index: str = SOURCE) -> list[str]:
    got = ws.document_index("GET_DOCUMENT", index_name=index, filepath=path)
    assert got["Success"], got
    return [c["id"] for c in got["Chunks"]]


def hits(ws: Any, query: str, index: str = SOURCE) -> list[dict[str, Any]]:
    """Keyword hits: whether the words are indexed (a synced page has vectors too, and the semantic
    side of a hybrid search always finds a nearest chunk)."""
    out = ws.document_index("SEARCH", query=query, index_name=index, top_n=10, mode="keyword")
    assert out["Success"], out
    return list(out["Results"])


def change_log_head(ws: Any) -> int:
    return int(ws.ctx.catalog.conn.execute("SELECT COALESCE(MAX(seq), 0) FROM changes").fetchone()[0])


# -- add and first sync ----------------------------------------------------------------


def test_add_and_first_sync(ws: Any, upstream: Upstream) -> None:
    added = ws.source_add(SOURCE, str(upstream.remote))
    assert added["Success"], added
    assert added["source"]["indexes"] == ["handbook"]  # named by the sidecars
    assert added["indexes_created"] == ["handbook"]
    synced = ws.source_sync(SOURCE)
    assert synced["Success"] and synced["plan"] == "full" and synced["status"] == "synced"
    head = git(upstream.work, "rev-parse", "HEAD")
    assert synced["commit"] == head
    got = docs(ws)
    assert sorted(got) == [
        "docs/onboarding/first-week.md",
        "docs/policies/data-retention.md",
        "docs/policies/password-policy.md",
        "docs/runbooks/database-failover.md",
        "docs/runbooks/incident-response.md",
        "docs/runbooks/rotate-api-keys.md",
    ]  # relative to the repository root; sidecars are configuration, not documents
    d = got["docs/runbooks/rotate-api-keys.md"]
    assert d["origin"] == "git"
    assert d["source_uri"] == f"git+{upstream.remote}@{head}:docs/runbooks/rotate-api-keys.md"
    assert d["metadata"]["gitkb_source"]["branch"] == "main"
    assert synced["chunks_added"] == sum(len(chunk_ids(ws, p)) for p in got)
    hit = hits(ws, "payments gateway key rotation")[0]
    assert hit["source_uri"].startswith(f"git+{upstream.remote}@{head}:")
    assert hit["location"]["line_start"] >= 1


def test_sync_of_the_same_commit_does_nothing(source_ws: Any) -> None:
    before = change_log_head(source_ws)
    again = source_ws.source_sync(SOURCE)
    assert again["Success"] and again["status"] == "unchanged" and again["plan"] == "none"
    assert change_log_head(source_ws) == before


def test_source_list_and_unknown_source(source_ws: Any, upstream: Upstream) -> None:
    listed = source_ws.source_list()
    assert listed["Success"] and listed["total_count"] == 1
    s = listed["Sources"][0]
    assert s["name"] == SOURCE and s["branch"] == "main" and s["documents_root"] == "docs"
    assert s["synced_commit"] == git(upstream.work, "rev-parse", "HEAD")
    assert s["proposal_branch"] == "gitkb/proposals/handbook"
    missing = source_ws.source_sync("nope")
    assert missing["Success"] is False and missing["code"] == "not_found" and "handbook" in missing["Error"]


def test_duplicate_name_and_bad_input_register_nothing(
    source_ws: Any, upstream: Upstream, tmp_path: Path
) -> None:
    dup = source_ws.source_add(SOURCE, str(upstream.remote))
    assert dup["code"] == "conflict"
    for kwargs, code in [
        ({"name": "bad name", "url": str(upstream.remote)}, "invalid_argument"),
        ({"name": "x", "url": "https://user:s3cr3t-token@example.com/r.git"}, "invalid_argument"),
        ({"name": "x", "url": str(upstream.remote), "branch": "nope"}, "not_found"),
        ({"name": "x", "url": str(tmp_path / "missing.git")}, None),
        ({"name": "x", "url": str(upstream.remote), "include": [""]}, "invalid_argument"),
        (
            {"name": "x", "url": str(upstream.remote), "forge": {"kind": "github", "repo": "o/r"}},
            "invalid_argument",
        ),
        (
            {"name": "x", "url": str(upstream.remote), "forge": {"kind": "gitea", "repo": "o/r"}},
            "invalid_argument",
        ),
        ({"name": "x", "url": str(upstream.remote), "forge": {"kind": "gitlab"}}, "invalid_argument"),
        ({"name": "x", "url": str(upstream.remote), "auth": {"password": "p"}}, "invalid_argument"),
    ]:
        out = source_ws.source_add(**kwargs)
        assert out["Success"] is False, kwargs
        assert code is None or out["code"] == code, out
        assert "s3cr3t-token" not in json.dumps(out)
    assert source_ws.source_list()["total_count"] == 1
    assert len(list((source_ws.home / "repos").iterdir())) == 1  # failed clones leave nothing


# -- incremental sync ------------------------------------------------------------------


def test_one_changed_file_reindexes_only_its_changed_chunks(source_ws: Any, upstream: Upstream) -> None:
    path = "docs/runbooks/rotate-api-keys.md"
    other = "docs/policies/password-policy.md"
    ids_before = {p: chunk_ids(source_ws, p) for p in (path, other)}
    file_id = docs(source_ws)[path]["file_id"]
    text = (upstream.work / path).read_text()
    upstream.write(path, text.replace("every 90 days", "every 45 days"))
    commit = upstream.commit_push("shorter key lifetime")
    out = source_ws.source_sync(SOURCE)
    assert out["plan"] == "incremental" and out["modified"] == [path] and out["added"] == []
    assert out["counts"]["deleted"] == 0 and out["counts"]["renamed"] == 0
    ids_after = chunk_ids(source_ws, path)
    assert out["chunks_added"] == len(set(ids_after) - set(ids_before[path]))
    assert chunk_ids(source_ws, other) == ids_before[other]
    assert docs(source_ws)[path]["file_id"] == file_id
    found = hits(source_ws, "45 days")
    assert found and found[0]["filepath"] == path and f"@{commit}:" in found[0]["source_uri"]
    assert all("90 days" not in h["snippet"] for h in hits(source_ws, "90 days"))


def test_rename_keeps_document_and_chunk_ids(source_ws: Any, upstream: Upstream) -> None:
    old, new = "docs/runbooks/database-failover.md", "docs/runbooks/db-failover.md"
    ids_before = chunk_ids(source_ws, old)
    file_id = docs(source_ws)[old]["file_id"]
    git(upstream.work, "mv", old, new)
    commit = upstream.commit_push("shorter name")
    out = source_ws.source_sync(SOURCE)
    assert out["renamed"] == [{"old_path": old, "path": new}] and out["chunks_added"] == 0
    got = docs(source_ws)
    assert old not in got and got[new]["file_id"] == file_id
    assert got[new]["source_uri"].endswith(f"@{commit}:{new}")
    assert chunk_ids(source_ws, new) == ids_before
    assert [h["filepath"] for h in hits(source_ws, "promote replica failover")][:1] == [new]


def test_delete_and_add(source_ws: Any, upstream: Upstream) -> None:
    git(upstream.work, "rm", "-q", "docs/policies/data-retention.md")
    upstream.write(
        "docs/policies/travel.md", "---\ntitle: Travel\n---\n# Travel\n\nBook trains before planes.\n"
    )
    upstream.commit_push("travel policy replaces retention")
    out = source_ws.source_sync(SOURCE)
    assert out["deleted"] == ["docs/policies/data-retention.md"] and out["added"] == [
        "docs/policies/travel.md"
    ]
    assert hits(source_ws, "trains planes")[0]["filepath"] == "docs/policies/travel.md"
    assert "docs/policies/data-retention.md" not in docs(source_ws)


def test_force_pushed_history_falls_back_to_a_full_comparison(source_ws: Any, upstream: Upstream) -> None:
    path = "docs/onboarding/first-week.md"
    ids_before = chunk_ids(source_ws, "docs/policies/password-policy.md")
    git(upstream.work, "checkout", "-q", "--orphan", "rewritten")
    upstream.write(
        path, "---\ntitle: First week\n---\n# First week\n\nMeet your onboarding buddy on Monday.\n"
    )
    git(upstream.work, "add", "-A")
    git(upstream.work, "commit", "-q", "-m", "history rewritten")
    git(upstream.work, "push", "-q", "--force", "origin", "rewritten:main")
    out = source_ws.source_sync(SOURCE)
    assert out["Success"] and out["plan"] == "full"
    assert out["modified"] == [path]
    assert chunk_ids(source_ws, "docs/policies/password-policy.md") == ids_before
    assert hits(source_ws, "onboarding buddy Monday")[0]["filepath"] == path


def test_sync_to_an_explicit_commit(source_ws: Any, upstream: Upstream) -> None:
    first = git(upstream.work, "rev-parse", "HEAD")
    upstream.write("docs/runbooks/new.md", "---\ntitle: New\n---\n# New\n\nbrand new runbook about zebras\n")
    upstream.commit_push("new runbook")
    assert source_ws.source_sync(SOURCE)["added"] == ["docs/runbooks/new.md"]
    # a sync never moves an index back: an older commit of the branch is a no-op reported as stale
    stale = source_ws.source_sync(SOURCE, commit=first)
    assert stale["Success"] and stale["status"] == "stale" and "rollback" in stale["Message"]
    assert hits(source_ws, "zebras")
    # moving back is the explicit admin action
    back = source_ws.source_rollback(SOURCE, first)
    assert back["commit"] == first and back["deleted"] == ["docs/runbooks/new.md"] and back["rolled_back"]
    assert not hits(source_ws, "zebras")


# -- sidecars ----------------------------------------------------------------------------


def test_invalid_sidecar_fails_the_sync_with_the_schema_message(source_ws: Any, upstream: Upstream) -> None:
    synced = source_ws.source_list()["Sources"][0]["synced_commit"]
    before = change_log_head(source_ws)
    upstream.write("docs/gitkb.yml", "index: handbook\nchunking:\n  strategy: paragraphs\n")
    upstream.write("docs/runbooks/rotate-api-keys.md", "# changed\n")
    upstream.commit_push("bad sidecar")
    out = source_ws.source_sync(SOURCE)
    assert out["Success"] is False and out["code"] == "validation"
    assert (
        "docs/gitkb.yml" in out["Error"]
        and "chunking/strategy" in out["Error"]
        and "paragraphs" in out["Error"]
    )
    assert out["path"] == "docs/gitkb.yml"
    assert source_ws.source_list()["Sources"][0]["synced_commit"] == synced
    assert change_log_head(source_ws) == before


def test_invalid_json_manifest_names_the_file(source_ws: Any, upstream: Upstream) -> None:
    upstream.write("docs/kb-manifest.json", '{"title": "x",}')
    upstream.commit_push("broken json")
    out = source_ws.source_sync(SOURCE)
    assert (
        out["code"] == "validation"
        and "docs/kb-manifest.json" in out["Error"]
        and "invalid JSON" in out["Error"]
    )


def test_sidecar_globs_and_flags_that_win(ws: Any, upstream: Upstream) -> None:
    upstream.write("docs/drafts/wip.md", "---\ntitle: WIP\n---\n# WIP\n\nunfinished draft\n")
    upstream.write("docs/runbooks/notes.txt", "plain notes\n")
    upstream.commit_push("drafts and notes")
    assert ws.source_add(SOURCE, str(upstream.remote))["Success"]
    out = ws.source_sync(SOURCE)
    got = docs(ws)
    assert "docs/drafts/wip.md" not in got  # the manifest's exclude
    assert "docs/runbooks/notes.txt" not in got  # the manifest's include is **/*.md
    assert out["counts"]["added"] == 6
    flagged = ws.source_add("all-txt", str(upstream.remote), index="plain", include=["**/*.txt"])
    assert flagged["Success"] and flagged["source"]["indexes"] == ["plain"]
    ws.source_sync("all-txt")
    assert list(docs(ws, "plain")) == ["docs/runbooks/notes.txt"]


def test_sidecar_change_reloads_with_the_new_rules(source_ws: Any, upstream: Upstream) -> None:
    upstream.write(
        "docs/kb-manifest.json",
        json.dumps(
            {
                "title": "h",
                "target_index": "handbook",
                "include": ["**/*.md"],
                "exclude": ["drafts/**", "onboarding/**"],
            }
        ),
    )
    upstream.commit_push("hide onboarding")
    out = source_ws.source_sync(SOURCE)
    assert out["plan"] == "full" and out["deleted"] == ["docs/onboarding/first-week.md"]
    assert out["chunks_added"] == 0


def test_required_frontmatter_skips_with_a_reason(source_ws: Any, upstream: Upstream) -> None:
    upstream.write("docs/runbooks/untitled.md", "# No front matter\n\ntext\n")
    upstream.commit_push("untitled")
    out = source_ws.source_sync(SOURCE)
    assert [s["category"] for s in out["skipped"]] == ["missing_frontmatter"]
    assert "docs/runbooks/untitled.md" not in docs(source_ws)


def test_shipped_schemas_validate_the_example_sidecars() -> None:
    import jsonschema
    import yaml

    from gitkb.services.changes.sources.sidecars import schema

    root = Path(__file__).resolve().parents[1] / "example_kb_repo" / "docs"
    jsonschema.validate(json.loads((root / "kb-manifest.json").read_text()), schema("kb-manifest.json"))
    jsonschema.validate(yaml.safe_load((root / "gitkb.yml").read_text()), schema("gitkb.yml"))


# -- the guard -----------------------------------------------------------------------------


def test_direct_writes_to_a_source_fed_index_are_refused(source_ws: Any, tmp_path: Path) -> None:
    before = change_log_head(source_ws)
    f = tmp_path / "note.md"
    f.write_text("# note\n")
    attempts = [
        ("ADD_DOCUMENTS", {"filepath": str(f)}),
        ("ADD_TEXT", {"text": "sneaky"}),
        ("DELETE_DOCUMENT", {"filepath": "docs/runbooks/rotate-api-keys.md"}),
        ("RENAME_DOCUMENT", {"filepath": "docs/runbooks/rotate-api-keys.md", "new_filename": "x.md"}),
    ]
    for action, params in attempts:
        out = source_ws.document_index(action, index_name=SOURCE, **params)
        assert out["Success"] is False and out["code"] == "managed_repo_guard", (action, out)
        assert out["managed_document_repo"] is True
        steps = " ".join(out["next_steps"])
        assert "propose_kb_edit" in steps and "open_kb_pull_request" in steps
    assert change_log_head(source_ws) == before
    assert "docs/runbooks/rotate-api-keys.md" in docs(source_ws)
    # other indexes stay writable
    assert source_ws.document_index("CREATE_INDEX", index_name="scratch")["Success"]
    assert source_ws.document_index("ADD_TEXT", index_name="scratch", text="fine here")["Success"]


def test_managed_clone_refuses_hand_made_ref_updates(source_ws: Any) -> None:
    [repo] = list((source_ws.home / "repos").iterdir())
    head = git(repo, "rev-parse", "refs/remotes/origin/main")
    out = git(repo, "update-ref", "refs/heads/hack", head, check=False)
    assert "managed by gitkb" in out and "propose_kb_edit" in out
    assert git(repo, "rev-parse", "--verify", "-q", "refs/heads/hack", check=False).strip() == ""


# -- credentials by reference, removal -----------------------------------------------------


def test_a_caller_cannot_name_where_a_secret_is(ws: Any, upstream: Upstream, tmp_path: Path) -> None:
    """Secrets are named by the admin in [[credentials]]; references from a caller are refused
    (the credential tests themselves are in tests/test_secrets_hosts.py)."""
    secrets = tmp_path / "secrets.toml"
    secrets.write_text('git_token = "glpat-AAAAbbbbCCCCdddd1234"\n')
    secrets.chmod(stat.S_IRUSR | stat.S_IWUSR)
    for auth in ({"token_env": "KB_GIT_TOKEN"}, {"secrets_file": str(secrets)}, {"ssh_key": str(secrets)}):
        out = ws.source_add(SOURCE, str(upstream.remote), auth=auth)
        assert out["Success"] is False and out["code"] == "invalid_argument", out
        assert "[[credentials]]" in out["Error"] and "glpat-AAAA" not in json.dumps(out)
    assert ws.source_list()["total_count"] == 0


def test_remove_source_drops_its_documents_and_clone(source_ws: Any) -> None:
    out = source_ws.source_remove(SOURCE)
    assert out["Success"] and out["documents_removed"] == 6
    assert docs(source_ws) == {}
    assert list((source_ws.home / "repos").iterdir()) == []
    assert source_ws.document_index("ADD_TEXT", index_name=SOURCE, text="writable again")["Success"]


def test_two_indexes_fed_by_one_source(ws: Any, upstream: Upstream) -> None:
    out = ws.source_add(SOURCE, str(upstream.remote), index=["a", "b"])
    assert out["Success"] and sorted(out["indexes_created"]) == ["a", "b"]
    ws.source_sync(SOURCE)
    assert sorted(docs(ws, "a")) == sorted(docs(ws, "b")) and len(docs(ws, "a")) == 6
    assert {d["file_id"] for d in docs(ws, "a").values()}.isdisjoint(
        {d["file_id"] for d in docs(ws, "b").values()}
    )


def test_state_survives_reopening(tmp_path: Path, upstream: Upstream) -> None:
    home = tmp_path / "ws2"
    with Workspace(home, embedding_provider="hashing", embedding_model="hashing-384") as w:
        assert w.source_add(SOURCE, str(upstream.remote))["Success"]
        assert w.source_sync(SOURCE)["Success"]
    with Workspace(home, embedding_provider="hashing", embedding_model="hashing-384") as w:
        assert w.source_sync(SOURCE)["status"] == "unchanged"
        assert hits(w, "incident commander")


# -- cite check ------------------------------------------------------------------------------


def test_cite_check_follows_the_text_to_the_branch_head(source_ws: Any, upstream: Upstream) -> None:
    cite = hits(source_ws, "payments gateway expire")[0]
    first = source_ws.cite_check(cite["id"])
    assert first["Success"] and first["status"] == "current" and first["present_at_commit"] is True
    assert first["commit"] in cite["source_uri"] and first["branch"] == "main"
    path = "docs/runbooks/rotate-api-keys.md"
    text = (upstream.work / path).read_text()
    upstream.write(path, text.replace("# Rotate API keys\n", "# Rotate API keys\n\nRead this first.\n", 1))
    upstream.commit_push("preface")  # not synced: the check reads git, not the index
    changed_lines = source_ws.cite_check(cite["id"])
    if changed_lines["status"] != "changed":  # one chunk for the whole file: the preface changes its text
        assert changed_lines["status"] == "moved"
    upstream.write(path, "---\ntitle: Rotate API keys\n---\n# Rotate\n\nAsk the platform team.\n")
    upstream.commit_push("rewrite")
    assert source_ws.cite_check(cite["id"])["status"] == "changed"
    git(upstream.work, "rm", "-q", path)
    upstream.commit_push("gone")
    gone = source_ws.cite_check(cite["id"])
    assert (
        gone["status"] == "deleted" and gone["present_at_commit"] is True and gone["current_at_head"] is False
    )
    assert source_ws.cite_check("kchk_" + "0" * 32)["code"] == "not_found"
    assert source_ws.cite_check("nope")["code"] == "invalid_argument"


def test_cite_check_reports_moved_lines(ws: Any, upstream: Upstream) -> None:
    path = "docs/runbooks/long.md"
    sections = "\n\n".join(
        f"## Part {i}\n\n" + f"Sentence {i} about widgets and gadgets. " * 40 for i in range(12)
    )
    upstream.write(path, "---\ntitle: Long\n---\n# Long\n\n" + sections + "\n")
    upstream.commit_push("long page")
    assert ws.source_add(SOURCE, str(upstream.remote))["Success"] and ws.source_sync(SOURCE)["Success"]
    got = ws.document_index("GET_DOCUMENT", index_name=SOURCE, filepath=path)
    last = got["Chunks"][-1]
    assert len(got["Chunks"]) > 1
    text = (upstream.work / path).read_text()
    upstream.write(path, text.replace("# Long\n", "# Long\n\nA new first paragraph.\n", 1))
    upstream.commit_push("preface")
    out = ws.cite_check(last["id"])
    assert out["status"] == "moved", out
    assert out["head_line_start"] == last["location"]["line_start"] + 2


def test_a_sync_wakes_the_embedder_so_its_chunks_get_vectors(source_ws: Any, upstream: Upstream) -> None:
    """A sync writes chunks like an ingest does: the background embedder gives them vectors without
    another write or a restart waking it (sync18: a sync never woke it, nor bound the index)."""
    from helpers import wait_until  # only this test waits for the embedder

    st = source_ws.get_index_status()
    assert st["documents_indexed"] > 0
    wait_until(
        lambda: source_ws.get_index_status()["dirty_embeddings"] == 0,
        timeout=20,
        interval=0.1,
        what="the synced chunks' vectors",
    )
    upstream.write("docs/runbooks/zz-vectors.md", "---\ntitle: Vectors\n---\n# Vectors\n\nThe comet page.\n")
    upstream.commit_push("one more page")
    assert source_ws.source_sync(SOURCE)["Success"]
    wait_until(
        lambda: source_ws.get_index_status()["dirty_embeddings"] == 0,
        timeout=20,
        interval=0.1,
        what="the new page's vectors",
    )
