"""The login form, the overview with its live status panel, the indexes, search/ask and the
document page. Each handler calls the same Workspace methods as the API and renders the dict."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from gitkb.core.errors import Forbidden, GitkbError, Unauthorized
from gitkb.http.errors import error_response, from_exception, ok_body, respond, status_for
from gitkb.http.limits import TOP_N_DEFAULTS, run_blocking
from gitkb.http.routes.actions import agent_default, guard_params
from gitkb.http.state import get_state
from gitkb.http.ui.page import UiRoute, expect, render, viewer_or_none, ws_call
from gitkb.http.ui.render import highlight_lines
from gitkb.http.ui.session import (
    check_csrf,
    check_token,
    clear_session,
    open_session,
    require_page,
    safe_next,
    set_session,
)

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)
MODES = ("", "hybrid", "keyword", "semantic")
CONTEXT_LINES = 30
PAGE_LINES = 200
STATUS_KEYS = (
    "status",
    "error",
    "queue_depth",
    "in_flight",
    "in_flight_job",
    "dirty_paths",
    "dirty_embeddings",
    "documents_indexed",
    "skipped_files",
    "caught_up",
    "vector_build",
    "Message",
)


# -- login -------------------------------------------------------------------------------------


@router.get("/login")
async def login_form(request: Request, target: str = Query("/ui", alias="next")) -> Response:
    if not get_state(request).cfg.auth_enabled:
        return RedirectResponse(safe_next(target), status_code=303)
    return render(request, "ui/login.html", {"title": "Log in", "next": safe_next(target), "error": None})


@router.post("/login")
async def login(request: Request) -> Response:
    form = await request.form()
    check_csrf(request, form)
    target = safe_next(str(form.get("next") or "/ui"))
    if not get_state(request).cfg.auth_enabled:
        return RedirectResponse(target, status_code=303)
    token = str(form.get("token") or "").strip()
    try:
        if not token:
            raise Unauthorized("enter an API token")
        principal = check_token(request, token)
    except (Unauthorized, Forbidden) as exc:
        ctx = {"title": "Log in", "next": target, "error": exc.message}
        return render(request, "ui/login.html", ctx, status=status_for(exc.code))
    response = RedirectResponse(target, status_code=303)
    set_session(request, response, await open_session(request, principal, token))  # an id, never the token
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    form = await request.form()
    check_csrf(request, form)
    response = RedirectResponse(
        "/ui/login" if get_state(request).cfg.auth_enabled else "/ui", status_code=303
    )
    await clear_session(request, response)
    return response


# -- overview and status -----------------------------------------------------------------------


def status_view(raw: dict[str, Any]) -> dict[str, Any]:
    """The fields the status panel shows (and the refresh endpoint sends), with the job's percent."""
    view = {k: raw.get(k) for k in STATUS_KEYS}
    job = raw.get("in_flight_job") or None
    pct = None
    if job:
        prog = job.get("progress") or {}
        done, total = prog.get("done") or 0, prog.get("total") or 0
        pct = int(100 * done / total) if total else None
    view["progress_percent"] = pct
    return view


@router.get("")
async def overview(request: Request) -> Response:
    require_page(request)
    status = status_view(expect(await ws_call(request, "get_index_status")))
    jobs = expect(await ws_call(request, "list_jobs", count=8)).get("Jobs", [])
    indexes = expect(await ws_call(request, "document_index", "LIST_INDICES")).get("IndexDetails", {})
    got = await ws_call(request, "list_reviews", state="pending")
    pending = got.get("total_count", len(got.get("Reviews", []))) if got.get("Success") else None
    ctx = {
        "title": "Overview",
        "page": "overview",
        "status": status,
        "jobs": jobs,
        "indexes": indexes,
        "pending": pending,
    }
    return render(request, "ui/overview.html", ctx)


@router.get("/status.json")
async def status_json(request: Request) -> Response:
    """What the status panel polls (read scope, by the page's cookie)."""
    if viewer_or_none(request) is None:
        return error_response(
            "unauthorized", "the session has ended; log in again", next_steps=["open /ui/login"]
        )
    try:  # a JSON endpoint: its errors are the API's envelope, not an error page
        require_page(request)
        result = await ws_call(request, "get_index_status")
    except GitkbError as exc:
        return from_exception(exc)
    if result.get("Success") is False:
        return respond(result)
    return JSONResponse(ok_body(**status_view(result)), headers={"Cache-Control": "no-store"})


# -- indexes -----------------------------------------------------------------------------------


@router.get("/indexes")
async def indexes(request: Request) -> Response:
    require_page(request)
    listed = expect(await ws_call(request, "document_index", "LIST_INDICES"))
    sources: list[dict[str, Any]] = list(expect(await ws_call(request, "source_list")).get("Sources", []))
    by_index: dict[str, list[dict[str, Any]]] = {}
    for s in sources:
        for name in s.get("indexes") or []:
            by_index.setdefault(name, []).append(s)
    ctx = {
        "title": "Indexes",
        "page": "indexes",
        "details": listed.get("IndexDetails", {}),
        "identity": listed.get("EmbeddingIdentityState") or {},
        "sources": sources,
        "by_index": by_index,
    }
    return render(request, "ui/indexes.html", ctx)


