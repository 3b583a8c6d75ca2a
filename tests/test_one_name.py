"""One name per thing on every interface (issue 21): the action table's parameter names are the
names the library, the HTTP API and the MCP tools take (the CLI: tests/test_cli_names.py), and the
table itself spells no thing two ways (``top_n`` and ``top_k`` were both in it)."""

from __future__ import annotations

import ast
import inspect
import textwrap
import typing
from typing import Any

import pytest
from fastapi.routing import APIRoute

from gitkb.core import action_table as table
from gitkb.http.routes import all_routers
from gitkb.mcp import tools
from gitkb.workspace import Workspace

# Names of one thing: at most one of each group may be a parameter name in the table.
SYNONYMS = (
    {"top_n", "top_k", "k"},
    {"count", "limit", "page_size"},
    {"default_top_n", "default_top_k"},
    {"filepath", "file_path"},
    {"show_files_only", "files_only"},
    {"pagination_mode", "page_mode"},
)
# (method, path, HTTP parameter) → why it is not a parameter of the action the route runs
HTTP_EXCEPTIONS: dict[tuple[str, str, str], str] = {
    ("GET", "/jobs", "limit"): "the older spelling of count, hidden from the schema",
    ("GET", "/audit", "limit"): "the older spelling of count, hidden from the schema",
}
HTTP_CALLERS = {"call", "action", "guard_params", "cap_call"}  # (request, "<action>", ...)


def _parameter_names() -> set[str]:
    return {p.name for a in table.ACTIONS.values() for p in a.wire_params}


def test_the_table_spells_each_thing_one_way() -> None:
    names = _parameter_names()
    for group in SYNONYMS:
        assert len(group & names) <= 1, f"two names of one thing in the action table: {sorted(group & names)}"
    assert "top_n" in names and "top_k" not in names and "default_top_n" in names


def _actions_run_by(endpoint: Any) -> set[str]:
    """The action names an HTTP route's function passes to ``call``/``action``/``guard_params``."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(endpoint)))
    out = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in HTTP_CALLERS
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            out.add(node.args[1].value)
    return out & set(table.ACTIONS)


def _http_names(route: APIRoute) -> set[str]:
    d = route.dependant
    names = {p.alias or p.name for p in (*d.query_params, *d.path_params)}
    for body in d.body_params:
        models = [body.field_info.annotation, *typing.get_args(body.field_info.annotation)]
        fields = next((m.model_fields for m in models if hasattr(m, "model_fields")), None)
        names |= set(fields) if fields is not None else {body.name}
    return names


def test_every_http_parameter_is_a_table_parameter_of_its_action() -> None:
    checked, bad = 0, []
    for route in (r for router in all_routers() for r in router.routes):
        if not isinstance(route, APIRoute):
            continue
        runs = _actions_run_by(route.endpoint)
        if not runs:
            continue  # pages, health, metrics, webhooks: not an action's parameters
        params = {p.name for a in runs for p in table.ACTIONS[a].wire_params}
        for name in sorted(_http_names(route)):
            checked += 1
            for method in route.methods:
                if name not in params and (method, route.path, name) not in HTTP_EXCEPTIONS:
                    bad.append(f"{method} {route.path} {name!r} (runs {sorted(runs)}: {sorted(params)})")
    assert checked > 60, checked
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("spelling", ["top_k", "top_n"])
def test_http_search_index_takes_the_older_spelling_too(make_client: Any, spelling: str) -> None:
    client = make_client()
    assert client.post("/indexes", json={"index_name": "kb"}).status_code == 200
    for i in range(5):
        body = {"filepath": f"n{i}.md", "text": f"# Note {i}\nrotate keys {i}\n"}
        assert client.post("/indexes/kb/texts", json=body).status_code == 200
    assert client.post("/kbs", json={"name": "ops", "indexes": ["kb"]}).status_code == 200
    res = client.post("/search_index", json={"query": "rotate keys", "agent_id": "bot", spelling: 2})
    assert res.status_code in (200, 403), res.text  # no binding yet: refused, not a parameter error
    client.post("/agents/bot/assign", json={"kbs": ["ops"], "default_top_k": 4})
    res = client.post("/search_index", json={"query": "rotate keys", "agent_id": "bot", spelling: 2})
    assert res.status_code == 200, res.text
    assert res.json()["top_n"] == 2 and len(res.json()["Results"]) == 2
    res = client.post("/search_index", json={"query": "rotate keys", "agent_id": "bot"})
    assert res.json()["top_n"] == 4  # the binding's default_top_n, given by its older name


def test_every_mcp_tool_takes_the_tables_names(ws: Workspace) -> None:
    offered = tools.offered(ws)
    assert len(offered) >= 10
    for spec, _ in offered:
        props = set(spec.input_schema.get("properties", {}))
        if spec.name == "document_index":
            want = {
                p.name
                for a in table.ACTIONS.values()
                if a.name in table.DOCUMENT_INDEX_NAMES
                for p in a.wire_params
            }
            assert props - {"action"} <= want, (spec.name, props - want)
            continue
        want = {p.name for p in table.ACTIONS[spec.name].wire_params} - tools.HIDDEN.get(spec.name, set())
        assert props == want, (spec.name, props ^ want)


def test_the_library_takes_the_tables_names(ws: Workspace) -> None:
    assert "top_n" in inspect.signature(Workspace.search_index).parameters
    assert "default_top_n" in inspect.signature(Workspace.agent_assign).parameters
    out = ws.search_index(query="x", top_k=3)  # type: ignore[call-arg]
    assert out["code"] == "invalid_argument" and "top_k" in out["Error"]
