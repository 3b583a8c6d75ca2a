"""Nothing one entry does stops the rest: bad names, deep trees, unreadable and special
entries on disk and in git trees are skipped entries; ADD_TEXT's size cap."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitkb.core.dir_walker import MAX_DEPTH
from gitkb.core.models import SkippedFile, WalkEntry
from gitkb.core.walking import walk
from helpers import SOURCE, Upstream, fails, git, ok

MakeDeep = Callable[[Path, int], None]
BAD = os.fsdecode(b"\xff\xfe-bytes.md")  # not UTF-8: a lone-surrogate str under surrogateescape


def touch(path: Path, text: str = "# t\n\nSome words.\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def split(results: list[WalkEntry | SkippedFile]) -> tuple[list[str], dict[str, SkippedFile]]:
    entries = [r.rel_path for r in results if isinstance(r, WalkEntry)]
    skipped = {r.path: r for r in results if isinstance(r, SkippedFile)}
    return entries, skipped


def docs(ws: Any, index: str) -> list[str]:
    out = ok(ws.document_index("LIST_DOCUMENTS", index_name=index, count=50, show_files_only=True))
    return sorted(d["path"] for d in out["Documents"])


@pytest.fixture
def make_deep() -> Iterator[Callable[[Path, int], None]]:
    """``make(root, n)``: ``root/d/d/.../d``, ``n`` folders deep (os.makedirs recurses, and so
    does pytest's clean-up of tmp_path, so the folders are removed here, bottom up)."""
    made: list[tuple[Path, int]] = []

    def make(root: Path, depth: int) -> None:
        root.mkdir(parents=True, exist_ok=True)
        current = root
        for _ in range(depth):
            current = current / "d"
            current.mkdir()
        made.append((root, depth))

    yield make
    for root, depth in made:
        for level in range(depth, 0, -1):
            shutil.rmtree(root.joinpath(*["d"] * level), ignore_errors=True)


def storable(path: str) -> None:
    path.encode("utf-8")  # would raise on a lone surrogate, as SQLite does


# -- walking -----------------------------------------------------------------------------


def test_a_name_that_is_not_utf8_is_skipped_and_the_rest_is_walked(tmp_path: Path) -> None:
    touch(tmp_path / "d" / "ok.md")
    touch(tmp_path / "d" / BAD)
    touch(tmp_path / "d" / os.fsdecode(b"bad-\xc3(dir") / "inner.md")
    entries, skipped = split(list(walk(tmp_path / "d")))
    assert entries == ["d/ok.md"]
    assert set(skipped) == {"d/\\xff\\xfe-bytes.md", "d/bad-\\xc3(dir/"}
    assert {s.category for s in skipped.values()} == {"bad_name"}
    assert "not valid UTF-8" in skipped["d/\\xff\\xfe-bytes.md"].detail
    for s in skipped.values():
        storable(s.path)


def test_a_name_with_control_characters_is_skipped(tmp_path: Path) -> None:
    touch(tmp_path / "d" / "ok.md")
    touch(tmp_path / "d" / "evil\x1b[2J.md")
    touch(tmp_path / "d" / "new\nline.md")
    entries, skipped = split(list(walk(tmp_path / "d")))
    assert entries == ["d/ok.md"]
    assert set(skipped) == {"d/evil\\x1b[2J.md", "d/new\\x0aline.md"}
    assert all(s.category == "bad_name" for s in skipped.values())


def test_a_tree_deeper_than_the_cap_is_walked_to_the_cap(tmp_path: Path, make_deep: MakeDeep) -> None:
    root = tmp_path / "deep"
    make_deep(root, 1100)  # deeper than Python's recursion limit
    touch(root / "top.md")
    touch(root / "d" / "d" / "two.md")
    entries, skipped = split(list(walk(root)))
    assert entries == ["deep/d/d/two.md", "deep/top.md"]
    [(path, skip)] = skipped.items()
    assert skip.category == "too_deep"
    assert path == "deep/" + "d/" * (MAX_DEPTH + 1)
    assert str(MAX_DEPTH) in skip.detail


def test_unreadable_folder_and_special_file_are_skipped(tmp_path: Path) -> None:
    touch(tmp_path / "d" / "ok.md")
    touch(tmp_path / "d" / "locked" / "secret.md")
    os.mkfifo(tmp_path / "d" / "pipe.md")
    (tmp_path / "d" / "locked").chmod(0)
    try:
        if os.access(tmp_path / "d" / "locked", os.R_OK):
            pytest.skip("running as root: permissions are not enforced")
        entries, skipped = split(list(walk(tmp_path / "d")))
    finally:
        (tmp_path / "d" / "locked").chmod(0o700)
    assert entries == ["d/ok.md"]
    assert skipped["d/locked/"].category == "unreadable"
    assert "Permission denied" in skipped["d/locked/"].detail
    assert skipped["d/pipe.md"].category == "special_file"


def test_a_folder_that_cannot_be_listed_is_skipped_and_the_rest_is_walked(tmp_path: Path) -> None:
    """A path longer than PATH_MAX cannot be listed (ENAMETOOLONG), even by root."""
    root = tmp_path / "long"
    touch(root / "ok.md")
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(20):  # 20 x 250 bytes > 4096
            os.mkdir("x" * 250, dir_fd=fd)
            nxt = os.open("x" * 250, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)
    entries, skipped = split(list(walk(root)))
    assert entries == ["long/ok.md"]
    [(path, skip)] = skipped.items()
    assert skip.category == "unreadable" and "too long" in skip.detail
    assert path.startswith("long/" + "x" * 250 + "/") and path.endswith("/")


def test_an_entry_that_vanishes_mid_walk_is_skipped(tmp_path: Path) -> None:
    for name in ("a.md", "b.md", "c.md"):
        touch(tmp_path / "d" / "x" / name)
    touch(tmp_path / "d" / "y" / "z.md")
    it = walk(tmp_path / "d")
    first = next(it)  # x/ is listed now; remove one of its files and the other folder
    assert isinstance(first, WalkEntry) and first.rel_path == "d/x/a.md"
    (tmp_path / "d" / "x" / "b.md").unlink()
    entries, skipped = split([first, *it])
    assert entries == ["d/x/a.md", "d/x/c.md", "d/y/z.md"]
    assert skipped["d/x/b.md"].category == "unreadable"
    assert "vanished" in skipped["d/x/b.md"].detail


def test_add_documents_of_a_tree_with_every_bad_entry_indexes_the_rest(
    ws: Any, tmp_path: Path, make_deep: MakeDeep
) -> None:
    root = tmp_path / "kb"
    touch(root / "good" / "one.md", "# One\n\nThe first good page.\n")
    touch(root / BAD, "# Bad\n")
    touch(root / "ctl\x07.md")
    make_deep(root / "deep", 1100)
    os.mkfifo(root / "fifo.md")
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    out = ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(root)))
    assert out["added"] == ["kb/good/one.md"]
    cats = {s["path"]: s["category"] for s in out["skipped"]}
    assert cats == {
        "kb/\\xff\\xfe-bytes.md": "bad_name",
        "kb/ctl\\x07.md": "bad_name",
        "kb/deep/" + "d/" * MAX_DEPTH: "too_deep",  # kb/deep is the first level
        "kb/fifo.md": "special_file",
    }
    assert docs(ws, "kb") == ["kb/good/one.md"]
    listed = {s["path"]: s["category"] for s in ws.get_index_status()["skipped_files"]}
    assert listed["kb/\\xff\\xfe-bytes.md"] == "bad_name"
    assert listed["kb/deep/" + "d/" * MAX_DEPTH] == "too_deep"


