"""Red team, round 21: the review gate against this round's keyword rebuilds.

A keyword index is rebuilt from the catalog when a home still has the old single-index layout,
when a rebuild did not finish (``keywords/rebuilding``), and by ``gitkb verify --repair``. None of
them may make searchable a text that no approved review let in: a staged proposal, a review
request waiting, a proposal branch.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from helpers import SOURCE, ok

PLANTED = "quokkaplantedword"


def _search_all(ws: Any) -> list[str]:
    """Every snippet the operator's searches answer for the planted word, in every mode."""
    out = []
    for mode in ("keyword", "hybrid", "semantic"):
        res = ok(ws.document_index("SEARCH", query=PLANTED, mode=mode, top_n=50))
        out += [r["snippet"] for r in res["Results"]]
    return out


def test_no_rebuild_indexes_a_staged_or_requested_proposal(source_ws: Any, make_ws: Any, home: Path) -> None:
    """Held: an agent stages an edit and asks for review (nothing approved); the keyword index is
    rebuilt on open (old layout mark, unfinished-rebuild mark, a folder removed) and by verify
    --repair: the planted word is never found, and the catalog holds no chunk of it."""
    ws = source_ws
    ok(ws.kb_create("kh", ["handbook"]))
    ok(ws.agent_assign("bot", ["kh"], mode="propose"))
    agent = ws.as_agent("bot")
    ok(
        agent.propose_kb_edit(
            SOURCE,
            "runbooks/database-failover.md",
            search="## When automatic promotion fails",
            replace=f"## When automatic promotion fails\n\n{PLANTED} run this instead.",
        )
    )
    ok(agent.propose_kb_edit(SOURCE, "runbooks/new-page.md", content=f"# New\n\n{PLANTED} page.\n"))
    ok(agent.open_kb_pull_request(SOURCE, title="planted"))
    assert not any(PLANTED in s for s in _search_all(ws))
    ws.close()
    kw = home / "keywords"
    for damage in ("legacy", "rebuilding", "folder"):
        if damage == "legacy":
            (kw / "meta.json").write_text("{}")  # the layout before one folder per index
        elif damage == "rebuilding":
            (kw / "rebuilding").write_text("killed mid-rebuild\n")
        else:
            for p in kw.iterdir():
                if p.is_dir():
                    shutil.rmtree(p)
        ws = make_ws()
        ok(ws.document_index("SEARCH", query="failover", mode="keyword"))  # the writer catches up
        assert not any(PLANTED in s for s in _search_all(ws)), damage
        assert not (kw / "rebuilding").exists() and not (kw / "meta.json").exists(), damage
        ws.close()
    ws = make_ws()
    ok(ws.verify(repair=True))
    assert not any(PLANTED in s for s in _search_all(ws))
    assert ok(ws.document_index("SEARCH", query="promotion", mode="keyword"))["count"] > 0
    ws.close()
