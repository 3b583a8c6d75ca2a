"""What an agent may see of a source's staged proposals: those on files the source feeds the
indexes of the agent's knowledge base (``registry.require_fed``), whoever staged them. An operator's
proposal on any other file under the documents root stays out of an agent's answers (its path, its
id, its diff, the file's current lines, a review that holds only such proposals).

Commit ids stay: ``branch_head`` of a refresh and ``base`` / ``head`` / ``push_sha`` of a review
name commits of the managed clone, which no action offered to agents reads (none takes a commit;
``tests/test_prleak21_review_view.py`` pins that), and the proposal branch reaches the remote only
when a person approves the review; they tell an agent nothing of what it may not see."""

from __future__ import annotations

from typing import Any

from gitkb.core.errors import InvalidArgument
from gitkb.services.changes.sources.refresh_text import refresh_message
from gitkb.services.changes.sources.registry import open_repo, require_fed, resolve_source
from gitkb.services.context import Context
from gitkb.stores.catalog import proposals as prop_rows
from gitkb.stores.catalog.sources import SourceRow
from gitkb.stores.repos import ManagedRepo


def _is_fed(row: SourceRow, repo: ManagedRepo, base: str, *paths: str) -> bool:
    """Fed by the source's selection at its synced commit and at ``base`` (a refresh's fetched head:
    an exclude pushed there and not synced yet hides the file too; ``require_fed``)."""
    try:
        require_fed(row, repo, base, *paths)
    except InvalidArgument:
        return False
    return True


def fed_ids(ctx: Context, source: str, base: str, proposal_ids: list[str]) -> set[str]:
    """The proposals among ``proposal_ids`` whose paths (and new paths) the source feeds its indexes
    at ``base`` (``require_fed``): what an agent bound to the source's KB may see of them."""
    row = resolve_source(ctx, source)
    repo = open_repo(ctx, row)
    shown: set[str] = set()
    for pid in proposal_ids:
        p = prop_rows.get_proposal(ctx.catalog.conn, str(pid))
        if p is not None and _is_fed(row, repo, base, p.path, *([p.new_path] if p.new_path else [])):
            shown.add(p.id)
    return shown


def _superseded_shown(ctx: Context, source: str, base: str, review_ids: list[str]) -> list[str]:
    """The superseded reviews that hold at least one fed proposal (the agent opens a new one of
    those); a review of only other files is not the agent's business."""
    out = []
    for rid in review_ids:
        r = prop_rows.get_review(ctx.catalog.conn, rid)
        if r is not None and fed_ids(ctx, source, base, r.proposal_ids):
            out.append(rid)
    return out


# What an agent is told of a failed fetch (its Warnings): git's own words name where the server
# keeps the remote (a path on its disk, an internal URL); the operator's answer keeps them.
AGENT_FETCH_WARNING = (
    "could not fetch from the remote of source {source!r}; {then} (the operator sees why: gitkb source sync)"
)


def _agent_warnings(warnings: list[str], source: str, then: str) -> list[str]:
    """An agent's Warnings: each fetch failure as one fixed sentence, any other warning as is."""
    fixed = AGENT_FETCH_WARNING.format(source=source, then=then)
    out = [fixed if w.startswith("could not fetch ") else w for w in warnings]
    return list(dict.fromkeys(out))


def fed_refresh(ctx: Context, out: dict[str, Any]) -> dict[str, Any]:
    """``refresh_proposals``' answer cut to the fed proposals (an agent's call), its counts and
    message made again from what is left."""
    row = resolve_source(ctx, out["source"])
    if out.get("Warnings"):
        out = {
            **out,
            "Warnings": _agent_warnings(out["Warnings"], row.name, "refreshed on the last fetched head"),
        }
    shown = fed_ids(ctx, out["source"], str(out["base"]), [str(e["proposal_id"]) for e in out["Proposals"]])
    out = {**out, "Proposals": [e for e in out["Proposals"] if e["proposal_id"] in shown]}
    out["applied"] = [i for i in out["applied"] if i in shown]
    out["conflicts"] = [i for i in out["conflicts"] if i in shown]
    out["reviews_superseded"] = _superseded_shown(
        ctx, out["source"], str(out["base"]), out["reviews_superseded"]
    )
    at = f"{row.branch} at {str(out['base'])[:12]}"
    if not out["Proposals"]:
        out["Message"] = f"nothing is staged on the files source {row.name!r} feeds; nothing to refresh"
    elif out.get("unchanged"):
        out["Message"] = f"the {len(out['Proposals'])} staged proposal(s) already build on {at}"
    else:
        out["Message"] = refresh_message(at, out["applied"], out["conflicts"], out["reviews_superseded"])
    return out


