"""Confirmation before a command deletes a whole thing (an index, a source, a knowledge base).

On a terminal (stdin and stderr) and without ``--json`` the command names what goes and asks;
``--yes`` skips the question. Without a terminal, or with ``--json``, it refuses unless ``--yes``
is given: exit 2 (a usage error) with one line saying so, before the workspace is opened.
Declining deletes nothing and exits 1. Per-item removals (``docs rm``, ``proposals discard``)
do not ask.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from gitkb.cli.runner import CliState, command_words


def yes_option(f: Any) -> Any:
    return click.option(
        "--yes",
        "-y",
        is_flag=True,
        help="Delete without asking (required without a terminal or with --json).",
    )(f)


def _state() -> Any:
    return click.get_current_context().find_object(CliState)


def refuse_unless_confirmable(yes: bool, what: str) -> None:
    """Exit 2 when the command could not ask (no terminal, or ``--json``) and ``--yes`` is missing."""
    if yes:
        return

    state = _state()
    why = "with --json" if state is not None and state.as_json else "without a terminal to ask on"
    if why == "with --json" or not (sys.stdin.isatty() and sys.stderr.isatty()):
        click.echo(
            f"error: `gitkb {command_words()}` deletes {what}; {why} it needs --yes. Nothing was deleted.",
            err=True,
        )
        sys.exit(2)


def ask(yes: bool, title: str, goes: list[str]) -> None:
    """On a terminal: name what goes, ask; exit 1 when the answer is no."""
    if yes:
        return
    click.echo(f"This deletes {title}:", err=True)
    for line in goes:
        click.echo(f"  - {line}", err=True)
    if not click.confirm("Delete it?", default=False, err=True):
        click.echo("Nothing was deleted.", err=True)
        state = _state()
        if state is not None:
            state.close()
        sys.exit(1)


def confirmed(
    yes: bool, what: str, describe: Callable[[Any], tuple[str, list[str]] | None], act: Callable[[Any], Any]
) -> Callable[[Any], Any]:
    """``run``'s call: refuse or ask (``describe(ws)`` names what goes; None when the thing does not
    exist, so the action itself answers not_found), then ``act(ws)``."""
    refuse_unless_confirmable(yes, what)

    def call(ws: Any) -> Any:
        if not yes:
            described = describe(ws)
            if described is not None:
                ask(yes, *described)
        return act(ws)

    return call


def counted(n: Any, noun: str) -> str:
    return f"{n if n is not None else '?'} {noun}"
