"""The OpenAPI (``/openapi.json``) documents a route's 422 as what the server answers: the error
envelope (``http/errors.document_errors``), and a real 422 body matches the documented schema.

Before: every route documented FastAPI's ``HTTPValidationError`` (``{"detail": [...]}``) while the
handler answers ``{"Success": false, "Error", "code": "validation", "next_steps", "details"}``.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from helpers import error_code


def test_every_documented_422_is_the_error_envelope_and_a_real_one_matches_it(client: Any) -> None:
    schema = client.get("/openapi.json").json()
    assert "HTTPValidationError" not in json.dumps(schema)
    documented = [
        (path, method, op["responses"]["422"])
        for path, ops in schema["paths"].items()
        for method, op in ops.items()
        if "422" in op.get("responses", {})
    ]
    assert len(documented) > 10, documented  # the routes that take a body or a query
    for path, method, refused in documented:
        body = refused["content"]["application/json"]["schema"]
        assert body["properties"]["Success"] == {"const": False}, (path, method, body)
    post_search = schema["paths"]["/search"]["post"]["responses"]["422"]["content"]["application/json"][
        "schema"
    ]

    r = client.post("/search", json={"query": ["not", "a", "string"]})
    assert r.status_code == 422 and error_code(r.json()) == "validation", r.text
    jsonschema.validate(r.json(), post_search)
    r = client.post("/search", json={})  # query missing
    assert r.status_code == 422, r.text
    jsonschema.validate(r.json(), post_search)
