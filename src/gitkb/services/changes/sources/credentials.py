"""Which secret a source may use, and where it may be sent.

Secrets are named by the admin in ``[[credentials]]`` of ``gitkb.toml`` (see
:mod:`gitkb.core.config`), each bound to ``hosts``. A source refers to one by name
(``credential``, and ``forge.credential`` when the forge API needs a different one); no
caller names an environment variable, a secrets file or a key file. A credential is used
only when the host it would go to -- the git remote's host, the forge's ``api_url`` host
-- is one of its hosts; otherwise the call is refused before anything is sent.

Sources registered before ``[[credentials]]`` existed stored references (``auth.token_env``,
``forge.secrets_file``, ...). They keep working only when an admin-configured credential
holds exactly those references and is bound to the host; otherwise their network calls are
refused with what to add to ``gitkb.toml``. (A local or ``file://`` remote needs no secret:
its stored references are ignored.)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gitkb.core.config import Credential, Settings
from gitkb.core.errors import InvalidArgument
from gitkb.core.hosts import host_matches, url_authority
from gitkb.forges import Secret, load_secret
from gitkb.stores.git_auth import GitCredentials, redact_url

DEFAULT_API_URLS = {"github": "https://api.github.com", "gitlab": "https://gitlab.com"}
# What a caller may no longer send: each names a secret's location on the server.
REFUSED_KEYS = ("token_env", "secrets_file", "secrets_key", "ssh_key", "app_key_env", "app_id", "username")
LEGACY_KEYS = ("token_env", "secrets_file", "secrets_key", "ssh_key", "app_key_env", "app_id")


def refuse_references(given: Mapping[str, Any] | None, where: str) -> None:
    """Refuse a caller's secret references (``auth.token_env``, ``forge.secrets_file``, ...)."""
    named = sorted(k for k, v in dict(given or {}).items() if k in REFUSED_KEYS and v not in (None, ""))
    if named:
        keys = ", ".join(f"{where}.{k}" for k in named)
        raise InvalidArgument(
            f"{keys}: a caller may not name an environment variable or a file; secrets are "
            "configured by the admin in [[credentials]] of gitkb.toml (name, hosts, token_env or "
            "secrets_file) and a source refers to one with credential = NAME",
            details={"refused": [f"{where}.{k}" for k in named]},
            next_steps=[
                'add [[credentials]] name = "NAME", hosts = ["HOST"], token_env = "VAR" to gitkb.toml',
                "then pass credential=NAME (CLI --credential NAME)",
            ],
        )


def find(settings: Settings, name: Any) -> Credential:
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgument("credential must be the name of a [[credentials]] entry of gitkb.toml")
    for cred in settings.credentials:
        if cred.name == name.strip():
            return cred
    known = ", ".join(c.name for c in settings.credentials) or "none is configured"
    raise InvalidArgument(
        f"no credential {name.strip()!r} in [[credentials]] of gitkb.toml (known: {known})",
        next_steps=["ask the admin to add it to [[credentials]] in gitkb.toml, with the hosts it serves"],
    )


def check_host(cred: Credential, authority: str | None, what: str) -> None:
    """Refuse to send ``cred`` to ``authority`` unless it is one of the credential's hosts."""
    if not authority:
        raise InvalidArgument(
            f"credential {cred.name!r} cannot be used for {what}: it reaches no host "
            "(a local path or file:// remote needs no credential)"
        )
    if not host_matches(authority, cred.hosts):
        raise InvalidArgument(
            f"credential {cred.name!r} is bound to {', '.join(cred.hosts)}, not to {authority} ({what}); "
            "nothing was sent",
            details={"host": authority, "credential": cred.name},
            next_steps=[f"use a credential whose hosts include {authority}, or ask the admin to add it"],
        )


def api_authority(kind: str, api_url: Any) -> str | None:
    return url_authority(str(api_url or DEFAULT_API_URLS.get(kind, "")))


def _matching_legacy(settings: Settings, refs: Mapping[str, Any], authority: str | None) -> Credential:
    """The admin credential holding exactly a legacy source's references, bound to its host."""
    stored = {k: str(v) for k, v in refs.items() if k in LEGACY_KEYS and v not in (None, "")}
    for cred in settings.credentials:
        mine = {k: getattr(cred, k) for k in LEGACY_KEYS if getattr(cred, k)}
        if mine == stored and authority and host_matches(authority, cred.hosts):
            return cred
    shown = ", ".join(f"{k} = {v!r}" for k, v in sorted(stored.items()))
    raise InvalidArgument(
        f"this source stores credential references from before [[credentials]] ({shown}); they are used "
        f"only through an admin-configured credential with the same references bound to {authority}",
        next_steps=[
            f'add [[credentials]] name = "NAME", hosts = ["{authority}"], {shown} to gitkb.toml',
            "or remove the source and add it again with credential=NAME",
        ],
    )


def git_credential(settings: Settings, source: Mapping[str, Any], url: str) -> Credential | None:
    """The credential git may use for ``url`` (checked against its hosts), or None."""
    authority = url_authority(url)
    name = source.get("credential")
    if name:
        cred = find(settings, name)
        check_host(cred, authority, f"git remote {redact_url(url)}")
        return cred
    legacy = {k: v for k, v in dict(source.get("auth") or {}).items() if k in LEGACY_KEYS and v}
    if not legacy or authority is None:
        return None
    return _matching_legacy(settings, legacy, authority)


def git_credentials(settings: Settings, source: Mapping[str, Any], url: str) -> GitCredentials | None:
    """What the git CLI gets: the token (loaded when needed) or SSH key, answered only to ``url``'s host."""
    cred = git_credential(settings, source, url)
    if cred is None:
        return None
    token = None
    if cred.token_env or cred.secrets_file:

        def token() -> str:
            return load_secret(cred.token_env, cred.secrets_file, cred.secrets_key or "git_token").reveal()

    return GitCredentials(
        token=token,
        username=cred.username,
        ssh_key=Path(cred.ssh_key) if cred.ssh_key else None,
        only_host=url_authority(url),
    )


def forge_credential(settings: Settings, source: Mapping[str, Any]) -> Credential:
    """The credential for the forge API of a github/gitlab source, checked against its api_url host."""
    cfg = dict(source.get("forge") or {})
    kind = str(cfg.get("kind") or "local")
    authority = api_authority(kind, cfg.get("api_url"))
    name = cfg.get("credential") or source.get("credential")
    if name:
        cred = find(settings, name)
        check_host(cred, authority, f"the {kind} API")
        return cred
    legacy = {k: v for k, v in cfg.items() if k in LEGACY_KEYS and v}
    if legacy:
        return _matching_legacy(settings, legacy, authority)
    raise InvalidArgument(
        f"a {kind} forge needs a credential: name one from [[credentials]] of gitkb.toml "
        "(credential=NAME, or forge.credential=NAME) bound to the API's host"
    )


def forge_secret(cred: Credential, kind: str) -> tuple[Secret | None, Secret | None, str | None]:
    """(token, GitHub App private key, app id) from an admin credential."""
    if cred.app_id:
        key = load_secret(cred.app_key_env, cred.secrets_file, cred.secrets_key or "github_app_key")
        return None, key, cred.app_id
    token = load_secret(cred.token_env, cred.secrets_file, cred.secrets_key or f"{kind}_token")
    return token, None, None
