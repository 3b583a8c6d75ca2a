"""Credentials for git remotes, and redaction of secrets from every message.

Secrets live only in memory (a :class:`GitCredentials`) and reach the git
CLI (which does all network work: fetch, ls-remote, push) through
environment variables read by a GIT_ASKPASS helper -- never on a command
line, in a URL written to config, or in a log. SSH goes through OpenSSH: the
user's agent, or a key file named in the credentials. Every error text that may echo a URL or git's stderr
goes through :func:`redact` first.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit

from gitkb.core.errors import InvalidArgument
from gitkb.stores.git_guard import guard_dir, writer_env

REDACTED = "***"
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")
_AUTH_HEADER = re.compile(r"(?i)(authorization:\s*(?:basic|bearer|token)\s+)\S+")
ASKPASS_PASSWORD_ENV = "GITKB_GIT_PASSWORD"
ASKPASS_USERNAME_ENV = "GITKB_GIT_USERNAME"
DEFAULT_TOKEN_USERNAME = "x-access-token"

ASKPASS_HOST_ENV = "GITKB_GIT_HOST"

ASKPASS_SCRIPT = """#!/bin/sh
# gitkb GIT_ASKPASS / SSH_ASKPASS helper: answers git's prompts from the
# environment gitkb sets for one git call. Never stores or prints secrets elsewhere.
# When GITKB_GIT_HOST is set, a prompt for a URL on any other host (a redirect) gets nothing.
case "$1" in
  *://*)
    if [ -n "${GITKB_GIT_HOST:-}" ]; then
      where=${1#*://}
      where=${where%%\\'*}
      where=${where%%/*}
      where=${where##*@}
      where=$(printf '%s' "$where" | tr 'A-Z' 'a-z')
      if [ "$where" != "$GITKB_GIT_HOST" ]; then
        echo "gitkb: no credential for $where" >&2
        exit 1
      fi
    fi ;;
esac
case "$1" in
  Username*|username*) printf '%s\\n' "${GITKB_GIT_USERNAME:-x-access-token}" ;;
  *) printf '%s\\n' "${GITKB_GIT_PASSWORD:-}" ;;
esac
"""


@dataclass(frozen=True)
class GitCredentials:
    """How to authenticate to a remote. Nothing here is ever persisted.

    * HTTPS: ``token`` (a string, or a zero-argument callable returning one,
      called when needed) with ``username`` (default ``x-access-token``,
      which GitHub and GitLab accept with a token).
    * SSH: ``ssh_key`` (private key file; ``ssh_public_key`` defaults to
      ``<key>.pub``; ``ssh_passphrase`` if it has one), or the user's agent
      (``SSH_AUTH_SOCK``) when no key file is given.
    """

    token: str | Callable[[], str] | None = field(default=None, repr=False)
    username: str | None = None
    ssh_key: Path | None = None
    ssh_public_key: Path | None = None
    ssh_passphrase: str | None = field(default=None, repr=False)
    ssh_username: str = "git"
    only_host: str | None = None  # ``host[:port]``: the askpass helper answers prompts for no other

    def resolve_token(self) -> str | None:
        tok = self.token() if callable(self.token) else self.token
        return tok or None

    def secrets(self) -> list[str]:
        """Every secret value, for :func:`redact`."""
        out = [s for s in (self.resolve_token(), self.ssh_passphrase) if s]
        return out

    def __repr__(self) -> str:
        return (
            f"GitCredentials(token={'<set>' if self.token else None}, username={self.username!r}, "
            f"ssh_key={str(self.ssh_key) if self.ssh_key else None!r}, "
            f"ssh_passphrase={'<set>' if self.ssh_passphrase else None})"
        )


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Hide secrets (and their URL-encoded forms), URL user-info and auth headers in ``text``."""
    out = text
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        if len(secret) < 4:  # too short to hide without mangling the message
            continue
        for form in {secret, quote(secret, safe=""), quote(secret)}:
            out = out.replace(form, REDACTED)
    out = _USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", out)
    return _AUTH_HEADER.sub(lambda m: m.group(1) + REDACTED, out)


def redact_url(url: str) -> str:
    """A URL fit to show: user-info removed."""
    return redact(url)


def check_url(url: str) -> str:
    """Refuse URLs that carry a password or token in their user-info (it would be persisted)."""
    if not url or not url.strip():
        raise InvalidArgument("the remote URL is empty")
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and parts.password:
        raise InvalidArgument(
            f"the remote URL {redact_url(url)} carries a password or token; "
            "name an admin-configured credential ([[credentials]] in gitkb.toml) instead"
        )
    if parts.scheme == "ext" or url.startswith("ext::"):
        raise InvalidArgument("ext:: remote URLs are not allowed")
    return url


def write_askpass(directory: Path) -> Path:
    """Write (or refresh) the askpass helper script in ``directory``; return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "askpass.sh"
    if not script.exists() or script.read_text() != ASKPASS_SCRIPT:
        tmp = directory / "askpass.sh.tmp"
        tmp.write_text(ASKPASS_SCRIPT)
        tmp.chmod(0o700)
        os.replace(tmp, script)
    return script


def cli_auth_env(creds: GitCredentials | None, askpass: Path) -> dict[str, str]:
    """Environment for one git CLI call: prompts answered by ``askpass``, never by a terminal."""
    env = {
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": str(askpass),
        "SSH_ASKPASS": str(askpass),
        "SSH_ASKPASS_REQUIRE": "force",
    }
    token = creds.resolve_token() if creds else None
    if creds and creds.only_host:
        env[ASKPASS_HOST_ENV] = creds.only_host.lower()
    if token:
        env[ASKPASS_PASSWORD_ENV] = token
        env[ASKPASS_USERNAME_ENV] = (creds.username if creds else None) or DEFAULT_TOKEN_USERNAME
    elif creds and creds.ssh_passphrase:
        env[ASKPASS_PASSWORD_ENV] = creds.ssh_passphrase
    if creds and creds.ssh_key:
        ssh = ["ssh", "-i", str(creds.ssh_key), "-o", "IdentitiesOnly=yes"]
        ssh += ["-l", creds.ssh_username] if creds.ssh_username != "git" else []
        if not creds.ssh_passphrase:
            ssh += ["-o", "BatchMode=yes"]
        env["GIT_SSH_COMMAND"] = " ".join(shlex.quote(a) for a in ssh)
    elif not os.environ.get("GIT_SSH_COMMAND") and not os.environ.get("GIT_SSH"):
        env["GIT_SSH_COMMAND"] = "ssh -o BatchMode=yes"  # agent or default keys; never a prompt
    return env


def network_env(git_dir: Path, creds: GitCredentials | None) -> dict[str, str]:
    """Everything a fetch/ls-remote/push in a managed repository needs: auth and the writer token."""
    env = writer_env(git_dir)
    env.update(cli_auth_env(creds, write_askpass(guard_dir(git_dir))))
    return env
