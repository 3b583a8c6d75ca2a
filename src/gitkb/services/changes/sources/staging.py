"""The proposal branch as a list: list, show, discard, and replay onto a new base.

Discarding a proposal from the middle of ``gitkb/proposals/<source>`` replays
the later ones onto its parent (refused when they build on it); after a
merge, :func:`restack` replays the proposals staged after the merged ones
onto the merge commit and marks the ones that no longer apply.
"""

from __future__ import annotations

from typing import Any

from gitkb.core.errors import Conflict, GitkbError, InvalidArgument, NotFound
from gitkb.core.paging import page_of, paged
from gitkb.services.changes import audit
from gitkb.services.changes.sources.branch_order import staged_on_branch
from gitkb.services.changes.sources.branches import move
from gitkb.services.changes.sources.refresh_text import refresh_message
from gitkb.services.changes.sources.registry import open_repo, proposal_branch, resolve_source
from gitkb.services.context import Context
from gitkb.stores.catalog import proposals as prop_rows
from gitkb.stores.catalog import sources as source_rows
from gitkb.stores.catalog.proposals import ProposalRow
from gitkb.stores.catalog.sources import SourceRow
from gitkb.stores.git_replay import replay
from gitkb.stores.repos import ManagedRepo


def author(ctx: Context) -> tuple[str, str]:
    """The author of gitkb's proposal commits (``[proposals] author_name/author_email`` in gitkb.toml)."""
    s = ctx.settings.section("proposals")
    return str(s.get("author_name") or "gitkb"), str(s.get("author_email") or "gitkb@localhost")


def describe(p: ProposalRow, source_name: str) -> dict[str, Any]:
    return {
        "proposal_id": p.id,
        "source": source_name,
        "op": p.op,
        "path": p.path,
        "new_path": p.new_path,
        "note": p.note,
        "state": p.state,
        "commit": p.commit_sha,
        "parent": p.parent_sha,
        "created_at": p.created_at,
        **({"detail": p.detail} if p.detail else {}),
    }


def list_proposals(
    ctx: Context, source: Any = None, state: Any = "staged", start: Any = None, count: Any = None
) -> dict[str, Any]:
    page = page_of(start, count, default=100)
    conn = ctx.catalog.conn
    row = resolve_source(ctx, source) if source else None
    states = None if state in (None, "", "all") else (str(state),)
    if states and states[0] not in prop_rows.PROPOSAL_STATES:
        raise InvalidArgument(f"state must be one of {', '.join(prop_rows.PROPOSAL_STATES)} or 'all'")
    every = prop_rows.list_proposals(conn, source_id=row.id if row else None, states=states)
    rows, fields = paged(every, page)
    names = {row.id: row.name} if row else {}
    for p in rows:
        if p.source_id not in names:
            s = source_rows.get_by_id(conn, p.source_id)
            names[p.source_id] = s.name if s else p.source_id
    return {
        "Proposals": [describe(p, names[p.source_id]) for p in rows],
        **fields,
        "Message": f"{len(rows)} of {len(every)} proposal(s)",
    }


def get_proposal(ctx: Context, proposal_id: Any) -> ProposalRow:
    if not isinstance(proposal_id, str) or not proposal_id.strip():
        raise InvalidArgument("proposal_id is required (prop_...)")
    p = prop_rows.get_proposal(ctx.catalog.conn, proposal_id.strip())
    if p is None:
        raise NotFound(f"no proposal {proposal_id!r}", next_steps=["list them with `gitkb proposals list`"])
    return p


def show_proposal(ctx: Context, proposal_id: Any) -> dict[str, Any]:
    p = get_proposal(ctx, proposal_id)
    row = source_rows.get_by_id(ctx.catalog.conn, p.source_id)
    assert row is not None
    repo = open_repo(ctx, row)
    out = describe(p, row.name)
    out["diff"] = repo.unified_diff(p.parent_sha, p.commit_sha)
    out["branch"] = proposal_branch(row)
    out["Message"] = (
        f"{p.id}: {p.op} {p.path}" + (f" -> {p.new_path}" if p.new_path else "") + f" ({p.state})"
    )
    return out


