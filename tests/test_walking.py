from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gitkb.core.errors import InvalidArgument, NotFound
from gitkb.core.exclusions import BUILTIN_EXCLUDES, excluded_by, is_excluded
from gitkb.core.models import SkippedFile, WalkEntry
from gitkb.core.walking import DEFAULT_MAX_BYTES, stored_path, walk


def touch(path: Path, content: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return path


def split(results: list[WalkEntry | SkippedFile]) -> tuple[list[str], dict[str, SkippedFile]]:
    entries = [r.rel_path for r in results if isinstance(r, WalkEntry)]
    skipped = {r.path: r for r in results if isinstance(r, SkippedFile)}
    return entries, skipped


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    docs = tmp_path / "x" / "docs"
    for rel in [
        "ops/rotate.md",
        "05-dual-targeting.md",
        "distance.md",
        "builder/x.md",
        "targets.md",
        "distribution/notes.md",
        "target/x.md",
        "a/build/y.md",
        "a/keep.md",
        "x.o",
        ".git/HEAD",
        "node_modules/pkg/index.js",
        "__pycache__/m.cpython-311.pyc",
        "dist/bundle.js",
    ]:
        touch(docs / rel)
    return docs


# --------------------------------------------------------------------------- patterns


@pytest.mark.parametrize(
    "rel",
    [
        "docs/05-dual-targeting.md",
        "05-dual-targeting.md",
        "distance.md",
        "builder/x.md",
        "a/rebuild.md",
        "targets/x.md",
        "my-dist/x.md",
        "x.orig",
        "notes.o.md",
        "gitignore.md",
        ".github/workflows/ci.yml",
        "node_modules_notes.md",
    ],
)
def test_kept_paths_are_not_excluded(rel: str) -> None:
    assert not is_excluded(rel)
    assert excluded_by(rel) is None


@pytest.mark.parametrize(
    ("rel", "pattern"),
    [
        ("target/x", "target"),
        ("a/build/y.md", "build"),
        ("x.o", "*.o"),
        ("deep/dir/x.o", "*.o"),
        (".git/HEAD", ".git"),
        ("node_modules/pkg/index.js", "node_modules"),
        ("src/__pycache__/m.pyc", "__pycache__"),
        ("dist/", "dist"),
        ("build", "build"),
    ],
)
def test_excluded_paths_name_the_builtin_pattern(rel: str, pattern: str) -> None:
    assert is_excluded(rel)
    assert excluded_by(rel) == f"the built-in pattern {pattern!r}"


def test_extra_patterns_are_gitignore_style() -> None:
    assert is_excluded("drafts/a.md", ["drafts/"])
    assert not is_excluded("drafts.md", ["drafts/"])
    assert excluded_by("a/b.tmp", ["*.tmp"]) == "the exclude pattern '*.tmp'"
    assert is_excluded("docs/private/x.md", ["/docs/private"])
    assert not is_excluded("other/docs/private/x.md", ["/docs/private"])
    # a negation can re-include a file the built-ins exclude
    assert not is_excluded("keep.o", ["!keep.o"])
    assert is_excluded("other.o", ["!keep.o"])


def test_builtin_list_is_the_documented_one() -> None:
    assert BUILTIN_EXCLUDES == ["__pycache__", "node_modules", ".git", "*.o", "target", "build", "dist"]
    assert DEFAULT_MAX_BYTES == 10 * 1024 * 1024


# --------------------------------------------------------------------------- stored paths


def test_directory_target_stores_paths_under_its_own_name(tree: Path) -> None:
    entries, _ = split(list(walk(tree)))
    assert "docs/ops/rotate.md" in entries
    assert all(p.startswith("docs/") for p in entries)


def test_single_file_target_stores_its_file_name(tree: Path) -> None:
    results = list(walk(tree / "ops" / "rotate.md"))
    assert results == [WalkEntry(tree / "ops" / "rotate.md", "rotate.md")]


def test_base_overrides_the_stored_prefix(tree: Path) -> None:
    entries, _ = split(list(walk(tree / "ops", base=tree.parent)))
    assert entries == ["docs/ops/rotate.md"]
    entries, _ = split(list(walk(tree, base=tree)))
    assert "ops/rotate.md" in entries
    results = list(walk(tree / "ops" / "rotate.md", base=tree))
    assert results == [WalkEntry(tree / "ops" / "rotate.md", "ops/rotate.md")]


def test_target_outside_base_is_invalid(tree: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    with pytest.raises(InvalidArgument, match="not inside the base"):
        walk(tree, base=other)
    with pytest.raises(InvalidArgument):
        walk(tree / "distance.md", base=tree / "distance.md")


def test_stored_path_helper(tree: Path) -> None:
    assert stored_path(tree / "ops" / "rotate.md", tree.parent) == "docs/ops/rotate.md"
    assert stored_path(tree / "ops" / ".." / "distance.md", tree) == "distance.md"
    with pytest.raises(InvalidArgument):
        stored_path(tree, tree / "ops")
    with pytest.raises(InvalidArgument):
        stored_path(tree, tree)


def test_missing_target_is_not_found(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "docs"
    with pytest.raises(NotFound, match=str(missing)):
        walk(missing)  # raised at call time, before any iteration


# --------------------------------------------------------------------------- exclusions


def test_walk_keeps_lookalikes_and_prunes_excluded_dirs(tree: Path) -> None:
    entries, skipped = split(list(walk(tree)))
    assert entries == [
        "docs/05-dual-targeting.md",
        "docs/a/keep.md",
        "docs/builder/x.md",
        "docs/distance.md",
        "docs/distribution/notes.md",
        "docs/ops/rotate.md",
        "docs/targets.md",
    ]
    assert set(skipped) == {
        "docs/.git/",
        "docs/__pycache__/",
        "docs/a/build/",
        "docs/dist/",
        "docs/node_modules/",
        "docs/target/",
        "docs/x.o",
    }
    assert all(s.category == "excluded" for s in skipped.values())
    assert skipped["docs/a/build/"].detail == "directory excluded by the built-in pattern 'build'"
    assert skipped["docs/x.o"].detail == "excluded by the built-in pattern '*.o'"


def test_target_is_never_excluded_by_its_own_name(tmp_path: Path) -> None:
    build = tmp_path / "build"
    touch(build / "guide.md")
    touch(build / "build" / "out.md")
    entries, skipped = split(list(walk(build)))
    assert entries == ["build/guide.md"]
    assert set(skipped) == {"build/build/"}
    # names above the target do not count either
    touch(tmp_path / "node_modules" / "pkg" / "docs" / "readme.md")
    entries, _ = split(list(walk(tmp_path / "node_modules" / "pkg" / "docs")))
    assert entries == ["docs/readme.md"]


def test_excluded_file_target_raises(tree: Path) -> None:
    with pytest.raises(InvalidArgument, match=r"excluded by the built-in pattern '\*\.o'") as info:
        walk(tree / "x.o")
    assert "nothing was indexed" in info.value.message
    with pytest.raises(InvalidArgument, match="exclude pattern"):
        walk(tree / "distance.md", exclude=["distance.md"])


def test_include_and_exclude_patterns(tree: Path) -> None:
    touch(tree / "ops" / "notes.txt")
    touch(tree / "drafts" / "wip.md")
    touch(tree / "ops" / "scratch.tmp")
    results = list(walk(tree, include=["*.md"], exclude=["drafts/", "*.tmp"]))
    entries, skipped = split(results)
    assert "docs/ops/notes.txt" not in entries  # outside include: omitted silently
    assert "docs/ops/notes.txt" not in skipped
    assert "docs/ops/scratch.tmp" not in skipped  # not asked for, so not reported either
    assert skipped["docs/drafts/"].detail == "directory excluded by the exclude pattern 'drafts/'"
    assert "docs/ops/rotate.md" in entries
    entries, _ = split(list(walk(tree, include=["ops/"])))
    assert entries == ["docs/ops/notes.txt", "docs/ops/rotate.md", "docs/ops/scratch.tmp"]


def test_invalid_pattern_is_invalid_argument(tree: Path) -> None:
    with pytest.raises(InvalidArgument, match="exclude pattern"):
        walk(tree, exclude=["!"])
    with pytest.raises(InvalidArgument, match="include pattern"):
        walk(tree, include=["!"])


# --------------------------------------------------------------------------- symlinks, sizes, order


def test_symlink_out_of_root_is_skipped(tmp_path: Path) -> None:
    outside = touch(tmp_path / "secret" / "passwd.md", "secret")
    root = tmp_path / "kb"
    touch(root / "a.md")
    (root / "leak.md").symlink_to(outside)
    (root / "leakdir").symlink_to(outside.parent, target_is_directory=True)
    (root / "up").symlink_to(tmp_path, target_is_directory=True)
    entries, skipped = split(list(walk(root)))
    assert entries == ["kb/a.md"]
    for name in ("kb/leak.md", "kb/leakdir/", "kb/up/"):
        assert skipped[name].category == "excluded"
        assert skipped[name].detail.startswith("symlink leads outside")


def test_symlinks_inside_are_followed_without_loops(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    touch(root / "real" / "page.md")
    (root / "alias.md").symlink_to(root / "real" / "page.md")
    (root / "mirror").symlink_to(root / "real", target_is_directory=True)
    (root / "mirror2").symlink_to(root / "real", target_is_directory=True)
    (root / "real" / "loop").symlink_to(root, target_is_directory=True)
    (root / "dangling.md").symlink_to(root / "gone.md")
    entries, skipped = split(list(walk(root)))
    assert entries == ["kb/alias.md", "kb/mirror/page.md", "kb/real/page.md"]
    assert skipped["kb/mirror/loop/"].detail.startswith("symlink loop")
    assert skipped["kb/real/loop/"].detail.startswith("symlink loop")
    assert "already walked" in skipped["kb/mirror2/"].detail
    assert skipped["kb/dangling.md"].detail.startswith("broken symlink")


def test_symlinked_target_directory(tmp_path: Path) -> None:
    touch(tmp_path / "real" / "a.md")
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    entries, _ = split(list(walk(tmp_path / "link")))
    assert entries == ["link/a.md"]


def test_too_large_files_are_skipped(tmp_path: Path) -> None:
    touch(tmp_path / "d" / "small.md", "x" * 10)
    touch(tmp_path / "d" / "big.md", "x" * 11)
    entries, skipped = split(list(walk(tmp_path / "d", max_bytes=10)))
    assert entries == ["d/small.md"]
    assert skipped["d/big.md"].category == "too_large"
    assert "11 bytes" in skipped["d/big.md"].detail
    assert list(walk(tmp_path / "d" / "big.md", max_bytes=10)) == [
        SkippedFile("big.md", "too_large", "11 bytes exceeds the limit of 10 bytes")
    ]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")
def test_special_files_are_skipped(tmp_path: Path) -> None:
    touch(tmp_path / "d" / "a.md")
    os.mkfifo(tmp_path / "d" / "pipe")
    entries, skipped = split(list(walk(tmp_path / "d")))
    assert entries == ["d/a.md"]
    assert skipped["d/pipe"].detail == "not a regular file"
    assert skipped["d/pipe"].category == "special_file"


def test_order_is_deterministic_and_sorted(tmp_path: Path) -> None:
    root = tmp_path / "r"
    names = ["b.md", "a/z.md", "a/b/c.md", "a-b.md", "A.md", "c/x.md", "a.md"]
    for name in reversed(names):
        touch(root / name)
    first = [r.rel_path for r in walk(root) if isinstance(r, WalkEntry)]
    second = [r.rel_path for r in walk(root) if isinstance(r, WalkEntry)]
    assert first == second
    assert first == sorted(first, key=lambda p: p.split("/"))
    assert first == ["r/A.md", "r/a/b/c.md", "r/a/z.md", "r/a-b.md", "r/a.md", "r/b.md", "r/c/x.md"]


def test_abs_paths_point_at_the_files(tree: Path) -> None:
    for result in walk(tree):
        if isinstance(result, WalkEntry):
            assert result.abs_path.is_file()
            assert result.abs_path == tree.parent / result.rel_path


@pytest.mark.slow
def test_walking_thousands_of_files_is_fast(tmp_path: Path) -> None:
    root = tmp_path / "big"
    for d in range(15):
        sub = root / f"guide-{d:02d}"
        sub.mkdir(parents=True)
        for f in range(184):
            (sub / f"page-{f:03d}.md").write_text("# t\n")
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        count = sum(1 for r in walk(root) if isinstance(r, WalkEntry))
        best = min(best, time.perf_counter() - start)
    assert count == 15 * 184
    assert best < 0.1
