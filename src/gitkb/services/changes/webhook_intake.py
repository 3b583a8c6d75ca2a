"""Webhook intake: match a delivery to its source, give its secret, deduplicate, request the sync.

The pure part (signatures, payloads, URL normalisation) is ``services.changes.webhooks``;
this module does the catalog work around it. A source's secret is its own
(``set_webhook_secret``, e.g. from ``source add --webhook-secret``) or the
server-wide fallback the entry point read from ``GITKB_WEBHOOK_SECRET``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gitkb.core.errors import Forbidden, GitkbError, NotFound, StoreUnavailable
from gitkb.services.changes import audit
from gitkb.services.changes.sources import merges, reach
from gitkb.services.changes.sources.merges import change_request_merged
from gitkb.services.changes.sources.sync import check_target
from gitkb.services.changes.webhooks import WebhookEvent, names_repository, normalise_repo_url
from gitkb.services.context import Context
from gitkb.stores.catalog import deliveries
from gitkb.stores.catalog import sources as source_rows
from gitkb.stores.catalog.sources import SourceRow


def find_source(ctx: Context, name: str | None, repo_urls: Iterable[str]) -> SourceRow:
    """By ``?source=NAME`` when given, else the source whose URL equals one of the payload's."""
    conn = ctx.catalog.conn
    if name:
        row = source_rows.get_by_name(conn, name)
        if row is None:
            raise NotFound(f"no source named {name!r}", next_steps=["check ?source= on the webhook URL"])
        return row
    wanted = {normalise_repo_url(u) for u in repo_urls} - {""}
    if wanted:
        for row in source_rows.list_all(conn):
            if normalise_repo_url(row.url) in wanted:
                return row
    raise NotFound(
        "no registered source matches this repository",
        next_steps=[
            "add ?source=NAME to the webhook URL, or register the repository with `gitkb source add`"
        ],
        details={"repository_urls": sorted(wanted)},
    )


REPOSITORY_MISMATCH = "repository_mismatch"  # the refusal's stable ``refused`` detail (code ``forbidden``)


def check_repository(
    ctx: Context, *, provider: str, delivery_id: str | None, row: SourceRow, event: WebhookEvent
) -> None:
    """A GitHub or GitLab delivery must be for the repository ``row`` follows (its payload's
    ``repository`` / ``project``, ``webhooks.names_repository``): a signed delivery for another
    repository posted to ``?source=NAME`` (a shared secret, a replayed body) is refused with
    ``forbidden`` (``refused: repository_mismatch``) before anything is claimed or queued, and
    the refusal is written to the audit log. Generic deliveries name their source themselves."""
    if provider not in ("github", "gitlab") or names_repository(event.repository, row.url):
        return
    urls = sorted({normalise_repo_url(u) for u in event.repository.urls} - {""})
    audit.record(
        ctx,
        actor=f"webhook:{provider}",
        action="webhook.refused",
        target=row.name,
        result=REPOSITORY_MISMATCH,
        detail={"delivery_id": delivery_id, "event": event.kind, "repository_urls": urls},
    )
    raise Forbidden(
        f"this {provider} delivery is for another repository than the one source {row.name!r} follows;"
        " nothing was queued",
        next_steps=[
            "point each repository's webhook at its own source's ?source=NAME, or leave ?source= out"
            " to match the source by the payload's repository URL"
        ],
        details={"refused": REPOSITORY_MISMATCH, "repository_urls": urls},
    )


def secret_for(ctx: Context, row: SourceRow, fallback: str | None) -> str | None:
    return deliveries.get_secret(ctx.catalog.conn, row.id) or fallback or None


def set_webhook_secret(ctx: Context, source: str, secret: str | None) -> dict[str, Any]:
    """Set (or, with an empty value, clear) a source's webhook secret; it is never shown again."""
    row = source_rows.get_by_name(ctx.catalog.conn, source)
    if row is None:
        raise NotFound(f"no source named {source!r}")
    with ctx.catalog.write() as conn:
        deliveries.set_secret(conn, row.id, secret or None)
    return {"Message": f"webhook secret for {source!r} {'set' if secret else 'cleared'}", "source": source}


