"""Assertions on gitkb's response dicts, shared by the test modules."""

from __future__ import annotations

from typing import Any


def ok(resp: dict[str, Any]) -> dict[str, Any]:
    assert resp["Success"] is True, resp
    return resp


def fails(resp: dict[str, Any], code: str) -> dict[str, Any]:
    assert resp["Success"] is False, resp
    assert resp["code"] == code, resp
    return resp
