"""Validate HTTP requests and responses against an OpenAPI 3.0 description.

Small and strict, on top of ``jsonschema`` (no new dependency):

- the path must match a path template of the description and the method one
  of its operations;
- path and query parameters are coerced from text by their schema type and
  validated; a required one must be there; a query parameter the operation
  does not declare is an error, and so is one given twice;
- a JSON body must be there when ``requestBody.required``, absent when the
  operation takes none, sent as ``application/json``, valid against the
  schema, and (stricter than the spec, to catch typos) carry no top-level key
  the schema does not list;
- a response is validated against the schema of its status (or ``default``).

OpenAPI 3.0's ``nullable`` is rewritten into JSON Schema's ``null`` type; the
rest is JSON Schema draft 4 (as 3.0 schemas are), with ``date-time`` and
``uri`` formats checked.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4

_URI = "urn:gitkb-test:openapi"
_METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


class SpecViolation(Exception):
    """A request or response that the description does not allow."""


@dataclass
class Operation:
    method: str
    template: str
    operation_id: str
    pointer: str  # JSON pointer of the operation object
    node: dict[str, Any]
    parameters: list[tuple[dict[str, Any], str]]  # (parameter, pointer), path-level merged


@dataclass
class ValidatedRequest:
    operation: Operation
    path_params: dict[str, Any]
    query: dict[str, Any]
    body: Any


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _nullable_to_null(node: Any) -> Any:
    if isinstance(node, list):
        return [_nullable_to_null(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _nullable_to_null(v) for k, v in node.items()}
    if out.pop("nullable", False) is True:
        if "type" in out and "$ref" not in out:
            types = out["type"] if isinstance(out["type"], list) else [out["type"]]
            out["type"] = [*types, "null"] if "null" not in types else types
            if "enum" in out and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


_format_checker = jsonschema.FormatChecker(formats=())


@_format_checker.checks("date-time", raises=ValueError)  # type: ignore[untyped-decorator]
def _is_datetime(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)", value):
        raise ValueError(f"{value!r} is not an RFC 3339 date-time")
    datetime.fromisoformat(value.replace("Z", "+00:00"))
    return True


@_format_checker.checks("uri", raises=ValueError)  # type: ignore[untyped-decorator]
def _is_uri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    parts = urlsplit(value)
    if not parts.scheme or (parts.scheme in ("http", "https") and not parts.netloc):
        raise ValueError(f"{value!r} is not an absolute URI")
    return True


class OpenAPI:
    def __init__(self, path: Path) -> None:
        raw = json.loads(path.read_text(encoding="utf-8"))
        self.raw = raw
        self.doc = _nullable_to_null(copy.deepcopy(raw))
        resource = Resource.from_contents(self.doc, default_specification=DRAFT4)
        self._registry: Registry[Any] = Registry().with_resource(_URI, resource)
        self.operations: list[tuple[re.Pattern[str], Operation]] = []
        self.by_id: dict[str, Operation] = {}
        for template, item in self.doc["paths"].items():
            item_ptr = f"/paths/{_escape(template)}"
            shared = [
                self.deref(p, f"{item_ptr}/parameters/{i}") for i, p in enumerate(item.get("parameters", []))
            ]
            for method in _METHODS:
                if method not in item:
                    continue
                op_node = item[method]
                op_ptr = f"{item_ptr}/{method}"
                own = [
                    self.deref(p, f"{op_ptr}/parameters/{i}")
                    for i, p in enumerate(op_node.get("parameters", []))
                ]
                names = {(p["name"], p["in"]) for p, _ in own}
                params = [*own, *((p, ptr) for p, ptr in shared if (p["name"], p["in"]) not in names)]
                op = Operation(method.upper(), template, op_node["operationId"], op_ptr, op_node, params)
                regex = "^" + re.sub(r"\\\{([^}]+)\\\}", r"(?P<\1>[^/]+)", re.escape(template)) + "$"
                self.operations.append((re.compile(regex.replace("(?P<", "(?P<p_")), op))
                self.by_id[op.operation_id] = op

    # -- lookups --------------------------------------------------------------

    def deref(self, node: Any, pointer: str) -> tuple[Any, str]:
        """Follow ``$ref`` chains of non-schema objects, keeping the pointer."""
        seen = 0
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if not ref.startswith("#/"):
                raise ValueError(f"external $ref {ref}")
            pointer = ref[1:]
            node = self.doc
            for part in pointer[1:].split("/"):
                node = node[part.replace("~1", "/").replace("~0", "~")]
            seen += 1
            if seen > 20:
                raise ValueError("$ref loop")
        return node, pointer

    def example(self, name: str) -> Any:
        """A component example's value, from the unmodified description."""
        return copy.deepcopy(self.raw["components"]["examples"][name]["value"])

    def validate_schema(self, instance: Any, pointer: str, what: str) -> None:
        validator = jsonschema.Draft4Validator(
            {"$ref": f"{_URI}#{pointer}"}, registry=self._registry, format_checker=_format_checker
        )
        errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
        if errors:
            lines = [
                f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message[:300]}" for e in errors[:5]
            ]
            raise SpecViolation(f"{what} does not match the schema:\n  " + "\n  ".join(lines))

    def match(self, method: str, path: str) -> tuple[Operation, dict[str, str]]:
        path_matched = False
        for regex, op in self.operations:
            m = regex.match(path)
            if not m:
                continue
            path_matched = True
            if op.method == method.upper():
                return op, {k[2:]: unquote(v) for k, v in m.groupdict().items()}
        if path_matched:
            raise SpecViolation(f"{method} {path}: method not described for this path")
        raise SpecViolation(f"{method} {path}: no path of the description matches")

    # -- requests -------------------------------------------------------------

    def validate_request(
        self,
        method: str,
        path: str,
        query: dict[str, list[str]],
        headers: dict[str, str],
        body: bytes,
    ) -> ValidatedRequest:
        op, raw_path = self.match(method, path)
        where = f"{op.operation_id} ({op.method} {op.template})"
        path_params: dict[str, Any] = {}
        query_params: dict[str, Any] = {}
        declared_query = set()
        for param, ptr in op.parameters:
            name, location = param["name"], param["in"]
            if location == "path":
                value = self._coerce(raw_path[name], param, ptr, where)
                path_params[name] = value
            elif location == "query":
                declared_query.add(name)
                if name not in query:
                    if param.get("required"):
                        raise SpecViolation(f"{where}: required query parameter {name!r} missing")
                    continue
                values = query[name]
                if len(values) != 1:
                    raise SpecViolation(f"{where}: query parameter {name!r} given {len(values)} times")
                query_params[name] = self._coerce(values[0], param, ptr, where)
            elif location == "header" and param.get("required") and name.lower() not in headers:
                raise SpecViolation(f"{where}: required header {name!r} missing")
        unknown = sorted(set(query) - declared_query)
        if unknown:
            raise SpecViolation(f"{where}: undeclared query parameter(s) {unknown}")
        return ValidatedRequest(op, path_params, query_params, self._validate_body(op, headers, body, where))

    def _coerce(self, text: str, param: dict[str, Any], ptr: str, where: str) -> Any:
        schema = param.get("schema", {})
        kind = schema.get("type")
        value: Any = text
        try:
            if kind == "integer":
                if not re.fullmatch(r"-?\d+", text):
                    raise ValueError
                value = int(text)
            elif kind == "number":
                value = float(text)
            elif kind == "boolean":
                if text not in ("true", "false"):
                    raise ValueError
                value = text == "true"
        except ValueError:
            raise SpecViolation(f"{where}: parameter {param['name']!r}={text!r} is not a {kind}") from None
        self.validate_schema(value, f"{ptr}/schema", f"{where}: parameter {param['name']!r}")
        return value

    def _validate_body(self, op: Operation, headers: dict[str, str], body: bytes, where: str) -> Any:
        spec_body = op.node.get("requestBody")
        if spec_body is None:
            if body.strip():
                raise SpecViolation(f"{where}: takes no request body, got {len(body)} bytes")
            return None
        spec_body, ptr = self.deref(spec_body, f"{op.pointer}/requestBody")
        if not body.strip():
            if spec_body.get("required"):
                raise SpecViolation(f"{where}: request body required")
            return None
        ctype = headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype not in spec_body.get("content", {}):
            raise SpecViolation(f"{where}: content type {ctype!r} not accepted")
        try:
            data = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SpecViolation(f"{where}: body is not JSON: {exc}") from None
        schema_ptr = f"{ptr}/content/{_escape(ctype)}/schema"
        self.validate_schema(data, schema_ptr, f"{where}: request body")
        schema, _ = self.deref(spec_body["content"][ctype]["schema"], schema_ptr)
        if isinstance(data, dict) and "properties" in schema:
            extra = sorted(set(data) - set(schema["properties"]))
            if extra:
                raise SpecViolation(f"{where}: request body has undescribed key(s) {extra}")
        return data

    # -- responses ------------------------------------------------------------

    def validate_response(self, op: Operation, status: int, body: Any) -> bool:
        """Validate ``body`` for ``status``; False when the status is not described."""
        responses = op.node.get("responses", {})
        key = str(status) if str(status) in responses else f"{str(status)[0]}XX"
        if key not in responses:
            key = "default"
        if key not in responses:
            return False
        resp, ptr = self.deref(responses[key], f"{op.pointer}/responses/{_escape(key)}")
        content = resp.get("content", {})
        if "application/json" not in content:
            if body is not None and status != 304:
                raise SpecViolation(f"{op.operation_id}: {status} is described without a JSON body")
            return True
        self.validate_schema(
            body,
            f"{ptr}/content/application~1json/schema",
            f"{op.operation_id}: {status} response body",
        )
        return True
