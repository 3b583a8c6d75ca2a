"""The audit log: every review decision, push and source change, appended once.

Everything written passes through :func:`gitkb.forges.redact` (known secrets
and anything shaped like a token or URL credentials), so the log never holds
a secret even when an error message quoted one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from gitkb.core.paging import page_fields, page_of
from gitkb.forges.secrets import redact
from gitkb.services.context import Context
from gitkb.stores.catalog import audit as audit_rows


def _clean(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {str(k): _clean(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v, secrets) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return redact(str(value), secrets)


def record(
    ctx: Context,
    *,
    actor: str,
    action: str,
    target: str,
    result: str,
    detail: dict[str, Any] | None = None,
    secrets: Iterable[str] = (),
) -> int:
    """Append one entry; returns its id."""
    s = tuple(x for x in secrets if x)
    with ctx.catalog.write() as conn:
        return audit_rows.append(
            conn,
            actor=redact(actor or "unknown", s),
            action=action,
            target=redact(target, s),
            result=redact(result, s),
            detail=_clean(json.loads(json.dumps(detail or {}, default=str)), s),
        )


def list_audit(
    ctx: Context, *, target: str | None = None, limit: Any = None, start: Any = None, count: Any = None
) -> dict[str, Any]:
    """The audit log, newest first, a page at a time (``limit`` is the older name of ``count``)."""
    page = page_of(start, count if count is not None else limit, default=100)
    conn = ctx.catalog.conn
    rows = audit_rows.recent(conn, target=target, limit=page.count, offset=page.start)
    total = audit_rows.count(conn, target=target)
    return {"Entries": [r.as_dict() for r in rows], **page_fields(page, total, len(rows))}
