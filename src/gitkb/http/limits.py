"""Request limits: body size and type, result caps, server-side paths, timeouts.

* ``BodyGate`` (ASGI middleware) reads at most the cap of a request body
  (``webhook_max_body_bytes`` under ``/webhooks``, ``max_body_bytes`` elsewhere)
  and refuses more with 413 before any route runs; a non-empty body must be
  JSON (415), except under ``/ui`` where the web page posts forms.
* ``run_blocking`` runs a Workspace call on a worker thread (reads and writes
  have separate pools) under the per-request timeout, so one slow search never
  holds the event loop or the other requests.
* ``cap`` and ``server_path`` check what the service layer cannot know: this
  server's caps and its ``allowed_roots``; ``capped`` applies the caps to one
  action's parameters, ``server_caps`` names them for a schema that advertises them.
* ``guarded`` is the one place both HTTP-facing interfaces call (the HTTP API and its
  web page, and ``gitkb mcp --transport http``): an action's parameters within the
  caps, and each of its ``SERVER_PATHS`` inside ``[server] allowed_roots`` (none set:
  refused). Work that reads the disk later, in a job (a reindex walks the roots ADD_DOCUMENTS
  recorded, a sync fetches a local-path source), is held to the same roots by the Workspace
  view these interfaces call (``Workspace.held_to``: the job carries them and checks when it is
  queued and when it runs, ``gitkb.core.disk_roots``). In-process callers (the CLI, the library,
  ``gitkb mcp`` over stdio, a process the operator starts) hold the operator's rights and are
  not checked.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gitkb.core import action_table as table
from gitkb.core import disk_roots
from gitkb.core.errors import Forbidden, InvalidArgument, StoreUnavailable
from gitkb.http.config import ServerConfig
from gitkb.http.errors import RequestTimeout, error_response
from gitkb.http.state import AppState
from gitkb.services.access import policy
from gitkb.services.access.principals import Principal
from gitkb.services.indexing.documents import DEFAULT_COUNT, MAX_PAGE
from gitkb.services.retrieval.ask import DEFAULT_TOP_N as ASK_TOP_N

T = TypeVar("T")
FORM_PREFIXES = ("/ui",)
# top_n when a SEARCH or ASK leaves it out (search.search's default, ask.DEFAULT_TOP_N)
TOP_N_DEFAULTS = {"SEARCH": 10, "ASK": ASK_TOP_N}
# The parameters naming a file or folder on this server's disk, by action, of the actions an HTTP
# or MCP caller can run (source_add's local url is checked by its route; checkout, backup, restore
# and the evaluations are not on HTTP or MCP). Every other path parameter names a stored document.
SERVER_PATHS: dict[str, tuple[str, ...]] = {"ADD_DOCUMENTS": ("filepath", "base_path")}


def is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class BodyGate:
    def __init__(self, app: ASGIApp, cfg: ServerConfig) -> None:
        self.app = app
        self.cfg = cfg

    def _cap(self, path: str) -> int:
        return self.cfg.webhook_max_body_bytes if path.startswith("/webhooks") else self.cfg.max_body_bytes

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, code: str, msg: str, steps: list[str]
    ) -> None:
        await error_response(code, msg, next_steps=steps, headers={"Connection": "close"})(
            scope, receive, send
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        cap = self._cap(path)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        too_big = f"the request body is over the {cap}-byte limit"
        steps = ["send a smaller body; large trees go in by server-side path or git sync"]
        declared = headers.get("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > cap:
            await self._refuse(scope, receive, send, "payload_too_large", too_big, steps)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > cap:
                await self._refuse(scope, receive, send, "payload_too_large", too_big, steps)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        ctype = headers.get("content-type", "")
        if body and not path.startswith(FORM_PREFIXES) and not is_json(ctype):
            await self._refuse(
                scope,
                receive,
                send,
                "unsupported_media_type",
                f"the body must be JSON (Content-Type: application/json), not {ctype or 'unspecified'}",
                ["send Content-Type: application/json (for a forge webhook, choose the JSON content type)"],
            )
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def run_blocking(
    state: AppState, fn: Callable[..., T], /, *args: Any, write: bool = False, **kw: Any
) -> T:
    """``fn(*args, **kw)`` on a worker thread, within the request timeout."""
    limiter = state.write_limiter if write else state.read_limiter
    seconds = state.cfg.request_timeout_s
    call = functools.partial(fn, *args, **kw)

    ticket = state.enter()

    def tracked() -> T:
        if not state.start(ticket):
            raise StoreUnavailable("the request was given up before its call started")
        try:
            return call()
        finally:
            state.leave(ticket)

    try:
        with anyio.fail_after(seconds):
            return await anyio.to_thread.run_sync(tracked, abandon_on_cancel=True, limiter=limiter)
    except BaseException as exc:
        state.leave(ticket, abandoning=True)  # a no-op once the call has started
        if not isinstance(exc, TimeoutError):
            raise
        steps = ["retry later; poll GET /status"]
        if write:
            steps.insert(0, "the write may still complete: check GET /jobs or GET /status before retrying")
        raise RequestTimeout(f"the call took longer than {seconds:g} s", next_steps=steps) from None


def cap(name: str, value: Any, limit: int | None) -> None:
    """Refuse an integer parameter over this server's own lower limit, when one is set (the action
    table's limits apply on every interface; type checks stay with the service)."""
    if limit is not None and isinstance(value, int) and not isinstance(value, bool) and value > limit:
        raise InvalidArgument(
            f"{name} is {value}; this server's limit is {limit}", next_steps=[f"ask for {name} <= {limit}"]
        )


