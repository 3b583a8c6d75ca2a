"""A progress bar on stderr, only when stderr is a terminal."""

from __future__ import annotations

import sys
from typing import Any

import click


class ProgressBar:
    def __init__(self, label: str) -> None:
        self.label = label
        self._bar: Any = None

    def update(self, done: int, total: int) -> None:
        if not sys.stderr.isatty() or total <= 0:
            return
        if self._bar is None:
            self._bar = click.progressbar(length=total, label=self.label, file=sys.stderr)
            self._bar.__enter__()
        if self._bar.length != total:
            self._bar.length = total
        self._bar.update(max(0, done - self._bar.pos))

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None
