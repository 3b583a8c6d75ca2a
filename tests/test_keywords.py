"""The tantivy keyword index on its own: applying is idempotent by chunk id."""

from __future__ import annotations

from pathlib import Path

from gitkb.stores.keyword_schema import KeywordDoc
from gitkb.stores.keywords import KeywordIndex


def test_apply_is_idempotent_and_removes_by_cid(tmp_path: Path) -> None:
    kw = KeywordIndex(tmp_path / "kw")
    docs = [KeywordDoc(i, "kidx_a", None, "Title", f"rotating keys number {i}") for i in range(1, 6)]
    kw.apply(removes=[], adds=docs)
    kw.commit()
    kw.apply(removes=[], adds=docs)  # a replay after a crash
    kw.commit()
    assert kw.count() == 5
    kw.apply(removes=[2, 3], adds=[])
    kw.commit()
    assert kw.count() == 3
    assert {cid for cid, _ in kw.search("rotate key", index_ids=["kidx_a"], limit=10)} == {1, 4, 5}
    kw.apply(removes=[], adds=[], drop_indexes=["kidx_a"])
    kw.commit()
    assert kw.count() == 0


def test_filters_by_index_and_tenant(tmp_path: Path) -> None:
    kw = KeywordIndex(tmp_path / "kw")
    kw.apply(
        removes=[],
        adds=[
            KeywordDoc(1, "kidx_a", None, "", "shared words here"),
            KeywordDoc(2, "kidx_b", None, "", "shared words here"),
            KeywordDoc(3, "kidx_a", "acme", "", "shared words here"),
        ],
    )
    kw.commit()
    assert [c for c, _ in kw.search("shared words", index_ids=["kidx_a"], limit=10)] == [1]
    assert [c for c, _ in kw.search("shared words", index_ids=["kidx_a"], limit=10, tenant="acme")] == [3]
    assert sorted(c for c, _ in kw.search("shared", index_ids=["kidx_a", "kidx_b"], limit=10)) == [1, 2]
    assert kw.search("shared", index_ids=[], limit=10) == []
    assert kw.search("!!! ???", index_ids=None, limit=10) == []


def test_a_commit_on_its_own_thread_is_waited_for_by_the_next_write(tmp_path: Path) -> None:
    """``start_commit`` returns at once; the next ``apply`` (or ``commit``, ``close``) waits for it,
    ``finish_commit`` hands its tag back once, and what it committed is durable and searchable."""
    kw = KeywordIndex(tmp_path / "kw")
    kw.apply(removes=[], adds=[KeywordDoc(i, "kidx_a", None, "", f"bucket policy {i}") for i in range(1, 4)])
    kw.start_commit(7)
    kw.apply(removes=[1], adds=[KeywordDoc(9, "kidx_a", None, "", "bucket lifecycle")])  # waits for it
    assert kw.count() == 3  # the first commit is visible; the second apply is not committed yet
    assert kw.finish_commit() == 7 and kw.finish_commit() is None
    kw.start_commit(8)
    kw.close()  # waits for it too: nothing is lost
    again = KeywordIndex(tmp_path / "kw")
    assert {c for c, _ in again.search("bucket", index_ids=["kidx_a"], limit=10)} == {2, 3, 9}
