"""Paging for every list answer: ``start``/``count`` in, the same five fields out.

A list function takes ``start`` (from 0) and ``count`` (1 to its limit), checks them with
``page_of`` (out of range or not an integer: ``invalid_argument``) and adds
``page_fields``: ``start``, ``count``, ``total_count``, ``actual_count``, ``has_more`` and
``next_start`` (``None`` on the last page). A start past the end is an empty page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from gitkb.core.action_table import MAX_LIST
from gitkb.core.errors import InvalidArgument

T = TypeVar("T")
MAX_COUNT = MAX_LIST  # the largest page any list answers (the action table's limit)
PAGE_KEYS = ("start", "count", "total_count", "actual_count", "has_more", "next_start")


@dataclass(frozen=True)
class Page:
    start: int
    count: int

    @property
    def end(self) -> int:
        return self.start + self.count


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name} must be an integer, not {value!r}")
    return value


def page_of(start: Any = None, count: Any = None, *, default: int, limit: int = MAX_COUNT) -> Page:
    """The page asked for; ``None`` means from the first item, ``default`` items."""
    s = 0 if start is None else _int("start", start)
    c = default if count is None else _int("count", count)
    if s < 0:
        raise InvalidArgument(f"start is {s}; it counts from 0", next_steps=["ask for start >= 0"])
    if not 1 <= c <= limit:
        raise InvalidArgument(
            f"count is {c}; a page holds 1 to {limit} items",
            next_steps=[f"ask for 1 <= count <= {limit}, and page on with next_start"],
        )
    return Page(s, c)


def page_fields(page: Page, total: int, actual: int) -> dict[str, Any]:
    has_more = page.start + actual < total
    return {
        "start": page.start,
        "count": page.count,
        "total_count": total,
        "actual_count": actual,
        "has_more": has_more,
        "next_start": page.start + actual if has_more else None,
    }


def paged(items: Sequence[T], page: Page) -> tuple[list[T], dict[str, Any]]:
    """One page of an in-memory list, and its fields."""
    rows = list(items[page.start : page.end])
    return rows, page_fields(page, len(items), len(rows))
