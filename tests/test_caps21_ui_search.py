"""The web page's search asks for what this server allows: with ``[server] max_top_n`` under
10 it sent top_n=10 on every search and answered 400. Now a search that leaves Results at
"default" takes the default, at most the cap, and the page shows the limit. Through the ASGI
client, as tests/test_ui_pages.py."""

from __future__ import annotations

import re
from typing import Any

from helpers import ok


def _notes(ws: Any) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="a"))
    for i in range(12):
        ok(ws.document_index("ADD_TEXT", index_name="a", text=f"failover note {i}", filepath=f"n{i}.md"))
    ws.close()


def _hits(html: str) -> int:
    return len(re.findall(r'<li class="citation">', html))


def _choices(html: str) -> list[str]:
    select = re.search(r'<select id="top_n".*?</select>', html, re.S)
    assert select, html
    return re.findall(r'<option value="(\d*)"', select.group(0))


def test_the_search_page_asks_within_the_servers_cap(ws: Any, make_client: Any) -> None:
    _notes(ws)
    c = make_client("[server]\nmax_top_n = 3\n")
    for tab in ("search", "ask"):  # was 400: "top_n is 10; this server's limit is 3"
        r = c.get("/ui/search", params={"q": "failover note", "mode": "keyword", "tab": tab})
        assert r.status_code == 200 and "alert-error" not in r.text, r.text
    page = c.get("/ui/search")
    assert page.status_code == 200 and "at most 3 on this server" in page.text
    assert _choices(page.text) == ["", "3"], _choices(page.text)
    r = c.get("/ui/search", params={"q": "failover", "mode": "keyword"})
    assert _hits(r.text) == 3, r.text
    r = c.get("/ui/search", params={"q": "failover", "mode": "keyword", "top_n": ""})  # the form's default
    assert r.status_code == 200 and _hits(r.text) == 3, r.text
    r = c.get("/ui/search", params={"q": "failover", "mode": "keyword", "top_n": 2})
    assert _hits(r.text) == 2 and 'value="2" selected' in r.text
    r = c.get("/ui/search", params={"q": "failover", "mode": "keyword", "top_n": 5})  # over: refused, said
    assert r.status_code == 400 and "limit is 3" in r.text


def test_the_search_page_without_a_cap_keeps_its_default(ws: Any, make_client: Any) -> None:
    _notes(ws)
    c = make_client()
    page = c.get("/ui/search").text
    assert "on this server" not in page and _choices(page) == ["", "5", "10", "20"]
    assert _hits(c.get("/ui/search", params={"q": "failover", "mode": "keyword"}).text) == 10
    assert _hits(c.get("/ui/search", params={"q": "failover", "mode": "keyword", "top_n": 5}).text) == 5
