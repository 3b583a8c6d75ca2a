"""Every list answer pages with ``start``/``count`` and says ``total_count``, ``actual_count``,
``has_more``, ``next_start``: in the library, over HTTP and on the CLI. Out of range:
``invalid_argument``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from gitkb.core.paging import PAGE_KEYS, page_fields, page_of, paged
from gitkb.http import create_app
from gitkb.services.changes import audit
from helpers import SOURCE, error_code

ROTATE = "runbooks/rotate-api-keys.md"


def test_page_of_and_paged_slice_pages_and_refuse_bad_bounds() -> None:
    assert page_of(None, None, default=7) == page_of(0, 7, default=1)
    rows, fields = paged(list(range(10)), page_of(8, 5, default=5))
    assert rows == [8, 9] and fields == {
        "start": 8,
        "count": 5,
        "total_count": 10,
        "actual_count": 2,
        "has_more": False,
        "next_start": None,
    }
    assert page_fields(page_of(0, 3, default=3), 10, 3)["next_start"] == 3
    assert paged([1, 2], page_of(50, 5, default=5))[0] == []  # past the end: an empty page
    for start, count in ((-1, 5), (0, 0), (0, 501), ("1", 5), (0, 2.5), (True, 5)):
        with pytest.raises(Exception) as exc:
            page_of(start, count, default=5)
        assert getattr(exc.value, "code", None) == "invalid_argument", (start, count)


def populate(ws: Any) -> None:
    """At least three of everything each list shows."""
    ws.document_index("CREATE_INDEX", index_name="notes")
    for i in range(5):
        assert ws.document_index("ADD_TEXT", index_name="notes", text=f"note {i}", filepath=f"n{i}.md")[
            "Success"
        ]
    for i in range(5):
        audit.record(ws.ctx, actor="test", action="test.entry", target=f"t{i}", result="ok")
    for i in range(2):
        assert ws.source_add(f"{SOURCE}-{i}", ws.source_list(count=1)["Sources"][0]["url"])["Success"]
    for n, (search, replace) in enumerate(
        (("every 90 days", "every 60 days"), ("Tuesday", "Wednesday"), ("every 60 days", "every 30 days"))
    ):
        assert ws.propose_kb_edit(SOURCE, ROTATE, search=search, replace=replace)["Success"], n
        pr = ws.open_kb_pull_request(SOURCE)
        assert pr["Success"], pr
        if n < 2:
            assert ws.deny_review(pr["review_id"], f"not yet {n}")["Success"]


LISTS: dict[str, tuple[Callable[..., dict[str, Any]], str]] = {
    "documents": (lambda ws, **p: ws.document_index("LIST_DOCUMENTS", index_name="notes", **p), "Documents"),
    "jobs": (lambda ws, **p: ws.list_jobs(**p), "Jobs"),
    "audit": (lambda ws, **p: ws.list_audit(**p), "Entries"),
    "reviews": (lambda ws, **p: ws.list_reviews(state="all", **p), "Reviews"),
    "proposals": (lambda ws, **p: ws.list_proposals(SOURCE, "all", **p), "Proposals"),
    "sources": (lambda ws, **p: ws.source_list(**p), "Sources"),
}


def test_every_list_pages_in_the_library(source_ws: Any) -> None:
    ws = source_ws
    populate(ws)
    for name, (listing, key) in LISTS.items():
        whole = listing(ws)
        assert whole["Success"] and all(k in whole for k in PAGE_KEYS), (name, whole)
        total = whole["total_count"]
        assert total >= 3 and whole["actual_count"] == len(whole[key]) == total, name
        assert whole["has_more"] is False and whole["next_start"] is None
        seen: list[Any] = []
        start: int | None = 0
        while start is not None:
            page = listing(ws, start=start, count=2)
            assert page["Success"] and page["start"] == start and page["count"] == 2, (name, page)
            assert page["total_count"] == total and page["actual_count"] == len(page[key]) <= 2
            assert page["has_more"] == (start + page["actual_count"] < total)
            seen.extend(page[key])
            start = page["next_start"]
        assert seen == whole[key], name  # the pages, in order, are the whole list
        past = listing(ws, start=total + 10, count=2)
        assert past["Success"] and past[key] == [] and past["has_more"] is False, name
        for bad in ({"start": -1}, {"count": 0}, {"count": 10_000}, {"start": "x"}):
            got = listing(ws, **bad)
            assert got["Success"] is False and got["code"] == "invalid_argument", (name, bad, got)
    docs = LISTS["documents"][0](ws)
    assert docs["TotalCount"] == docs["total_count"]  # the spec names both


ROUTES = {
    "documents": ("/indexes/notes/documents", "Documents"),
    "jobs": ("/jobs", "Jobs"),
    "audit": ("/audit", "Entries"),
    "reviews": ("/reviews?state=all", "Reviews"),
    "proposals": (f"/proposals?state=all&source={SOURCE}", "Proposals"),
    "sources": ("/sources", "Sources"),
}


def test_every_list_route_pages_over_http(source_ws: Any) -> None:
    ws = source_ws
    populate(ws)
    with TestClient(create_app(ws.settings, workspace=ws), client=("127.0.0.1", 1)) as c:
        for name, (url, key) in ROUTES.items():
            sep = "&" if "?" in url else "?"
            whole = c.get(url).json()
            assert whole["Success"] is True and whole["total_count"] >= 3, (name, whole)
            r = c.get(f"{url}{sep}start=1&count=2")
            assert r.status_code == 200, (name, r.text)
            page = r.json()
            more = whole["total_count"] > 3
            assert page[key] == whole[key][1:3] and page["has_more"] is more, name
            assert page["next_start"] == (3 if more else None) and page["total_count"] == whole["total_count"]
            for bad in ("start=-1", "count=0", "count=100000"):
                r = c.get(f"{url}{sep}{bad}")
                assert r.status_code == 400 and error_code(r) == "invalid_argument", (name, bad, r.text)


def test_list_commands_take_start_and_count(source_ws: Any) -> None:
    ws = source_ws
    populate(ws)
    home = str(ws.settings.home)
    runner = CliRunner()
    for args, key in (
        (["jobs", "list"], "Jobs"),
        (["review", "list", "--state", "all"], "Reviews"),
        (["proposals", "list", "--state", "all"], "Proposals"),
        (["source", "list"], "Sources"),
        (["docs", "list", "notes"], "Documents"),
    ):
        r = runner.invoke(cli_app(), ["--home", home, "--json", *args, "--start", "1", "--count", "2"])
        assert r.exit_code == 0, (args, r.output)
        body = json.loads(r.stdout)
        assert body["start"] == 1 and body["count"] == 2 and body["actual_count"] == len(body[key]) == 2, args
        human = runner.invoke(cli_app(), ["--home", home, *args, "--count", "1"])
        assert human.exit_code == 0 and "more: --start 1" in human.stderr + human.stdout, (args, human.output)
        bad = runner.invoke(cli_app(), ["--home", home, *args, "--count", "0"])
        assert bad.exit_code == 1 and "count must be from 1" in bad.stderr, args


def cli_app() -> Any:
    from gitkb.cli.main import cli

    return cli
