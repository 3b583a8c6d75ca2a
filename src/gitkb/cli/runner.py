"""What every command shares: the CLI's state (the workspace a command means), ``run`` (call the
library, print, exit with the contract's code) and the crash log. Commands import from here; the
entry point (``gitkb.cli.main``) builds the group and registers the commands."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gitkb.cli.hints import cli_words
from gitkb.cli.home import READ_COMMANDS, choose_home, crash_log_dir
from gitkb.cli.output import Renderer, default_render, emit_json, shown, terminal_safe, warnings_of
from gitkb.core.errors import GitkbError, write_crash_log

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
        if writes is None:
            writes = command_words() not in READ_COMMANDS
        home = choose_home(self.home, self.home_source, writes=writes, env=os.environ, cwd=Path.cwd())
        RESOLVED["home"] = home  # where an unexpected error's log goes
        return home

    def workspace(self) -> Workspace:
        if self._ws is None:
            from gitkb.workspace import Workspace  # heavy: tantivy; the CLI starts without it

            self._ws = Workspace(
                self.resolve_home(), resume_in_background=True
            )  # a crash's leftovers outlive the command
        return self._ws

    def close(self) -> None:
        if self._ws is not None:
            self._ws.close()
            self._ws = None


def run(call: Callable[[Workspace], dict[str, Any]], render: Renderer = default_render) -> None:
    """Call the library, print the result, exit with the contract's code."""
    state = click.get_current_context().find_object(CliState)
    assert state is not None

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
        message = cli_words(str(data.get("Error", "failed")))
        if data.get("code") == "internal" and "details in" not in message:  # e.g. a job that failed
            message += f"; details in {crash_log.path()}"
        click.echo(f"error: {shown(message)}", err=True)
        for step in data.get("next_steps") or []:
            click.echo(f"  next: {shown(cli_words(str(step)))}", err=True)
        state.close()
        sys.exit(3 if data.get("code") == "internal" else 1)
    if not state.as_json:
        safe = terminal_safe(data)
        if isinstance(safe.get("Message"), str):  # in CLI words, as errors and warnings are
            safe["Message"] = cli_words(safe["Message"])
        warnings_of(safe)
        render(safe)


class _CrashLog(logging.Handler):
    """``<home>/logs/gitkb.log``: where tracebacks go instead of the terminal.

    ``home`` is the ``--home`` given (set when options are parsed), else
    ``GITKB_HOME``, else ``./.gitkb``; a current directory that no longer exists
    falls back to the temporary directory. Writing never raises.
    """

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.home: str | None = None

    def path(self) -> Path:
        try:
            resolved = RESOLVED.get("home") or (Path(self.home) if self.home else None)
            return crash_log_dir(resolved, os.environ) / "gitkb.log"  # never a new ./.gitkb
        except Exception:  # noqa: BLE001 - e.g. the current directory was removed
            return Path(tempfile.gettempdir()) / "gitkb-logs" / "gitkb.log"

    def write(self, what: BaseException | str) -> Path:
        path = self.path()
        return write_crash_log(path.parent.parent, what) or path  # 0700 directory, 0600 file

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):  # logging must not be what fails
            self.write(self.format(record))


crash_log = _CrashLog()
crash_log.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
