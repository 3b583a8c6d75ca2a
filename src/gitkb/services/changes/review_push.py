"""The outbound half of the review gate: what a push would overwrite, the push itself, and its
reconciliation after a crash.

* :func:`remote_state` fetches the proposal branch and lists the commits on it that gitkb did not
  push and the push would take off (``{sha, author, message}``): reachable from the remote head,
  from neither the staged head, the base branch nor any commit gitkb pushed for the source.
* :func:`push_and_open` records ``pushing_sha`` *before* ``git push --force-with-lease``, then the
  push, then the change request; ``pushing_sha`` is cleared only once both outcomes are recorded.
* :func:`reconcile_in_flight` settles a review whose ``pushing_sha`` is set by a process that is
  gone (a process holds ``<home>/locks/push-<source id>.lock`` while it pushes; the OS drops the
  lock when the process dies): the remote branch holds the sha -> recorded as pushed and the
  change request opened or updated (``open_or_update`` finds the one already open, so it exists
  once); otherwise the push never happened -> ``push_error`` says to approve again. Review calls
  (list, show, open, approve, deny) and every sync run it first; with nothing in flight it is one
  query.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gitkb.core.change_planning import changed_files
from gitkb.core.errors import Conflict, GitkbError, NotFound
from gitkb.core.faults import crash_point
from gitkb.forges import open_or_update
from gitkb.services.changes import audit
from gitkb.services.changes.sources.registry import forge_for, open_repo, proposal_branch
from gitkb.services.context import Context
from gitkb.stores.catalog import proposals as prop_rows
from gitkb.stores.catalog import sources as source_rows
from gitkb.stores.catalog.proposals import ReviewRow
from gitkb.stores.catalog.sources import SourceRow
from gitkb.stores.git_push import commits_dropped
from gitkb.stores.git_replay import merge_base
from gitkb.stores.repos import ManagedRepo

log = logging.getLogger("gitkb.review")
INTERRUPTED = "the push was interrupted before it reached the remote (gitkb stopped); approve again to retry"


def _lock_path(ctx: Context, source_id: str) -> Path:
    return ctx.settings.home / "locks" / f"push-{source_id}.lock"


@contextlib.contextmanager
def push_lock(ctx: Context, source_id: str, *, wait: bool = False) -> Iterator[bool]:
    """Hold the source's push lock; yields False when another live process holds it (``wait``: block)."""
    path = _lock_path(ctx, source_id)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def overwrite_warning(r: ReviewRow) -> str | None:
    if not r.overwrites:
        return None
    shown = ", ".join(f"{c['sha'][:12]} ({c['author']}: {c['message']})" for c in r.overwrites[:5])
    more = f" and {len(r.overwrites) - 5} more" if len(r.overwrites) > 5 else ""
    return (
        f"approving this review overwrites {len(r.overwrites)} commit(s) on {r.branch!r} that gitkb did not "
        f"push: {shown}{more}; approve with the overwrite acknowledgement (gitkb review approve {r.id} --overwrite)"
    )


def diff_with_warning(r: ReviewRow) -> str:
    """The staged diff, preceded (when the push overwrites others' commits) by ``#`` lines naming them;
    ``git apply`` and the web page's parser skip text before the first ``diff --git``."""
    if not r.overwrites:
        return r.diff
    lines = [
        f"# WARNING: approving this review force-replaces {r.branch} on the remote and removes "
        f"{len(r.overwrites)} commit(s) gitkb did not push:",
        *(f"#   {c['sha'][:12]}  {c['author']}  {c['message']}" for c in r.overwrites),
        f"# Approving needs the overwrite acknowledgement (gitkb review approve {r.id} --overwrite).",
    ]
    return "\n".join(lines) + "\n" + r.diff


def remote_state(
    ctx: Context, row: SourceRow, repo: ManagedRepo, *, head: str, base: str
) -> tuple[str | None, list[dict[str, str]]]:
    """Fetch the proposal branch: ``(its remote head or None, the others' commits a push of head drops)``."""
    try:
        remote = repo.fetch(proposal_branch(row))
    except NotFound:
        return None, []
    keep = [head, base, *prop_rows.pushed_shas(ctx.catalog.conn, row.id)]
    return remote, commits_dropped(repo.repository, remote, keep)


def push_and_open(
    ctx: Context, r: ReviewRow, row: SourceRow, repo: ManagedRepo, reviewer: str, expected: str | None
) -> dict[str, Any]:
    """Push ``r.push_sha`` leased on ``expected``, then open or update the change request."""
    with ctx.catalog.write() as w:
        prop_rows.update_review(w, r.id, pushing_sha=r.push_sha, expected_remote_sha=expected)
    crash_point("review.before_push")
    try:
        repo.push_with_lease(r.branch, expected, sha=r.push_sha)
    except GitkbError as exc:
        stale = isinstance(exc, Conflict)
        with ctx.catalog.write() as w:
            prop_rows.update_review(
                w, r.id, pushing_sha=None, push_error="stale lease" if stale else exc.message
            )
        audit.record(
            ctx,
            actor=reviewer,
            action="push",
            target=row.name,
            result="stale_lease" if stale else "failed",
            detail={"review_id": r.id, "branch": r.branch, "expected": expected, "error": exc.message},
        )
        details = {"review_id": r.id, "review_state": "approved", "pushed": False}
        if stale:
            raise Conflict(
                f"review {r.id} is approved but was not pushed: {r.branch!r} moved on the remote while gitkb "
                f"pushed (expected {expected or 'no branch'}); nothing was overwritten",
                next_steps=[
                    f"approve review {r.id} again: gitkb fetches the branch and lists what would be overwritten",
                    f"to replace those commits, approve with the acknowledgement: gitkb review approve {r.id} "
                    "--overwrite",
                ],
                details={**details, "stale_lease": True},
            ) from None
        exc.details.update(details)
        raise
    crash_point("review.after_push")
    _record_pushed(ctx, r, row, reviewer)
    return open_change_request(ctx, prop_rows.get_review(ctx.catalog.conn, r.id) or r, row, repo, reviewer)


