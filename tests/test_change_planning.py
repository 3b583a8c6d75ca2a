from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gitkb.core.change_planning import ChangePlan, apply_plan, changed_files, plan_changes

PATHS = st.sampled_from([f"docs/{d}/{f}.md" for d in ("a", "b", "c") for f in ("x", "y", "z", "w")])
BLOBS = st.sampled_from(["b1", "b2", "b3", "b4", "b5"])
TREES = st.dictionaries(PATHS, BLOBS, max_size=12)


def test_empty_plan() -> None:
    plan = plan_changes({"a": "1"}, {"a": "1"})
    assert plan.is_empty and plan == ChangePlan() and len(plan) == 0
    assert changed_files(plan) == []


def test_buckets_and_changed_files() -> None:
    old = {"docs/a/x.md": "1", "docs/a/y.md": "2", "docs/a/z.md": "3"}
    new = {"docs/a/x.md": "1b", "docs/b/y.md": "2", "docs/a/n.md": "9"}
    plan = plan_changes(old, new)
    assert plan.added == ("docs/a/n.md",)
    assert plan.modified == ("docs/a/x.md",)
    assert plan.deleted == ("docs/a/z.md",)
    assert plan.renamed == (("docs/a/y.md", "docs/b/y.md"),)
    assert plan.paths_to_load == ("docs/a/n.md", "docs/a/x.md", "docs/b/y.md")
    assert plan.paths_gone == ("docs/a/y.md", "docs/a/z.md")
    assert changed_files(plan) == [
        {"path": "docs/a/n.md", "status": "A"},
        {"path": "docs/a/x.md", "status": "M"},
        {"path": "docs/a/z.md", "status": "D"},
        {"path": "docs/b/y.md", "status": "R", "old_path": "docs/a/y.md"},
    ]


def test_rename_pairing_is_deterministic_same_name_first() -> None:
    old = {"a/one.md": "e", "a/two.md": "e", "a/three.md": "e"}
    new = {"b/two.md": "e", "b/zzz.md": "e", "b/aaa.md": "e"}
    plan = plan_changes(old, new)
    assert set(plan.renamed) == {
        ("a/two.md", "b/two.md"),
        ("a/one.md", "b/aaa.md"),
        ("a/three.md", "b/zzz.md"),
    }
    assert plan == plan_changes(dict(reversed(old.items())), dict(reversed(new.items())))


def test_more_deletions_than_additions_of_same_blob() -> None:
    plan = plan_changes({"a.md": "e", "b.md": "e", "c.md": "e"}, {"d.md": "e"})
    assert plan.renamed == (("a.md", "d.md"),)
    assert plan.deleted == ("b.md", "c.md")
    assert plan.added == ()


def test_modified_path_never_part_of_rename() -> None:
    # b.md takes a.md's blob but existed before: a deletion plus a modification.
    plan = plan_changes({"a.md": "1", "b.md": "2"}, {"b.md": "1"})
    assert plan.deleted == ("a.md",) and plan.modified == ("b.md",) and plan.renamed == ()


@settings(max_examples=400, deadline=None)
@given(TREES, TREES)
def test_applying_plan_gives_new(old: dict[str, str], new: dict[str, str]) -> None:
    plan = plan_changes(old, new)
    assert apply_plan(old, plan, new) == new
    assert plan.is_empty == (old == new)


@settings(max_examples=400, deadline=None)
@given(TREES, TREES)
def test_no_path_in_two_buckets(old: dict[str, str], new: dict[str, str]) -> None:
    plan = plan_changes(old, new)
    rename_old = [o for o, _ in plan.renamed]
    rename_new = [n for _, n in plan.renamed]
    olds = [*plan.deleted, *plan.modified, *rename_old]
    news = [*plan.added, *plan.modified, *rename_new]
    assert len(olds) == len(set(olds))
    assert len(news) == len(set(news))
    assert not set(plan.added) & set(plan.deleted)
    assert not set(rename_new) & set(plan.deleted)
    assert not set(rename_old) & set(plan.added)
    for o, n in plan.renamed:
        assert o in old and o not in new and n in new and n not in old and old[o] == new[n]
    assert [f["path"] for f in changed_files(plan)] == sorted(f["path"] for f in changed_files(plan))


@settings(max_examples=300, deadline=None)
@given(TREES, st.dictionaries(PATHS, PATHS, max_size=4))
def test_pure_moves_are_detected_as_renames(old: dict[str, str], moves: dict[str, str]) -> None:
    # Give every file a unique blob, then move some files to paths that are free.
    old = {p: f"blob-{p}" for p in old}
    new = dict(old)
    moved: dict[str, str] = {}
    for src, dst in moves.items():
        if src in new and dst not in new and dst not in old and src not in moved.values():
            new[dst] = new.pop(src)
            moved[src] = dst
    plan = plan_changes(old, new)
    assert set(plan.renamed) == set(moved.items())
    assert not plan.added and not plan.deleted and not plan.modified


@given(TREES, TREES)
def test_plan_is_deterministic(old: dict[str, str], new: dict[str, str]) -> None:
    shuffled_old = dict(sorted(old.items(), reverse=True))
    shuffled_new = dict(sorted(new.items(), reverse=True))
    assert plan_changes(old, new) == plan_changes(shuffled_old, shuffled_new)
