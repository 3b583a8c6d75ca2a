"""The MCP server does what its schemas say, and over HTTP what the HTTP API does.

* ``gitkb mcp --transport http`` applies the ``[server]`` caps (``max_top_n``, ``max_count``)
  exactly as the HTTP API (``gitkb.http.limits.capped``): over the cap refused, left out (the
  default over the cap, an agent's binding's included) the cap. Tested through a real MCP client
  over streamable HTTP (uvicorn on a loopback port, the app ``gitkb mcp`` serves).
* Every maximum a tool's input schema advertises is accepted and the next value refused, for
  the operator and an agent, with and without caps: ``document_index`` said top_n 1-100 to
  agents, who are refused over 50.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from gitkb.core.config import load_settings
from gitkb.http.config import load_server_config
from gitkb.mcp import build_server
from gitkb.mcp.render import parse_block
from gitkb.mcp.server import http_app
from helpers import ok, wait_until

AGENT = "alice"
CAPS = "[server]\nmax_top_n = 5\nmax_count = 3\n"
Q = {"query": "failover", "mode": "keyword"}


@pytest.fixture
def filled(ws: Any) -> Any:
    ok(ws.document_index("CREATE_INDEX", index_name="a", chunk_size=8, chunk_overlap=0))
    for i in range(60):
        ok(ws.document_index("ADD_TEXT", index_name="a", text=f"failover note {i}", filepath=f"n{i}.md"))
    long_text = " ".join(f"failover step {i} of the long runbook." for i in range(40))
    ok(ws.document_index("ADD_TEXT", index_name="a", text=long_text, filepath="long.md"))
    ok(ws.kb_create("ka", ["a"]))
    ok(ws.agent_assign(AGENT, ["ka"], default_top_n=40))
    return ws


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def mcp_over_http(ws: Any, agent_id: str | None, toml: str) -> Iterator[str]:
    """``gitkb mcp --transport http [--agent ID]`` with ``toml`` in gitkb.toml: the server the
    command builds (``build_server(..., limits=cfg)`` behind ``http_app``), on a loopback port."""
    import uvicorn  # the HTTP transport's server, as gitkb mcp runs it

    (ws.home / "gitkb.toml").write_text(toml)
    cfg = load_server_config(load_settings(ws.home))
    app = http_app(build_server(ws, agent_id, limits=cfg), cfg)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, timeout=10, interval=0.02, what="the MCP HTTP server to start")
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _data(result: Any) -> dict[str, Any]:
    text = result.content[0].text
    try:
        return parse_block(text)  # type: ignore[no-any-return]
    except ValueError:
        return json.loads(text)  # type: ignore[no-any-return]


def _session(target: Any, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[Any], list[Any]]:
    """(the tools listed, the results of ``calls``) in one session with ``target``."""

    async def main() -> tuple[list[Any], list[Any]]:
        async with Client(target) as client:
            listed = (await client.list_tools()).tools
            return listed, [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(main)


@pytest.mark.parametrize("agent_id", [AGENT, None])
def test_mcp_over_http_applies_the_server_caps(filled: Any, agent_id: str | None) -> None:
    """Before, ``gitkb mcp --transport http`` left ``[server] max_top_n = 5`` / ``max_count = 3``
    out: the agent got its binding's 40 hits, 6 when it asked, a page of 50 documents."""
    calls: list[tuple[str, dict[str, Any]]] = [
        ("document_index", {"action": "SEARCH", **Q}),
        ("document_index", {"action": "SEARCH", **Q, "top_n": 6}),
        ("document_index", {"action": "SEARCH", **Q, "top_n": 2}),
        ("document_index", {"action": "ASK", "query": "failover note?", "mode": "keyword"}),
        ("document_index", {"action": "LIST_DOCUMENTS", "index_name": "a"}),
        ("document_index", {"action": "LIST_DOCUMENTS", "index_name": "a", "count": 4}),
        ("document_index", {"action": "GET_DOCUMENT", "index_name": "a", "filepath": "long.md"}),
    ]
    if agent_id is not None:
        calls += [("search_index", Q), ("search_index", {**Q, "top_n": 6})]
    with mcp_over_http(filled, agent_id, CAPS) as url:
        _, got = _session(url, calls)
    search, over, asked, ask, listed, listed_over, doc = got[:7]
    assert not search.is_error and _data(search)["count"] == 5, search.content[0].text
    assert over.is_error and _data(over)["code"] == "invalid_argument", over.content[0].text
    assert _data(asked)["count"] == 2
    assert not ask.is_error and 0 < len(_data(ask)["Sources"]) <= 5, ask.content[0].text
    assert len(_data(listed)["Documents"]) == 3, listed.content[0].text
    assert listed_over.is_error and _data(listed_over)["code"] == "invalid_argument"
    assert len(_data(doc)["Chunks"]) == 3, doc.content[0].text
    if agent_id is not None:
        index, index_over = got[7:]
        assert not index.is_error and _data(index)["count"] == 5, index.content[0].text
        assert index_over.is_error and _data(index_over)["code"] == "invalid_argument"


