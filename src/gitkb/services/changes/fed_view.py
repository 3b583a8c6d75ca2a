"""What an agent may see of a source's staged proposals: those on files the source feeds the
indexes of the agent's knowledge base (``registry.require_fed``), whoever staged them. An operator's
proposal on any other file under the documents root stays out of an agent's answers (its path, its
id, the file's current lines)."""

from __future__ import annotations

from typing import Any

from gitkb.core.errors import InvalidArgument
from gitkb.services.changes.sources.registry import open_repo, require_fed, resolve_source
from gitkb.services.context import Context
from gitkb.stores.catalog import proposals as prop_rows


def fed_ids(ctx: Context, source: str, base: str, proposal_ids: list[str]) -> set[str]:
    """The proposals among ``proposal_ids`` whose paths (and new paths) the source feeds its indexes
    at ``base`` (``require_fed``): what an agent bound to the source's KB may see of them."""
    row = resolve_source(ctx, source)
    repo = open_repo(ctx, row)
    shown: set[str] = set()
    for pid in proposal_ids:
        p = prop_rows.get_proposal(ctx.catalog.conn, str(pid))
        if p is None:
            continue
        try:
            require_fed(row, repo, base, p.path, *([p.new_path] if p.new_path else []))
        except InvalidArgument:
            continue
        shown.add(p.id)
    return shown


def fed_refresh(ctx: Context, out: dict[str, Any]) -> dict[str, Any]:
    """``refresh_proposals``' answer cut to the fed proposals (an agent's call), its counts and
    message made again from what is left."""
    row = resolve_source(ctx, out["source"])
    shown = fed_ids(ctx, out["source"], str(out["base"]), [str(e["proposal_id"]) for e in out["Proposals"]])
    out = {**out, "Proposals": [e for e in out["Proposals"] if e["proposal_id"] in shown]}
    out["applied"] = [i for i in out["applied"] if i in shown]
    out["conflicts"] = [i for i in out["conflicts"] if i in shown]
    at = f"{row.branch} at {str(out['base'])[:12]}"
    if not out["Proposals"]:
        out["Message"] = f"nothing is staged on the files source {row.name!r} feeds; nothing to refresh"
    elif out.get("unchanged"):
        out["Message"] = f"the {len(out['Proposals'])} staged proposal(s) already build on {at}"
    else:
        msg = f"Refreshed on {at}: {len(out['applied'])} applied, {len(out['conflicts'])} conflict(s)"
        if out["conflicts"]:
            msg += "; a conflicting proposal can be discarded (gitkb proposals discard ID) or proposed again against the new text"
        if out["reviews_superseded"]:
            msg += f"; superseded review(s) {', '.join(out['reviews_superseded'])}: open a new one"
        out["Message"] = msg
    return out
