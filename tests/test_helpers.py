"""The shared test helpers themselves: ``wait_until`` returns what it waited for and fails saying
what it waited for and the last value it saw."""

from __future__ import annotations

import time

import pytest

from helpers import WaitTimeout, wait_until


def test_wait_until_returns_the_first_truthy_value() -> None:
    answers = iter([None, 0, [], {"status": "completed"}, {"status": "later"}])
    assert wait_until(lambda: next(answers), timeout=5, interval=0.001, what="a job") == {"status": "completed"}


def test_wait_until_fails_naming_what_and_the_last_value_after_its_timeout() -> None:
    calls: list[float] = []

    def never() -> list[str]:
        calls.append(time.monotonic())
        return []

    start = time.monotonic()
    with pytest.raises(AssertionError, match=r"timed out after 0\.2s waiting for the index to catch up; last value: \[\]"):
        wait_until(never, timeout=0.2, interval=0.01, what="the index to catch up")
    assert time.monotonic() - start >= 0.2 and len(calls) >= 2
    assert issubclass(WaitTimeout, AssertionError)


def test_wait_until_lets_the_predicates_own_failure_through_at_once() -> None:
    def broken() -> bool:
        raise AssertionError("status 500")

    start = time.monotonic()
    with pytest.raises(AssertionError, match="status 500"):
        wait_until(broken, timeout=30, what="never reached")
    assert time.monotonic() - start < 5
