"""Tenant and tier filters of SEARCH, and the warning for the silent-zero-results trap.

Tenants isolate: a search with ``tenant`` sees only that tenant's documents, a
search without it only untenanted ones. A search under a tenant that has no
documents in an index while other tenants do is almost always a typo or a
missing ``tenant`` at ingest; it gets a warning instead of a bare empty list.
Tiers (``hot``, ``warm``, ``cold``) filter after the fact; a document added
without a tier counts as ``hot``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from gitkb.core.errors import InvalidArgument
from gitkb.services.context import Context
from gitkb.stores.catalog import documents as doc_rows
from gitkb.stores.catalog.documents import DocumentRow, LiveChunk
from gitkb.stores.catalog.indexes import IndexRow

TIERS = ("hot", "warm", "cold")
DEFAULT_TIER = "hot"


def check_tenant(tenant: Any) -> str | None:
    """A tenant as documents store it and searches match it: surrounding spaces off, None for none
    (``""``); only spaces refused (ingest refuses them too); control characters refused (the keyword index marks "no tenant" with one, so such a
    tenant's documents were found by searches without tenant, and its searches found those)."""
    if tenant is None:
        return None
    if not isinstance(tenant, str):
        raise InvalidArgument(f"tenant must be a string, got {tenant!r}")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in tenant):
        raise InvalidArgument(f"tenant {tenant!r} holds control characters; a tenant is a plain name")
    if tenant and not tenant.strip():  # ingest refuses it: searching would find untenanted documents
        raise InvalidArgument(
            f'tenant {tenant!r} is blank; leave it out (or send "") to search documents without a tenant',
        )
    return tenant.strip() or None


def validate_tiers(tiers: Any) -> frozenset[str] | None:
    if tiers is None or tiers == []:
        return None
    if isinstance(tiers, str):
        tiers = [tiers]
    if not isinstance(tiers, list | tuple) or not all(isinstance(t, str) for t in tiers):
        raise InvalidArgument(f"tiers must be a list drawn from {', '.join(TIERS)}")
    bad = [t for t in tiers if t not in TIERS]
    if bad:
        raise InvalidArgument(f"unknown tier(s) {', '.join(map(repr, bad))}; tiers are {', '.join(TIERS)}")
    return frozenset(tiers)


def tier_matches(doc: DocumentRow | LiveChunk, tiers: frozenset[str] | None) -> bool:
    return tiers is None or (doc.tier or DEFAULT_TIER) in tiers


def tenant_warnings(ctx: Context, rows: Iterable[IndexRow], tenant: Any) -> list[str]:
    """Warnings for indexes where the tenant filter can only give zero results."""
    now = time.time()
    out = []
    conn = ctx.catalog.conn
    for row in rows:
        # The common case, answered from the (index_id, tenant, expires_at) index: the searched
        # tenant (or the untenanted) has live documents here, so there is nothing to warn about.
        if doc_rows.has_live_tenant(conn, row.id, tenant or None, now):
            continue
        if tenant:
            mine, others, untenanted = doc_rows.tenant_counts(conn, row.id, tenant, now)
            if mine == 0 and others > 0:
                out.append(
                    f"index {row.name!r} has no documents for tenant {tenant!r}, while {others} document(s)"
                    " belong to other tenants: check the tenant name (results for this index are empty)"
                )
            elif mine == 0 and untenanted > 0:
                out.append(
                    f"index {row.name!r} has no documents for tenant {tenant!r}; its {untenanted} document(s)"
                    " are untenanted and are found only by a search without tenant"
                )
        else:
            untenanted, tenanted = doc_rows.untenanted_counts(conn, row.id, now)
            if untenanted == 0 and tenanted > 0:
                out.append(
                    f"index {row.name!r} holds only tenanted documents ({tenanted}); a search without tenant"
                    " sees only untenanted ones: pass tenant"
                )
    return out
