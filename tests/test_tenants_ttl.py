"""Tenants isolate, tiers filter, expired documents are never returned and get purged."""

from __future__ import annotations

import time
from typing import Any

import pytest

from gitkb.services.runtime import ttl


def _add(ws: Any, text: str, **place: Any) -> dict[str, Any]:
    out = ws.document_index("ADD_TEXT", index_name="kb", text=text, **place)
    assert out["Success"], out
    return out


@pytest.fixture
def tenants(ws: Any) -> Any:
    ws.document_index("CREATE_INDEX", index_name="kb", embeddings=False)
    _add(ws, "shared untenanted runbook about failover")
    _add(ws, "acme failover runbook", tenant="acme")
    _add(ws, "globex failover runbook", tenant="globex")
    return ws


def _paths(res: dict[str, Any]) -> list[str]:
    return sorted(r["snippet"] for r in res["Results"])


def test_search_without_tenant_sees_only_untenanted(tenants: Any) -> None:
    res = tenants.document_index("SEARCH", query="failover")
    assert _paths(res) == ["shared untenanted runbook about failover"]
    assert "Warnings" not in res


def test_search_with_tenant_sees_only_that_tenant(tenants: Any) -> None:
    res = tenants.document_index("SEARCH", query="failover", tenant="acme")
    assert _paths(res) == ["acme failover runbook"]
    assert "Warnings" not in res


def test_a_blank_tenant_is_refused_as_ingest_refuses_it(tenants: Any, make_client: Any) -> None:
    """A tenant of only spaces searched the untenanted documents (redteam23): another population
    than the caller named. Refused on search as on ingest, on the library and over HTTP; ``""``
    still means no tenant (a web form's empty field)."""
    for call in (
        lambda: tenants.document_index("SEARCH", query="failover", tenant="   "),
        lambda: tenants.document_index("ADD_TEXT", index_name="kb", text="x", tenant="   "),
    ):
        res = call()
        assert res["Success"] is False and res["code"] == "invalid_argument", res
    assert _paths(tenants.document_index("SEARCH", query="failover", tenant="")) == [
        "shared untenanted runbook about failover"
    ]
    client = make_client()
    ws = client.app.state.gitkb.workspace
    ws.document_index("CREATE_INDEX", index_name="kb", embeddings=False)
    _add(ws, "shared untenanted runbook about failover")
    r = client.post("/search", json={"query": "failover", "tenant": "   "})
    assert r.status_code == 400 and r.json()["code"] == "invalid_argument", r.text


def test_unknown_tenant_warns_instead_of_silent_zero(tenants: Any) -> None:
    res = tenants.document_index("SEARCH", query="failover", tenant="acmee")
    assert res["Success"] and res["Results"] == []
    [w] = res["Warnings"]
    assert "no documents for tenant 'acmee'" in w and "other tenants" in w


def test_tenant_search_on_untenanted_index_warns(ws: Any) -> None:
    ws.document_index("CREATE_INDEX", index_name="kb", embeddings=False)
    _add(ws, "plain failover notes")
    res = ws.document_index("SEARCH", query="failover", tenant="acme")
    assert res["Results"] == [] and "untenanted" in res["Warnings"][0]


def test_search_without_tenant_on_tenanted_index_warns(ws: Any) -> None:
    ws.document_index("CREATE_INDEX", index_name="kb", embeddings=False)
    _add(ws, "acme failover runbook", tenant="acme")
    res = ws.document_index("SEARCH", query="failover")
    assert res["Results"] == [] and "only tenanted documents" in res["Warnings"][0]


def test_agent_search_carries_the_tenant_warning(tenants: Any) -> None:
    tenants.kb_create("all", ["kb"])
    tenants.agent_assign("bot", ["all"])
    res = tenants.search_index("failover", tenant="nobody", agent_id="bot")
    assert res["Success"] and res["count"] == 0
    assert any("no documents for tenant 'nobody'" in w for w in res["Warnings"])
    ok = tenants.search_index("failover", tenant="globex", agent_id="bot")
    assert [r["snippet"] for r in ok["Results"]] == ["globex failover runbook"]


def test_tiers_filter_and_untiered_counts_as_hot(ws: Any) -> None:
    ws.document_index("CREATE_INDEX", index_name="kb", embeddings=False)
    _add(ws, "hot failover page", tier="hot")
    _add(ws, "cold failover archive", tier="cold")
    _add(ws, "untiered failover page")
    cold = ws.document_index("SEARCH", query="failover", tiers=["cold"])
    assert _paths(cold) == ["cold failover archive"]
    hot = ws.document_index("SEARCH", query="failover", tiers=["hot"])
    assert _paths(hot) == ["hot failover page", "untiered failover page"]  # untiered counts as hot
    both = ws.search_index("failover", tiers=["hot", "cold"])
    assert both["count"] == 3
    assert ws.document_index("SEARCH", query="failover", tiers=["lukewarm"])["code"] == "invalid_argument"
    assert (
        ws.document_index("ADD_TEXT", index_name="kb", text="x", tier="lukewarm")["code"]
        == "invalid_argument"
    )


def _expire(ws: Any, file_id: str) -> None:
    """Let the clock pass the document's expiry (instead of sleeping through a real TTL)."""
    with ws.ctx.catalog.write() as conn:
        conn.execute("UPDATE documents SET expires_at = ? WHERE id = ?", (time.time() - 1, file_id))


