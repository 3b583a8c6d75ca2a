"""A read-only working copy of a managed repository at one commit (``gitkb checkout``).

Layout::

    DIR/                        the whole tree at the commit; files and folders without write bits
    DIR/.git/                   a repository of its own (objects fetched from the managed clone, no remote)
    DIR/.git/hooks/*            refuse commits, pushes, merges, rebases and every ref update
    DIR/.git/gitkb-checkout.json   {"source", "commit", "documents_root", "managed_document_repo": true}: the
                                   mark the guard (``gitkb guard``) looks for, walking up from a path

``core.hooksPath`` is set in the copy's own config so a global hooks path does not replace the
hooks. The reference-transaction hook lets a ref update through only with ``GITKB_CHECKOUT_REFRESH``
set (this module's refresh); it stops ``git commit --no-verify`` too. As with the managed clone's
guard, hooks and modes stop accidents and agents, not a user set on bypassing them.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

from gitkb.core.errors import InvalidArgument, StoreUnavailable

MARKER = "gitkb-checkout.json"
REFRESH_ENV = "GITKB_CHECKOUT_REFRESH"
_SCRUB_PREFIX = "GIT_"

REFUSAL = (
    "gitkb: this is a read-only checkout of the knowledge base {source!r}; it takes no commits or pushes. "
    "Propose the change instead: propose_kb_edit (or propose_kb_delete / propose_kb_rename), then "
    "open_kb_pull_request."
)
_REFUSING_HOOKS = ("pre-commit", "pre-merge-commit", "pre-push", "pre-rebase", "pre-applypatch", "commit-msg")


def marker_path(directory: Path) -> Path:
    return Path(directory) / ".git" / MARKER


def read_marker(directory: Path) -> dict[str, Any] | None:
    """The checkout's marker, or None when ``directory`` is not a gitkb checkout."""
    try:
        data = json.loads(marker_path(directory).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("managed_document_repo") is True else None


def _git(directory: Path, *args: str, refresh: bool = False) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUB_PREFIX)}
    env.update({"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_CONFIG_NOSYSTEM": "1"})
    if refresh:
        env[REFRESH_ENV] = "1"
    proc = subprocess.run(
        ["git", "-C", str(directory), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        raise StoreUnavailable(
            f"git {args[0]} in the checkout {directory} failed: {proc.stderr.strip()[:500]}"
        )
    return proc.stdout


def _hook(source: str, name: str) -> str:
    msg = REFUSAL.format(source=source).replace("'", "'\"'\"'")
    if name == "reference-transaction":
        return (
            "#!/bin/sh\n# gitkb checkout: no ref moves but gitkb's own refresh.\n"
            f'[ -n "${REFRESH_ENV}" ] && exit 0\n'
            '[ "$1" = "prepared" ] || exit 0\n'
            f"echo '{msg}' >&2\nexit 1\n"
        )
    return f"#!/bin/sh\n# gitkb checkout: refuse {name}.\necho '{msg}' >&2\nexit 1\n"


def _walk_tree(directory: Path) -> list[tuple[Path, bool]]:
    """Every folder and file of the working tree (not ``.git``), folders last-to-first for chmod."""
    out: list[tuple[Path, bool]] = []
    for root, dirs, files in os.walk(directory):
        if Path(root) == directory:
            dirs[:] = [d for d in dirs if d != ".git"]
        out.extend((Path(root) / f, False) for f in files)
        out.extend((Path(root) / d, True) for d in dirs)
    return out


def set_writable(directory: Path, writable: bool) -> None:
    """Add or take away every write bit of the working tree (files and folders, the top one too)."""
    for path, _is_dir in [(directory, True), *_walk_tree(directory)]:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(st.st_mode):
            continue
        mode = stat.S_IMODE(st.st_mode)
        mode = (mode | stat.S_IWUSR) if writable else (mode & ~0o222)
        os.chmod(path, mode)


def make_writable_for_refresh(directory: Path) -> None:
    """Folders need their write bit back (top first) before git can replace what they hold."""
    os.chmod(directory, stat.S_IMODE(os.lstat(directory).st_mode) | stat.S_IWUSR)
    for root, dirs, files in os.walk(directory):
        if Path(root) == directory:
            dirs[:] = [d for d in dirs if d != ".git"]
        for d in dirs:
            p = Path(root) / d
            if not p.is_symlink():
                os.chmod(p, stat.S_IMODE(os.lstat(p).st_mode) | stat.S_IWUSR)
        for f in files:
            p = Path(root) / f
            if not p.is_symlink():
                os.chmod(p, stat.S_IMODE(os.lstat(p).st_mode) | stat.S_IWUSR)


def materialise(git_dir: Path, directory: Path, commit: str, source: str, documents_root: str = "") -> None:
    """Create or refresh the read-only checkout of ``commit`` (an object of the clone ``git_dir``)."""
    directory = Path(directory)
    existing = read_marker(directory)
    if existing is None:
        if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
            raise InvalidArgument(
                f"{directory} exists and is not an empty folder or a gitkb checkout; nothing was written",
                next_steps=["give a new or empty folder"],
            )
        directory.mkdir(parents=True, exist_ok=True)
        _git(directory, "init", "-q")
        _install_hooks(directory, source)
        _write_marker(directory, source, None, documents_root)  # marked (and guarded) before any file lands
    elif existing.get("source") != source:
        raise InvalidArgument(
            f"{directory} is a checkout of source {existing.get('source')!r}, not {source!r}; nothing was written",
            next_steps=["give another folder"],
        )
    else:
        _install_hooks(directory, source)
    make_writable_for_refresh(directory)
    try:
        _git(directory, "fetch", "-q", "--no-tags", str(Path(git_dir).resolve()), commit, refresh=True)
        _git(
            directory,
            "-c",
            "advice.detachedHead=false",
            "checkout",
            "-q",
            "--force",
            "--detach",
            commit,
            refresh=True,
        )
        _git(directory, "clean", "-q", "-ffdx", refresh=True)
        _write_marker(directory, source, commit, documents_root)
    finally:
        set_writable(directory, False)


def _write_marker(directory: Path, source: str, commit: str | None, documents_root: str) -> None:
    marker = {
        "source": source,
        "commit": commit,
        "documents_root": documents_root,
        "managed_document_repo": True,
    }
    tmp = marker_path(directory).with_name(MARKER + ".tmp")
    tmp.write_text(json.dumps(marker, sort_keys=True) + "\n")
    os.replace(tmp, marker_path(directory))


def enclosing_checkout(path: Path) -> Path | None:
    """The checkout ``path`` lies in (``path`` itself excluded), if any."""
    for folder in Path(path).parents:
        if read_marker(folder) is not None:
            return folder
    return None


def _install_hooks(directory: Path, source: str) -> None:
    hooks = directory / ".git" / "hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    for name in (*_REFUSING_HOOKS, "reference-transaction"):
        path = hooks / name
        path.write_text(_hook(source, name))
        path.chmod(0o755)
    _git(directory, "config", "core.hooksPath", str(hooks.resolve()))


def head(directory: Path) -> str:
    return _git(directory, "rev-parse", "HEAD").strip()
