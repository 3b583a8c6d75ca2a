"""One way to wait in a test: poll a predicate until it answers something truthy."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """``wait_until`` gave up: a test failure (catch it only to skip, as a missing daemon does)."""


def wait_until(
    predicate: Callable[[], T], *, timeout: float, interval: float = 0.05, what: str = "the condition"
) -> T:
    """Call ``predicate`` every ``interval`` seconds until it returns a truthy value, and return it.

    After ``timeout`` seconds, fail with ``what`` and the predicate's last value. An exception the
    predicate raises (an ``assert`` on a response, say) propagates at once.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:g}s waiting for {what}; last value: {value!r}")
        time.sleep(interval)
