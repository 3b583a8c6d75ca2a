"""The review queue: pending reviews newest first with their staged diffs, a history tab of
decided ones, one review's page, and the Approve and Deny forms (``review`` scope, CSRF-checked;
the logged-in token's name is the reviewer the audit log records). A review whose push would
overwrite commits gitkb did not push shows them above its diff, and its Approve form carries a
checkbox (``overwrite=yes``) without which the approval is refused. A proposal still staged (or in
conflict) of a review not pushed can be discarded from the review's page, one at a time."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response

from gitkb.core.errors import InvalidArgument
from gitkb.http.errors import status_for
from gitkb.http.ui.diff import parse_diff
from gitkb.http.ui.page import UiFailure, UiRoute, expect, render, ws_call
from gitkb.http.ui.session import check_csrf, require_page

router = APIRouter(prefix="/ui/reviews", route_class=UiRoute, include_in_schema=False)
INLINE_LIMIT = 20  # pending reviews shown with their diffs on the queue page
VIEWS = ("unified", "split")


def reviews_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(r) for r in result.get("Reviews") or []]


async def proposals_of(
    request: Request, review: dict[str, Any], cache: dict[str, dict[str, dict[str, Any]]]
) -> list[dict[str, Any]]:
    """The proposals a review contains, with their notes (one listing per source and request)."""
    source = str(review.get("source") or "")
    if source not in cache:
        got = await ws_call(request, "list_proposals", source=source, state="all")
        listed = got.get("Proposals", []) if got.get("Success") else []
        cache[source] = {str(p.get("proposal_id")): p for p in listed}
    known = cache[source]
    return [known.get(str(pid), {"proposal_id": pid, "note": ""}) for pid in review.get("proposal_ids") or []]


async def full_review(
    request: Request, rid: str, cache: dict[str, dict[str, dict[str, Any]]] | None = None
) -> dict[str, Any]:
    """show_review's dict plus its proposals (with notes) and its diff parsed for display."""
    review = expect(await ws_call(request, "show_review", review_id=rid))
    review["proposals"] = await proposals_of(request, review, {} if cache is None else cache)
    review["files"] = parse_diff(str(review.get("diff") or ""))
    return review


def _view(view: str) -> str:
    return view if view in VIEWS else "unified"


@router.get("")
async def queue(
    request: Request,
    tab: str = Query("pending", pattern="^(pending|history)$"),
    view: str = "unified",
) -> Response:
    who = require_page(request)
    if tab == "pending":
        listed = reviews_of(expect(await ws_call(request, "list_reviews", state="pending")))
        listed.sort(key=lambda r: r.get("created_at") or 0, reverse=True)
        cache: dict[str, dict[str, dict[str, Any]]] = {}
        reviews, held = [], 0
        for r in listed[:INLINE_LIMIT]:
            try:
                reviews.append(await full_review(request, str(r["review_id"]), cache))
            except UiFailure as exc:  # a source outside [server] allowed_roots: the page may not show it
                if exc.code != "forbidden":
                    raise
                held += 1
        more = max(0, len(listed) - INLINE_LIMIT)
    else:
        listed = reviews_of(expect(await ws_call(request, "list_reviews", state="all")))
        reviews = [r for r in listed if r.get("review_state") != "pending"]
        reviews.sort(key=lambda r: r.get("decided_at") or r.get("created_at") or 0, reverse=True)
        more = held = 0
    ctx = {
        "title": "Reviews",
        "page": "reviews",
        "tab": tab,
        "reviews": reviews,
        "more": more,
        "held": held,
        "view": _view(view),
        "can_review": who.has("review"),
    }
    return render(request, "ui/reviews.html", ctx)


@router.get("/{rid}")
async def one(request: Request, rid: str, view: str = "unified", done: str = "") -> Response:
    who = require_page(request)
    review = await full_review(request, rid)
    ctx = {
        "title": review.get("title") or f"Review {rid}",
        "page": "reviews",
        "r": review,
        "view": _view(view),
        "can_review": who.has("review"),
        "done": done,
        "error": None,
    }
    return render(request, "ui/review.html", ctx)


async def _decide(request: Request, rid: str, decision: str) -> Response:
    form = await request.form()
    check_csrf(request, form)
    who = require_page(request, "review")
    if decision == "approve":
        overwrite = str(form.get("overwrite") or "") == "yes"  # the page's acknowledgement checkbox
        result = await ws_call(
            request, "approve_review", review_id=rid, reviewer=who.name, overwrite=overwrite, write=True
        )
    else:
        reason = str(form.get("reason") or "").strip()
        if not reason:
            raise InvalidArgument("a denial needs a reason", next_steps=["go back and write why"])
        result = await ws_call(
            request, "deny_review", review_id=rid, reason=reason, reviewer=who.name, write=True
        )
    if result.get("Success") is False:
        failure = UiFailure(result)
        review = await full_review(request, rid)
        ctx = {
            "title": review.get("title") or f"Review {rid}",
            "page": "reviews",
            "r": review,
            "view": "unified",
            "can_review": True,
            "done": "",
            "error": failure,
        }
        return render(request, "ui/review.html", ctx, status=status_for(failure.code))
    state = "approved" if decision == "approve" else "denied"
    return RedirectResponse(f"/ui/reviews/{quote(rid, safe='')}?done={state}", status_code=303)


@router.post("/{rid}/approve")
async def approve(request: Request, rid: str) -> Response:
    return await _decide(request, rid, "approve")


@router.post("/{rid}/deny")
async def deny(request: Request, rid: str) -> Response:
    return await _decide(request, rid, "deny")


@router.post("/{rid}/proposals/{pid}/discard")
async def discard(request: Request, rid: str, pid: str) -> Response:
    """Discard one staged proposal of this review (the policy decides who may)."""
    form = await request.form()
    check_csrf(request, form)
    require_page(request)
    result = await ws_call(request, "discard_proposal", proposal_id=pid, write=True)
    if result.get("Success") is False:
        failure = UiFailure(result)
        review = await full_review(request, rid)
        ctx = {
            "title": review.get("title") or f"Review {rid}",
            "page": "reviews",
            "r": review,
            "view": "unified",
            "can_review": False,
            "done": "",
            "error": failure,
        }
        return render(request, "ui/review.html", ctx, status=status_for(failure.code))
    return RedirectResponse(f"/ui/reviews/{quote(rid, safe='')}?done=discarded", status_code=303)
