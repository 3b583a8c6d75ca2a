"""A model folder of the embedders' cache (``<home>/models/<model>/``) that only this process's user
can change: the documents' model is linked and the query graph built there, and both are loaded
from there, so a folder that is a symlink (to another user's directory) or another user's, or a
file at a graph's name that is a symlink or someone else's, is never used as it is
(``fastembed_minilm.assemble_model_dir``, ``minilm_query.ensure_query_graph``).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path


def _owners() -> set[int]:
    """Who may own a model folder or file: this process's user, or root (as ssh's StrictModes)."""
    return {os.geteuid(), 0}


def own_folder(model_dir: Path) -> None:
    """Refuse a model folder that is a symlink, not a folder, another user's (neither this user nor
    root), or root's and writable by others; take group and others' write access from one of this
    user's (no one else may plant a graph or weights in it; a filesystem that refuses the change is
    refused too)."""
    st = os.lstat(model_dir)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise OSError(
            f"{model_dir} is a symlink or not a folder: no model is assembled, built or loaded there"
        )
    if st.st_uid not in _owners():
        raise OSError(f"{model_dir} belongs to another user (uid {st.st_uid}): no model is loaded from it")
    if st.st_mode & 0o022:
        if st.st_uid != os.geteuid():
            raise OSError(f"{model_dir} is writable by other users: no model is loaded from it")
        os.chmod(model_dir, stat.S_IMODE(st.st_mode) & ~0o022)


def trusted(path: Path) -> bool:
    """A regular file (not a symlink) of this user's or root's that no one else may write."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid in _owners() and not st.st_mode & 0o022


def discard(path: Path) -> None:
    """Remove what is at ``path`` unless it is a folder (a link goes, never what it points to)."""
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
