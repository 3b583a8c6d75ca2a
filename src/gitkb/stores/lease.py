"""The local guard of one home: an exclusive OS file lock on ``<home>/writer.lock``, held for a process's
lifetime.

It is not the writer lease (that is a catalog row, ``gitkb.stores.node_lease``): it says which process
of this home writes the home's own derived files (the keyword index under ``<home>/keywords``, the
embedded Chroma under ``<home>/vectors``). Only the process holding it may take the writer lease; on a
node that is not the writer it keeps the node's keyword index current. The file says who (pid, host,
since).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import IO, Any

from gitkb.core.files import open_private


class LocalGuard:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[str] | None = None

    @property
    def held(self) -> bool:
        return self._fh is not None

    def try_acquire(self) -> bool:
        if self._fh is not None:
            return True
        fh = open_private(self.path, "a+")  # 0600; held for the process lifetime
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            return False
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}))
        fh.flush()
        self._fh = fh
        return True

    def holder(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.path.read_text("utf-8") or "null")
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def release(self) -> None:
        if self._fh is not None:
            try:
                fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            finally:
                self._fh.close()
                self._fh = None
