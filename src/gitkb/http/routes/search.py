"""``POST /search`` and ``POST /ask`` (the SEARCH and ASK actions, with this server's caps).

Their OpenAPI (``/openapi.json``) documents ``top_n`` as this server takes it (``document_top_n``,
installed by ``create_app`` from its ``[server]`` config): the maximum is ``[server] max_top_n``
when set under the action table's, the agent's (``MAX_TOP_K``) is said in the description (a
schema carries one maximum), and the 400 ``invalid_argument`` a value over it gets is documented.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from gitkb.core.action_table import MAX_TOP_K, MAX_TOP_N
from gitkb.http.auth import authenticated
from gitkb.http.calls import ActionBody, action
from gitkb.http.config import ServerConfig
from gitkb.http.errors import ERROR_ENVELOPE
from gitkb.http.limits import TOP_N_DEFAULTS
from gitkb.http.routes.actions import guard_params

AUTH = [Depends(authenticated)]  # who is calling; the policy decides what they may do
router = APIRouter(tags=["search"])


class SearchBody(ActionBody):
    query: str
    index_name: str | None = None
    indexes: list[str] | None = Field(
        None, description="several index names; all indexes when neither is given"
    )
    mode: str | None = Field(
        None, description="keyword, semantic or hybrid (default: hybrid when embeddings exist)"
    )
    top_n: int | None = Field(
        None,
        description=f"results wanted, 1-{MAX_TOP_N}; for an agent (a token bound to one) 1-{MAX_TOP_K}"
        " (the action table's limits); this server's [server] max_top_n, when set, lowers both",
    )
    tenant: str | None = None


class AskBody(SearchBody):
    pass


@router.post("/search", dependencies=AUTH, summary="Search: every hit is a citation")
async def search(request: Request, body: SearchBody) -> JSONResponse:
    params = await guard_params(request, "SEARCH", body.params())
    return await action(request, "SEARCH", write=False, **params)


@router.post("/ask", dependencies=AUTH, summary="Ask: an answer with citations (ASK)")
async def ask(request: Request, body: AskBody) -> JSONResponse:
    params = await guard_params(request, "ASK", body.params())
    return await action(request, "ASK", write=False, **params)


def top_n_maxima(cfg: ServerConfig) -> tuple[int, int]:
    """The most results this server gives a SEARCH / ASK: (any caller, an agent)."""
    most = MAX_TOP_N if cfg.max_top_n is None else min(MAX_TOP_N, cfg.max_top_n)
    return most, min(MAX_TOP_K, most)


def _top_n_texts(cfg: ServerConfig) -> dict[str, tuple[int, str]]:
    """By route: the documented maximum of ``top_n`` and its description."""
    most, agents = top_n_maxima(cfg)
    why = "this server's [server] max_top_n" if most < MAX_TOP_N else "the action table's MAX_TOP_N"
    why_agents = "this server's [server] max_top_n" if agents < MAX_TOP_K else "the action table's MAX_TOP_K"
    over = "over it: 400 invalid_argument, nothing searched"

    def action_text(name: str) -> str:
        default = min(TOP_N_DEFAULTS[name], most)
        return (
            f"results wanted, 1-{most} on this server ({why}); for an agent (a token bound to one)"
            f" 1-{agents} ({why_agents}): the schema's maximum is the first. Left out: {default}, or an"
            f" agent's binding default, never over the maximum; {over}"
        )

    return {
        "/search": (most, action_text("SEARCH")),
        "/ask": (most, action_text("ASK")),
        "/search_index": (
            agents,
            f"results wanted, 1-{agents} on this server ({why_agents}) for every caller, an agent or"
            f" not. Left out: the agent's binding default, never over the maximum; {over}",
        ),
    }


def _document(schema: dict[str, Any], cfg: ServerConfig) -> None:
    """Write this server's ``top_n`` maxima and their 400 into ``schema`` (idempotent)."""
    bodies = schema.get("components", {}).get("schemas", {})
    for route, (maximum, text) in _top_n_texts(cfg).items():
        op = schema.get("paths", {}).get(route, {}).get("post")
        if op is None:
            continue
        ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        prop = bodies[ref.rsplit("/", 1)[1]]["properties"]["top_n"]
        prop["description"] = text
        for branch in prop.get("anyOf", [prop]):
            if branch.get("type") == "integer":
                branch.update(minimum=1, maximum=maximum)
        op["responses"]["400"] = {
            "description": f"invalid_argument: top_n over {maximum} (see top_n), or another parameter"
            " out of range; the error envelope",
            "content": {"application/json": {"schema": ERROR_ENVELOPE}},
        }


def document_top_n(app: FastAPI, cfg: ServerConfig) -> None:
    """``app``'s OpenAPI documents ``top_n`` of /search, /ask and /search_index as ``cfg`` caps it
    (the schema is FastAPI's, rebuilt when the routes change; this writes the caps into it)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        schema = build()
        _document(schema, cfg)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