# What an agent's open_kb_pull_request answer keeps of a review (deny by default: a key describe()
# gains is the reviewers' until it is listed here). Dropped: overwrites (others' commits: sha,
# author, message; the agent gets their number), reviewer, reason, decided_at, push_error.
AGENT_REVIEW_KEYS = (
    "Success",
    "Message",
    "review_id",
    "review_state",
    "existing",
    "source",
    "target_index",
    "branch",
    "base_branch",
    "base",
    "head",
    "push_sha",
    "title",
    "body",
    "changed_files",
    "proposal_ids",
    "pushed",
    "push_in_flight",
    "number",
    "url",
    "requested_by",
    "created_at",
)


_ESCAPES = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r", 34: '\\"', 92: "\\\\"}


def _git_quoted(path: str) -> str:
    """``path`` as a ``diff --git`` line writes it: quoted, C escapes and octal bytes, when it holds a
    quote, a backslash, a control character or a non-ASCII letter (git's and libgit2's rule)."""
    raw = path.encode("utf-8", "surrogatepass")
    if not any(b in _ESCAPES or b < 0x20 or b >= 0x7F for b in raw):
        return path
    body = "".join(_ESCAPES.get(b) or (f"\\{b:03o}" if b < 0x20 or b >= 0x7F else chr(b)) for b in raw)
    return f'"{body}"'


def _diff_of(diff: str, files: list[dict[str, str]]) -> str:
    """The sections of a unified diff of exactly ``files`` (``{path, old_path?}``); any other section,
    and text before the first ``diff --git`` line (the overwrite warning), is left out. A line of a
    section's body never starts with ``diff --git`` (it starts with `` ``, ``+``, ``-``, ``@`` or ``\\``).
    A path git quotes (a non-ASCII letter, a quote, a backslash) is matched quoted."""
    heads = {
        f"diff --git {_git_quoted('a/' + (f.get('old_path') or f['path']))} {_git_quoted('b/' + f['path'])}"
        for f in files
    }
    kept: list[str] = []
    keep = False
    for line in diff.splitlines(keepends=True):
        if line.startswith("diff --git "):
            keep = line.rstrip("\r\n") in heads
        if keep:
            kept.append(line)
    return "".join(kept)


def fed_review(
    ctx: Context, out: dict[str, Any], *, caller: str, title: str, body: str, warnings: list[str]
) -> dict[str, Any]:
    """``open_kb_pull_request``'s answer for an agent: the review (which may hold every staged
    proposal: the PR/MR is for people) shown through the fed proposals only -- their ids, the
    changed files the source feeds, their diff sections -- with the number of the other proposals
    it holds, not their names. Its title and body (the default ones list every path) are shown when
    the review holds no other proposal or when ``caller`` requested it with the ``title`` / ``body``
    this call gives (another's review is never shown on a right guess);
    ``requested_by`` when ``caller`` asked for it (else its kind: ``local``, ``token``, ``agent``)."""
    r = prop_rows.get_review(ctx.catalog.conn, str(out["review_id"]))
    assert r is not None
    row = resolve_source(ctx, out["source"])
    repo = open_repo(ctx, row)
    shown = fed_ids(ctx, row.name, r.base_sha, r.proposal_ids)
    files = [
        f
        for f in r.changed_files
        if _is_fed(row, repo, r.base_sha, f["path"], *([f["old_path"]] if f.get("old_path") else []))
    ]
    view = {k: out[k] for k in AGENT_REVIEW_KEYS if k in out}
    if r.state == "approved" and not r.pushed and r.push_error:  # git's or the forge's words: the operator's
        view["Message"] = (
            f"Review {r.id} is approved but not pushed: the push failed; a reviewer approves it again to"
            " retry (the operator sees why: gitkb review show)"
        )
    view["proposal_ids"] = [i for i in r.proposal_ids if i in shown]
    view["changed_files"] = files
    view["diff"] = _diff_of(r.diff, files)
    others = len(r.proposal_ids) - len(view["proposal_ids"])
    view["other_proposals"] = others
    if others:  # its own words only: another's review shown back on a right guess was an oracle
        mine = r.requested_by == caller
        view["title"] = r.title if mine and title.strip() and title.strip() == r.title else None
        view["body"] = r.body if mine and body.strip() and body.strip() == r.body else None
        view["Message"] = (
            f"{view['Message']}. The review also holds {others} other staged proposal(s) of source"
            f" {row.name!r}, on files it does not feed your knowledge bases (not shown)"
        )
    asked = r.requested_by or ""  # another's: its kind only (local:<user> names an account)
    view["requested_by"] = asked if asked == caller else asked.split(":")[0]
    shown_warnings = _agent_warnings(list(warnings), row.name, "approving checks the remote again")
    if r.overwrites and not r.pushed:
        shown_warnings.append(
            f"approving this review overwrites {len(r.overwrites)} commit(s) on {r.branch!r} that gitkb"
            " did not push; the reviewer sees them and decides"
        )
    if shown_warnings:
        view["Warnings"] = shown_warnings
    return view