def request_sync(
    ctx: Context, row: SourceRow, commit: str, *, held_to: tuple[Path, ...] | None = None
) -> dict[str, Any]:
    """Enqueue the source's sync to ``commit``: the same job, deduplicated per (source, commit),
    that a local-forge merge enqueues. ``{job_id, queued, deduplicated, reason?}``.

    The payload's sha is a hint: the tracked branch is fetched first and a commit not reachable
    from its head (a staged proposal, another branch, an unknown id) is refused with
    ``InvalidArgument`` before anything is queued; one already synced, or older than the synced
    commit (a replayed delivery), queues nothing (``status: stale``). When the remote cannot be
    reached now the job is queued anyway: the sync makes the same checks when it runs."""
    try:
        seen = check_target(ctx, row.name, commit)
    except StoreUnavailable:
        seen = {"status": "sync", "commit": commit}
    if seen["status"] != "sync":
        return {
            "source": row.name,
            "commit": seen["commit"],
            "queued": False,
            "job_id": None,
            "deduplicated": seen["status"] == "unchanged",
            "status": seen["status"],
            "reason": seen["reason"],
        }
    return dict(merges.request_sync(ctx, row.name, seen["commit"], held_to=held_to))


def accept(
    ctx: Context,
    *,
    provider: str,
    delivery_id: str | None,
    row: SourceRow,
    event: WebhookEvent,
    held_to: tuple[Path, ...] | None = None,
) -> dict[str, Any]:
    """A verified delivery → its answer. Replays of a delivery id answer with the first job; a
    delivery for another repository than the source's is refused (``check_repository``); held to
    ``held_to`` (the server's allowed roots: a webhook is remote), a source whose url is a path of
    this disk outside them is refused (``reach.refuse_outside``) before anything is fetched,
    claimed, settled or queued, and the sync job it queues carries them."""
    check_repository(ctx, provider=provider, delivery_id=delivery_id, row=row, event=event)
    wanted = event.wants_sync and event.branch == row.branch
    if wanted:  # a settle and a sync fetch from the source's url
        reach.refuse_outside(ctx, row.id, held_to)
    reason = event.reason
    if event.wants_sync and not wanted:
        reason = f"the event is for branch {event.branch!r}; source {row.name!r} follows {row.branch!r}"
    base = {"source": row.name, **event.as_dict()}
    if reason:
        base["reason"] = reason
    if delivery_id:
        with ctx.catalog.write() as conn:
            earlier = deliveries.claim(
                conn, provider, delivery_id, source_id=row.id, commit=event.commit, event=event.kind
            )
        if earlier is not None:
            return {**base, "Success": True, "duplicate": True, "job_id": earlier.job_id, "queued": False}
    if not wanted:
        return {**base, "Success": True, "duplicate": False, "job_id": None, "queued": False}
    assert event.commit is not None
    settled = _settle_merge(ctx, row, event)
    try:
        sync = request_sync(ctx, row, event.commit, held_to=held_to)
    except BaseException:
        if delivery_id:
            with ctx.catalog.write() as conn:
                deliveries.release(conn, provider, delivery_id)
        raise
    job_id = sync.get("job_id")
    if delivery_id:
        with ctx.catalog.write() as conn:
            deliveries.set_job(conn, provider, delivery_id, job_id)
    out = {**base, "Success": True, "duplicate": False, "job_id": job_id, "queued": job_id is not None}
    if sync.get("deduplicated") and job_id:
        out["deduplicated"] = True  # the same sync was already queued (e.g. by a local-forge merge)
    if sync.get("reason"):
        out["reason"] = sync["reason"]
    if sync.get("status"):
        out["status"] = sync["status"]  # stale: older than the synced commit, nothing to do
    if settled:
        out["settled"] = settled
    return out


def _settle_merge(ctx: Context, row: SourceRow, event: WebhookEvent) -> dict[str, Any] | None:
    """A merge event names its change request: settle its review even when the forge squashed or
    rebased (services.changes.sources.merges.change_request_merged). A failure here never blocks the sync."""
    number = event.extra.get("number") if event.provider == "github" else event.extra.get("iid")
    if (
        event.kind != "merge"
        or not isinstance(number, int)
        or isinstance(number, bool)
        or event.commit is None
    ):
        return None
    try:
        return change_request_merged(ctx, row.name, number, event.commit)
    except GitkbError as exc:
        return {"reviews_merged": [], "reason": f"could not settle change request #{number}: {exc.message}"}