def restack(
    ctx: Context, row: SourceRow, repo: ManagedRepo, onto: str, keep: list[ProposalRow]
) -> dict[str, list[str]]:
    """Rebuild the proposal branch as ``keep`` replayed onto ``onto``.

    Proposals that conflict with the new base are marked ``conflict`` (with
    the paths); ones whose change is already there are marked ``merged``.
    Returns ``{"kept", "conflicts", "already_applied"}`` (proposal ids).
    """
    branch = proposal_branch(row)
    result = replay(repo.repository, onto, [(p.parent_sha, p.commit_sha) for p in keep])
    current = repo.head(branch)
    repo.reset_branch(branch, result.head, expected=current)
    out: dict[str, list[str]] = {"kept": [], "conflicts": [], "already_applied": []}
    parent = onto
    with ctx.catalog.write() as w:
        for p in keep:
            if p.commit_sha in result.commits:
                new = result.commits[p.commit_sha]
                move(w, repo, p.id, parent, new)
                parent = new
                out["kept"].append(p.id)
            elif p.commit_sha in result.conflicts:
                paths = result.conflicts[p.commit_sha]
                steps = [
                    f"discard it: gitkb proposals discard {p.id}",
                    "or propose it again against the new text (propose_kb_edit)",
                ]
                prop_rows.set_proposal_state(
                    w,
                    p.id,
                    "conflict",
                    detail={"conflicting_paths": paths, "base": onto, "next_steps": steps},
                )
                out["conflicts"].append(p.id)
            else:
                prop_rows.set_proposal_state(
                    w, p.id, "merged", detail={"reason": "already in the base", "base": onto}
                )
                out["already_applied"].append(p.id)
    return out


def discard_proposal(ctx: Context, proposal_id: Any, *, actor: str = "operator") -> dict[str, Any]:
    p = get_proposal(ctx, proposal_id)
    if p.state not in ("staged", "conflict"):
        raise Conflict(f"proposal {p.id} is {p.state}; only staged proposals can be discarded")
    row = source_rows.get_by_id(ctx.catalog.conn, p.source_id)
    assert row is not None
    if p.state == "conflict":
        with ctx.catalog.write() as w:
            prop_rows.set_proposal_state(w, p.id, "discarded")
        return {"Message": f"Discarded {p.id}", "proposal_id": p.id, "branch": proposal_branch(row)}
    repo = open_repo(ctx, row)
    staged = staged_on_branch(ctx.catalog.conn, row.id)
    later = staged[[s.id for s in staged].index(p.id) + 1 :]
    probe = replay(repo.repository, p.parent_sha, [(s.parent_sha, s.commit_sha) for s in later])
    if probe.conflicts:
        blocked = [s.id for s in later if s.commit_sha in probe.conflicts]
        raise Conflict(
            f"cannot discard {p.id}: later proposals build on it ({', '.join(blocked)}); discard them first",
            next_steps=[f"gitkb proposals discard {b}" for b in reversed(blocked)]
            + [f"then gitkb proposals discard {p.id}"],
            details={"depends": blocked},
        )
    with ctx.catalog.write() as w:
        prop_rows.set_proposal_state(w, p.id, "discarded")
    rest = restack(ctx, row, repo, p.parent_sha, later)
    audit.record(
        ctx,
        actor=actor,
        action="proposal.discard",
        target=row.name,
        result="discarded",
        detail={"proposal_id": p.id, "path": p.path},
    )
    return {
        "Message": f"Discarded {p.id}; {len(rest['kept'])} later proposal(s) kept on {proposal_branch(row)}",
        "proposal_id": p.id,
        "branch": proposal_branch(row),
        "branch_head": repo.head(proposal_branch(row)),
        **rest,
    }


# -- refresh: the staged proposals again, on the target branch's head now ----------------------

_AROUND = 3  # lines of context either side of a conflicting edit


def _text(repo: ManagedRepo, commit: str, path: str) -> str | None:
    try:
        return repo.read_blob(commit, path).decode("utf-8", "replace")
    except NotFound:
        return None


