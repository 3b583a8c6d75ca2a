"""Forge webhooks: ``POST /webhooks/github``, ``/webhooks/gitlab``, ``/webhooks/generic``.

Order of checks, each refusing with nothing enqueued: body size and JSON content
type (``BodyGate``, 413/415) → a signature header at all (401) → a JSON object
(400) → the source, by ``?source=NAME`` or the payload's repository URL (404) →
the signature against that source's secret (401) → the payload's repository is the
source's remote (403 ``forbidden``, ``refused: repository_mismatch``, audited; every
event, ping too) → the event → its commit, a
hint checked against the tracked branch fetched from the remote: not reachable
from its head (a staged proposal, another branch, an unknown id) 400
``invalid_argument``; the synced commit or an older one (a delivery replayed
under a new id) 200 ``{"status": "stale"}`` with no job. A merge or push to the
source's branch answers 202 with the sync job id; a replayed delivery id 200
with ``{"duplicate": true, "job_id": <first delivery's job>}``; a ping or an
event that needs no sync 200.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse

from gitkb.core import action_table
from gitkb.core.errors import Unauthorized
from gitkb.http.auth import Principal, authenticated
from gitkb.http.limits import run_blocking
from gitkb.http.state import AppState, get_state
from gitkb.services.access import policy
from gitkb.services.changes import webhook_intake as intake
from gitkb.services.changes import webhooks as wh
from gitkb.services.changes.webhooks import WebhookEvent
from gitkb.stores.catalog.sources import SourceRow

router = APIRouter(prefix="/webhooks", tags=["webhooks"])
JSON_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"type": "object", "additionalProperties": True}}},
    }
}
SOURCE_QUERY = Query(None, description="the source's name; else matched by the payload's repository URL")


async def _source(state: AppState, name: str | None, urls: tuple[str, ...]) -> tuple[SourceRow, str | None]:
    ctx = state.workspace.ctx

    def lookup() -> tuple[SourceRow, str | None]:
        row = intake.find_source(ctx, name, urls)
        return row, intake.secret_for(ctx, row, state.cfg.webhook_secret)

    return await run_blocking(state, lookup)


def _no_secret(row: SourceRow) -> Unauthorized:
    return Unauthorized(
        f"source {row.name!r} has no webhook secret, so no delivery can be verified",
        next_steps=[
            "set one with `gitkb source add ... --webhook-secret`, or GITKB_WEBHOOK_SECRET on the server"
        ],
    )


def _outcome(result: dict[str, Any]) -> str:
    """What became of a verified delivery, for ``gitkb_webhook_deliveries_total``."""
    if result.get("duplicate"):
        return "duplicate"
    if result.get("queued"):
        return "queued"
    return "stale" if result.get("status") == "stale" else "ignored"


async def _accept(
    request: Request, provider: str, delivery_id: str | None, row: SourceRow, event: WebhookEvent
) -> JSONResponse:
    state = get_state(request)
    ctx = state.workspace.ctx
    result: dict[str, Any] = await run_blocking(
        state,
        intake.accept,
        ctx,
        provider=provider,
        delivery_id=delivery_id,
        row=row,
        event=event,
        held_to=state.cfg.allowed_roots,  # a webhook is remote: a local-path source only inside them
        write=True,
    )
    request.state.webhook_outcome = _outcome(result)  # counted by gitkb.http.metrics.RequestMeter
    return JSONResponse(result, status_code=202 if result.get("queued") else 200)


@router.post(
    "/github",
    openapi_extra=JSON_BODY,
    summary="GitHub: pull_request merged, push, ping (X-Hub-Signature-256)",
)
async def github(request: Request, source: str | None = SOURCE_QUERY) -> JSONResponse:
    state = get_state(request)
    signature = request.headers.get("x-hub-signature-256")
    if not signature:
        raise Unauthorized("missing X-Hub-Signature-256", next_steps=["give the GitHub webhook a secret"])
    body = await request.body()
    payload = wh.decode_json(body)
    row, secret = await _source(state, source, wh.repository_identity("github", payload).urls)
    if not secret:
        raise _no_secret(row)
    if not wh.verify_github_signature(secret, body, signature):
        raise Unauthorized("X-Hub-Signature-256 does not match the body and the source's secret")
    event = wh.parse_github(request.headers.get("x-github-event"), payload)
    delivery = request.headers.get("x-github-delivery")
    if event.kind == "ping":
        ctx = state.workspace.ctx
        check = intake.check_repository
        await run_blocking(
            state, check, ctx, provider="github", delivery_id=delivery, row=row, event=event, write=True
        )
        request.state.webhook_outcome = "ping"
        return JSONResponse({"Success": True, "event": "ping", "source": row.name, "queued": False})
    return await _accept(request, "github", delivery, row, event)


@router.post(
    "/gitlab",
    openapi_extra=JSON_BODY,
    summary="GitLab: Merge Request Hook (merged), Push Hook (X-Gitlab-Token)",
)
async def gitlab(request: Request, source: str | None = SOURCE_QUERY) -> JSONResponse:
    state = get_state(request)
    token = request.headers.get("x-gitlab-token")
    if not token:
        raise Unauthorized("missing X-Gitlab-Token", next_steps=["give the GitLab webhook a secret token"])
    payload = wh.decode_json(await request.body())
    row, secret = await _source(state, source, wh.repository_identity("gitlab", payload).urls)
    if not secret:
        raise _no_secret(row)
    if not wh.verify_gitlab_token(secret, token):
        raise Unauthorized("X-Gitlab-Token does not match the source's secret")
    event = wh.parse_gitlab(request.headers.get("x-gitlab-event"), payload)
    delivery = request.headers.get("idempotency-key") or request.headers.get("x-gitlab-event-uuid")
    return await _accept(request, "gitlab", delivery, row, event)


@router.post(
    "/generic",
    openapi_extra=JSON_BODY,
    summary="CI: {source, commit} with a bearer token of scope operate (or write)",
)
async def generic(request: Request, who: Principal = Depends(authenticated)) -> JSONResponse:  # noqa: B008
    policy.authorize(who, action_table.ACTIONS["source_sync"])  # a sync: the operate class
    state = get_state(request)
    name, commit = wh.parse_generic(wh.decode_json(await request.body()))
    row, _ = await _source(state, name, ())
    event = WebhookEvent("generic", "push", branch=row.branch, commit=commit)
    return await _accept(request, "generic", request.headers.get("idempotency-key"), row, event)
