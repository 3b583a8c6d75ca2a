"""Files and directories gitkb makes under its home: owner-only from the moment they exist.

The catalog holds webhook secrets, logs hold tracebacks with paths and arguments, lock and
record files say who runs where: every directory gitkb creates is ``0700`` and every file
``0600``, set by ``os.mkdir``/``os.open`` with the mode (never a ``chmod`` afterwards, which
leaves a window). The process umask can only make them stricter.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO, Any

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dirs(path: str | os.PathLike[str]) -> Path:
    """``mkdir -p`` where each directory made is 0700 (existing ones are left as they are)."""
    p = Path(path)
    missing = []
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(d, DIR_MODE)
    return Path(path)


def open_private(path: str | os.PathLike[str], mode: str = "a", encoding: str | None = "utf-8") -> IO[Any]:
    """``open(path, mode)`` for ``a``, ``a+``, ``w``, ``wb``, ``ab``: a new file is created 0600."""
    flags = os.O_CREAT | (os.O_RDWR if "+" in mode else os.O_WRONLY)
    if mode.startswith("a"):
        flags |= os.O_APPEND
    elif mode.startswith("w"):
        flags |= os.O_TRUNC
    fd = os.open(path, flags, FILE_MODE)
    return os.fdopen(fd, mode, encoding=None if "b" in mode else encoding)


def create_private(path: str | os.PathLike[str]) -> None:
    """Create ``path`` empty and 0600 if it does not exist (so a library that opens it later,
    SQLite say, finds it with the right mode)."""
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, FILE_MODE))


def append_log(home: str | os.PathLike[str], text: str) -> Path:
    """Append ``text`` to ``<home>/logs/gitkb.log`` (0700 directory, 0600 file); returns its path."""
    logdir = private_dirs(Path(home) / "logs")
    with open_private(logdir / "gitkb.log", "a") as fh:
        fh.write(text)
    return logdir / "gitkb.log"
