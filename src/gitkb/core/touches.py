"""A path a pending tool call touches, and how: ``read``, ``write`` or ``unknown``.

The result type of :mod:`gitkb.core.tool_calls` (file tools) and :mod:`gitkb.core.shell_touches`
(shell commands). No I/O here.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

READ, WRITE, UNKNOWN = "read", "write", "unknown"


@dataclass(frozen=True)
class Touch:
    kind: str  # read | write | unknown
    path: str  # absolute when the call's cwd is known, else as given
    why: str  # what touches it: "Write", "rm", "redirect >", "git commit", ...


def join_cwd(cwd: str, path: str) -> str:
    """``path`` from the folder ``cwd`` (as given when ``cwd`` is unknown)."""
    return posixpath.join(cwd, path) if cwd else path