def test_an_explicitly_named_file_in_an_excluded_folder_is_refused(
    ws: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    touch(tmp_path / "docs" / "node_modules" / "a.md")
    touch(tmp_path / "docs" / "build" / "b.md")
    touch(tmp_path / "docs" / "kept.md")
    monkeypatch.chdir(tmp_path)
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    for named in (
        "docs/node_modules/a.md",
        str(tmp_path / "docs" / "node_modules" / "a.md"),
        "docs/build/b.md",
    ):
        out = fails(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=named), "invalid_argument")
        assert "excluded" in out["Error"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # not below the current directory: judged by the stored path
    target = str(tmp_path / "docs" / "node_modules" / "a.md")
    out = fails(
        ws.document_index(
            "ADD_DOCUMENTS", index_name="kb", filepath=target, base_path=str(tmp_path / "docs")
        ),
        "invalid_argument",
    )
    assert "node_modules" in out["Error"]
    assert docs(ws, "kb") == []
    monkeypatch.chdir(tmp_path)
    ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath="docs/kept.md"))
    assert docs(ws, "kb") == ["kept.md"]


# -- git tree entries ----------------------------------------------------------------------


def commit_bad_names(upstream: Upstream) -> None:
    """Commit, with git itself, a file and a folder whose names are not UTF-8, and one with ESC."""
    work = os.fsencode(upstream.work)
    for rel in (
        b"docs/runbooks/\xff\xfe-bytes.md",
        b"docs/bad-\xc3(dir/inner.md",
        b"docs/runbooks/esc\x1b[2J.md",
    ):
        full = os.path.join(work, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as handle:
            handle.write(b"---\ntitle: Planted\n---\n# Planted\n\nA planted page about zebra crossings.\n")
    upstream.write(
        "docs/runbooks/fresh.md", "---\ntitle: Fresh\n---\n# Fresh\n\nA fresh page about quokkas.\n"
    )
    upstream.commit_push("names that are not UTF-8")


BAD_GIT = {
    "docs/runbooks/\\xff\\xfe-bytes.md": "bad_name",
    "docs/bad-\\xc3(dir/": "bad_name",
    "docs/runbooks/esc\\x1b[2J.md": "bad_name",
}


def test_git_tree_map_skips_bad_names(upstream: Upstream) -> None:
    from gitkb.stores.repos import ManagedRepo

    commit_bad_names(upstream)
    repo = ManagedRepo.open(upstream.remote)
    tree = repo.tree_map(git(upstream.work, "rev-parse", "HEAD"), "docs")
    assert "docs/runbooks/fresh.md" in tree
    assert {s.path: s.category for s in tree.skipped} == BAD_GIT
    for path in tree:
        storable(path)


def test_full_sync_skips_bad_names_and_indexes_the_rest(ws: Any, upstream: Upstream) -> None:
    commit_bad_names(upstream)
    ok(ws.source_add(SOURCE, str(upstream.remote)))
    synced = ok(ws.source_sync(SOURCE))
    assert synced["plan"] == "full"
    assert {s["path"]: s["category"] for s in synced["skipped"]} == BAD_GIT
    assert "docs/runbooks/fresh.md" in docs(ws, SOURCE)
    assert len(docs(ws, SOURCE)) == 7  # the six pages of the example handbook and the fresh one
    listed = {s["path"]: s["category"] for s in ws.get_index_status()["skipped_files"]}
    assert BAD_GIT.items() <= listed.items()


def test_incremental_sync_skips_bad_names_and_indexes_the_rest(source_ws: Any, upstream: Upstream) -> None:
    commit_bad_names(upstream)
    synced = ok(source_ws.source_sync(SOURCE))
    assert synced["plan"] == "incremental"
    assert synced["added"] == ["docs/runbooks/fresh.md"]
    assert {s["path"]: s["category"] for s in synced["skipped"]} == BAD_GIT
    assert "docs/runbooks/fresh.md" in docs(source_ws, SOURCE)
    # and the next commit still syncs
    upstream.write("docs/runbooks/later.md", "---\ntitle: Later\n---\nLater words.\n")
    git(upstream.work, "rm", "-q", "-r", "docs/runbooks/esc\x1b[2J.md")
    upstream.commit_push("later")
    again = ok(source_ws.source_sync(SOURCE))
    assert again["added"] == ["docs/runbooks/later.md"]
    listed = {s["path"] for s in source_ws.get_index_status()["skipped_files"]}
    assert "docs/runbooks/esc\\x1b[2J.md" not in listed  # gone from the tree, gone from status
    assert "docs/runbooks/\\xff\\xfe-bytes.md" in listed


# -- ADD_TEXT's size cap and the job table ---------------------------------------------------


def job_params_bytes(ws: Any) -> int:
    return int(ws.ctx.catalog.conn.execute("SELECT COALESCE(SUM(LENGTH(params)), 0) FROM jobs").fetchone()[0])


def test_add_text_over_the_default_cap_is_too_large_and_writes_nothing(ws: Any) -> None:
    from gitkb.core.walking import DEFAULT_MAX_BYTES

    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    out = fails(
        ws.document_index(
            "ADD_TEXT", index_name="kb", text="x" * (DEFAULT_MAX_BYTES + 1), filepath="big.txt"
        ),
        "too_large",
    )
    assert str(DEFAULT_MAX_BYTES) in out["Error"] and out["limit"] == DEFAULT_MAX_BYTES
    assert docs(ws, "kb") == []
    assert job_params_bytes(ws) < 10_000  # the refused text is not kept in the job table either


def test_add_text_cap_counts_utf8_bytes(tmp_path: Path) -> None:
    from gitkb import Workspace

    with Workspace(
        tmp_path / "w", embedding_provider="hashing", embedding_model="hashing-384", max_file_bytes=1000
    ) as w:
        ok(w.document_index("CREATE_INDEX", index_name="kb"))
        ok(w.document_index("ADD_TEXT", index_name="kb", text="x" * 1000, filepath="exact.txt"))
        fails(
            w.document_index("ADD_TEXT", index_name="kb", text="é" * 501, filepath="two-byte.txt"),
            "too_large",
        )
        assert docs(w, "kb") == ["exact.txt"]


def test_add_text_too_large_over_cli_and_http(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from fastapi.testclient import TestClient

    from gitkb.cli.main import cli
    from gitkb.core.config import load_settings
    from gitkb.core.walking import DEFAULT_MAX_BYTES
    from gitkb.http import create_app
    from helpers import error_code

    home = tmp_path / "w"
    home.mkdir()
    (home / "gitkb.toml").write_text('[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n')
    runner = CliRunner()
    assert runner.invoke(cli, ["--home", str(home), "index", "create", "kb"]).exit_code == 0
    big = "y" * (DEFAULT_MAX_BYTES + 1)
    r = runner.invoke(
        cli, ["--home", str(home), "add-text", "kb", "-", "--filepath", "a.txt", "--no-wait"], input=big
    )
    assert r.exit_code == 1 and f"over the limit of {DEFAULT_MAX_BYTES} bytes" in r.output, r.output[:300]
    settings = load_settings(home, max_file_bytes=100)
    with TestClient(create_app(settings), client=("127.0.0.1", 50000)) as c:
        resp = c.post("/indexes/kb/texts", json={"text": "z" * 101, "filepath": "b.txt"})
        assert resp.status_code == 413 and error_code(resp) == "too_large", resp.text
        listed = c.get("/indexes/kb/documents", params={"show_files_only": True}).json()
        assert listed["Documents"] == []


def test_the_job_table_keeps_no_copy_of_submitted_texts(ws: Any) -> None:
    from gitkb.stores.catalog import jobs as job_rows

    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    text = "A long paragraph about rotating keys. " * 50_000  # ~1.9 MB
    for i in range(5):
        ok(ws.document_index("ADD_TEXT", index_name="kb", text=f"{i} {text}", filepath=f"t{i}.txt"))
    out = ws.promoted(
        "document_index", action="ADD_TEXT", index_name="kb", text="promoted " + text, filepath="p.txt"
    )
    ok(ws.wait_job(out["job_id"], timeout=60))
    assert len(docs(ws, "kb")) == 6
    assert job_params_bytes(ws) < 10_000  # before: 6 copies, ~11 MB
    assert job_rows.staged_bytes(ws.ctx.catalog.conn) == 0


def test_a_queued_add_text_survives_a_restart_and_its_staged_text_goes_when_done(home: Path) -> None:
    from gitkb import Workspace
    from gitkb.stores.catalog import jobs as job_rows

    with Workspace(home, embedding_provider="hashing", embedding_model="hashing-384") as w:
        ok(w.document_index("CREATE_INDEX", index_name="kb"))
        with (
            w.ctx.catalog.write() as conn
        ):  # what a SIGKILLed writer leaves behind, staged as submit stages it
            job = job_rows.insert(
                conn,
                "action",
                {"action": "ADD_TEXT", "params": {"index_name": "kb", "filepath": "kept.txt"}},
                state="running",
                runner="deadhost:1:1",
                staged={"params.text": "the staged text about pelicans"},
            )
    with Workspace(home, embedding_provider="hashing", embedding_model="hashing-384") as w2:
        done = ok(w2.wait_job(job.id, timeout=30))
        assert done["status"] == "completed", done
        assert ok(w2.document_index("SEARCH", query="pelicans", index_name="kb"))["Results"]
        assert job_rows.staged_bytes(w2.ctx.catalog.conn) == 0
        assert "pelicans" not in str(job_rows.get(w2.ctx.catalog.conn, job.id))


# -- property: no tree of random byte names fails an ingest as a whole -------------------------


_NAME_BYTES = (
    st.binary(min_size=1, max_size=24)
    .map(lambda b: b.replace(b"/", b"_").replace(b"\x00", b"_"))
    .filter(lambda b: b not in (b".", b".."))
)
_TREE = st.recursive(
    st.binary(max_size=200),  # a file's content
    lambda children: st.dictionaries(_NAME_BYTES, children, min_size=1, max_size=4),
    max_leaves=12,
).filter(lambda t: isinstance(t, dict))


def _build(root: bytes, tree: dict[bytes, Any], rel: bytes = b"") -> list[bytes]:
    files: list[bytes] = []
    for name, child in tree.items():
        path = os.path.join(root, rel, name) if rel else os.path.join(root, name)
        here = os.path.join(rel, name) if rel else name
        if isinstance(child, dict):
            os.mkdir(path)
            files += _build(root, child, here)
        else:
            with open(path, "wb") as handle:
                handle.write(child)
            files.append(here)
    return files


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=_TREE)
def test_random_byte_names_never_fail_an_ingest(ws: Any, tree: dict[bytes, Any]) -> None:
    import tempfile

    from gitkb.core.paths import check_stored_path, escape_name

    if not ws.document_index("LIST_INDICES").get("Indices"):
        ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    parent = tempfile.mkdtemp(prefix="gitkb-prop-", dir=os.environ.get("TMPDIR"))
    try:
        root = os.path.join(os.fsencode(parent), b"root")
        os.mkdir(root)
        files = _build(root, tree)
        out = ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=os.fsdecode(root)))
        stored = set(out["added"]) | set(out["modified"]) | set(out["unchanged"])
        skipped = [s["path"] for s in out["skipped"]]
        for path in stored:
            assert check_stored_path(path) == path  # every stored path obeys the stored-path rules
        for rel in files:
            shown = escape_name("root/" + os.fsdecode(rel))
            assert shown in stored or any(
                shown == s or (s.endswith("/") and shown.startswith(s)) for s in skipped
            ), (
                shown,
                out["skipped"],
            )
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def test_a_target_whose_own_path_is_not_utf8_is_refused_cleanly(ws: Any, tmp_path: Path) -> None:
    above = tmp_path / os.fsdecode(b"\xff-above")
    touch(above / "docs" / "a.md")
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    for target in (above / "docs", above / "docs" / "a.md", above):
        out = fails(
            ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(target)), "invalid_argument"
        )
        assert "\\xff-above" in out["Error"] and "not valid UTF-8" in out["Error"]
        out["Error"].encode("utf-8")
    assert docs(ws, "kb") == []


def test_add_text_with_a_lone_surrogate_is_refused_not_an_internal_error(ws: Any) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    out = fails(
        ws.document_index("ADD_TEXT", index_name="kb", text="broken \udcff text", filepath="a.txt"),
        "invalid_argument",
    )
    assert "not valid Unicode" in out["Error"]
    assert docs(ws, "kb") == []


def test_a_name_with_a_backslash_is_skipped_not_stored_under_another_path(ws: Any, tmp_path: Path) -> None:
    """Found by the property test: a POSIX file named ``\\`` stored as ``root/\\``, which every stored-path
    check reads as ``root``; such a name is a ``bad_name`` skip and the rest is indexed."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "\\").write_text("odd name\n")
    (root / "a\\b.md").write_text("# also odd\n")
    (root / "good.md").write_text("# good\n")
    ok(ws.document_index("CREATE_INDEX", index_name="bs"))
    out = ok(ws.document_index("ADD_DOCUMENTS", index_name="bs", filepath=str(root)))
    assert docs(ws, "bs") == ["root/good.md"]
    assert sorted(s["category"] for s in out["skipped"] if s["category"] == "bad_name") == [
        "bad_name",
        "bad_name",
    ]
