"""Proposals: staged edits to a source, one commit each on ``gitkb/proposals/<source>``.

``propose_kb_edit`` (full content, or an exact-once search/replace),
``propose_kb_delete`` and ``propose_kb_rename`` check everything first --
the path rules of :mod:`gitkb.core.paths` (nothing outside a first-level
folder of the documents root, no symlinks, supported extensions), exactly
one of content/search, the search text occurring exactly once, text not
binary, size under ``[proposals] max_bytes``, sidecars still valid -- and
only then write one commit in memory on top of the earlier staged proposals
(pygit2, no checkout) and move the branch with a compare-and-swap. Any
failure leaves the branch exactly as it was. Staging touches neither the
indexes nor the remote: ``open_kb_pull_request`` (services.changes.review_request) records a
review, and only its approval (services.changes.review) pushes.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from gitkb.core.errors import Conflict, InvalidArgument, NotFound
from gitkb.core.paths import normalize_proposal_path
from gitkb.services.changes import audit, fed_view
from gitkb.services.changes.sources import staging
from gitkb.services.changes.sources.branches import record
from gitkb.services.changes.sources.registry import open_repo, proposal_branch, require_fed, resolve_source
from gitkb.services.changes.sources.sidecars import SCHEMA_FILES, parse_sidecar
from gitkb.services.changes.sources.staging import author as author
from gitkb.services.changes.sources.staging import (  # listing, showing, discarding, replaying
    discard_proposal,
    get_proposal,
    list_proposals,
    restack,
    show_proposal,
)
from gitkb.services.context import Context
from gitkb.stores.catalog import proposals as prop_rows
from gitkb.stores.catalog.sources import SourceRow
from gitkb.stores.repos import ManagedRepo

DEFAULT_MAX_BYTES = 1024 * 1024
_BINARY = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")  # control characters text never holds


def _settings(ctx: Context) -> dict[str, Any]:
    return ctx.settings.section("proposals")


def _text_arg(name: str, value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidArgument(f"{name} must be a string, got {type(value).__name__}")
    return value


def staging_base(ctx: Context, row: SourceRow, repo: ManagedRepo) -> str:
    """Where the next proposal goes: the branch tip while proposals are staged, else the latest base."""
    head = repo.head(proposal_branch(row))
    if head is not None and prop_rows.list_proposals(ctx.catalog.conn, source_id=row.id, states=("staged",)):
        return head
    base = repo.tracking_head(row.branch) or row.synced_commit
    if base is None:
        raise NotFound(f"source {row.name!r} has no fetched commit yet; run `gitkb source sync {row.name}`")
    return base


def _check_content(ctx: Context, row: SourceRow, path: str, text: str) -> bytes:
    data = text.encode("utf-8", "surrogatepass") if text else b""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(f"content for {path!r} is not valid Unicode text (lone surrogates)") from None
    limit = int(_settings(ctx).get("max_bytes") or DEFAULT_MAX_BYTES)
    if len(data) > limit:
        raise InvalidArgument(
            f"content for {path!r} is {len(data)} bytes; the limit is {limit} ([proposals] max_bytes)",
            details={"size": len(data), "limit": limit},
        )
    found = _BINARY.search(text)
    if found is not None:
        bad = found.group()
        raise InvalidArgument(
            f"content for {path!r} looks binary (control character U+{ord(bad):04X}); only text can be proposed"
        )
    name = path.rsplit("/", 1)[-1]
    root = row.documents_root.strip("/")
    if name in SCHEMA_FILES and path == (f"{root}/{name}" if root else name):
        parse_sidecar(name, data, path)  # ValidationFailed with the schema's message
    elif name.lower().endswith(".json"):
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidArgument(
                f"{path!r} would not be valid JSON: {exc.msg} (line {exc.lineno})"
            ) from None
    elif name.lower().endswith((".yml", ".yaml")):
        try:
            yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InvalidArgument(f"{path!r} would not be valid YAML: {exc}") from None
    return data


def _current_text(repo: ManagedRepo, base: str, path: str) -> str | None:
    if repo.is_symlink_path(base, path):
        raise InvalidArgument(
            f"invalid path {path!r}: it is or goes through a symlink; gitkb does not follow them"
        )
    try:
        data = repo.read_blob(base, path)
    except NotFound:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidArgument(
            f"{path!r} is not UTF-8 text on the proposal branch; it cannot be edited here"
        ) from None


def _stage(
    ctx: Context,
    row: SourceRow,
    repo: ManagedRepo,
    base: str,
    *,
    op: str,
    path: str,
    new_path: str | None,
    changes: dict[str, bytes | None],
    renames: dict[str, str],
    note: str,
    actor: str,
    detail: dict[str, Any] | None = None,
) -> dict[str, Any]:
    branch = proposal_branch(row)
    before = repo.head(branch)
    subject = {"add": "add", "edit": "edit", "delete": "delete", "rename": "rename"}[op]
    title = f"gitkb: {subject} {path}" + (f" -> {new_path}" if new_path else "")
    message = title + (f"\n\n{note.strip()}" if note.strip() else "")
    if before is not None and before != base:  # nothing staged: restart the branch from the latest base
        repo.reset_branch(branch, base, expected=before)
    try:
        commit = repo.commit_changes(
            branch, base, changes, renames=renames, message=message, author=author(ctx)
        )
    except BaseException:
        if before is not None and before != base:
            repo.reset_branch(branch, before, expected=base)
        raise
    try:
        with ctx.catalog.write() as w:
            prop = prop_rows.insert_proposal(
                w,
                proposal_id=prop_rows.new_proposal_id(),
                source_id=row.id,
                op=op,
                path=path,
                new_path=new_path,
                note=note,
                parent_sha=base,
                commit_sha=commit,
                detail=detail,
            )
            record(w, repo, prop.id, base, commit)  # the branch can be rebuilt from the catalog
    except BaseException:
        if before is None:
            repo.delete_branch(branch, expected=commit)
        else:
            repo.reset_branch(branch, before, expected=commit)
        raise
    audit.record(
        ctx,
        actor=actor,
        action="proposal.stage",
        target=row.name,
        result="staged",
        detail={"proposal_id": prop.id, "op": op, "path": path, "new_path": new_path},
    )
    return {
        "Message": f"Staged {op} of {path!r} as {prop.id} on {branch}; open_kb_pull_request sends it for review",
        "proposal_id": prop.id,
        "source": row.name,
        "branch": branch,
        "op": op,
        "path": path,
        "new_path": new_path,
        "commit": commit,
        "base": base,
        "diff": repo.unified_diff(base, commit),
        "changed_files": _changed(op, path, new_path),
    }


def _changed(op: str, path: str, new_path: str | None) -> list[dict[str, str]]:
    """What this one proposal changes, as the forge will list it (no tree diff needed)."""
    if op == "rename":
        assert new_path is not None
        return [{"path": new_path, "status": "R", "old_path": path}]
    return [{"path": path, "status": {"add": "A", "edit": "M", "delete": "D"}[op]}]


def propose_kb_edit(
    ctx: Context,
    source_id_or_index: Any,
    relative_path: Any,
    content: Any = "",
    search: Any = "",
    replace: Any = "",
    note: Any = "",
    *,
    actor: str = "agent",
    fed_only: bool = False,
) -> dict[str, Any]:
    content, search = _text_arg("content", content), _text_arg("search", search)
    replace, note = _text_arg("replace", replace), _text_arg("note", note)
    if bool(content) == bool(search):
        raise InvalidArgument(
            "give exactly one of content (the whole new file) or search (text that occurs exactly once, "
            "with replace as its replacement)"
            + (" -- both were given" if content else " -- neither was given")
        )
    if content and replace:
        raise InvalidArgument("replace goes with search; with content, pass the whole new file only")
    row = resolve_source(ctx, source_id_or_index)
    path = normalize_proposal_path(relative_path, documents_root=row.documents_root)
    repo = open_repo(ctx, row)
    base = staging_base(ctx, row, repo)
    if fed_only:  # an agent: only what the source feeds the indexes it may use
        require_fed(row, repo, base, path)
    current = _current_text(repo, base, path)
    if search:
        if current is None:
            raise NotFound(
                f"{path!r} does not exist on the proposal branch; pass content to create it",
                details={"path": path},
            )
        count = current.count(search)
        if count != 1:
            raise InvalidArgument(
                f"the search text occurs {count} times in {path!r}; it must occur exactly once"
                + (
                    " (add surrounding text to make it unique)"
                    if count > 1
                    else " (copy it exactly from the file)"
                ),
                details={"occurrences": count, "path": path},
            )
        new_text = current.replace(search, replace, 1)
    else:
        new_text = content
    data = _check_content(ctx, row, path, new_text)
    if current is not None and new_text == current:
        raise InvalidArgument(f"the edit leaves {path!r} as it is; nothing to stage")
    return _stage(
        ctx,
        row,
        repo,
        base,
        op="add" if current is None else "edit",
        path=path,
        new_path=None,
        changes={path: data},
        renames={},
        note=note,
        actor=actor,
        detail={"search": search, "replace": replace} if search else None,
    )


def propose_kb_delete(
    ctx: Context,
    source_id_or_index: Any,
    relative_path: Any,
    note: Any = "",
    *,
    actor: str = "agent",
    fed_only: bool = False,
) -> dict[str, Any]:
    note = _text_arg("note", note)
    row = resolve_source(ctx, source_id_or_index)
    path = normalize_proposal_path(relative_path, documents_root=row.documents_root)
    repo = open_repo(ctx, row)
    base = staging_base(ctx, row, repo)
    if fed_only:  # an agent: only what the source feeds the indexes it may use
        require_fed(row, repo, base, path)
    if _current_text_or_none(repo, base, path) is None:
        raise NotFound(
            f"{path!r} does not exist on the proposal branch; nothing to delete", details={"path": path}
        )
    return _stage(
        ctx,
        row,
        repo,
        base,
        op="delete",
        path=path,
        new_path=None,
        changes={path: None},
        renames={},
        note=note,
        actor=actor,
    )


def _current_text_or_none(repo: ManagedRepo, base: str, path: str) -> bytes | None:
    if repo.is_symlink_path(base, path):
        raise InvalidArgument(
            f"invalid path {path!r}: it is or goes through a symlink; gitkb does not follow them"
        )
    try:
        return repo.read_blob(base, path)
    except NotFound:
        return None


def propose_kb_rename(
    ctx: Context,
    source_id_or_index: Any,
    relative_path: Any,
    new_relative_path: Any,
    note: Any = "",
    *,
    actor: str = "agent",
    fed_only: bool = False,
) -> dict[str, Any]:
    note = _text_arg("note", note)
    row = resolve_source(ctx, source_id_or_index)
    old = normalize_proposal_path(relative_path, documents_root=row.documents_root)
    new = normalize_proposal_path(new_relative_path, documents_root=row.documents_root)
    if old == new:
        raise InvalidArgument(f"{old!r} and the new path are the same; nothing to rename")
    repo = open_repo(ctx, row)
    base = staging_base(ctx, row, repo)
    if fed_only:  # an agent: only what the source feeds the indexes it may use
        require_fed(row, repo, base, old, new)
    if _current_text_or_none(repo, base, old) is None:
        raise NotFound(
            f"{old!r} does not exist on the proposal branch; nothing to rename", details={"path": old}
        )
    if _current_text_or_none(repo, base, new) is not None:
        raise Conflict(
            f"cannot rename {old!r} to {new!r}: the target exists",
            next_steps=["pick another new path, or propose deleting the target first (propose_kb_delete)"],
            details={"path": new},
        )
    return _stage(
        ctx,
        row,
        repo,
        base,
        op="rename",
        path=old,
        new_path=new,
        changes={},
        renames={old: new},
        note=note,
        actor=actor,
    )


def refresh_proposals(
    ctx: Context, source: Any, *, actor: str = "operator", fed_only: bool = False
) -> dict[str, Any]:
    """``sources.staging.refresh_proposals``: every staged proposal of the source made again on
    the target branch's head. ``fed_only`` (an agent's call): the answer tells only of the
    proposals on files the source feeds its indexes (``require_fed``: the paths the agent's
    binding reads, whoever staged them); an operator's proposal on any other file under the
    documents root is refreshed all the same but neither listed nor counted, so its path, its
    id and the file's current lines stay out of the agent's answer."""
    out = staging.refresh_proposals(ctx, source, actor=actor)
    return fed_view.fed_refresh(ctx, out) if fed_only else out


__all__ = [
    "discard_proposal",
    "get_proposal",
    "list_proposals",
    "propose_kb_delete",
    "propose_kb_edit",
    "propose_kb_rename",
    "refresh_proposals",
    "restack",
    "show_proposal",
    "staging_base",
]
