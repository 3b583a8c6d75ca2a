"""scope22: an agent's default top_n under a server cap is read off the event loop.

With ``[server] max_top_n`` set, a SEARCH / ASK an agent's token sends without ``top_n`` gets its
binding's default (at most the cap). ``http/routes/actions.py`` ``guard_params`` read that
default from the catalog (``agent_default`` → ``scope.load_scope``) inside the async handler: a
slow or locked catalog stopped every request of the server. Now the read runs on a worker thread
(``run_blocking``), as the handlers' other blocking work does.

Checked on PostgreSQL, where a test can hold a real lock: another connection locks the ``agents``
table, an agent's SEARCH waits on it, and ``/healthz`` must still answer meanwhile; once the lock
goes, the SEARCH answers with the binding's default.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from helpers import ok, wait_until

BOT = "d" * 24
TOML = (
    "[server]\nmax_top_n = 5\n"
    f'[[server.tokens]]\nname = "bot"\ntoken = "{BOT}"\nscopes = ["read"]\nagent = "alice"\n'
)
AUTH = {"Authorization": f"Bearer {BOT}"}
ROUTES = [
    ("/actions/document_index", {"action": "SEARCH", "query": "failover", "mode": "keyword"}),
    ("/search", {"query": "failover", "mode": "keyword"}),
    ("/ask", {"query": "failover", "mode": "keyword"}),
]


def _world(c: TestClient) -> None:
    ws = c.app.state.gitkb.workspace  # type: ignore[attr-defined]
    ok(ws.document_index("CREATE_INDEX", index_name="a"))
    for i in range(8):
        ok(ws.document_index("ADD_TEXT", index_name="a", text=f"failover note {i}", filepath=f"n{i}.md"))
    ok(ws.kb_create("ka", ["a"]))
    ok(ws.agent_assign("alice", ["ka"], default_top_n=2))


def _hits(body: dict[str, Any]) -> int:
    return len(body.get("Results") or body.get("Sources") or body.get("Citations") or [])


@pytest.mark.parametrize(("route", "body"), ROUTES)
def test_the_agents_default_applies_under_the_cap(
    make_client: Callable[..., TestClient], route: str, body: Any
) -> None:
    c = make_client(TOML)
    _world(c)
    r = c.post(route, json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got.get("count", _hits(got)) == 2, got  # the binding's 2, not the cap's 5 or SEARCH's 10


@pytest.mark.parametrize("catalog_backend", ["postgresql"], indirect=True)
def test_a_locked_catalog_read_of_the_default_does_not_stop_the_server(
    make_client: Callable[..., TestClient], catalog_url: str
) -> None:
    import psycopg  # heavy: only this test holds a lock of its own on the PostgreSQL catalog

    c = make_client(TOML)
    _world(c)
    route, body = ROUTES[0]
    answers: dict[str, Any] = {}
    with psycopg.connect(catalog_url) as locker:
        locker.execute("LOCK TABLE agents IN ACCESS EXCLUSIVE MODE")  # held until the rollback
        search = threading.Thread(
            target=lambda: answers.update(search=c.post(route, json=body, headers=AUTH))
        )
        search.start()
        try:
            wait_until(
                lambda: locker.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()[0] > 0,
                timeout=30,
                what="the SEARCH waiting on the locked agents table",
            )
            health = threading.Thread(target=lambda: answers.update(health=c.get("/healthz")))
            health.start()
            health.join(10)
            assert not health.is_alive(), "/healthz did not answer while the agent's default was read"
            assert answers["health"].status_code == 200, answers["health"].text
            assert search.is_alive() and "search" not in answers  # it still waits on the lock
        finally:
            locker.rollback()
            search.join(60)
    r = answers["search"]
    assert r.status_code == 200 and r.json()["count"] == 2, r.text
