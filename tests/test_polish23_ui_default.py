"""polish23: ``/ui/search``'s Results control names the number a search left at "default" will
use (the caller's default, at most this server's ``[server] max_top_n``), on both tabs.

Before: the option read "default" alone. The page binds no agent (an agent's token is refused at
login, tests/test_ui_pages.py::test_login_cookie_and_redirects, and a Bearer header is no page
session), so its default is the action's (SEARCH 10, ASK ``ask.DEFAULT_TOP_N``), capped. Through
the real page (the ASGI client), as tests/test_caps21_ui_search.py.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from gitkb.services.retrieval.ask import DEFAULT_TOP_N as ASK_DEFAULT
from helpers import ok

READER, BOT = "reader-read-token-0123", "bot-agent-token-01234"
TOKENS = (
    f'[[server.tokens]]\nname = "reader"\ntoken = "{READER}"\nscopes = ["read"]\n'
    f'[[server.tokens]]\nname = "bot"\ntoken = "{BOT}"\nscopes = ["read"]\nagent = "support-bot"\n'
)


def _notes(ws: Any) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="a"))
    for i in range(14):
        ok(ws.document_index("ADD_TEXT", index_name="a", text=f"failover note {i}", filepath=f"n{i}.md"))
    ws.close()


def _default_label(html: str) -> str:
    select = re.search(r'<select id="top_n".*?</select>', html, re.S)
    assert select, html
    label = re.search(r'<option value=""[^>]*>([^<]*)</option>', select.group(0))
    assert label, select.group(0)
    return label.group(1).strip()


def _hits(html: str) -> int:
    return len(re.findall(r'<li class="citation">', html))


@pytest.mark.parametrize(
    ("cap", "search_n", "ask_n"), [(None, 10, ASK_DEFAULT), (3, 3, 3), (30, 10, ASK_DEFAULT)]
)
def test_the_default_option_names_the_number_used(
    ws: Any, make_client: Any, cap: int | None, search_n: int, ask_n: int
) -> None:
    _notes(ws)
    c = make_client(f"[server]\nmax_top_n = {cap}\n" if cap else None)
    assert _default_label(c.get("/ui/search").text) == f"default ({search_n})"
    assert _default_label(c.get("/ui/search", params={"tab": "ask"}).text) == f"default ({ask_n})"
    r = c.get("/ui/search", params={"q": "failover note", "mode": "keyword", "top_n": ""})
    assert r.status_code == 200 and _default_label(r.text) == f"default ({search_n})", r.text
    assert _hits(r.text) == search_n, r.text  # the number shown is the number the search used
    picked = c.get("/ui/search", params={"q": "failover note", "mode": "keyword", "top_n": 2}).text
    assert _default_label(picked) == f"default ({search_n})" and 'value="2" selected' in picked


def test_a_logged_in_reader_sees_the_capped_default(ws: Any, make_client: Any) -> None:
    _notes(ws)
    c = make_client("[server]\nmax_top_n = 4\n" + TOKENS)
    page = c.get("/ui/login")
    csrf = re.search(r'name="csrf_token" value="([0-9a-f]{64})"', page.text)
    assert csrf, page.text
    bot = c.post("/ui/login", data={"token": BOT, "csrf_token": csrf.group(1)})
    assert bot.status_code == 403 and "bound to agent" in bot.text  # the page binds no agent
    bearer = c.get("/ui/search", headers={"Authorization": f"Bearer {BOT}"}, follow_redirects=False)
    assert bearer.status_code == 303 and "/ui/login" in bearer.headers["location"], bearer.text
    r = c.post("/ui/login", data={"token": READER, "csrf_token": csrf.group(1), "next": "/ui/search"})
    assert r.status_code == 200 and _default_label(r.text) == "default (4)", r.text
    r = c.get("/ui/search", params={"q": "failover note", "mode": "keyword"})
    assert _default_label(r.text) == "default (4)" and _hits(r.text) == 4, r.text