def _record_pushed(
    ctx: Context, r: ReviewRow, row: SourceRow, actor: str, *, reconciled: bool = False
) -> None:
    with ctx.catalog.write() as w:
        prop_rows.update_review(w, r.id, pushed=True, push_error=None)
    detail: dict[str, Any] = {"review_id": r.id, "branch": r.branch, "sha": r.push_sha}
    if reconciled:
        detail["reconciled"] = True
    audit.record(ctx, actor=actor, action="push", target=row.name, result="pushed", detail=detail)


def open_change_request(
    ctx: Context, r: ReviewRow, row: SourceRow, repo: ManagedRepo, reviewer: str
) -> dict[str, Any]:
    try:
        forge = forge_for(ctx, row)
        cr, created = open_or_update(forge, head=r.branch, base=r.base_branch, title=r.title, body=r.body)
    except GitkbError as exc:
        with ctx.catalog.write() as w:
            prop_rows.update_review(w, r.id, pushing_sha=None, push_error=f"change request: {exc.message}")
        audit.record(
            ctx,
            actor=reviewer,
            action="change_request.open",
            target=row.name,
            result="failed",
            detail={"review_id": r.id, "error": exc.message},
        )
        exc.details.update({"review_id": r.id, "review_state": "approved", "pushed": True})
        exc.next_steps = [
            *exc.next_steps,
            f"the branch is pushed; approve review {r.id} again to retry the PR step",
        ]
        raise
    crash_point("review.after_change_request")
    base_head = repo.tracking_head(r.base_branch) or r.base_sha
    start = merge_base(repo.repository, r.push_sha, base_head) or r.base_sha
    files = changed_files(repo.diff_names(start, r.push_sha))
    with ctx.catalog.write() as w:
        prop_rows.update_review(
            w,
            r.id,
            cr_number=cr.number,
            cr_url=cr.url,
            changed_files=files,
            push_error=None,
            pushing_sha=None,
        )
    audit.record(
        ctx,
        actor=reviewer,
        action="change_request.open" if created else "change_request.update",
        target=row.name,
        result="ok",
        detail={"review_id": r.id, "number": cr.number, "url": cr.url},
    )
    return {"number": cr.number, "url": cr.url, "created": created, "changed_files": files}


def settle(ctx: Context, r: ReviewRow, row: SourceRow, repo: ManagedRepo) -> None:
    """Finish a review left with ``pushing_sha`` by a process that died (hold the push lock)."""
    actor = r.reviewer or "reconcile"
    if not r.pushed:
        try:
            remote: str | None = repo.fetch(r.branch)
        except NotFound:
            remote = None
        sha = r.pushing_sha or r.push_sha
        if remote is None or not (remote == sha or repo.is_ancestor(sha, remote)):
            with ctx.catalog.write() as w:
                prop_rows.update_review(w, r.id, pushing_sha=None, push_error=INTERRUPTED)
            audit.record(
                ctx,
                actor=actor,
                action="push",
                target=row.name,
                result="interrupted",
                detail={"review_id": r.id, "branch": r.branch, "sha": sha, "remote": remote},
            )
            return
        _record_pushed(ctx, r, row, actor, reconciled=True)
    base = repo.tracking_head(r.base_branch)
    if base is not None and repo.is_ancestor(r.push_sha, base):  # merged already: no change request to open
        with ctx.catalog.write() as w:
            prop_rows.update_review(w, r.id, pushing_sha=None)
        return
    fresh = prop_rows.get_review(ctx.catalog.conn, r.id)
    if fresh is not None:
        with contextlib.suppress(GitkbError):  # recorded as push_error; approving again retries
            open_change_request(ctx, fresh, row, repo, actor)


def reconcile_in_flight(
    ctx: Context, *, source_id: str | None = None, reachable: Callable[[SourceRow], bool] | None = None
) -> list[str]:
    """Settle every review a dead process left mid-push; returns their ids. Never raises for the remote.
    ``reachable`` (a remote caller's, ``reach.reachable``): the sources whose url it may fetch
    from; the others' reviews are left for a caller that may."""
    done = []
    for r in prop_rows.reviews_in_flight(ctx.catalog.conn, source_id=source_id):
        with push_lock(ctx, r.source_id) as held:
            if not held:
                continue  # a live process is pushing it right now
            fresh = prop_rows.get_review(ctx.catalog.conn, r.id)
            if fresh is None or fresh.pushing_sha is None:
                continue
            row = source_rows.get_by_id(ctx.catalog.conn, r.source_id)
            if row is not None and reachable is not None and not reachable(row):
                continue  # its url is a path of this disk outside the caller's roots: not fetched
            try:
                if row is None:
                    raise NotFound(f"the source of review {r.id} was removed")
                settle(ctx, fresh, row, open_repo(ctx, row))
            except GitkbError as exc:
                log.warning("could not reconcile the push of review %s yet: %s", r.id, exc.message)
                continue
            done.append(r.id)
    return done
