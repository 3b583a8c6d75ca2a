"""Crash points for the crash-safety tests.

``crash_point(name)`` kills the process with SIGKILL when the environment
variable ``GITKB_CRASH_AT`` names that point (optionally ``name:N`` for the
N-th time it is reached). Unset — always, outside those tests — it costs one
dictionary lookup.
"""

from __future__ import annotations

import os
import signal

_hits: dict[str, int] = {}


def crash_point(name: str) -> None:
    spec = os.environ.get("GITKB_CRASH_AT")
    if not spec:
        return
    point, _, nth = spec.partition(":")
    if point != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
