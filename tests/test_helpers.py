"""The shared test helpers themselves: ``wait_until`` returns what it waited for and fails saying
what it waited for and the last value it saw; and no test module edits ``sys.path``."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import pytest

from helpers import WaitTimeout, wait_until


def test_wait_until_returns_the_first_truthy_value() -> None:
    answers = iter([None, 0, [], {"status": "completed"}, {"status": "later"}])
    assert wait_until(lambda: next(answers), timeout=5, interval=0.001, what="a job") == {
        "status": "completed"
    }


def test_wait_until_fails_naming_what_and_the_last_value_after_its_timeout() -> None:
    calls: list[float] = []

    def never() -> list[str]:
        calls.append(time.monotonic())
        return []

    start = time.monotonic()
    with pytest.raises(
        AssertionError, match=r"timed out after 0\.2s waiting for the index to catch up; last value: \[\]"
    ):
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


def test_no_test_module_edits_sys_path() -> None:
    """pytest puts tests/ on the path (rootdir conftest, ``prepend`` mode): a test that edits
    ``sys.path`` itself hides an import that only works from one directory."""
    offenders = []
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "path"
                and getattr(node.value, "id", None) == "sys"
            ):
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []
