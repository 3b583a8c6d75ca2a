"""prleak21: an agent's open_kb_pull_request names only the indexes it may target.

A source ``duo`` feeds two indexes, ``dpub`` (in alice's KB) and ``dsecret`` (in no KB of hers).
alice's open_kb_pull_request('duo') was refused with "feeds several indexes; pass target_index, one
of: dpub, dsecret" (details.candidates too), naming an index she cannot see; and she had to pass a
target although only one is hers. Now her candidates are the indexes she may propose to: one, so
it is the target.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from fastapi.testclient import TestClient

from helpers import bare_repo, error_code, ok
from test_gate21_refresh import TOML


def test_an_agents_review_targets_only_its_indexes(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None
) -> None:
    c = make_client(TOML)
    work = tmp_path / "work"
    (work / "docs" / "ops").mkdir(parents=True)
    (work / "docs" / "ops" / "a.md").write_text("# A\n\nThe runbook.\n")
    remote = bare_repo(tmp_path, work)
    ws = c.app.state.gitkb.workspace  # type: ignore[attr-defined]
    ok(ws.source_add("duo", str(remote), index=["dpub", "dsecret"]))
    ok(ws.source_sync("duo"))
    ok(ws.kb_create("kd", ["dpub"]))
    ok(ws.agent_assign("alice", ["kd"], mode="propose"))
    agent = ws.as_agent("alice")
    ok(agent.propose_kb_edit("duo", "ops/a.md", search="runbook", replace="handbook"))
    out = agent.open_kb_pull_request("duo")
    assert "dsecret" not in json.dumps(out), out
    assert ok(out)["target_index"] == "dpub", out
    # naming the other index is refused as out of scope, and the operator still chooses either
    assert error_code(agent.open_kb_pull_request("duo", target_index="dsecret")) == "forbidden"
    r = ws.open_kb_pull_request("duo")
    assert error_code(r) == "invalid_argument" and "dsecret" in r["Error"], r
