"""redteam23: the retired-chunk retention (``[catalog] retired_days``) of nodes sharing one catalog.

The writer prunes with its own retention; a node configured for 90 days on the same catalog told
its callers "retired chunks are kept 90 days" (status, and a pruned citation's not_found with
``retired_days`` 90) after another node's one-second retention had pruned the rows: a citation
well inside what it promised was gone, and it said the wrong rule. Now the prune records the
retention it used and every node reports that one (and its own setting, when they differ).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from gitkb import Workspace
from gitkb.core.config import DEFAULT_RETIRED_DAYS
from helpers import ok, wait_until
from helpers.nodes import node_settings, sqlite_url

SHORT = 1e-6  # 0.09 s


def _node(tmp_path: Path, name: str, **fields: Any) -> Workspace:
    url = sqlite_url(tmp_path / "shared" / "catalog.sqlite3")
    return Workspace(settings=replace(node_settings(tmp_path / name, url), **fields))


def test_every_node_reports_the_retention_the_prune_used(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    a = _node(tmp_path, "a")
    ok(a.document_index("CREATE_INDEX", index_name="kb"))
    ok(
        a.document_index(
            "ADD_TEXT", index_name="kb", text="The gateway keys expire every 90 days.", filepath="k.md"
        )
    )
    cited = ok(a.document_index("SEARCH", query="gateway keys expire", index_name="kb", mode="keyword"))[
        "Results"
    ][0]
    ok(
        a.document_index(
            "ADD_TEXT", index_name="kb", text="The gateway keys expire every 30 days.", filepath="k.md"
        )
    )
    assert ok(a.cite_check(cited["id"]))["status"] == "stale"  # within a's 90 days
    a.close()
    time.sleep(0.2)

    b = _node(tmp_path, "b", catalog_retired_days=SHORT)  # another node, another retention
    assert b.ctx.is_writer
    wait_until(lambda: b.get_index_status()["retired_chunks"]["rows"] == 0, timeout=10)
    b.close()

    a = _node(tmp_path, "a")
    try:
        gone = a.cite_check(cited["id"])
        assert gone["code"] == "not_found" and "no longer known" in gone["Error"], gone
        assert f"kept {DEFAULT_RETIRED_DAYS:g} days" not in gone["Error"], gone
        assert gone["retired_days"] == SHORT, gone
        status = ok(a.get_index_status())["retired_chunks"]
        assert status["retention_days"] == DEFAULT_RETIRED_DAYS, status  # a's own setting, as before
        assert status["pruned_with_days"] == SHORT, status  # what the prune that removed them used
    finally:
        a.close()
