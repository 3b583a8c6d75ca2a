"""The staged proposals of a source in the order the proposal branch holds them.

The catalog lists a source's staged proposals by when they were staged; choosing some of them for a
review (``open_kb_pull_request(proposal_ids=...)``) moves those first on the branch, so the branch
order can differ. Everything that walks the branch (choosing, discarding, refreshing, rebuilding
it) walks it in branch order: each proposal on the one before.
"""

from __future__ import annotations

from gitkb.stores.catalog import proposals as prop_rows
from gitkb.stores.catalog.engine import Conn
from gitkb.stores.catalog.proposals import ProposalRow


def on_branch(staged: list[ProposalRow]) -> list[ProposalRow]:
    """``staged`` in branch order, each on the one before; as given when they do not make one chain."""
    after = {p.parent_sha: p for p in staged}
    first = [p for p in staged if p.parent_sha not in {q.commit_sha for q in staged}]
    if len(first) != 1 or len(after) != len(staged):
        return staged
    chain = [first[0]]
    while len(chain) < len(staged) and chain[-1].commit_sha in after:
        chain.append(after[chain[-1].commit_sha])
    return chain if len(chain) == len(staged) else staged


def staged_on_branch(conn: Conn, source_id: str) -> list[ProposalRow]:
    """The source's staged proposals in branch order (the first is on the base, the last is the tip)."""
    return on_branch(prop_rows.list_proposals(conn, source_id=source_id, states=("staged",)))
