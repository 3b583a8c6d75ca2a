"""Reading an HTTP error answer in tests, whichever envelope the server uses.

The HTTP error shape is moving from ``{"ok": false, "error": {"code", "message"}}`` to the
library's envelope at the top level (``{"Success": false, "Error", "code", ...}``); tests read
the code and the message through these two functions so they hold across that change.
"""

from __future__ import annotations

from typing import Any


def _body(resp: Any) -> dict[str, Any]:
    body = resp.json() if hasattr(resp, "json") else resp
    assert isinstance(body, dict), body
    return body


def error_code(resp: Any) -> str:
    body = _body(resp)
    if "code" in body:
        return str(body["code"])
    return str(body["error"]["code"])


def error_message(resp: Any) -> str:
    body = _body(resp)
    if "Error" in body:
        return str(body["Error"])
    return str(body["error"]["message"])
