"""The two optional sidecars at a source's documents root, validated by JSON Schema.

* ``kb-manifest.json`` -- what the knowledge base is (title, target index,
  include/exclude globs, required front matter);
* ``gitkb.yml`` -- how gitkb indexes it (index, include/exclude, required
  front matter, chunking).

Both are checked against the schemas shipped in ``gitkb/schemas/``. A file
that does not parse or does not validate raises ``ValidationFailed`` (code
``validation``) whose message names the file and the schema's complaint;
``details`` carries ``path`` and ``schema_path``. Pure: callers pass bytes.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import jsonschema
import yaml

from gitkb.core.errors import ValidationFailed

MANIFEST = "kb-manifest.json"
GITKB_YML = "gitkb.yml"
SCHEMA_FILES: dict[str, str] = {MANIFEST: "kb-manifest.schema.json", GITKB_YML: "gitkb.schema.json"}


@functools.cache
def schema(name: str) -> dict[str, Any]:
    """The shipped JSON Schema for sidecar ``name``."""
    text = (resources.files("gitkb") / "schemas" / SCHEMA_FILES[name]).read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


@functools.cache
def _validator(name: str) -> jsonschema.protocols.Validator:
    s = schema(name)
    cls = jsonschema.validators.validator_for(s)
    cls.check_schema(s)
    return cls(s)


def _fail(where: str, message: str, **details: Any) -> ValidationFailed:
    return ValidationFailed(
        f"{where}: {message}",
        details={"path": where, **details},
        next_steps=[
            f"fix {where} (see the schema gitkb/schemas/{SCHEMA_FILES.get(where.rsplit('/', 1)[-1], '')})"
        ],
    )


def parse_sidecar(name: str, data: bytes, where: str) -> dict[str, Any]:
    """Parse and validate one sidecar's bytes; ``where`` is its path for messages."""
    if name not in SCHEMA_FILES:
        raise ValueError(f"not a sidecar: {name}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _fail(where, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        value: Any = json.loads(text) if name == MANIFEST else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise _fail(where, f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise _fail(where, f"invalid YAML: {getattr(exc, 'problem', None) or exc}{at}") from None
    if value is None and name == GITKB_YML:
        value = {}  # an empty YAML file configures nothing
    errors = sorted(_validator(name).iter_errors(value), key=lambda e: (list(e.absolute_path), e.message))
    if errors:
        err = errors[0]
        loc = "/".join(str(p) for p in err.absolute_path) or "(top level)"
        raise _fail(
            where,
            f"does not match its schema at {loc}: {err.message}",
            schema_path="/".join(str(p) for p in err.absolute_schema_path),
            errors=len(errors),
        )
    assert isinstance(value, dict)
    return value


@dataclass(frozen=True)
class Sidecars:
    """Validated sidecar contents (empty dicts when a file is absent)."""

    manifest: dict[str, Any] = field(default_factory=dict)
    gitkb: dict[str, Any] = field(default_factory=dict)
    present: tuple[str, ...] = ()

    def setting(self, key: str, manifest_key: str | None = None) -> Any:
        """``gitkb.yml`` wins over ``kb-manifest.json``."""
        if key in self.gitkb:
            return self.gitkb[key]
        return self.manifest.get(manifest_key or key)

    @property
    def index(self) -> str | None:
        v = self.gitkb.get("index") or self.manifest.get("target_index")
        return str(v) if v else None

    @property
    def title(self) -> str | None:
        v = self.setting("title")
        return str(v) if v else None


def read_sidecars(files: Mapping[str, bytes | None], documents_root: str) -> Sidecars:
    """``files``: sidecar name -> bytes (None or missing: absent)."""
    parsed: dict[str, dict[str, Any]] = {}
    for name in SCHEMA_FILES:
        data = files.get(name)
        if data is None:
            continue
        where = f"{documents_root.strip('/')}/{name}" if documents_root.strip("/") else name
        parsed[name] = parse_sidecar(name, data, where)
    return Sidecars(parsed.get(MANIFEST, {}), parsed.get(GITKB_YML, {}), tuple(sorted(parsed)))