def _lines_around(text: str | None, line: int) -> list[dict[str, Any]]:
    """The file's current lines around ``line`` (1-based), as ``{line, text}``."""
    if text is None:
        return []
    lines = text.splitlines()
    lo, hi = max(1, line - _AROUND), min(len(lines), line + _AROUND)
    return [{"line": n, "text": lines[n - 1]} for n in range(lo, hi + 1)]


def _first_difference(old: str | None, new: str | None) -> int:
    a, b = (old or "").splitlines(), (new or "").splitlines()
    for n, (x, y) in enumerate(zip(a, b, strict=False), start=1):
        if x != y:
            return n
    return min(len(a), len(b)) + 1


def _reapply(
    repo: ManagedRepo, p: ProposalRow, tip: str
) -> tuple[dict[str, bytes | None], dict[str, str]] | dict[str, Any]:
    """What ``p`` changes when made again on ``tip``: ``(changes, renames)``, or a conflict dict."""
    now = _text(repo, tip, p.path)
    search = p.detail.get("search")
    if p.op == "edit" and isinstance(search, str) and search:
        found = (now or "").count(search)
        if now is not None and found == 1:
            new = now.replace(search, str(p.detail.get("replace") or ""), 1)
            return {p.path: new.encode("utf-8")}, {}
        old = _text(repo, p.parent_sha, p.path) or ""
        line = old[: max(old.find(search), 0)].count("\n") + 1
        why = "the file is gone" if now is None else f"the search text occurs {found} times in the new text"
        return {"reason": why, "line": line, "lines": _lines_around(now, line)}
    before = _text(repo, p.parent_sha, p.path)
    if before != now:
        line = _first_difference(before, now)
        why = "the file was deleted since" if now is None else "the file changed since the proposal's base"
        if before is None:
            why = "the file was created since"
        return {"reason": why, "line": line, "lines": _lines_around(now, line)}
    if p.op == "rename":
        assert p.new_path is not None
        if _text(repo, tip, p.new_path) is not None:
            return {"reason": f"{p.new_path!r} exists now", "line": 1, "lines": []}
        return {}, {p.path: p.new_path}
    if p.op == "delete":
        return {p.path: None}, {}
    return {p.path: repo.read_blob(p.commit_sha, p.path)}, {}


def refresh_proposals(ctx: Context, source: Any, *, actor: str = "operator") -> dict[str, Any]:
    """Make every staged proposal again on the current head of the target branch.

    A search/replace edit must find its search text exactly once in the new text; a full-content
    edit, an add, a delete or a rename applies when its file is as it was at the proposal's base.
    Per proposal: ``applied`` or ``conflict`` (with the file's current lines around the edit and
    next steps); conflicting ones are marked ``conflict`` (still listed, discardable). Reviews whose
    staged head is no longer on the branch and that were not pushed are marked ``superseded``.
    """
    row = resolve_source(ctx, source)
    repo = open_repo(ctx, row)
    branch = proposal_branch(row)
    onto, warnings = _fetch_onto(repo, row)
    staged = staged_on_branch(ctx.catalog.conn, row.id)
    out: dict[str, Any] = {
        "source": row.name,
        "branch": branch,
        "base": onto,
        "Proposals": [],
        "applied": [],
        "conflicts": [],
        "reviews_superseded": [],
    }
    if warnings:
        out["Warnings"] = warnings
    if not staged:
        return {**out, "Message": f"nothing is staged for source {row.name!r}; nothing to refresh"}
    if staged[0].parent_sha == onto:
        out["applied"] = [p.id for p in staged]
        out["Proposals"] = [{"proposal_id": p.id, "path": p.path, "result": "applied"} for p in staged]
        return {
            **out,
            "branch_head": repo.head(branch),
            "unchanged": True,
            "Message": f"the {len(staged)} staged proposal(s) already build on {row.branch} at {onto[:12]}",
        }
    before = repo.head(branch)
    tip, moved, conflicts = _replay(ctx, repo, row, staged, onto)
    repo.reset_branch(branch, tip, expected=before)
    with ctx.catalog.write() as w:
        for p, parent, new in moved:
            move(w, repo, p.id, parent, new)
        for p, c in conflicts:
            state = "merged" if c.get("already_applied") else "conflict"
            prop_rows.set_proposal_state(w, p.id, state, detail={**p.detail, **c, "base": onto})
        for r in prop_rows.list_reviews(w, source_id=row.id, states=("pending", "approved"), limit=1000):
            if not r.pushed and r.pushing_sha is None and not repo.is_ancestor(r.head_sha, tip):
                prop_rows.update_review(w, r.id, state="superseded")
                out["reviews_superseded"].append(r.id)
    _report(out, row, moved, conflicts)
    audit.record(
        ctx,
        actor=actor,
        action="proposals.refresh",
        target=row.name,
        result="ok",
        detail={"base": onto, "applied": out["applied"], "conflicts": out["conflicts"]},
    )
    out["branch_head"] = tip
    out["Message"] = refresh_message(
        f"{row.branch} at {onto[:12]}", out["applied"], out["conflicts"], out["reviews_superseded"]
    )
    return out


