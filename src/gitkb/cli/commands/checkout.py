"""gitkb checkout SOURCE DIR, and gitkb guard (the agent runtime's hook: no workspace)."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from gitkb.cli.runner import run


def _render(data: dict[str, Any]) -> None:
    click.echo(data["Message"])
    for step in data.get("next_steps") or []:
        click.echo(f"  next: {step}")


@click.command("checkout")
@click.argument("source")
@click.argument("directory", type=click.Path(file_okay=False))
def checkout(source: str, directory: str) -> None:
    """A read-only working copy of SOURCE at its synced commit in DIRECTORY, refreshed by every sync.

    For agents that read with their own file tools; its git hooks refuse commits and pushes, and
    `gitkb guard` (wired into the agent runtime) refuses writes to it."""
    path = os.path.abspath(directory)
    run(lambda ws: ws.checkout(source, path), _render)


@click.command("guard")
def guard() -> None:
    """Hook for agent runtimes: read one pending tool call as JSON on stdin and decide.

    Claude Code's PreToolUse input (tool_name, tool_input, cwd) or {"tool", "path", "command", "cwd"}.
    A write, edit, delete, move or git mutation inside a gitkb checkout is denied (Claude Code: a
    permissionDecision of deny; the plain form: exit 2 and the denial as JSON); anything else exits 0
    and prints nothing."""
    from gitkb.services.changes.checkout_guard import run_guard  # CLI start: ~9 ms only it needs

    code, out, err = run_guard(sys.stdin.read(), default_cwd=os.getcwd(), env=os.environ)
    if out:
        click.echo(out, nl=False)
    if err:
        click.echo(err, nl=False, err=True)
    sys.exit(code)


def register(group: click.Group) -> None:
    group.add_command(checkout)
    group.add_command(guard)