# -- search and ask ----------------------------------------------------------------------------


def group_footnotes(footnotes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """ASK's footnotes, one entry per marker (a source quoted at several places has one marker)."""
    out: dict[Any, dict[str, Any]] = {}
    for fn in footnotes or []:
        entry = out.setdefault(
            fn.get("marker"),
            {
                "marker": fn.get("marker"),
                "filepath": fn.get("filepath"),
                "index_name": fn.get("index_name"),
                "quotes": [],
            },
        )
        entry["quotes"].append({"quote": fn.get("quote"), "location": fn.get("location")})
    return list(out.values())


def top_n_choices(limit: int | None, asked: int | None) -> list[int]:
    """The page's Results choices besides "default": 5, 10, 20 up to this server's cap (the cap
    itself when under 20) and the number asked for."""
    picks = {n for n in (5, 10, 20) if limit is None or n <= limit}
    if limit is not None and limit < 20:
        picks.add(limit)
    return sorted(picks | ({asked} if asked is not None else set()))


async def default_top_n(request: Request, action: str, limit: int | None) -> int:
    """How many results a SEARCH / ASK left at "default" returns for this page's caller: its agent's
    binding default (none: the action's), at most this server's cap (as ``guard_params`` fills it)."""
    agent = await run_blocking(get_state(request), agent_default, request, None)
    n = agent if agent is not None else TOP_N_DEFAULTS[action]
    return n if limit is None else min(n, limit)


@router.get("/search")
async def search(
    request: Request,
    q: str = "",
    mode: str = "",
    index: str = "",
    tab: str = Query("search", pattern="^(search|ask)$"),
    results: str = Query("", alias="top_n", pattern=r"^\d{0,3}$", description="empty: the default"),
) -> Response:
    require_page(request)
    top_n = int(results) if results else None  # the range is the action's (and this server's) to check
    names = expect(await ws_call(request, "document_index", "LIST_INDICES")).get("Indices", [])
    limit = get_state(request).cfg.max_top_n  # [server] max_top_n: asked for by default, never over
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    action = "ASK" if tab == "ask" else "SEARCH"
    if q.strip():
        given: dict[str, Any] = {
            "query": q,
            "mode": mode or None,
            "index_name": index or None,
            "top_n": top_n,  # left out: the default (an agent's: its binding's), at most the cap
        }
        params = await guard_params(request, action, {k: v for k, v in given.items() if v is not None})
        got = await ws_call(request, "document_index", action, **params)
        result, error = (got, None) if got.get("Success") else (None, got)
    ctx = {
        "title": "Ask" if tab == "ask" else "Search",
        "page": "search",
        "q": q,
        "mode": mode,
        "index": index,
        "tab": tab,
        "top_n": top_n,
        "top_n_choices": top_n_choices(limit, top_n),
        "top_n_limit": limit,
        "top_n_default": await default_top_n(request, action, limit),  # what "default" will use
        "modes": MODES,
        "index_names": names,
        "result": result,
        "error": error,
        "footnotes": group_footnotes((result or {}).get("Footnotes") or []),
    }
    return render(request, "ui/search.html", ctx, status=200 if error is None else 400)


@router.get("/doc")
async def document(
    request: Request,
    index: str,
    path: str,
    start: int | None = Query(None, ge=1, description="first cited line (1-based)"),
    end: int | None = Query(None, ge=1, description="last cited line"),
    page_from: int | None = Query(None, alias="from", ge=1, description="first line shown"),
) -> Response:
    """A document at the cited lines: a window of lines around them, numbered and highlighted."""
    require_page(request)
    cap = get_state(request).cfg.max_count or 500
    if start is not None and end is not None and end < start:
        start, end = end, start
    if page_from is not None:
        first = page_from
    elif start is not None:
        first = max(1, start - CONTEXT_LINES)
    else:
        first = 1
    span = (end or start or first) - first + 1 + CONTEXT_LINES
    count = min(cap, max(PAGE_LINES, span))
    doc = expect(
        await ws_call(
            request,
            "document_index",
            "GET_DOCUMENT",
            index_name=index,
            filepath=path,
            pagination_mode="lines",
            start=first - 1,
            count=count,
        )
    )
    first_line = int(doc.get("line_start") or first)
    content = str(doc.get("Content") or "")
    rows = [
        {
            "no": first_line + i,
            "html": html,
            "cited": start is not None and start <= first_line + i <= (end or start),
        }
        for i, html in enumerate(highlight_lines(content, path))
    ]
    total = int(doc.get("total") or 0)
    ctx = {
        "title": doc.get("title") or path,
        "page": "search",
        "doc": doc,
        "rows": rows,
        "index": index,
        "path": path,
        "start": start,
        "end": end,
        "total": total,
        "prev_from": max(1, first_line - count) if first_line > 1 else None,
        "next_from": int(doc.get("next_start") or 0) + 1 if doc.get("has_more") else None,
    }
    return render(request, "ui/document.html", ctx)
