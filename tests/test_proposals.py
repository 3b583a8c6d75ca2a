"""propose_kb_edit / _delete / _rename on a real managed clone: staging, stacking, and every bad input."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitkb import Workspace
from helpers import SOURCE, Upstream, git

BRANCH = "gitkb/proposals/handbook"
ROTATE = "runbooks/rotate-api-keys.md"


def managed_repo(ws: Any) -> Path:
    [repo] = list((ws.home / "repos").iterdir())
    return repo


def branch_head(ws: Any) -> str | None:
    out = git(managed_repo(ws), "rev-parse", "--verify", "-q", f"refs/heads/{BRANCH}", check=False).strip()
    return out or None


def staged(ws: Any) -> list[dict[str, Any]]:
    out = ws.list_proposals(SOURCE)
    assert out["Success"], out
    return list(out["Proposals"])


def staged_text(ws: Any, path: str) -> str:
    return git(managed_repo(ws), "show", f"{BRANCH}:{path}")


# -- staging -----------------------------------------------------------------------------


def test_search_replace_commits_on_the_proposal_branch(source_ws: Any, upstream: Upstream) -> None:
    remote_before = upstream.remote_sha("main")
    out = source_ws.propose_kb_edit(
        SOURCE,
        ROTATE,
        search="every 90 days",
        replace="every 60 days",
        note="Security asked for shorter key lifetimes.",
    )
    assert out["Success"], out
    assert out["proposal_id"].startswith("prop_") and out["branch"] == BRANCH
    assert "-API keys for the payments gateway expire every 90 days." in out["diff"]
    assert "+API keys for the payments gateway expire every 60 days." in out["diff"]
    assert out["changed_files"] == [{"path": "docs/runbooks/rotate-api-keys.md", "status": "M"}]
    repo = managed_repo(source_ws)
    assert branch_head(source_ws) == out["commit"]
    assert git(repo, "rev-parse", f"{out['commit']}^") == git(upstream.work, "rev-parse", "HEAD")
    body = git(repo, "log", "-1", "--format=%B", out["commit"])
    assert body.startswith("gitkb: edit docs/runbooks/rotate-api-keys.md") and "shorter key lifetimes" in body
    # staging touches neither the index nor the remote
    assert upstream.remote_sha("main") == remote_before and upstream.remote_sha(BRANCH) is None
    found = source_ws.document_index("SEARCH", query="every 90 days", index_name=SOURCE)["Results"]
    assert found and "90 days" in found[0]["snippet"]


def test_proposals_stack_and_search_sees_the_staged_text(source_ws: Any) -> None:
    first = source_ws.propose_kb_edit(SOURCE, ROTATE, search="every 90 days", replace="every 60 days")
    second = source_ws.propose_kb_edit(SOURCE, ROTATE, search="every 60 days", replace="every 30 days")
    assert first["Success"] and second["Success"], second
    assert second["base"] == first["commit"]
    assert "expire every 30 days" in staged_text(source_ws, "docs/" + ROTATE)
    assert [p["proposal_id"] for p in staged(source_ws)] == [first["proposal_id"], second["proposal_id"]]


def test_content_add_delete_rename_and_sidecar(source_ws: Any) -> None:
    added = source_ws.propose_kb_edit(
        SOURCE, "faq/billing.md", content="---\ntitle: Billing\n---\n# Billing\n"
    )
    assert added["Success"] and added["op"] == "add"
    assert added["changed_files"] == [{"path": "docs/faq/billing.md", "status": "A"}]
    deleted = source_ws.propose_kb_delete(SOURCE, "policies/data-retention.md", note="superseded")
    assert deleted["changed_files"] == [{"path": "docs/policies/data-retention.md", "status": "D"}]
    renamed = source_ws.propose_kb_rename(SOURCE, "runbooks/database-failover.md", "runbooks/db-failover.md")
    assert renamed["changed_files"] == [
        {
            "path": "docs/runbooks/db-failover.md",
            "status": "R",
            "old_path": "docs/runbooks/database-failover.md",
        }
    ]
    sidecar = source_ws.propose_kb_edit(
        SOURCE, "gitkb.yml", search="strategy: auto", replace="strategy: sentence"
    )
    assert sidecar["Success"] and sidecar["path"] == "docs/gitkb.yml"
    full_path = source_ws.propose_kb_edit(
        SOURCE, "docs/faq/billing.md", search="# Billing", replace="# Invoices"
    )
    assert full_path["Success"] and full_path["path"] == "docs/faq/billing.md"  # the root may be spelled out
    assert len(staged(source_ws)) == 5


def test_list_show_discard(source_ws: Any) -> None:
    a = source_ws.propose_kb_edit(SOURCE, ROTATE, search="every 90 days", replace="every 60 days")
    b = source_ws.propose_kb_edit(SOURCE, "faq/one.md", content="# one\n")
    c = source_ws.propose_kb_edit(SOURCE, ROTATE, search="Tuesday", replace="Wednesday")
    shown = source_ws.show_proposal(b["proposal_id"])
    assert shown["Success"] and shown["op"] == "add" and "+# one" in shown["diff"]
    out = source_ws.discard_proposal(b["proposal_id"])
    assert out["Success"] and out["kept"] == [c["proposal_id"]]
    assert [p["proposal_id"] for p in staged(source_ws)] == [a["proposal_id"], c["proposal_id"]]
    text = staged_text(source_ws, "docs/" + ROTATE)
    assert "every 60 days" in text and "Wednesday change window" in text
    assert "faq/one.md" not in git(managed_repo(source_ws), "ls-tree", "-r", "--name-only", BRANCH)
    again = source_ws.discard_proposal(b["proposal_id"])
    assert again["code"] == "conflict"
    discarded = source_ws.list_proposals(SOURCE, "discarded")["Proposals"]
    assert [p["proposal_id"] for p in discarded] == [b["proposal_id"]]


def test_discarding_a_proposal_others_build_on_is_refused(source_ws: Any) -> None:
    a = source_ws.propose_kb_edit(SOURCE, ROTATE, search="every 90 days", replace="every 60 days")
    source_ws.propose_kb_edit(SOURCE, ROTATE, search="every 60 days", replace="every 30 days")
    head = branch_head(source_ws)
    out = source_ws.discard_proposal(a["proposal_id"])
    assert out["code"] == "conflict" and "build on it" in out["Error"]
    assert branch_head(source_ws) == head and len(staged(source_ws)) == 2


def test_staging_restarts_from_the_latest_base_when_nothing_is_staged(
    source_ws: Any, upstream: Upstream
) -> None:
    a = source_ws.propose_kb_edit(SOURCE, ROTATE, search="every 90 days", replace="every 60 days")
    source_ws.discard_proposal(a["proposal_id"])
    upstream.write("docs/runbooks/new.md", "---\ntitle: N\n---\n# N\n")
    new_base = upstream.commit_push("upstream moved")
    source_ws.source_sync(SOURCE)
    b = source_ws.propose_kb_edit(SOURCE, ROTATE, search="Tuesday", replace="Thursday")
    assert b["Success"] and b["base"] == new_base


# -- bad input: a clear error, and the branch exactly as it was ---------------------------


def _refused(ws: Any, call: Any, code: str, words: str) -> dict[str, Any]:
    head, count = branch_head(ws), len(staged(ws))
    out = call()
    assert out["Success"] is False, out
    assert out["code"] == code, out
    assert words.lower() in out["Error"].lower(), out["Error"]
    assert branch_head(ws) == head and len(staged(ws)) == count
    return dict(out)


@pytest.mark.parametrize(
    ("kwargs", "code", "words"),
    [
        ({"relative_path": "runbooks/x.exe", "content": "x"}, "invalid_argument", "unsupported file type"),
        ({"relative_path": "runbooks/x", "content": "x"}, "invalid_argument", "unsupported file type"),
        ({"relative_path": "../README.md", "content": "x"}, "invalid_argument", "climbs out"),
        ({"relative_path": "/etc/passwd.md", "content": "x"}, "invalid_argument", "absolute"),
        ({"relative_path": "guide.md", "content": "x"}, "invalid_argument", "first-level folder"),
        ({"relative_path": "runbooks/../../README.md", "content": "x"}, "invalid_argument", "climbs out"),
        ({"relative_path": "runbooks\\..\\..\\x.md", "content": "x"}, "invalid_argument", "climbs out"),
        ({"relative_path": ".git/config.md", "content": "x"}, "invalid_argument", ".git"),
        ({"relative_path": "runbooks/%2e%2e/x.md", "content": "x"}, "invalid_argument", "percent-encoded"),
        ({"relative_path": "DOCS/runbooks/x.md", "content": "x"}, "invalid_argument", "only in case"),
        ({"relative_path": ROTATE, "content": "x", "search": "y"}, "invalid_argument", "both were given"),
        ({"relative_path": ROTATE}, "invalid_argument", "neither was given"),
        (
            {"relative_path": ROTATE, "content": "x", "replace": "y"},
            "invalid_argument",
            "replace goes with search",
        ),
        ({"relative_path": ROTATE, "search": "the", "replace": "a"}, "invalid_argument", "times in"),
        (
            {"relative_path": ROTATE, "search": "not in the file", "replace": "a"},
            "invalid_argument",
            "0 times",
        ),
        ({"relative_path": "runbooks/none.md", "search": "a", "replace": "b"}, "not_found", "does not exist"),
        ({"relative_path": ROTATE, "content": "bin\x00ary"}, "invalid_argument", "binary"),
        (
            {"relative_path": "gitkb.yml", "content": "index: handbook\nbogus: 1\n"},
            "validation",
            "docs/gitkb.yml",
        ),
        ({"relative_path": "kb-manifest.json", "content": "{"}, "validation", "invalid JSON"),
        ({"relative_path": "faq/data.json", "content": "{nope"}, "invalid_argument", "valid JSON"),
        (
            {"relative_path": ROTATE, "search": "every 90 days", "replace": "every 90 days"},
            "invalid_argument",
            "as it is",
        ),
    ],
)
def test_bad_edits_are_refused_and_change_nothing(
    source_ws: Any, kwargs: dict[str, Any], code: str, words: str
) -> None:
    source_ws.propose_kb_edit(SOURCE, "faq/seed.md", content="# seed\n")  # so the branch exists
    _refused(source_ws, lambda: source_ws.propose_kb_edit(SOURCE, **kwargs), code, words)


def test_ambiguous_search_reports_the_count(source_ws: Any) -> None:
    out = _refused(
        source_ws,
        lambda: source_ws.propose_kb_edit(SOURCE, ROTATE, search="key", replace="k"),
        "invalid_argument",
        "exactly once",
    )
    assert out["occurrences"] > 1 and f"occurs {out['occurrences']} times" in out["Error"]


def test_unknown_source_and_bad_types(source_ws: Any) -> None:
    _refused(
        source_ws, lambda: source_ws.propose_kb_edit("nope", ROTATE, content="x"), "not_found", "no source"
    )
    _refused(
        source_ws,
        lambda: source_ws.propose_kb_edit(SOURCE, ROTATE, content=b"x"),
        "invalid_argument",
        "string",
    )
    _refused(
        source_ws, lambda: source_ws.propose_kb_edit(SOURCE, 42, content="x"), "invalid_argument", "string"
    )


def test_bad_deletes_and_renames(source_ws: Any) -> None:
    _refused(
        source_ws,
        lambda: source_ws.propose_kb_delete(SOURCE, "runbooks/none.md"),
        "not_found",
        "nothing to delete",
    )
    _refused(
        source_ws,
        lambda: source_ws.propose_kb_delete(SOURCE, "../README.md"),
        "invalid_argument",
        "climbs out",
    )
    _refused(
        source_ws,
        lambda: source_ws.propose_kb_rename(SOURCE, ROTATE, "README.md"),
        "invalid_argument",
        "first-level folder",
    )
    _refused(
        source_ws,
        lambda: source_ws.propose_kb_rename(SOURCE, ROTATE, "policies/password-policy.md"),
        "conflict",
        "target exists",
    )
    _refused(
        source_ws, lambda: source_ws.propose_kb_rename(SOURCE, ROTATE, ROTATE), "invalid_argument", "same"
    )
    _refused(
        source_ws,
        lambda: source_ws.propose_kb_rename(SOURCE, ROTATE, "runbooks/x.exe"),
        "invalid_argument",
        "unsupported",
    )


def test_oversize_content_is_refused(tmp_path: Path, upstream: Upstream) -> None:
    home = tmp_path / "small"
    home.mkdir()
    (home / "gitkb.toml").write_text("[proposals]\nmax_bytes = 200\n")
    with Workspace(home, embedding_provider="hashing", embedding_model="hashing-384") as w:
        assert w.source_add(SOURCE, str(upstream.remote))["Success"]
        out = _refused(
            w,
            lambda: w.propose_kb_edit(SOURCE, "faq/big.md", content="x" * 201),
            "invalid_argument",
            "limit is 200",
        )
        assert out["size"] == 201
        assert w.propose_kb_edit(SOURCE, "faq/small.md", content="x" * 200)["Success"]


def test_symlinks_are_never_followed(ws: Any, upstream: Upstream) -> None:
    os.symlink("../..", upstream.work / "docs" / "escape")
    os.symlink("/etc", upstream.work / "docs" / "runbooks" / "etc")
    upstream.commit_push("symlinks")
    assert ws.source_add(SOURCE, str(upstream.remote))["Success"]
    assert ws.source_sync(SOURCE)["Success"]
    for path in ("escape/README.md", "escape/docs/x.md", "runbooks/etc/passwd.md", "escape"):
        out = ws.propose_kb_edit(SOURCE, path, content="pwned")
        assert out["Success"] is False and out["code"] == "invalid_argument", (path, out)
    assert branch_head(ws) is None


# -- hostile paths (hypothesis) --------------------------------------------------------------

SEGMENTS = st.sampled_from(
    [
        "..",
        ".",
        "",
        "docs",
        "DOCS",
        "runbooks",
        "policies",
        ".git",
        ".GIT",
        "git~1",
        "x.md",
        "a.txt",
        "b.json",
        "%2e%2e",
        "%2f",
        "..%2f",
        "．．",
        "\\",
        "..\\..",
        "c:",
        "x.md.",
        " x.md",
        "x.md ",
        "\x00",
        "\u202e",
        "ｘ.md",
        "kb-manifest.json",
        "gitkb.yml",
        "escape",
        "README.md",
    ]
)
HOSTILE = st.lists(SEGMENTS, min_size=1, max_size=6).map("/".join) | st.text(max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=HOSTILE)
def test_hostile_paths_never_escape_the_documents_root(source_ws: Any, upstream: Upstream, path: str) -> None:
    head, count = branch_head(source_ws), len(staged(source_ws))
    out = source_ws.propose_kb_edit(
        SOURCE, path, content='{"ok": true}\n' if path.endswith(".json") else "ok\n"
    )
    if not out["Success"]:
        assert out["code"] in ("invalid_argument", "validation", "conflict"), out
        assert branch_head(source_ws) == head and len(staged(source_ws)) == count
        return
    written = out["path"]
    parts = written.split("/")
    assert parts[0] == "docs" and len(parts) >= 2
    assert len(parts) >= 3 or parts[1] in ("kb-manifest.json", "gitkb.yml")
    assert all(p not in ("", ".", "..") and p.casefold().rstrip(". ") not in (".git", "git~1") for p in parts)
    assert not any(ch in written for ch in "\\:\x00")
    changed = git(managed_repo(source_ws), "diff", "-z", "--name-only", out["base"], out["commit"])
    assert changed.split("\0") == [written, ""] or changed.split("\0") == [written]
    source_ws.discard_proposal(out["proposal_id"])
