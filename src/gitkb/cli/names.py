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

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        if self.is_flag or self.multiple or self.count or not self.old:
            super().add_to_parser(parser, ctx)
            return
        # every value given is kept, so two spellings given with different values are refused
        # (``consume_value``) instead of the last one silently winning
        parser.add_option(obj=self, opts=self.opts, dest=self.name, action="append", nargs=self.nargs)

    def consume_value(self, ctx: click.Context, opts: Any) -> Any:
        given = opts.get(self.name)
        if isinstance(given, list) and not self.multiple:
            if len({str(v) for v in given}) > 1:
                raise click.UsageError(
                    f"{self.opts[0]} was given more than once (or under its older spelling) with "
                    f"different values: {', '.join(map(str, given))}; give it once",
                    ctx,
                )
            opts = {**opts, self.name: given[-1]}
        return super().consume_value(ctx, opts)

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        shown = self.opts
        self.opts = [o for o in shown if o not in self.old]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = shown
