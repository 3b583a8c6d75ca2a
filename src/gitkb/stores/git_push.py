"""Leased pushes through the git CLI (libgit2 has no ``--force-with-lease``).

The only push gitkb makes::

    git push --porcelain --force-with-lease=refs/heads/<b>:<expected> <remote> <sha>:refs/heads/<b>

``<expected>`` is the sha gitkb last saw on the remote, or empty for "the
branch must not exist yet". Never a ``+`` refspec: a forced refspec silently
overrides the lease. A stale lease is refused by git before anything moves;
we raise ``Conflict`` and nothing changed on either side.
"""

from __future__ import annotations

import re
from pathlib import Path

from gitkb.core.errors import Conflict, ForgeError, InvalidArgument, Unauthorized
from gitkb.stores.git_auth import GitCredentials, cli_auth_env, write_askpass
from gitkb.stores.git_cli import last_lines, run_git
from gitkb.stores.git_guard import guard_dir, writer_env

_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_AUTH_FAILURES = (
    "authentication failed",
    "could not read username",
    "could not read password",
    "permission denied",
    "invalid username or password",
    "http basic: access denied",
    "terminal prompts disabled",
    "returned error: 401",
    "returned error: 403",
)


def push_with_lease(
    git_dir: Path,
    branch: str,
    sha: str,
    expected_remote_sha: str | None,
    *,
    remote: str = "origin",
    credentials: GitCredentials | None = None,
    timeout: float = 300.0,
) -> str:
    """Push ``sha`` to ``refs/heads/<branch>`` on ``remote`` if it is still at ``expected_remote_sha``."""
    if not _SHA.match(sha):
        raise InvalidArgument(f"push needs a full commit sha, got {sha!r}")
    if expected_remote_sha is not None and not _SHA.match(expected_remote_sha):
        raise InvalidArgument(f"expected remote sha must be a full sha or None, got {expected_remote_sha!r}")
    if branch.startswith(("+", "-", "refs/")) or ":" in branch or not branch:
        raise InvalidArgument(f"invalid branch name {branch!r}")
    ref = f"refs/heads/{branch}"
    env = writer_env(git_dir)  # the push updates refs/remotes/<remote>/<branch> locally
    env.update(cli_auth_env(credentials, write_askpass(guard_dir(git_dir))))
    secrets = credentials.secrets() if credentials else []
    result = run_git(
        git_dir,
        [
            "-c", "credential.helper=",
            "-c", "core.askPass=",
            "push", "--porcelain", "--no-verify",
            f"--force-with-lease={ref}:{expected_remote_sha or ''}",
            remote, f"{sha}:{ref}",
        ],
        env=env,
        secrets=secrets,
        timeout=timeout,
        check=False,
    )  # fmt: skip
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
    lowered = result.stderr.lower()
    if any(marker in lowered for marker in _AUTH_FAILURES):
        raise Unauthorized(f"push of {branch!r} to {remote} was refused: {last_lines(result.stderr)}")
    raise ForgeError(f"push of {branch!r} to {remote} failed: {last_lines(text)}")


def _ref_status(porcelain: str, ref: str) -> tuple[str, str] | None:
    """(flag, summary) from ``git push --porcelain`` for ``ref``: ``<flag>\\t<from>:<to>\\t<summary>``."""
    for line in porcelain.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[1].endswith(f":{ref}"):
            return parts[0][:1] or " ", parts[2]
    return None
