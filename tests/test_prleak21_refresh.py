"""prleak21: what an agent's refresh_proposals says of reviews and of the branch head.

``reviews_superseded``: a review the refresh superseded is named to an agent only when it holds a
proposal on a file the source feeds (the agent opens a new one of those); a review of only other
files (the operator's review of private/payroll.md) is not its business, and its id stayed in the
agent's answer and Message. ``branch_head`` stays: a commit id of the managed clone, which no agent
action reads (test_prleak21_review_view::test_no_action_offered_to_agents_takes_a_commit).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from fastapi.testclient import TestClient

from helpers import ok, with_roots
from test_gate21_refresh import TOML, _world
from test_prleak21_review_view import _as_alice


def test_a_review_of_only_other_files_is_not_named_to_the_agent(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None
) -> None:
    c = make_client(TOML)
    ws, ids = _world(c, tmp_path)
    private = ok(ws.open_kb_pull_request("pub", proposal_ids=[ids["operator_private"]]))["review_id"]
    out = _as_alice(c, ws, "mcp", "refresh_proposals", {"source": "pub"})
    assert out["reviews_superseded"] == [] and private not in json.dumps(out), out
    assert ok(ws.show_review(private))["review_state"] == "superseded"  # superseded all the same
    assert re.fullmatch(r"[0-9a-f]{40}", out["branch_head"]), out


def test_a_review_holding_a_fed_proposal_is_named_to_the_agent(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None
) -> None:
    c = make_client(with_roots(TOML, tmp_path))  # over HTTP the local upstream must be inside the roots
    ws, ids = _world(c, tmp_path)
    review = _as_alice(c, ws, "http", "open_kb_pull_request", {"source_id_or_index": "pub"})["review_id"]
    out = _as_alice(c, ws, "library", "refresh_proposals", {"source": "pub"})
    assert out["reviews_superseded"] == [review] and review in out["Message"], out
    assert ok(ws.show_review(review))["review_state"] == "superseded"
