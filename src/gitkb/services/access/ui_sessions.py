"""Web page sessions: opened at login, looked up on every page, deleted at logout or expiry.

The browser's cookie holds a random id (``secrets.token_urlsafe(32)``), never the API token;
the catalog keeps the id's digest with the token's name and digest (see
:mod:`gitkb.stores.catalog.ui_sessions`). The caller (the web page) checks the token against
the server's configuration when the session is used, so revoking a token ends its sessions.
"""

from __future__ import annotations

import hashlib
import secrets
import time

from gitkb.services.context import Context
from gitkb.stores.catalog import ui_sessions as rows
from gitkb.stores.catalog.ui_sessions import SessionRow


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


def open_session(ctx: Context, token_name: str, token_sha256: str, ttl_s: float) -> str:
    """A new session for the token; returns the id to put in the cookie."""
    session_id = secrets.token_urlsafe(32)
    now = time.time()
    with ctx.catalog.write() as conn:
        rows.purge_expired(conn, now)
        rows.insert(conn, _digest(session_id), token_name, token_sha256, now, now + ttl_s)
    return session_id


def lookup(ctx: Context, session_id: str) -> SessionRow | None:
    if not session_id or len(session_id) > 200:
        return None
    return rows.get(ctx.catalog.conn, _digest(session_id), time.time())


def close_session(ctx: Context, session_id: str) -> bool:
    if not session_id:
        return False
    with ctx.catalog.write() as conn:
        return rows.delete(conn, _digest(session_id)) > 0
