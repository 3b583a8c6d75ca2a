"""Red team, round 21: every caller gets exactly what it asked for, on every interface.

An attack here is a parameter that one interface silently widens, narrows or drops.
"""

from __future__ import annotations

from typing import Any

from helpers import error_code, fails, ok


def _two_indexes(ws: Any) -> None:
    for name, text in (("a", "alpha failover runbook"), ("b", "beta failover checklist")):
        ok(ws.document_index("CREATE_INDEX", index_name=name))
        ok(ws.document_index("ADD_TEXT", index_name=name, text=text, filepath=f"{name}.md"))


def test_an_empty_index_list_is_refused_not_widened_to_every_index(ws: Any, make_client: Any) -> None:
    """SEARCH / ASK with ``indexes: []`` named no index, and searched every one of them (an agent's
    and ``search_index``'s empty list search nothing): a caller building its list from a filter that
    matched nothing got every index's passages. Now it is invalid_argument on the library, the
    action API and ``POST /search`` / ``/ask``; leaving ``indexes`` out still searches all."""
    _two_indexes(ws)
    for action in ("SEARCH", "ASK"):
        out = fails(ws.document_index(action, query="failover", indexes=[]), "invalid_argument")
        assert "empty" in out["Error"], out
        assert ok(ws.document_index(action, query="failover"))
    assert ok(ws.document_index("SEARCH", query="failover"))["indexes"] == ["a", "b"]
    ws.close()
    client = make_client()
    for route in ("/search", "/ask"):
        r = client.post(route, json={"query": "failover", "indexes": []})
        assert r.status_code == 400 and error_code(r.json()) == "invalid_argument", r.text
    r = client.post("/actions/document_index", json={"action": "SEARCH", "query": "failover", "indexes": []})
    assert r.status_code == 400 and error_code(r.json()) == "invalid_argument", r.text
    r = client.post("/search", json={"query": "failover"})
    assert r.status_code == 200 and r.json()["indexes"] == ["a", "b"], r.text
