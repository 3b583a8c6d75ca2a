"""An index by name, for the services that act on one (no other service imports needed: a leaf)."""

from __future__ import annotations

from gitkb.core.errors import NotFound
from gitkb.core.names import validate_index_name
from gitkb.services.context import Context
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog.indexes import IndexRow


def get_index(ctx: Context, name: object, *, field: str = "index_name") -> IndexRow:
    name = validate_index_name(name, field=field)
    row = index_rows.get_by_name(ctx.catalog.conn, name)
    if row is None or row.hidden:
        known = [r.name for r in index_rows.list_all(ctx.catalog.conn)]
        hint = f"known indexes: {', '.join(known[:20])}" if known else "no index exists yet"
        raise NotFound(
            f"index {name!r} does not exist ({hint})",
            next_steps=[
                "create it with CREATE_INDEX (CLI: gitkb index create NAME)",
                "or pick one from LIST_INDICES",
            ],
        )
    return row
