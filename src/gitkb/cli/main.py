"""Entry point: ``gitkb [--home DIR] [--json] COMMAND``.

Exit codes: 0 ok, 1 a domain error (one line on stderr), 2 usage, 3 an
unexpected error (with the log path), 130 interrupted.

No Python traceback reaches the terminal: :func:`main` turns every exception
(at import of the commands, while parsing options, in a command, in a
progress callback, while closing) into one line and ``<home>/logs/gitkb.log``;
log records of the ``gitkb`` loggers (a job that failed with its traceback)
go to that file too, not to stderr; characters the terminal's encoding lacks
are printed as escapes instead of failing; a closed pipe (``| head``) ends
quietly.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import TYPE_CHECKING, NoReturn

import click

from gitkb.cli.output import shown
from gitkb.cli.runner import CliState, crash_log

if TYPE_CHECKING:
    pass


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
    crash_log.home = home
    ctx.obj = state
    ctx.call_on_close(state.close)


_import_error: BaseException | None = None


def _register() -> None:
    from gitkb.cli.commands import register_all  # in the try below: main() reports a broken command

    register_all(cli)


try:
    _register()
except Exception as _exc:  # noqa: BLE001 - reported by main() as one line, not a traceback at import
    _import_error = _exc


def _unexpected(exc: BaseException) -> NoReturn:
    log_path = crash_log.write(exc)
    message = shown(" ".join(str(exc).split()))[:500]
    click.echo(f"error: unexpected {type(exc).__name__}: {message} (details in {log_path})", err=True)
    sys.exit(3)


def _quiet_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the exit flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def main(argv: list[str] | None = None) -> None:
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):  # a detached stream
                reconfigure(errors="backslashreplace")
    root = logging.getLogger("gitkb")
    if crash_log not in root.handlers:
        root.addHandler(crash_log)
        root.propagate = False  # no record (and no traceback) reaches stderr through the root logger
    try:
        if _import_error is not None:
            _unexpected(_import_error)
        cli.main(args=argv, prog_name="gitkb", standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("interrupted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        _quiet_stdout()
        sys.exit(1)
    except SystemExit:
        raise
    except Exception as exc:  # noqa: BLE001
        _unexpected(exc)


if __name__ == "__main__":  # pragma: no cover
    main()
