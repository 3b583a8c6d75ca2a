"""``<home>/server.json``: where the server that owns a workspace listens.

The server holding the writer lease records its loopback URL there on start-up
and removes it on shutdown, so other gitkb processes on the machine can find it
(and send their calls to it instead of opening the stores). A record whose
process is gone (kill -9) is stale: ``read_record`` ignores it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from gitkb.core.files import open_private

RECORD = "server.json"


def advertised_url(host: str, port: int) -> str:
    """The loopback URL for a wildcard bind, else the bound address itself."""
    if host in ("0.0.0.0", "", "::", "[::]"):
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - another user's live process
        return True
    return True


def write_record(home: Path, url: str, *, auth: bool, writer: bool) -> Path:
    path = home / RECORD
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    data = {"url": url, "pid": os.getpid(), "started_at": time.time(), "auth": auth, "writer": writer}
    with open_private(tmp, "w") as fh:  # 0600, like everything under the home
        fh.write(json.dumps(data))
    os.replace(tmp, path)
    return path


def read_record(home: Path) -> dict[str, Any] | None:
    """The live server's record, or None (none recorded, unreadable, or its process is gone)."""
    try:
        data = json.loads((home / RECORD).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not _alive(data.get("pid")):
        return None
    return data


def remove_record(home: Path) -> None:
    """Remove the record if this process wrote it."""
    path = home / RECORD
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(data, dict) and data.get("pid") == os.getpid():
        path.unlink(missing_ok=True)
