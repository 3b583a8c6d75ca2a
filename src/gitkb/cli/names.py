"""The CLI's option names are the action table's parameter names, dashes for underscores
(``--pagination-mode`` is ``pagination_mode``); tests/test_cli_names.py checks every option of
every command the table names, with its short list of documented exceptions.

An option renamed to match keeps its old spelling working as a hidden alias: ``cls=Renamed,
old=("--mode",)`` accepts both and shows only the table's name in ``--help``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click


class Renamed(click.Option):
    """An option whose older spellings (``old``) still work but are left out of ``--help``."""

    def __init__(self, param_decls: Sequence[str], *, old: Sequence[str] = (), **kwargs: Any) -> None:
        names = [d for d in param_decls if d.startswith("-")]
        dest = [d for d in param_decls if not d.startswith("-")]
        super().__init__([*names, *old, *dest], **kwargs)
        self.old: tuple[str, ...] = tuple(old)

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        shown = self.opts
        self.opts = [o for o in shown if o not in self.old]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = shown