@pytest.fixture
def expiring(ws: Any) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    ws.document_index("CREATE_INDEX", index_name="kb", embeddings=False)
    keep = _add(ws, "durable failover runbook", filepath="docs/durable.md")
    t0 = time.time()
    gone = _add(ws, "ephemeral failover notice", filepath="docs/ephemeral.md", ttl_seconds=3600)
    [doc] = [
        d
        for d in ws.document_index("LIST_DOCUMENTS", index_name="kb")["Documents"]
        if d["file_id"] == gone["file_id"]
    ]
    assert t0 + 3600 <= doc["expires_at"] <= time.time() + 3600
    assert ws.document_index("SEARCH", query="ephemeral")["count"] == 1  # live before it expires
    assert ttl.count_expired(ws.ctx) == 0
    _expire(ws, gone["file_id"])
    return ws, keep, gone


def test_expired_documents_are_never_returned(expiring: Any) -> None:
    ws, keep, gone = expiring
    assert ws.document_index("SEARCH", query="ephemeral")["count"] == 0
    assert [r["filepath"] for r in ws.document_index("SEARCH", query="failover")["Results"]] == [
        "docs/durable.md"
    ]
    listed = ws.document_index("LIST_DOCUMENTS", index_name="kb")
    assert listed["TotalCount"] == 1 and [d["path"] for d in listed["Documents"]] == ["docs/durable.md"]
    files = ws.document_index("LIST_DOCUMENTS", index_name="kb", show_files_only=True, path_filter="docs")
    assert [d["path"] for d in files["Documents"]] == ["docs/durable.md"]
    by_id = ws.document_index("GET_DOCUMENT", index_name="kb", file_id=gone["file_id"])
    by_path = ws.document_index(
        "GET_DOCUMENT", index_name="kb", filepath="docs/ephemeral.md", pagination_mode="lines"
    )
    assert by_id["code"] == "not_found" and by_path["code"] == "not_found"
    assert ws.document_index("GET_DOCUMENT", index_name="kb", file_id=keep["file_id"])["Success"]
    assert ws.search_index("ephemeral")["count"] == 0


def test_purge_expired_removes_them_and_counts(expiring: Any) -> None:
    ws, _, _ = expiring
    assert ttl.count_expired(ws.ctx) == 1
    out = ws.purge_expired()
    assert out["Success"] and out["purged"] == 1 and out["by_index"] == {"kb": 1}
    assert out["pending_purge"] == 0 and ttl.count_expired(ws.ctx) == 0
    conn = ws.ctx.catalog.conn
    assert conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0] == 1
    assert conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] == 1
    # the keyword index followed the change log: only the durable chunk is left in it
    assert ws.ctx.keywords.search("ephemeral", index_ids=None, limit=10) == []
    again = ws.purge_expired()
    assert again["purged"] == 0


def test_readding_refreshes_a_ttl(ws: Any) -> None:
    ws.document_index("CREATE_INDEX", index_name="kb", embeddings=False)
    first = _add(ws, "short lived page", filepath="p.md", ttl_seconds=3600)
    _expire(ws, first["file_id"])
    _add(ws, "short lived page", filepath="p.md")  # same text, no ttl now: it no longer expires
    assert ws.document_index("SEARCH", query="short lived")["count"] == 1
    assert ttl.count_expired(ws.ctx) == 0


def test_ttl_seconds_must_be_a_positive_integer(ws: Any) -> None:
    ws.document_index("CREATE_INDEX", index_name="kb", embeddings=False)
    for bad in (0, -5, "60", True):
        out = ws.document_index("ADD_TEXT", index_name="kb", text="x", ttl_seconds=bad)
        assert out["code"] == "invalid_argument", bad


def test_semantic_and_hybrid_respect_tenant_tier_and_ttl(ws: Any) -> None:
    ws.document_index("CREATE_INDEX", index_name="kb")
    _add(ws, "failover for everyone")
    _add(ws, "acme failover", tenant="acme", tier="cold")
    gone = _add(ws, "expired failover", ttl_seconds=3600)
    assert ws.build_embeddings()["Success"]
    _expire(ws, gone["file_id"])
    for mode in ("semantic", "hybrid"):
        plain = ws.document_index("SEARCH", query="failover", mode=mode)
        assert _paths(plain) == ["failover for everyone"], mode
        acme = ws.document_index("SEARCH", query="failover", mode=mode, tenant="acme", tiers=["cold"])
        assert _paths(acme) == ["acme failover"], mode
        assert (
            ws.document_index("SEARCH", query="failover", mode=mode, tenant="acme", tiers=["hot"])["count"]
            == 0
        )


def test_readding_a_document_under_another_tenant_moves_its_vectors_too(ws: Any) -> None:
    # Same text, same path, other tenant: the chunk keeps its id and its vector, so the vector's
    # tenant label must follow, or a tenant-filtered semantic search misses it.
    ws.document_index("CREATE_INDEX", index_name="kb")
    _add(ws, "Rotate the signing keys every 90 days.", filepath="keys.txt", tenant="acme")
    assert ws.build_embeddings()["Success"]
    for now, before in (("globex", "acme"), (None, "globex"), ("acme", None)):
        place = {"tenant": now} if now else {}
        _add(ws, "Rotate the signing keys every 90 days.", filepath="keys.txt", **place)
        assert ws.build_embeddings()["Success"]
        for mode in ("semantic", "hybrid"):
            found = ws.document_index("SEARCH", query="signing key rotation", mode=mode, tenant=now)
            assert found["count"] == 1, (now, mode, found)
            old = ws.document_index("SEARCH", query="signing key rotation", mode=mode, tenant=before)
            assert old["count"] == 0, (before, mode, old)
