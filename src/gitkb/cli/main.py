"""Entry point: ``gitkb [--home DIR] [--json] COMMAND``.

Exit codes: 0 ok, 1 a domain error (one line on stderr), 2 usage, 3 an
unexpected error (with the log path), 130 interrupted.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gitkb.cli.output import Renderer, default_render, emit_json, warnings_of

if TYPE_CHECKING:
    from gitkb.workspace import Workspace


RESOLVED: dict[str, Path] = {}  # the workspace this process's command resolved to


def command_words() -> str:
    """The running command's path under ``gitkb`` (``"index list"``)."""
    ctx = click.get_current_context(silent=True)
    words: list[str] = []
    while ctx is not None and ctx.parent is not None:
        words.append(ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(reversed(words))


@dataclass
class CliState:
    home: str | None
    as_json: bool
    home_source: str = "--home"  # or "GITKB_HOME": where ``home`` came from
    _ws: Workspace | None = None

    def resolve_home(self, *, writes: bool | None = None) -> Path:
        """The workspace this command means (``gitkb.cli.home``); raises ``NotFound`` when none."""
        import os

        from gitkb.cli.home import READ_COMMANDS, choose_home

        if writes is None:
            writes = command_words() not in READ_COMMANDS
        home = choose_home(self.home, self.home_source, writes=writes, env=os.environ, cwd=Path.cwd())
        RESOLVED["home"] = home  # where an unexpected error's log goes
        return home

    def workspace(self) -> Workspace:
        if self._ws is None:
            from gitkb.workspace import Workspace

            self._ws = Workspace(self.resolve_home())
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
    except GitkbError as exc:  # e.g. bad gitkb.toml at start-up, or no workspace found
        data = exc.to_response()
    report(data, render)


def report(data: dict[str, Any], render: Renderer = default_render) -> None:
    """Print a response dict (or its error and next steps) and exit with the contract's code."""
    state = click.get_current_context().find_object(CliState)
    assert state is not None
    if state.as_json:
        emit_json(data)
    if not data.get("Success", False):
        from gitkb.cli.hints import cli_words  # the library names actions; the terminal, commands

        click.echo(f"error: {cli_words(str(data.get('Error', 'failed')))}", err=True)
        for step in data.get("next_steps") or []:
            click.echo(f"  next: {cli_words(str(step))}", err=True)
        state.close()
        sys.exit(3 if data.get("code") == "internal" else 1)
    if not state.as_json:
        warnings_of(data)
        render(data)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--home",
    type=click.Path(file_okay=False),
    envvar="GITKB_HOME",
    help="Workspace directory (default: GITKB_HOME, else the nearest .gitkb upward from here).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the response dict as JSON on stdout.")
@click.version_option(package_name="gitkb")
@click.pass_context
def cli(ctx: click.Context, home: str | None, as_json: bool) -> None:
    """gitkb: searchable knowledge bases over documentation in git."""
    from_env = ctx.get_parameter_source("home") is click.core.ParameterSource.ENVIRONMENT
    state = CliState(home=home, as_json=as_json, home_source="GITKB_HOME" if from_env else "--home")
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
        import contextlib
        import os
        import traceback
        from pathlib import Path

        from gitkb.cli.home import crash_log_dir
        from gitkb.core.files import append_log

        logdir = crash_log_dir(RESOLVED.get("home"), os.environ)  # never a new ./.gitkb
        with contextlib.suppress(OSError):
            append_log(logdir.parent, "".join(traceback.format_exception(exc)))  # 0700 dir, 0600 file
        click.echo(f"error: unexpected {type(exc).__name__}: {exc} (details in {Path(logdir) / 'gitkb.log'})", err=True)
        sys.exit(3)


if __name__ == "__main__":  # pragma: no cover
    main()
