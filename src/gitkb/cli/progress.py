"""One progress bar per phase a command waits on (indexing, embedding, a job...).

A :class:`Bar` is callable as ``progress(done, total, *rest)`` (the library's callback shape)
and draws click's bar on stderr: ``label [####    ] done/total  pct  eta  rate/s``. It draws
nothing when stderr is not a terminal or the command runs with ``--json``; a phase that never
reports (nothing to wait for) draws nothing either.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from gitkb.cli.runner import CliState


def bars_wanted() -> bool:
    """A terminal on stderr and no ``--json``."""
    if not sys.stderr.isatty():
        return False
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return True

    state = ctx.find_object(CliState)
    return not (state is not None and state.as_json)


class Bar:
    def __init__(self, label: str) -> None:
        self.label = label
        self.enabled = bars_wanted()
        self._bar: Any = None
        self._t0 = 0.0
        self._first = 0

    def _rate(self, _item: object) -> str | None:
        if self._bar is None:
            return None
        seconds = time.monotonic() - self._t0
        done = self._bar.pos - self._first
        return f"{done / seconds:.1f}/s" if seconds > 0.05 and done > 0 else None

    def __call__(self, done: int, total: int, *_: Any) -> None:
        if not self.enabled or total <= 0:
            return
        if self._bar is None:
            self._bar = click.progressbar(
                length=total, label=self.label, file=sys.stderr, show_pos=True, item_show_func=self._rate
            )
            self._bar.__enter__()
            self._t0, self._first = time.monotonic(), max(0, min(done, total))
        if total != self._bar.length:
            self._bar.length = total
        self._bar.update(max(0, min(done, total) - self._bar.pos), current_item=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def job_line(data: dict[str, Any]) -> str:
    """What a command that queued a job and did not wait says: the job and how to follow it."""
    job_id = data.get("job_id")
    return (
        f"{data.get('kind') or 'job'} runs in the background as job {job_id}; not waited for. "
        f"Follow it with `gitkb jobs wait {job_id}` (`gitkb status` shows the progress)."
    )
