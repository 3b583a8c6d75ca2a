"""Rendering of response dicts for people (tables, text) and for scripts (--json).

Everything printed passes :func:`terminal_safe` once (``gitkb.cli.runner.run``
applies it to every response before a renderer sees it): control characters,
bidi overrides and bytes that were not UTF-8 are spelled out (``\\x1b``,
``\\u202e``, ``\\xff``), so a document name can never drive the operator's
terminal. Names (keys ending in ``path``, ``name``, ``title``) have line breaks
spelled out too; texts (a document page, a snippet, an answer) keep ``\\n``,
``\\t`` and CRLF. ``--json`` prints valid JSON with the same characters as
``\\uXXXX`` escapes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import click

from gitkb.cli.hints import cli_words
from gitkb.core.paths import escape_name

_NAME_KEY = re.compile(r"(?:path|name|title|file_id)s?$", re.IGNORECASE)
_TEXT_KEEP = "\n\t\r"
# what json.dumps(ensure_ascii=False) leaves raw but a terminal acts on (or cannot encode)
_JSON_UNSAFE = re.compile("[\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def shown(text: str, *, name: bool = True) -> str:
    """``text`` as it may reach a terminal; a name (``name=True``) has line breaks spelled out too."""
    if name:
        return escape_name(text)
    safe = escape_name(text, keep=_TEXT_KEEP)
    if "\r" in safe:  # CRLF stays; a lone CR would let a line overwrite what came before
        safe = re.sub("\r(?!\n)", "\\\\x0d", safe)
    return safe


def terminal_safe(value: Any, key: str = "") -> Any:
    """A copy of a response with every string (keys included) passed through :func:`shown`."""
    if isinstance(value, str):
        return shown(value, name=bool(_NAME_KEY.search(key)))
    if isinstance(value, dict):
        return {shown(str(k)): terminal_safe(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [terminal_safe(v, key) for v in value]
    return value


def emit_json(data: dict[str, Any]) -> None:
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    click.echo(_JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


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
    """Warnings on stderr, in CLI words (commands, not the library's method names)."""
    for w in data.get("Warnings") or []:
        click.echo(f"warning: {cli_words(str(w))}", err=True)


Renderer = Callable[[dict[str, Any]], None]


def default_render(data: dict[str, Any]) -> None:
    msg = data.get("Message")
    if msg:
        click.echo(msg)
    else:
        emit_json(data)
