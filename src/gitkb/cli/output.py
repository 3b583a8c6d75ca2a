"""Rendering of response dicts for people (tables, text) and for scripts (--json)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click


def emit_json(data: dict[str, Any]) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    cells = [[("" if v is None else str(v)) for v in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in cells:
        for i, v in enumerate(r):
            widths[i] = min(max(widths[i], len(v)), 80)
    def line(vals: Sequence[str]) -> str:
        return "  ".join(v[:80].ljust(widths[i]) for i, v in enumerate(vals)).rstrip()
    out = [line(list(headers)), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out)


def warnings_of(data: dict[str, Any]) -> None:
    for w in data.get("Warnings") or []:
        click.echo(f"warning: {w}", err=True)


Renderer = Callable[[dict[str, Any]], None]


def default_render(data: dict[str, Any]) -> None:
    msg = data.get("Message")
    if msg:
        click.echo(msg)
    else:
        emit_json(data)


def is_tty() -> bool:
    return sys.stderr.isatty()