# A call of each tool / action per integer parameter that may advertise a maximum.
TEMPLATES: dict[tuple[str, str], list[dict[str, Any]]] = {
    ("search_index", "top_n"): [Q],
    ("document_index", "top_n"): [{"action": "SEARCH", **Q}, {"action": "ASK", **Q}],
    ("document_index", "count"): [
        {"action": "LIST_DOCUMENTS", "index_name": "a"},
        {"action": "GET_DOCUMENT", "index_name": "a", "filepath": "long.md"},
    ],
}


def _maxima(listed: list[Any]) -> dict[tuple[str, str], int]:
    return {
        (t.name, name): prop["maximum"]
        for t in listed
        for name, prop in t.input_schema["properties"].items()
        if "maximum" in prop
    }


def _check_maxima(
    open_session: Callable[[list[tuple[str, dict[str, Any]]]], tuple[list[Any], list[Any]]],
) -> dict[tuple[str, str], int]:
    listed, _ = open_session([])
    maxima = _maxima(listed)
    assert set(maxima) <= set(TEMPLATES), f"no call template for {set(maxima) - set(TEMPLATES)}"
    calls = [
        (tool, {**args, param: value})
        for (tool, param), hi in maxima.items()
        for args in TEMPLATES[(tool, param)]
        for value in (hi, hi + 1)
    ]
    _, got = open_session(calls)
    for (tool, args), result in zip(calls, got, strict=True):
        param = next(p for (t, p) in maxima if t == tool and p in args)
        at_max = args[param] == maxima[(tool, param)]
        if at_max:
            assert not result.is_error, (tool, args, result.content[0].text)
        else:
            assert result.is_error and _data(result)["code"] == "invalid_argument", (tool, args)
    return maxima


@pytest.mark.parametrize("agent_id", [AGENT, None])
def test_every_advertised_maximum_is_accepted_and_the_next_refused(filled: Any, agent_id: str | None) -> None:
    maxima = _check_maxima(lambda calls: _session(build_server(filled, agent_id), calls))
    assert maxima[("document_index", "top_n")] == (50 if agent_id else 100)  # the binding limit
    if agent_id is not None:
        assert maxima[("search_index", "top_n")] == 50


@pytest.mark.parametrize("agent_id", [AGENT, None])
def test_every_advertised_maximum_holds_under_the_server_caps(filled: Any, agent_id: str | None) -> None:
    with mcp_over_http(filled, agent_id, CAPS) as url:
        maxima = _check_maxima(lambda calls: _session(url, calls))
    assert maxima[("document_index", "top_n")] == 5 and maxima[("document_index", "count")] == 3
    if agent_id is not None:
        assert maxima[("search_index", "top_n")] == 5


@pytest.mark.slow  # a subprocess: importing the mcp SDK and uvicorn takes seconds on a small machine
def test_the_gitkb_mcp_command_over_http_applies_the_caps(
    filled: Any, home: Path, catalog_url: str | None
) -> None:
    """The command itself: ``gitkb mcp --transport http --agent alice`` with ``max_top_n = 5``
    answered the binding's 40 hits to a search that left top_n out."""
    (home / "gitkb.toml").write_text(CAPS)
    filled.close()
    port = _free_port()
    exe = str(Path(sys.executable).with_name("gitkb"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITKB_")}
    env.update(GITKB_EMBEDDING_PROVIDER="hashing", GITKB_EMBEDDING_MODEL="hashing-384")
    if catalog_url is not None:
        env["GITKB_CATALOG_URL"] = catalog_url
    args = [exe, "--home", str(home), "mcp", "--transport", "http", "--agent", AGENT, "--port", str(port)]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:

        def listening() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        wait_until(listening, timeout=60, interval=0.1, what="gitkb mcp --transport http to listen")
        listed, (hits,) = _session(f"http://127.0.0.1:{port}/mcp", [("search_index", Q)])
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert not hits.is_error and _data(hits)["count"] == 5, hits.content[0].text
    assert _maxima(listed)[("search_index", "top_n")] == 5
