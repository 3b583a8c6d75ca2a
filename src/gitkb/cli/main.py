"""Entry point: ``gitkb [--home DIR] [--json] COMMAND``.

Exit codes: 0 ok, 1 a domain error (one line on stderr), 2 usage, 3 an
unexpected error (with the log path), 130 interrupted.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from gitkb.cli.output import Renderer, default_render, emit_json, warnings_of

if TYPE_CHECKING:
    from gitkb.workspace import Workspace


@dataclass
class CliState:
    home: str | None
    as_json: bool
    _ws: Workspace | None = None

    def workspace(self) -> Workspace:
        if self._ws is None:
            from gitkb.workspace import Workspace

            self._ws = Workspace(self.home, resume_in_background=True)  # a crash's leftovers outlive the command
        return self._ws

    def close(self) -> None:
        if self._ws is not None:
            self._ws.close()
            self._ws = None


def run(call: Callable[[Workspace], dict[str, Any]], render: Renderer = default_render) -> None:
    """Call the library, print the result, exit with the contract's code."""
    state = click.get_current_context().find_object(CliState)
    assert state is not None
    from gitkb.core.errors import GitkbError

    try:
        data = call(state.workspace())
    except GitkbError as exc:  # e.g. bad gitkb.toml at start-up
        data = exc.to_response()
    if state.as_json:
        emit_json(data)
    if not data.get("Success", False):
        click.echo(f"error: {data.get('Error', 'failed')}", err=True)
        for step in data.get("next_steps") or []:
            click.echo(f"  next: {step}", err=True)
        state.close()
        sys.exit(3 if data.get("code") == "internal" else 1)
    if not state.as_json:
        warnings_of(data)
        render(data)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", type=click.Path(file_okay=False), envvar="GITKB_HOME", help="Workspace directory (default ./.gitkb).")
@click.option("--json", "as_json", is_flag=True, help="Print the response dict as JSON on stdout.")
@click.version_option(package_name="gitkb")
@click.pass_context
def cli(ctx: click.Context, home: str | None, as_json: bool) -> None:
    """gitkb: searchable knowledge bases over documentation in git."""
    state = CliState(home=home, as_json=as_json)
    ctx.obj = state
    ctx.call_on_close(state.close)


def _register() -> None:
    from gitkb.cli.commands import register_all

    register_all(cli)


_register()


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="gitkb", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except SystemExit:
        raise
    except Exception as exc:  # noqa: BLE001
        import os
        import traceback
        from pathlib import Path

        from gitkb.core.config import resolve_home

        logdir = resolve_home(None, os.environ) / "logs"
        try:
            logdir.mkdir(parents=True, exist_ok=True)
            (logdir / "gitkb.log").open("a").write("".join(traceback.format_exception(exc)))
        except OSError:
            pass
        click.echo(f"error: unexpected {type(exc).__name__}: {exc} (details in {Path(logdir) / 'gitkb.log'})", err=True)
        sys.exit(3)


if __name__ == "__main__":  # pragma: no cover
    main()
