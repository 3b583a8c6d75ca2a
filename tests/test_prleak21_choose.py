"""prleak21: choosing proposals for a review twice.

``open_kb_pull_request(proposal_ids=...)`` moves the chosen proposals first on the branch; the
catalog still lists them by when they were staged. A second choice then replayed the branch from
the first-staged proposal's (new) parent, found the chosen edit already there, marked it ``merged``
(reset the branch without it) and failed with an internal IndexError.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fastapi.testclient import TestClient

from helpers import ok
from test_gate21_refresh import TOML, _world


def test_a_second_choice_after_a_reordering_reviews_the_chosen_proposal(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None
) -> None:
    c = make_client(TOML)
    ws, ids = _world(c, tmp_path)
    ok(ws.open_kb_pull_request("pub", proposal_ids=[ids["operator_public"], ids["operator_private"]]))
    out = ok(ws.open_kb_pull_request("pub", proposal_ids=[ids["operator_public"]]))
    assert out["proposal_ids"] == [ids["operator_public"]], out
    assert [f["path"] for f in out["changed_files"]] == ["docs/public/c.md"], out
    assert "rollout" in out["diff"], out
    states = {p["proposal_id"]: p["state"] for p in ok(ws.list_proposals("pub", state="all"))["Proposals"]}
    assert set(states.values()) == {"staged"}, states  # none marked merged by the replay
    # a third choice, of the one staged last, works too
    last = ok(ws.open_kb_pull_request("pub", proposal_ids=[ids["mine"]]))
    assert last["proposal_ids"] == [ids["mine"]] and "every team" in last["diff"], last
