"""Staged proposal commits kept in the catalog (``proposal_specs``), so a proposal branch can be made
again on any node: one row per proposal, for the commit it is at now (``stores.node_git`` makes the spec)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from gitkb.stores.catalog.engine import Conn


def record_spec(conn: Conn, proposal_id: str, parent_sha: str, commit_sha: str, spec: dict[str, Any]) -> None:
    conn.execute(
        "INSERT INTO proposal_specs(proposal_id, parent_sha, commit_sha, spec, recorded_at) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT(proposal_id) DO UPDATE SET parent_sha = excluded.parent_sha,"
        " commit_sha = excluded.commit_sha, spec = excluded.spec, recorded_at = excluded.recorded_at",
        (proposal_id, parent_sha, commit_sha, json.dumps(spec), time.time()),
    )


def specs_for(conn: Conn, proposal_ids: Sequence[str]) -> dict[str, tuple[str, dict[str, Any]]]:
    """proposal id -> (the commit its spec makes, the spec)."""
    if not proposal_ids:
        return {}
    marks = ",".join("?" * len(proposal_ids))
    return {
        str(r[0]): (str(r[1]), json.loads(r[2]))
        for r in conn.execute(
            f"SELECT proposal_id, commit_sha, spec FROM proposal_specs WHERE proposal_id IN ({marks})",
            list(proposal_ids),
        )
    }
