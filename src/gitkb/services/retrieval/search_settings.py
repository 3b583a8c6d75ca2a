"""How an index is ranked: fusion method, semantic weight, RRF k and BM25 k1/b.

Three layers, first found wins: the searched indexes' own ``settings.search``
(when every searched index sets the same value), ``[search]`` in gitkb.toml,
then the defaults chosen by measurement (``gitkb.services.retrieval.fusion``,
``gitkb.stores.keyword_schema.TANTIVY_BM25``). ``SET_SEARCH_SETTINGS`` changes an
index's own layer; values are checked against one schema before anything is
written (``indexes.set_search_settings``).
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from gitkb.core.errors import InvalidArgument
from gitkb.services.context import Context
from gitkb.services.retrieval.fusion import DEFAULT_FUSION, DEFAULT_RRF_K, DEFAULT_SEMANTIC_WEIGHT, FUSIONS
from gitkb.stores.catalog.indexes import IndexRow
from gitkb.stores.keyword_schema import TANTIVY_BM25

DEFAULTS: dict[str, Any] = {
    "fusion": DEFAULT_FUSION,
    "semantic_weight": DEFAULT_SEMANTIC_WEIGHT,
    "rrf_k": DEFAULT_RRF_K,
    "bm25_k1": TANTIVY_BM25[0],
    "bm25_b": TANTIVY_BM25[1],
}

_NUMBER = {"type": "number", "not": {"type": "boolean"}}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "fusion": {
            "enum": list(FUSIONS),
            "description": "hybrid: normalised score fusion or reciprocal-rank fusion",
        },
        "semantic_weight": {
            **_NUMBER,
            "minimum": 0,
            "maximum": 1,
            "description": "score fusion: the keyword list gets 1 - w",
        },
        "rrf_k": {**_NUMBER, "minimum": 0, "maximum": 1000, "description": "RRF: k in 1 / (k + rank)"},
        "bm25_k1": {**_NUMBER, "minimum": 0, "maximum": 10, "description": "BM25 term-frequency saturation"},
        "bm25_b": {**_NUMBER, "minimum": 0, "maximum": 1, "description": "BM25 length normalisation"},
    },
}
_VALIDATOR = Draft202012Validator(SCHEMA)


def validate(search: Any) -> dict[str, Any]:
    """``search`` settings as given, or ``invalid_argument`` naming every bad key."""
    if not isinstance(search, dict):
        raise InvalidArgument(f"search settings must be an object, got {search!r}")
    errors = sorted(_VALIDATOR.iter_errors(search), key=lambda e: list(e.path))
    if errors:
        detail = "; ".join(f"{'.'.join(map(str, e.path)) or 'search'}: {e.message}" for e in errors)
        raise InvalidArgument(
            f"invalid search settings: {detail}", next_steps=[f"keys: {', '.join(DEFAULTS)}"]
        )
    return dict(search)


def validate_index_settings(settings: Any) -> dict[str, Any] | None:
    """An index's whole ``settings`` at CREATE_INDEX: its ``search`` part must be valid."""
    if settings is None:
        return None
    if not isinstance(settings, dict):
        raise InvalidArgument(f"settings must be an object, got {settings!r}")
    if "search" in settings:
        validate(settings["search"])
    if not isinstance(settings.get("include_sidecars", False), bool):
        raise InvalidArgument(
            f"settings.include_sidecars must be true or false, got {settings['include_sidecars']!r}"
        )
    return settings


def setting(ctx: Context, rows: list[IndexRow], key: str) -> Any:
    """The value of ``key`` for a search over ``rows`` (first layer that has one)."""
    own = [
        r.settings["search"].get(key) if isinstance(r.settings.get("search"), dict) else None for r in rows
    ]
    if own and own[0] is not None and all(v == own[0] for v in own):
        return own[0]
    v = workspace_layer(ctx).get(key)
    return DEFAULTS[key] if v is None else v


def mixed(ctx: Context, rows: list[IndexRow], keys: tuple[str, ...]) -> list[str]:
    """A warning per key the searched indexes set differently (one sets none): one value ranks
    them all, the workspace's (gitkb.toml or the default), not each index's own."""
    out = []
    for key in keys:
        own = {
            r.name: r.settings["search"].get(key) if isinstance(r.settings.get("search"), dict) else None
            for r in rows
        }
        if len({repr(v) for v in own.values()}) > 1:
            given = ", ".join(f"{name} {'unset' if v is None else v}" for name, v in own.items())
            layer = "gitkb.toml" if workspace_layer(ctx).get(key) is not None else "default"
            out.append(
                f"the searched indexes set different {key} ({given}): the {layer} value"
                f" {setting(ctx, rows, key)} ranked them all; search one index for its own"
            )
    return out


def workspace_layer(ctx: Context) -> dict[str, Any]:
    """``[search]`` of gitkb.toml, checked once per workspace: a bad value or an unknown key is an
    ``invalid_argument`` naming the file, never a silent fallback to the default."""
    cached = ctx.caches.search_settings_toml
    if cached is None:
        section = dict(ctx.settings.section("search"))
        try:
            validate(section)
        except InvalidArgument as exc:
            raise InvalidArgument(
                f"gitkb.toml [search]: {exc.message}", next_steps=[f"keys: {', '.join(DEFAULTS)}"]
            ) from None
        cached = ctx.caches.search_settings_toml = section
    return dict(cached)


def effective(ctx: Context, rows: list[IndexRow]) -> dict[str, Any]:
    return {k: setting(ctx, rows, k) for k in DEFAULTS}


def origins(ctx: Context, row: IndexRow) -> dict[str, str]:
    """Where each effective value of one index comes from: ``index``, ``gitkb.toml`` or ``default``."""
    raw = row.settings.get("search")
    own: dict[str, Any] = raw if isinstance(raw, dict) else {}
    toml = workspace_layer(ctx)
    return {
        k: "index" if own.get(k) is not None else "gitkb.toml" if toml.get(k) is not None else "default"
        for k in DEFAULTS
    }


def bm25_of(ctx: Context, rows: list[IndexRow]) -> tuple[float, float]:
    return float(setting(ctx, rows, "bm25_k1")), float(setting(ctx, rows, "bm25_b"))