def fill_to_cap(params: dict[str, Any], name: str, limit: int | None, default: int | None) -> None:
    """A parameter left out takes the library's ``default`` (None: no bound, e.g. a whole document),
    which may lie over this server's lower limit: then it is the limit (never over it, asked or not)."""
    if limit is not None and params.get(name) is None and (default is None or default > limit):
        params[name] = limit


def server_caps(cfg: ServerConfig) -> dict[str, int]:
    """This server's own lower limits by parameter name (``top_n``, ``count``), those set."""
    caps = {"top_n": cfg.max_top_n, "count": cfg.max_count}
    return {k: v for k, v in caps.items() if v is not None}


def capped(
    cfg: ServerConfig, name: str, params: dict[str, Any], *, top_n_default: int | None = None
) -> dict[str, Any]:
    """``params`` of action ``name`` (a ``document_index`` action; ``SEARCH`` for search_index)
    within this server's caps: a value over one is refused, one left out whose default lies over
    it is the cap. ``top_n_default``: the caller's own default (an agent's binding's)."""
    cap("top_n", params.get("top_n"), cfg.max_top_n)
    if "count" in table.ACTIONS[name].fields:
        cap("count", params.get("count"), cfg.max_count)
    params = dict(params)
    if top_n_default is not None or name in TOP_N_DEFAULTS:  # left out: the default, maybe over the cap
        fill_to_cap(params, "top_n", cfg.max_top_n, top_n_default or TOP_N_DEFAULTS[name])
    if name == "LIST_DOCUMENTS":
        fill_to_cap(params, "count", cfg.max_count, MAX_PAGE)
    elif name == "GET_DOCUMENT":
        mode = params.get("pagination_mode")
        fill_to_cap(
            params, "count", cfg.max_count, DEFAULT_COUNT.get(mode if isinstance(mode, str) else "chunks")
        )
    return params


def guarded(
    cfg: ServerConfig,
    name: str,
    params: dict[str, Any],
    principal: Principal | None,
    *,
    top_n_default: int | None = None,
) -> dict[str, Any]:
    """``params`` of ``document_index`` action ``name`` (upper case) as this server takes them
    from ``principal``: within its caps (``capped``) and each server-side path (``SERVER_PATHS``)
    inside its allowed roots, resolved (``server_path``: what is walked is what was checked). A
    caller the policy refuses the action is not answered about paths (where one resolves, the
    roots): the library refuses it the action, having read nothing (None: not known, checked)."""
    params = capped(cfg, name, params, top_n_default=top_n_default)
    spec = table.ACTIONS[name]
    if not may_run(principal, name):
        return params
    for field in SERVER_PATHS.get(name, ()):
        if field in spec.required or params.get(field) is not None:
            params[field] = server_path(cfg, params.get(field), name=field)
    return params


def may_run(principal: Principal | None, name: str) -> bool:
    """Whether the policy lets ``principal`` run action ``name`` at all (None: not known, as if it
    may). A server-side path is checked, and its check answered, only for a caller who may."""
    return principal is None or bool(policy.allowed_actions(principal, (name,)))


def server_path(cfg: ServerConfig, raw: Any, *, name: str = "filepath") -> str:
    """A server-side path the API may read: absolute, and (symlinks resolved) inside an allowed root.

    Returns the resolved path, so what is walked is what was checked."""
    other = "or use a remote (https://, ssh://) url" if name == "url" else "or send the text with ADD_TEXT"
    if not cfg.allowed_roots:
        raise Forbidden(
            f"{name}: reading this server's disk by path is disabled on this server",
            next_steps=["set [server] allowed_roots in gitkb.toml", other],
        )
    if not isinstance(raw, str) or not raw.strip() or "\x00" in raw:
        raise InvalidArgument(f"{name} must be an absolute path under an allowed root")
    p = Path(raw).expanduser()
    if not p.is_absolute():
        raise InvalidArgument(f"{name} must be absolute, got {raw!r}")
    real = Path(os.path.realpath(p))
    if not disk_roots.inside(real, cfg.allowed_roots):
        raise Forbidden(
            f"{name} {raw!r} is outside the allowed roots"
            + (f" (it resolves to {real})" if real != p else ""),
            details={"allowed_roots": [str(r) for r in cfg.allowed_roots]},
            next_steps=["name a path under one of the allowed roots", other],
        )
    return str(real)
