"""Crash points and pause points for the crash-safety and interleaving tests.

``crash_point(name)`` kills the process with SIGKILL when the environment
variable ``GITKB_CRASH_AT`` names that point (optionally ``name:N`` for the
N-th time it is reached). Unset — always, outside those tests — it costs one
dictionary lookup.

``pause_point(name)`` (every crash point is one too) stops the thread that
reaches it when ``GITKB_PAUSE_AT`` (points, comma-separated) names it
(``name:N``: the N-th time only, counted per directory) and
``GITKB_PAUSE_DIR`` a directory: it writes ``<dir>/<name>.reached`` and waits
(at most ``PAUSE_SECONDS``) for ``<dir>/<name>.go``, so a test can run another
process's (or thread's) work at exactly that point. Unset, it costs one
dictionary lookup.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

PAUSE_SECONDS = 60.0
_hits: dict[str, int] = {}
_pauses: dict[str, int] = {}


def crash_point(name: str) -> None:
    pause_point(name)
    spec = os.environ.get("GITKB_CRASH_AT")
    if not spec:
        return
    point, _, nth = spec.partition(":")
    if point != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)


def pause_point(name: str) -> None:
    spec = os.environ.get("GITKB_PAUSE_AT")
    if not spec:
        return
    nth = next((n for p, _, n in (s.partition(":") for s in spec.split(",")) if p == name), None)
    if nth is None:
        return
    where = Path(os.environ.get("GITKB_PAUSE_DIR") or ".")
    key = f"{name}@{where}"  # counted per directory: each test's own
    _pauses[key] = _pauses.get(key, 0) + 1
    if _pauses[key] != int(nth or 1):
        return
    (where / f"{name}.reached").write_text(str(os.getpid()))
    deadline = time.monotonic() + PAUSE_SECONDS
    while not (where / f"{name}.go").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
