"""Leased pushes through the git CLI (libgit2 has no ``--force-with-lease``).

The only push gitkb makes::

    git push --porcelain --force-with-lease=refs/heads/<b>:<expected> <remote> <sha>:refs/heads/<b>

``<expected>`` is the sha gitkb last saw on the remote, or empty for "the
branch must not exist yet". Never a ``+`` refspec: a forced refspec silently
overrides the lease. A stale lease is refused by git before anything moves;
we raise ``Conflict`` and nothing changed on either side.

:func:`commits_dropped` says, before any push, which commits a push would take
off the remote branch (reachable from its head, from none of the commits kept).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import pygit2

from gitkb.core.errors import Conflict, ForgeError, InvalidArgument, Unauthorized
from gitkb.stores.git_auth import GitCredentials, network_env, redact
from gitkb.stores.git_cli import last_lines, run_git
from gitkb.stores.git_fetch import NO_CREDENTIAL_HELPERS, transport_error

_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


def push_with_lease(
    git_dir: Path,
    branch: str,
    sha: str,
    expected_remote_sha: str | None,
    *,
    remote: str = "origin",
    credentials: GitCredentials | None = None,
    timeout: float = 300.0,
    where: str | None = None,
) -> str:
    """Push ``sha`` to ``refs/heads/<branch>`` on ``remote`` if it is still at ``expected_remote_sha``."""
    if not _SHA.match(sha):
        raise InvalidArgument(f"push needs a full commit sha, got {sha!r}")
    if expected_remote_sha is not None and not _SHA.match(expected_remote_sha):
        raise InvalidArgument(f"expected remote sha must be a full sha or None, got {expected_remote_sha!r}")
    if branch.startswith(("+", "-", "refs/")) or ":" in branch or not branch:
        raise InvalidArgument(f"invalid branch name {branch!r}")
    ref = f"refs/heads/{branch}"
    env = network_env(git_dir, credentials)  # with the writer token: the push moves our tracking ref
    secrets = credentials.secrets() if credentials else []
    result = run_git(
        git_dir,
        [
            *NO_CREDENTIAL_HELPERS,
            "push",
            "--porcelain",
            "--no-verify",
            f"--force-with-lease={ref}:{expected_remote_sha or ''}",
            remote,
            f"{sha}:{ref}",
        ],
        env=env,
        secrets=secrets,
        timeout=timeout,
        check=False,
    )
    status = _ref_status(result.stdout, ref)
    if result.returncode == 0 and status is not None and status[0] in ("*", " ", "+", "="):
        return sha
    text = f"{result.stdout}\n{result.stderr}"
    if status is not None and "stale info" in status[1]:
        raise Conflict(
            f"push of {branch!r} refused: the remote branch moved (it is no longer at "
            f"{expected_remote_sha or 'nothing'}); nothing was overwritten. Fetch, review again, then push.",
            details={"branch": branch, "expected_remote_sha": expected_remote_sha},
        )
    shown = redact(where or remote, secrets)
    if isinstance(transport_error("push", result, shown), Unauthorized):
        raise Unauthorized(f"push of {branch!r} to {shown} was refused: {last_lines(result.stderr)}")
    raise ForgeError(f"push of {branch!r} to {shown} failed: {last_lines(text)}")


def _ref_status(porcelain: str, ref: str) -> tuple[str, str] | None:
    """(flag, summary) from ``git push --porcelain`` for ``ref``: ``<flag>\\t<from>:<to>\\t<summary>``."""
    for line in porcelain.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[1].endswith(f":{ref}"):
            return parts[0][:1] or " ", parts[2]
    return None


def commits_dropped(
    repository: pygit2.Repository, remote_head: str | None, keep: Iterable[str], *, limit: int = 100
) -> list[dict[str, str]]:
    """The commits reachable from ``remote_head`` and from none of ``keep``, newest first (at most
    ``limit``): what replacing the remote branch would take off it. Each is ``{sha, author, message}``
    (message: the subject line). ``remote_head`` must have been fetched; unknown ``keep`` shas are skipped.
    """
    if not remote_head:
        return []
    walker = repository.walk(remote_head, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME)
    for sha in set(keep):
        try:
            walker.hide(sha)
        except (KeyError, ValueError, pygit2.GitError):
            continue  # not in this clone: it cannot be an ancestor of a fetched head either
    out: list[dict[str, str]] = []
    for commit in walker:
        if len(out) >= limit:
            break
        a = commit.author
        out.append(
            {
                "sha": str(commit.id),
                "author": f"{a.name} <{a.email}>",
                "message": (commit.message or "").strip().split("\n", 1)[0],
            }
        )
    return out
