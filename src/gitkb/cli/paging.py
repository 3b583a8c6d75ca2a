"""``--start/--count`` on every list command, and the line that says there is more."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def page_options(fn: F) -> F:
    """``--start N`` (from 0) and ``--count N`` (the library's default page when not given)."""
    fn = click.option(
        "--count", type=int, default=None, help="Items in the page (default: the list's page)."
    )(fn)
    return click.option("--start", type=int, default=None, help="First item, from 0.")(fn)


def with_more(render: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """``render``, then, when the page is not the last, where the next one starts (on stderr)."""

    def out(data: dict[str, Any]) -> None:
        render(data)
        if data.get("has_more"):
            first = int(data.get("start") or 0)
            click.echo(
                f"(items {first + 1}-{first + int(data.get('actual_count') or 0)} of {data.get('total_count')};"
                f" more: --start {data.get('next_start')})",
                err=True,
            )

    return out