def _fetch_onto(repo: ManagedRepo, row: SourceRow) -> tuple[str, list[str]]:
    """The target branch's head now (fetched), else the last fetched one with a warning."""
    warnings: list[str] = []
    try:
        onto = repo.fetch(row.branch)
    except GitkbError as exc:
        tracked = repo.tracking_head(row.branch)
        if tracked is None:
            raise
        onto = tracked
        warnings.append(f"could not fetch {row.branch!r} ({exc.message}); refreshed on the last fetched head")
    return onto, warnings


Moved = list[tuple[prop_rows.ProposalRow, str, str]]  # (proposal, new parent, new commit)
Conflicts = list[tuple[prop_rows.ProposalRow, dict[str, Any]]]


def _replay(
    ctx: Context, repo: ManagedRepo, row: SourceRow, staged: list[prop_rows.ProposalRow], onto: str
) -> tuple[str, Moved, Conflicts]:
    """Each staged proposal made again on ``onto``, in order, on a scratch branch; returns the new
    tip, the proposals that moved and those that conflict (or are already in the base)."""
    scratch = f"gitkb/refresh/{row.name}"
    repo.delete_branch(scratch)
    tip = onto
    moved: Moved = []
    conflicts: Conflicts = []
    try:
        for p in staged:
            made = _reapply(repo, p, tip)
            if isinstance(made, dict):
                conflicts.append((p, made))
                continue
            changes, renames = made
            repo.reset_branch(scratch, tip)
            message = f"gitkb: {p.op} {p.path}" + (f" -> {p.new_path}" if p.new_path else "")
            message += f"\n\n{p.note.strip()}" if p.note.strip() else ""
            try:
                new = repo.commit_changes(
                    scratch, tip, changes, renames=renames, message=message, author=author(ctx)
                )
            except InvalidArgument:  # already in the new base
                conflicts.append(
                    (
                        p,
                        {
                            "reason": "the change is already in the new base",
                            "line": 1,
                            "lines": [],
                            "already_applied": True,
                        },
                    )
                )
                continue
            moved.append((p, tip, new))
            tip = new
    finally:
        repo.delete_branch(scratch)
    return tip, moved, conflicts


def _report(out: dict[str, Any], row: SourceRow, moved: Moved, conflicts: Conflicts) -> None:
    """Each proposal's result in ``out``: applied (with its commit), already applied, or a conflict
    with the current lines and next steps."""
    for p, _parent, new in moved:
        out["applied"].append(p.id)
        out["Proposals"].append({"proposal_id": p.id, "path": p.path, "result": "applied", "commit": new})
    for p, c in conflicts:
        if c.get("already_applied"):
            out["Proposals"].append({"proposal_id": p.id, "path": p.path, "result": "already_applied"})
            continue
        out["conflicts"].append(p.id)
        out["Proposals"].append(
            {
                "proposal_id": p.id,
                "path": p.path,
                "result": "conflict",
                "reason": c["reason"],
                "line": c["line"],
                "current_lines": c["lines"],
                "next_steps": [
                    f"discard it: gitkb proposals discard {p.id}",
                    f"or propose again against the new text: read {p.path} at {row.branch} and call "
                    f"propose_kb_edit (gitkb propose {row.name} {p.path} ...), then discard {p.id}",
                ],
            }
        )
