"""What every page handler shares: rendering a template (with the viewer, the CSRF token and the
flash message), calling the Workspace like the API does, and answering errors as HTML pages.

``UiRoute`` is the router's route class: a ``GitkbError`` (from a guard or a failed call), a bad
query parameter or a login redirect raised anywhere in a page handler becomes an HTML answer here,
while the API keeps its JSON error shape.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute

from gitkb.core.errors import GitkbError
from gitkb.http.calls import caller_view, check_params, clean
from gitkb.http.errors import status_for
from gitkb.http.limits import run_blocking
from gitkb.http.state import get_state
from gitkb.http.ui.session import (
    CSRF_FIELD,
    UiRedirect,
    auth_enabled,
    csrf_token,
    set_cookies,
    ui_state,
    viewer,
)

NAV = (
    ("overview", "/ui", "Overview"),
    ("reviews", "/ui/reviews", "Reviews"),
    ("indexes", "/ui/indexes", "Indexes"),
    ("search", "/ui/search", "Search"),
)


class UiFailure(GitkbError):
    """A Workspace call that answered ``Success: false``, carried to the error page."""

    def __init__(self, result: dict[str, Any]) -> None:
        code = str(result.get("code") or "internal")
        steps = result.get("next_steps")
        super().__init__(
            str(result.get("Error") or result.get("Message") or "failed"),
            next_steps=list(steps) if isinstance(steps, list) else None,
        )
        self.code = code
        self.result = result


def render(
    request: Request, template: str, context: dict[str, Any] | None = None, *, status: int = 200
) -> HTMLResponse:
    ctx: dict[str, Any] = {
        "request": request,
        "nav": NAV,
        "viewer": viewer_or_none(request),
        "auth_enabled": auth_enabled(request),
        "csrf_field": CSRF_FIELD,
        "csrf_token": csrf_token(request),
        **(context or {}),
    }
    response: HTMLResponse = ui_state(request).templates.TemplateResponse(
        request, template, ctx, status_code=status
    )
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    )
    set_cookies(request, response)
    return response


def viewer_or_none(request: Request) -> Any:
    try:
        return viewer(request)
    except GitkbError:
        return None


def error_page(request: Request, status: int, message: str, next_steps: list[str] | None = None) -> Response:
    title = {401: "Not logged in", 403: "Not allowed", 404: "Not found"}.get(status, "Something went wrong")
    return render(
        request,
        "ui/error.html",
        {"title": title, "status": status, "message": message, "next_steps": next_steps or []},
        status=status,
    )


class UiRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        original = super().get_route_handler()

        async def handler(request: Request) -> Response:
            try:
                return await original(request)
            except UiRedirect as r:
                return RedirectResponse(r.url, status_code=303)
            except GitkbError as exc:
                return error_page(request, status_for(exc.code), exc.message, exc.next_steps)
            except RequestValidationError as exc:
                first = exc.errors()[0] if exc.errors() else {}
                where = ".".join(str(p) for p in first.get("loc", ()))
                return error_page(request, 400, f"{where}: {first.get('msg', 'not valid')}")

        return handler


async def ws_call(
    request: Request, method: str, /, *args: Any, write: bool = False, **params: Any
) -> dict[str, Any]:
    """``Workspace.<method>(*args, **params)`` on a worker thread, as the API calls it; the dict as is."""
    state = get_state(request)
    kwargs = clean(params)
    check_params(method, kwargs)
    result = await run_blocking(state, getattr(caller_view(request), method), *args, write=write, **kwargs)
    return dict(result)


def expect(result: dict[str, Any]) -> dict[str, Any]:
    """The result, or a ``UiFailure`` (an error page) when it says ``Success: false``."""
    if result.get("Success") is False:
        raise UiFailure(result)
    return result
